# syntax=docker/dockerfile:1
# Multi-stage: compile TypeScript with the full toolchain, ship only production dependencies.
ARG NODE_VERSION=24.21.0

FROM node:${NODE_VERSION}-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
# Installs what package-lock.json pins; unlike `npm ci` it tolerates optional platform binaries
# (Biome's) that the lockfile does not list.
RUN npm install --no-save --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
RUN npx tsc -p tsconfig.build.json && npm prune --omit=dev --no-audit --no-fund

FROM gcr.io/distroless/nodejs24-debian12:nonroot
ENV NODE_ENV=production
ENV NODE_OPTIONS="--max-old-space-size=128 --max-semi-space-size=2" MALLOC_ARENA_MAX=2
WORKDIR /app
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY package.json ./
COPY bin ./bin
COPY crds ./crds
USER 65532:65532
ENTRYPOINT ["/nodejs/bin/node", "/app/bin/dms-operator.mjs"]
CMD ["run"]
