import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadSeed } from "../../src/simulator/seed.ts";
import { startSimulator } from "../../src/simulator/server.ts";
import { call } from "./simulator-http.ts";

const example = fileURLToPath(new URL("../../src/simulator/seed.example.yaml", import.meta.url));
let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "sim-seed-"));
});
afterAll(() => rm(dir, { recursive: true, force: true }));

async function file(name: string, text: string) {
  const path = join(dir, name);
  await writeFile(path, text);
  return path;
}

describe("the example seed", () => {
  it("serves its tenant, 2 providers, an integration with 4 repos and its deployments", async () => {
    const seed = await loadSeed(example);
    const sim = await startSimulator({ seed });
    try {
      expect((await call(sim, "GET", "/v2/auth/providers")).body).toHaveLength(2);
      const integration = seed.integrations?.[0]?.id ?? "";
      expect(
        (await call(sim, "GET", `/v1/integrations/forge/github/${integration}/repos`)).body,
      ).toHaveLength(4);
      const page = (await call(sim, "GET", "/v2/deployments")).body;
      expect(page.resources.map((d: { name: string }) => d.name)).toEqual(
        seed.deployments?.map((d) => d.name),
      );
      expect(new Set(page.resources.map((d: { source: string }) => d.source)).size).toBeGreaterThan(2);
      expect(page.resources.every((d: { tenant_id: string }) => d.tenant_id === seed.tenantId)).toBe(true);
    } finally {
      await sim.close();
    }
  });
});

describe("loadSeed", () => {
  it("reads JSON as well as YAML", async () => {
    const path = await file(
      "seed.json",
      JSON.stringify({ deployments: [{ name: "j", source: "internal_docker" }] }),
    );
    expect((await loadSeed(path)).deployments?.[0]?.name).toBe("j");
  });

  it("treats an empty file as an empty seed", async () => {
    expect(await loadSeed(await file("empty.yaml", ""))).toEqual({});
  });

  it.each([
    [
      "a bad enum",
      "deployments:\n  - name: a\n    source: ftp\n",
      /deployments\[0\]\.source: Input should be 'github'/,
    ],
    ["a missing name", "deployments:\n  - source: github\n", /deployments\[0\]\.name: Field required/],
    [
      "a non-uuid integration",
      "integrations:\n  - id: nope\n    repos: []\n",
      /integrations\[0\]\.id: Input should be a valid UUID/,
    ],
    [
      "a repo id that is not an integer",
      `integrations:\n  - id: 3f9a2b1c-4d5e-4f60-8a7b-9c0d1e2f3a4b\n    repos:\n      - {id: x, name: r, owner: o}\n`,
      /integrations\[0\]\.repos\[0\]\.id/,
    ],
    ["an unknown key", "tenant: x\n", /tenant: Extra inputs are not permitted/],
    [
      "a bad created_at",
      "deployments:\n  - {name: a, source: github, created_at: yesterday}\n",
      /deployments\[0\]\.created_at: Input should be a valid datetime/,
    ],
    [
      "a provider's created_at that is no date-time (the spec types it so)",
      "providers:\n  - {provider_id: p, name: P, created_at: yesterday}\n",
      /providers\[0\]\.created_at: Input should be a valid datetime/,
    ],
    [
      "a provider's updated_at that is no date-time",
      "providers:\n  - {provider_id: p, name: P, updated_at: 2030-01-01}\n",
      /providers\[0\]\.updated_at: Input should be a valid datetime/,
    ],
    [
      "a source_revision_config field the spec does not have",
      "deployments:\n  - {name: a, source: github, source_revision_config: {ref: main}}\n",
      /deployments\[0\]\.source_revision_config\.ref: Extra inputs are not permitted/,
    ],
    [
      "a secret reference field the spec does not have",
      "deployments:\n  - name: a\n    source: external_docker\n    secret_references: [{name: A, secret_name: s, secret_key: k, key: x}]\n",
      /deployments\[0\]\.secret_references\[0\]\.key: Extra inputs are not permitted/,
    ],
    [
      "a duplicate name",
      "deployments:\n  - {name: a, source: github}\n  - {name: a, source: github}\n",
      /deployments\[1\]\.name: duplicate name 'a'/,
    ],
    ["a list at the top", "- a\n", /\(root\): Input should be a valid dictionary/],
  ])("names the field of %s, with the file", async (_what, text, message) => {
    const path = await file("bad.yaml", text);
    const error = await loadSeed(path).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(Error);
    expect((error as Error).message).toMatch(message);
    expect((error as Error).message.startsWith(`${path}: `)).toBe(true);
  });

  it("says so when the file is not YAML or cannot be read", async () => {
    await expect(loadSeed(await file("broken.yaml", "deployments: [\n"))).rejects.toThrow(
      /not valid YAML or JSON/,
    );
    await expect(loadSeed(join(dir, "missing.yaml"))).rejects.toThrow(/cannot read the seed file/);
  });

  it("startSimulator refuses an invalid seed, naming the field", async () => {
    // biome-ignore lint/suspicious/noExplicitAny: deliberately invalid input.
    const seed: any = { deployments: [{ name: "a", source: "github", fail_revisions: "always" }] };
    await expect(startSimulator({ seed })).rejects.toThrow(/deployments\[0\]\.fail_revisions/);
  });
});
