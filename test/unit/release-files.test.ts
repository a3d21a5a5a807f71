// What the release machinery promises, read from the files that implement it: the image is built
// with `npm ci` from base images pinned by digest and carries OCI labels with the release's
// version; CI runs the README's test command on every push and pull request; a tag builds both
// architectures, signs the image keyless with cosign and attests its SPDX SBOM, publishes the Helm
// chart as a signed OCI artifact, pins the manifests to the pushed digest, attaches them, and
// publishes the package with provenance; every third-party action is pinned by commit SHA.
// (actionlint checks the workflows' syntax in test/e2e/workflows.test.ts; the image's runtime
// layout is run in test/e2e/image-layout.test.ts.)
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";

const ROOT = join(import.meta.dirname, "..", "..");
const read = (path: string) => readFileSync(join(ROOT, path), "utf8");
type Step = {
  uses?: string;
  run?: string;
  with?: Record<string, unknown>;
  env?: Record<string, string>;
  id?: string;
};
type Job = { steps: Step[]; permissions?: Record<string, string>; needs?: string | string[] };
type Workflow = {
  on: Record<string, unknown>;
  permissions?: Record<string, string>;
  jobs: Record<string, Job>;
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

describe("Dockerfile base images", () => {
  const dockerfile = read("Dockerfile");
  const froms = [...dockerfile.matchAll(/^FROM\s+(?:--platform=\S+\s+)?(\S+)(?:\s+AS\s+(\S+))?/gim)].map(
    (m) => ({
      image: m[1] ?? "",
      stage: m[2],
    }),
  );

  it("pins every base image by digest (a stage of this file is not a base image)", () => {
    expect(froms.length).toBeGreaterThanOrEqual(2);
    const stages = new Set<string>();
    for (const { image, stage } of froms) {
      if (!stages.has(image)) expect(image).toMatch(/^[a-z0-9][\w./-]*:[\w.-]+@sha256:[0-9a-f]{64}$/);
      if (stage) stages.add(stage);
    }
    // A frontend named by `# syntax=` is an image too, pulled before the build starts.
    const syntax = /^#\s*syntax\s*=\s*(\S+)/m.exec(dockerfile)?.[1];
    if (syntax !== undefined) expect(syntax).toMatch(/@sha256:[0-9a-f]{64}$/);
  });

  it("builds with the Node version the toolchain installs", () => {
    const toolchain = /^const NODE_VERSION = "([\d.]+)";$/m.exec(read("scripts/toolchain.mjs"))?.[1];
    expect(toolchain).toMatch(/^\d+\.\d+\.\d+$/);
    expect(froms[0]?.image).toMatch(new RegExp(`^node:${toolchain?.replaceAll(".", "\\.")}-`));
  });
});

/**
 * The `uses:` lines of a workflow's text that are not pinned as `owner/repo[/path]@<40 hex> # vX.Y.Z`
 * (local actions `./…` need no pin; `docker://` images need a digest).
 */
function unpinnedUses(text: string): string[] {
  const lines = [...text.matchAll(/^\s*(?:-\s+)?uses:\s*(.*)$/gm)].map((m) => (m[1] ?? "").trim());
  return lines.filter(
    (ref) =>
      !ref.startsWith("./") &&
      !/^docker:\/\/\S+@sha256:[0-9a-f]{64}$/.test(ref) &&
      !/^[\w.-]+\/[\w.-]+(\/[^@\s]+)?@[0-9a-f]{40} # v\d+(\.\d+){0,2}$/.test(ref),
  );
}

/** The actions a parsed workflow uses, from its steps and reusable-workflow jobs. */
function usesOf(w: Workflow): string[] {
  return Object.values(w.jobs).flatMap((j) => [
    ...((j as { uses?: string }).uses ? [(j as { uses?: string }).uses as string] : []),
    ...(j.steps ?? []).flatMap((s) => (s.uses ? [s.uses] : [])),
  ]);
}

describe("third-party actions", () => {
  const files = readdirSync(join(ROOT, ".github", "workflows"))
    .filter((f) => /\.ya?ml$/.test(f))
    .map((f) => ({ name: `.github/workflows/${f}`, text: read(`.github/workflows/${f}`) }));
  // The pull-request workflow docs/gitops.md gives GitOps repositories is a workflow too.
  const doc = /### A CI gate \(GitHub Actions\)[\s\S]*?```yaml\n([\s\S]*?)```/.exec(
    read("docs/gitops.md"),
  )?.[1];
  const all = [...files, { name: "docs/gitops.md", text: doc ?? "" }];

  it("are pinned by full commit SHA with the release in a trailing comment, in every workflow", () => {
    expect(files.map((f) => f.name).sort()).toEqual([
      ".github/workflows/ci.yml",
      ".github/workflows/release.yml",
    ]);
    expect(doc).toBeDefined();
    for (const { name, text } of all) {
      // Every `uses:` the YAML holds is on a line of its own, so the text check sees them all.
      const parsed = usesOf(parse(text) as Workflow);
      expect(parsed.length, name).toBeGreaterThan(0);
      expect([...text.matchAll(/^\s*(?:-\s+)?uses:/gm)].length, name).toBe(parsed.length);
      expect(unpinnedUses(text), name).toEqual([]);
    }
  });

  it("name one commit and one release per action across the workflows", () => {
    const pins = new Map<string, Set<string>>();
    for (const { text } of all)
      for (const m of text.matchAll(/uses:\s*([^@\s]+)@(\S+ # \S+)/g)) {
        const action = (m[1] ?? "").toLowerCase();
        pins.set(action, new Set([...(pins.get(action) ?? []), m[2] ?? ""]));
      }
    const conflicting = [...pins]
      .filter(([, versions]) => versions.size > 1)
      .map(([a, v]) => `${a}: ${[...v]}`);
    expect(conflicting).toEqual([]);
    expect(pins.size).toBeGreaterThan(5);
  });

  it("are kept current by Dependabot, as are the Dockerfile's base images", () => {
    const config = parse(read(".github/dependabot.yml")) as {
      updates: { "package-ecosystem": string; directory: string }[];
    };
    const watched = config.updates.map((u) => `${u["package-ecosystem"]} ${u.directory}`);
    expect(watched).toEqual(expect.arrayContaining(["github-actions /", "docker /"]));
  });

  it("the check finds a tag, a branch, a short SHA and a missing version comment", () => {
    const bad = [
      "      - uses: actions/checkout@v4",
      "      - uses: actions/checkout@main",
      "      - uses: actions/checkout@3d3c42e # v7.0.1",
      "      - uses: actions/checkout@3d3c42e5aac5ba805825da76410c181273ba90b1",
      "      - uses: docker://alpine:3",
    ];
    const good = [
      "      - uses: actions/checkout@3d3c42e5aac5ba805825da76410c181273ba90b1 # v7.0.1",
      "      - uses: ./.github/actions/local",
      "    uses: octo/flows/.github/workflows/x.yml@3d3c42e5aac5ba805825da76410c181273ba90b1 # v1",
    ];
    expect(unpinnedUses([...bad, ...good].join("\n"))).toEqual(bad.map((l) => l.replace(/^\s*- uses: /, "")));
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

  it("publishes the npm package with provenance, dist/ built by an explicit step (prepack's own)", () => {
    expect(run(/^npm publish --provenance --ignore-scripts/)).toBeDefined();
    const npm = release.jobs.npm?.steps.flatMap((s) => (s.run ? [s.run.trim()] : [])) ?? [];
    expect(npm.indexOf("npm run build")).toBeGreaterThan(npm.indexOf("npm ci --ignore-scripts"));
    expect(npm.findIndex((r) => r.startsWith("npm publish"))).toBeGreaterThan(npm.indexOf("npm run build"));
    expect(release.jobs.npm?.permissions?.["id-token"]).toBe("write");
    expect((JSON.parse(read("package.json")) as { scripts: Record<string, string> }).scripts.prepack).toBe(
      "npm run build",
    );
  });

  it("installs with npm ci wherever it installs, running no dependency's install script", () => {
    const installs = all.flatMap((s) => (s.run && /npm (ci|install)\b/.test(s.run) ? [s.run.trim()] : []));
    expect(installs.length).toBeGreaterThan(0);
    // Every job here can write or sign: none lets a dependency's script run with that right.
    expect(installs.every((r) => r === "npm ci --ignore-scripts")).toBe(true);
  });
});

describe("release workflow: signatures, SBOM, chart", () => {
  const release = workflow("release.yml");
  const job = (name: string): Job => {
    const found = release.jobs[name];
    if (!found) throw new Error(`release.yml has no job ${name}`);
    return found;
  };
  const runs = (j: Job) => j.steps.flatMap((s) => (s.run ? [s.run] : [])).join("\n");
  const uses = (j: Job, action: string) => j.steps.find((s) => s.uses?.startsWith(`${action}@`));
  const signs = (j: Job) => /\bcosign (sign|attest)\b|\bnpm publish --provenance\b/.test(runs(j));
  /** A GitHub Actions expression, as the workflow writes it. */
  const expr = (e: string) => `\${{ ${e} }}`;
  const IMAGE_BY_DIGEST = `${expr("needs.image.outputs.image")}@${expr("needs.image.outputs.digest")}`;

  it("signs the pushed image by digest, keyless, and attests its SPDX SBOM to the same digest", () => {
    const sign = job("sign-image");
    expect(sign.needs).toBe("image");
    const sbom = uses(sign, "anchore/sbom-action");
    expect(sbom?.with?.image).toBe(IMAGE_BY_DIGEST);
    expect(sbom?.with?.format).toBe("spdx-json");
    const predicate = String(sbom?.with?.["output-file"]);
    const step = sign.steps.find((s) => s.run?.includes("cosign sign"));
    expect(step?.env?.IMAGE).toBe(IMAGE_BY_DIGEST);
    expect(step?.run).toMatch(/^cosign sign --yes "\$IMAGE"$/m);
    expect(step?.run).toContain(`cosign attest --yes --type spdxjson --predicate ${predicate} "$IMAGE"`);
    // Keyless: no key is passed, the signature is bound to the workflow's OIDC identity.
    expect(runs(sign)).not.toMatch(/--key\b/);
  });

  it("packages the chart at the release's version, pushes it to GHCR's OCI registry and signs its digest", () => {
    const chart = job("chart");
    expect(chart.needs).toBe("image");
    expect(uses(chart, "azure/setup-helm")?.with?.version).toMatch(/^v\d+\.\d+\.\d+$/);
    const pkg = chart.steps.find((s) => s.run?.includes("helm package"));
    expect(pkg?.env?.VERSION).toBe(expr("needs.image.outputs.version"));
    expect(pkg?.run).toContain(
      'helm package charts/dms-operator --version "$VERSION" --app-version "$VERSION"',
    );
    const push = chart.steps.find((s) => s.run?.includes("helm push"));
    expect(push?.run).toMatch(/charts="ghcr\.io\/\$\{GITHUB_REPOSITORY_OWNER,,\}\/charts"/);
    expect(push?.run).toContain('helm push "chart/dms-operator-$VERSION.tgz" "oci://$charts"');
    expect(push?.run).toContain('cosign sign --yes "$charts/dms-operator@$digest"');
    expect(release.jobs.image?.permissions?.packages).toBe("write");
    expect(chart.permissions?.packages).toBe("write");
  });

  it("installs cosign and helm in the jobs that run them, before they run", () => {
    for (const [name, j] of Object.entries(release.jobs)) {
      for (const [tool, action] of [
        ["cosign", "sigstore/cosign-installer"],
        ["helm", "azure/setup-helm"],
      ] as const) {
        const first = j.steps.findIndex((s) => s.run && new RegExp(`^\\s*${tool} `, "m").test(s.run));
        if (first === -1) continue;
        const installer = j.steps.findIndex((s) => s.uses?.startsWith(`${action}@`));
        expect(installer, `${name} runs ${tool}`).toBeGreaterThanOrEqual(0);
        expect(installer, `${name} installs ${tool} first`).toBeLessThan(first);
      }
    }
  });

  it("lets only the jobs that sign ask for an OIDC token", () => {
    expect(release.permissions).toEqual({ contents: "read" });
    const withToken = Object.entries(release.jobs)
      .filter(([, j]) => j.permissions?.["id-token"] === "write")
      .map(([name]) => name);
    const signing = Object.entries(release.jobs)
      .filter(([, j]) => signs(j))
      .map(([name]) => name);
    expect(withToken.sort()).toEqual(signing.sort());
    expect(signing.sort()).toEqual(["chart", "npm", "sign-image"]);
  });

  it("creates the GitHub release only once the image and the chart are signed", () => {
    expect([job("manifests").needs].flat().sort()).toEqual(["chart", "image", "sign-image"]);
  });

  it("restores no dependency cache in a job that publishes", () => {
    for (const [name, j] of Object.entries(release.jobs)) {
      const node = uses(j, "actions/setup-node");
      if (!node) continue;
      expect(node.with?.cache, name).toBeUndefined();
      expect(node.with?.["package-manager-cache"], name).toBe(false);
    }
  });
});
