/**
 * `plan` and `import` as a GitOps repository's CI uses them: `plan -f -` on the multi-document
 * output of `kubectl kustomize`, a path with no resources failing the gate, and `import` never
 * overwriting a file the user already edited (a filled-in Secret manifest) unless `--force`.
 */
import { readdir, readFile, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type RunningSimulator, startSimulator } from "../../src/simulator/server.ts";
import { cli, KEY, manifestDir, resourceYaml, SEED } from "./gitops-fixture.ts";

let sim: RunningSimulator;
const dirs: string[] = [];
const tempDir = async (files: Record<string, string> = {}) => {
  const dir = await manifestDir(files);
  dirs.push(dir);
  return dir;
};

beforeAll(async () => {
  sim = await startSimulator({ apiKey: KEY, seed: SEED, secretsInResponses: "values" });
});
afterAll(async () => {
  await sim.close();
  for (const dir of dirs) await rm(dir, { recursive: true, force: true });
});

// What `kubectl kustomize overlays/prod` prints: other kinds mixed in, `---` separated.
const kustomizeOutput = [
  "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  a: b\n",
  resourceYaml("new-agent", { source: "internal_docker", sourceRevisionConfig: { imageUri: "new:1" } }),
  resourceYaml("summarizer", {
    source: "internal_docker",
    sourceConfig: { resourceSpec: { minScale: 1, maxScale: 2 } },
    sourceRevisionConfig: { imageUri: "summarizer:2025-06-01" },
  }),
].join("---\n");

describe("plan -f -", () => {
  it("plans every Deployment resource of a multi-document stream on standard input", async () => {
    const run = await cli(sim.url, ["plan", "-f", "-"], {}, kustomizeOutput);
    expect(run.stderr).toBe("");
    expect(run.stdout).toMatch(/^default\/new-agent \[<stdin>:\d+\]: create$/m);
    expect(run.stdout).toMatch(/^default\/summarizer \[<stdin>:\d+\]: adopt [0-9a-f-]{36} as it is/m);
    expect(run.stdout).toMatch(/Plan: 1 to create, 1 to adopt, 0 to patch/);
    expect(run.code).toBe(2);
  });

  it("reports a bad document on standard input with its line", async () => {
    const bad = `${kustomizeOutput}---\n${resourceYaml("broken", { source: "nowhere" })}`;
    const run = await cli(sim.url, ["plan", "-f", "-", "-o", "json"], {}, bad);
    const doc = JSON.parse(run.stdout) as { fileErrors: Array<{ file: string; line: number }> };
    expect(doc.fileErrors.length).toBeGreaterThan(0);
    expect(doc.fileErrors[0]?.file).toBe("<stdin>");
    expect(run.code).toBe(1);
  });

  it("refuses -f - twice", async () => {
    const run = await cli(sim.url, ["plan", "-f", "-", "-f", "-"], {}, kustomizeOutput);
    expect(run.stderr).toContain("-f - (standard input) may be given once");
    expect(run.code).toBe(1);
  });
});

describe("plan on input with no Deployment resources", () => {
  it("exits 1 naming the path, for a directory of other manifests", async () => {
    const dir = await tempDir({
      "configmap.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n",
    });
    const run = await cli(sim.url, ["plan", "-f", dir]);
    expect(run.stdout).toBe("");
    expect(run.stderr).toContain(
      `error: no Deployment resources (apiVersion dms.dev/v1alpha1, kind Deployment) in ${dir}`,
    );
    expect(run.stderr).toContain("check the path given to -f");
    expect(run.code).toBe(1);
  });

  it("exits 1 for an empty directory and for empty standard input", async () => {
    expect((await cli(sim.url, ["plan", "-f", await tempDir()])).code).toBe(1);
    const run = await cli(sim.url, ["plan", "-f", "-"], {}, "");
    expect(run.stderr).toContain("in <stdin> (1 file read)");
    expect(run.code).toBe(1);
  });
});

describe("import --out-dir never overwrites", () => {
  it("writes nothing when a file exists, names it, and overwrites only with --force", async () => {
    const dir = await tempDir();
    const first = await cli(sim.url, ["import", "--out-dir", dir, "--secrets-from", "agents"]);
    expect(first.code).toBe(0);
    const secret = join(dir, "agents.secret.yaml");
    const filled = "# filled in by hand\napiVersion: v1\nkind: Secret\nmetadata:\n  name: agents\n";
    await writeFile(secret, filled);
    const listing = (await readdir(dir)).sort();

    const again = await cli(sim.url, ["import", "--out-dir", dir, "--secrets-from", "agents"]);
    expect(again.code).toBe(1);
    expect(again.stdout).not.toContain("wrote");
    expect(again.stderr).toMatch(
      /error: import would overwrite \d+ existing file\(s\); nothing was written \(pass --force to overwrite them\)/,
    );
    expect(again.stderr).toContain(`error: ${secret}\n`);
    expect(await readFile(secret, "utf8")).toBe(filled);
    expect((await readdir(dir)).sort()).toEqual(listing);

    const forced = await cli(sim.url, ["import", "--out-dir", dir, "--secrets-from", "agents", "--force"]);
    expect(forced.code).toBe(0);
    expect(forced.stdout).toContain(`wrote ${secret}`);
    expect(await readFile(secret, "utf8")).not.toBe(filled);
  });

  it("a new directory, or new files beside unrelated ones, are written without --force", async () => {
    const dir = await tempDir({ "README.md": "notes\n" });
    const run = await cli(sim.url, ["import", "--out-dir", dir]);
    expect(run.code).toBe(0);
    expect(await readFile(join(dir, "README.md"), "utf8")).toBe("notes\n");
  });
});
