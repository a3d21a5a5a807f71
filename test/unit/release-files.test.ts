// What the release machinery promises, read from the files that implement it: the image is built
// with `npm ci` and carries OCI labels with the release's version; CI runs the README's test
// command on every push and pull request; a tag builds both architectures, pins the manifests to
// the pushed digest, attaches them, and publishes the package with provenance. (actionlint checks
// the workflows' syntax in test/e2e/workflows.test.ts; the image's runtime layout is run in
// test/e2e/image-layout.test.ts.)
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";

const ROOT = join(import.meta.dirname, "..", "..");
const read = (path: string) => readFileSync(join(ROOT, path), "utf8");
type Step = { uses?: string; run?: string; with?: Record<string, unknown>; id?: string };
type Workflow = {
  on: Record<string, unknown>;
  jobs: Record<string, { steps: Step[]; permissions?: Record<string, string>; needs?: string | string[] }>;
};
const workflow = (name: string) => parse(read(`.github/workflows/${name}`)) as Workflow;
const steps = (w: Workflow) => Object.values(w.jobs).flatMap((j) => j.steps);

describe("Dockerfile", () => {
  const dockerfile = read("Dockerfile").replace(/\\\n\s*/g, " ");

  it("installs with npm ci (never npm install) and ships production dependencies only", () => {
    expect(dockerfile).toMatch(/^RUN npm ci\b/m);
    expect(dockerfile).not.toMatch(/npm install/);
    expect(dockerfile).toMatch(/npm prune --omit=dev/);
  });

  it("labels the image with the OCI annotations, the version from the build argument", () => {
    const runtime = dockerfile.slice(dockerfile.lastIndexOf("\nFROM "));
    for (const key of ["title", "description", "version", "revision", "source", "licenses"])
      expect(runtime).toContain(`org.opencontainers.image.${key}=`);
    expect(runtime).toMatch(/^ARG VERSION=/m);
    expect(runtime).toMatch(/org\.opencontainers\.image\.version="\$\{VERSION\}"/);
    const pkg = JSON.parse(read("package.json")) as { version: string; license: string };
    expect(runtime).toContain(`ARG VERSION=${pkg.version}`);
    expect(runtime).toContain(`org.opencontainers.image.licenses="${pkg.license}"`);
  });
});

describe("CI workflow", () => {
  const ci = workflow("ci.yml");
  it("runs on every push and pull request, installs with npm ci and runs the README's test command", () => {
    expect(Object.keys(ci.on).sort()).toEqual(["pull_request", "push"]);
    const runs = steps(ci).flatMap((s) => (s.run ? [s.run.trim()] : []));
    expect(runs).toEqual(["npm ci", "npm test"]);
    expect(read("README.md")).toContain("npm test       # lint, type-check, and every test");
  });
});

describe("release workflow", () => {
  const release = workflow("release.yml");
  const all = steps(release);
  const run = (pattern: RegExp) => all.find((s) => s.run && pattern.test(s.run));

  it("runs on a version tag and checks it against package.json", () => {
    expect(release.on).toEqual({ push: { tags: ["v*.*.*"] } });
    expect(run(/require\("\.\/package\.json"\)\.version/)).toBeDefined();
  });

  it("builds and pushes a multi-arch image to GHCR with the version build argument", () => {
    const build = all.find((s) => s.uses?.startsWith("docker/build-push-action@"));
    expect(build?.with?.platforms).toBe("linux/amd64,linux/arm64");
    expect(build?.with?.push).toBe(true);
    expect(String(build?.with?.["build-args"])).toMatch(/^VERSION=/m);
    expect(
      all.some((s) => s.uses?.startsWith("docker/login-action@") && s.with?.registry === "ghcr.io"),
    ).toBe(true);
    expect(release.jobs.image?.permissions?.packages).toBe("write");
  });

  it("renders the manifests with the pushed digest and attaches them to the release", () => {
    const render = run(/npm run release:manifests -- --version /);
    expect(render?.run).toContain('--image "$IMAGE"');
    expect(JSON.stringify(render)).toContain("needs.image.outputs.digest");
    expect(run(/gh release create .* release\/\*\.yaml/)).toBeDefined();
    expect(release.jobs.manifests?.permissions?.contents).toBe("write");
  });

  it("publishes the npm package with provenance (prepack builds dist/)", () => {
    expect(run(/^npm publish --provenance/)).toBeDefined();
    expect(release.jobs.npm?.permissions?.["id-token"]).toBe("write");
    expect((JSON.parse(read("package.json")) as { scripts: Record<string, string> }).scripts.prepack).toBe(
      "npm run build",
    );
  });

  it("installs with npm ci wherever it installs", () => {
    const installs = all.flatMap((s) => (s.run && /npm (ci|install)\b/.test(s.run) ? [s.run.trim()] : []));
    expect(installs.length).toBeGreaterThan(0);
    expect(installs.every((r) => r === "npm ci")).toBe(true);
  });
});
