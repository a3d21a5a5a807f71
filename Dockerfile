# Multi-stage: compile TypeScript with the full toolchain, ship only production dependencies.
# Built for linux/amd64 and linux/arm64 by .github/workflows/release.yml. The runtime stage's
# layout (what it copies, the user, the read-only tree) is proven by test/e2e/image-layout.test.ts.
#
# Both base images are pinned by digest (the multi-arch index, so each platform gets its own image
# from it): a tag can be moved to other content, a digest cannot, so a rebuild of a release starts
# from the bytes the release was built from. The tag stays in front of the digest for the reader;
# the digest decides. Dependabot (.github/dependabot.yml) proposes updates; by hand,
# `docker buildx imagetools inspect <image>:<tag>` prints the index digest ("Digest:"): replace
# tag and digest together. The Node version matches scripts/toolchain.mjs (a test checks it).
# No `# syntax=` line: that would pull a frontend image by a moving tag, and BuildKit's built-in
# frontend reads everything this file uses.
FROM node:24.21.0-bookworm-slim@sha256:2fe369e969550cde8e867afc3fe370b260140cab4a23d467074295b42163d553 AS build
WORKDIR /app
COPY package.json package-lock.json ./
# Exactly what package-lock.json pins (it records every platform's optional binaries).
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
RUN npm run build && npm prune --omit=dev --no-audit --no-fund

FROM gcr.io/distroless/nodejs24-debian12:nonroot@sha256:14d42e2511532589a7c7e01a753667a74fcc96266e137e8125006b87b0c32d0a
ARG VERSION=0.2.0-dev
ARG REVISION=unknown
ARG SOURCE=https://github.com/dms-dev/dms-operator
LABEL org.opencontainers.image.title="dms-operator" \
      org.opencontainers.image.description="Kubernetes operator that keeps Deployment Management Service deployments in line with Deployment custom resources" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.source="${SOURCE}" \
      org.opencontainers.image.licenses="Apache-2.0"
ENV NODE_ENV=production
ENV NODE_OPTIONS="--max-old-space-size=96 --max-semi-space-size=1" MALLOC_ARENA_MAX=2 \
    MALLOC_MMAP_THRESHOLD_=16384 MALLOC_TRIM_THRESHOLD_=131072
WORKDIR /app
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY package.json ./
COPY bin ./bin
COPY crds ./crds
USER 65532:65532
ENTRYPOINT ["/nodejs/bin/node", "/app/bin/dms-operator.mjs"]
CMD ["run"]
