import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { Value } from "@sinclair/typebox/value";
import { describe, expect, it } from "vitest";
import { parseAllDocuments } from "yaml";
import { CreateDeploymentBodySchema, DEPLOYMENT_SOURCES, type ForgeRepo } from "../../src/api/wire.ts";
import { resolveGithub } from "../../src/crd/github.ts";
import { desiredFromSpec } from "../../src/crd/mapping.ts";
import { type DeploymentResource, DeploymentResourceSchema } from "../../src/crd/schema.ts";
import { plan } from "../../src/reconcile/plan.ts";
import { seededRepos } from "../../src/simulator/catalog.ts";
import { loadSeed } from "../../src/simulator/seed.ts";

const dir = join(import.meta.dirname, "..", "..", "manifests", "samples");

const SEED = join(import.meta.dirname, "..", "..", "src", "simulator", "seed.example.yaml");

/** The forge repositories of the simulator's example seed, by integration id. */
async function seedRepos(): Promise<Map<string, ForgeRepo[]>> {
  return seededRepos(await loadSeed(SEED));
}

interface Doc {
  file: string;
  object: Record<string, unknown>;
}

async function samples(): Promise<Doc[]> {
  const files = (await readdir(dir)).filter((f) => f.endsWith(".yaml") && f !== "kustomization.yaml").sort();
  const docs: Doc[] = [];
  for (const file of files) {
    for (const doc of parseAllDocuments(await readFile(join(dir, file), "utf8"))) {
      expect(doc.errors, file).toEqual([]);
      docs.push({ file, object: doc.toJS() as Record<string, unknown> });
    }
  }
  return docs;
}

const deployments = (docs: Doc[]) =>
  docs
    .filter((d) => d.object.kind === "Deployment")
    .map((d) => ({ ...d, resource: d.object as unknown as DeploymentResource }));

describe("manifests/samples", () => {
  it("kustomization.yaml lists exactly the sample files", async () => {
    const kustomization = parseAllDocuments(
      await readFile(join(dir, "kustomization.yaml"), "utf8"),
    )[0]?.toJS();
    const files = (await readdir(dir)).filter((f) => f.endsWith(".yaml") && f !== "kustomization.yaml");
    expect([...kustomization.resources].sort()).toEqual(files.sort());
  });

  it("covers every source kind, the github shorthand and a secret by reference", async () => {
    const found = deployments(await samples());
    expect(new Set(found.map((d) => d.resource.spec.source))).toEqual(new Set(DEPLOYMENT_SOURCES));
    expect(found.some((d) => d.resource.spec.github)).toBe(true);
    const byRef = found.find((d) => d.resource.spec.secrets?.some((s) => s.valueFrom));
    const secretFile = (await samples()).find((d) => d.object.kind === "Secret");
    expect(byRef?.file).toBe(secretFile?.file);
  });

  it("every Deployment matches the resource schema", async () => {
    for (const { file, object } of deployments(await samples())) {
      expect(
        [...Value.Errors(DeploymentResourceSchema, object)].map((e) => `${e.path}: ${e.message}`),
        file,
      ).toEqual([]);
    }
  });

  it("every Deployment plans a create the service's request schema accepts, against the example seed", async () => {
    const docs = await samples();
    const repos = await seedRepos();
    const secretData: Record<string, Record<string, string>> = {};
    for (const { object } of docs.filter((d) => d.object.kind === "Secret")) {
      const meta = object.metadata as { name: string };
      secretData[meta.name] = object.stringData as Record<string, string>;
    }
    for (const { file, resource } of deployments(docs)) {
      const shorthand = resource.spec.github;
      const github = shorthand
        ? resolveGithub(shorthand, repos.get(shorthand.integrationId) ?? [])
        : undefined;
      const { integrationId, repoUrl } = resource.spec.sourceConfig ?? {};
      if (integrationId && repoUrl) {
        // A spelled-out github source must name a repository its integration reaches.
        expect(
          repos.get(integrationId)?.map((r) => r.url),
          file,
        ).toContain(repoUrl);
      }
      const desired = desiredFromSpec(resource.spec, resource.metadata?.name ?? "", { secretData, github });
      const result = plan(desired, undefined, {});
      expect(result.action, file).toBe("create");
      if (result.action !== "create") continue;
      expect(
        [...Value.Errors(CreateDeploymentBodySchema, result.body)].map((e) => `${e.path}: ${e.message}`),
        file,
      ).toEqual([]);
      expect(JSON.stringify(result.summary), file).not.toContain("sk-example-not-a-real-key");
    }
  });
});
