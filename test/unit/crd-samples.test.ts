import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import type { TSchema } from "@sinclair/typebox";
import { Value } from "@sinclair/typebox/value";
import { describe, expect, it } from "vitest";
import { isScalar, parseAllDocuments } from "yaml";
import { DEPLOYMENT_SOURCES, type ForgeRepo } from "../../src/api/wire.ts";
import { CreateDeploymentBodySchema } from "../../src/api/wire-requests.ts";
import {
  CLUSTER_SERVICE_CONNECTION_KIND,
  ClusterServiceConnectionSchema,
  CONNECTION_KINDS,
  type ConnectionKind,
  SERVICE_CONNECTION_KIND,
  ServiceConnectionSchema,
} from "../../src/crd/connection-schema.ts";
import { resolveGithub } from "../../src/crd/github.ts";
import { desiredFromSpec } from "../../src/crd/mapping.ts";
import { type DeploymentResource, DeploymentResourceSchema } from "../../src/crd/schema.ts";
import { plan } from "../../src/reconcile/plan.ts";
import { seededRepos } from "../../src/simulator/catalog.ts";
import { loadSeed } from "../../src/simulator/seed.ts";
import { overlayPatches, withSimulatorValues } from "../support/samples.ts";

const dir = join(import.meta.dirname, "..", "..", "manifests", "samples");

/**
 * The values of a sample that belong to a tenant, by kind: each must carry a `# replace:` comment
 * (a path of a list item applies to every item).
 */
const TENANT_VALUES: Record<string, string[][]> = {
  Deployment: [
    ["spec", "github", "integrationId"],
    ["spec", "github", "repository"],
    ["spec", "sourceConfig", "integrationId"],
    ["spec", "sourceConfig", "repoUrl"],
    ["spec", "sourceConfig", "listenerId"],
    ["spec", "sourceConfig", "listenerConfig", "k8sNamespace"],
    ["spec", "sourceConfig", "resourceSpec", "serviceAccountName"],
    ["spec", "sourceRevisionConfig", "imageUri"],
    ["spec", "sourceRevisionConfig", "sourceTarballPath"],
    ["spec", "secretReferences", "*", "secretName"],
    ["spec", "secretReferences", "*", "secretKey"],
    ["spec", "connectionRef", "name"],
  ],
  ServiceConnection: [
    ["metadata", "name"],
    ["spec", "baseUrl"],
    ["spec", "apiKeySecretRef", "name"],
    ["spec", "tenantId"],
  ],
  ClusterServiceConnection: [
    ["metadata", "name"],
    ["spec", "baseUrl"],
    ["spec", "apiKeySecretRef", "name"],
    ["spec", "apiKeySecretRef", "namespace"],
    ["spec", "tenantId"],
  ],
  Secret: [["stringData", "*"]],
};

/** The nodes at `path` of a parsed document (`*` is every item or value). */
function nodesAt(node: unknown, path: string[]): unknown[] {
  if (path.length === 0) return [node];
  const [head, ...rest] = path;
  const items = (node as { items?: { key?: { value?: unknown }; value?: unknown }[] } | null)?.items;
  if (!Array.isArray(items)) return [];
  if (head === "*") return items.flatMap((item) => nodesAt("value" in item ? item.value : item, rest));
  const pair = items.find((item) => item.key?.value === head);
  return pair ? nodesAt(pair.value, rest) : [];
}

/** The samples as the overlay renders them. */
async function simulatorSamples(): Promise<Doc[]> {
  const patches = overlayPatches();
  return (await samples()).map((doc) => ({ ...doc, object: withSimulatorValues(doc.object, patches) }));
}

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

/** The connection samples, with the TypeBox schema of their kind. */
const CONNECTION_SCHEMAS: Record<ConnectionKind, TSchema> = {
  [SERVICE_CONNECTION_KIND]: ServiceConnectionSchema,
  [CLUSTER_SERVICE_CONNECTION_KIND]: ClusterServiceConnectionSchema,
};
const connections = (docs: Doc[]) =>
  docs.filter((d) => (CONNECTION_KINDS as readonly unknown[]).includes(d.object.kind));

/** A sample needing a connection: it is one, or a Deployment naming one. */
const usesConnection = (doc: Doc) =>
  connections([doc]).length > 0 ||
  deployments([doc]).some((d) => d.resource.spec.connectionRef !== undefined);

describe("manifests/samples", () => {
  it("kustomization.yaml lists exactly the samples that need no connection of their own", async () => {
    // `npm run demo` and the quickstart apply it: a connection needs the user's service URL and
    // key Secret first, and a Deployment on one would wait for it forever.
    const kustomization = parseAllDocuments(
      await readFile(join(dir, "kustomization.yaml"), "utf8"),
    )[0]?.toJS();
    const docs = await samples();
    const files = [...new Set(docs.map((d) => d.file))];
    const needing = new Set(docs.filter(usesConnection).map((d) => d.file));
    expect(needing.size).toBeGreaterThan(0);
    expect([...kustomization.resources].sort()).toEqual(files.filter((f) => !needing.has(f)).sort());
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

  it("has one connection of each kind, each matching its schema", async () => {
    const found = connections(await samples());
    expect(found.map((d) => d.object.kind).sort()).toEqual([...CONNECTION_KINDS].sort());
    for (const { file, object } of found) {
      const schema = CONNECTION_SCHEMAS[object.kind as ConnectionKind];
      expect(
        [...Value.Errors(schema, object)].map((e) => `${e.path}: ${e.message}`),
        file,
      ).toEqual([]);
    }
  });

  it("tells in each connection's comment how to create the very Secret it reads", async () => {
    for (const { file, object } of connections(await samples())) {
      const ref = (object.spec as { apiKeySecretRef: { name: string; key: string; namespace?: string } })
        .apiKeySecretRef;
      const text = await readFile(join(dir, file), "utf8");
      const command = /^#\s+(kubectl create secret generic .*)$/m.exec(text)?.[1]?.split(/\s+/) ?? [];
      expect(command[4], file).toBe(ref.name);
      expect(command.find((w) => w.startsWith("--from-literal="))?.split("=")[1], file).toBe(ref.key);
      const namespace = command[command.indexOf("-n") + 1];
      // The namespaced kind reads its own namespace: the command leaves it to the user.
      expect(namespace, file).toBe(ref.namespace ?? "<namespace>");
    }
  });

  it("every connectionRef names a connection sample of that kind", async () => {
    const docs = await samples();
    const refs = deployments(docs).flatMap((d) =>
      d.resource.spec.connectionRef ? [d.resource.spec.connectionRef] : [],
    );
    expect(refs.length).toBeGreaterThan(0);
    const known = connections(docs).map(
      (d) => `${d.object.kind}/${(d.object.metadata as { name: string }).name}`,
    );
    for (const ref of refs) expect(known).toContain(`${ref.kind}/${ref.name}`);
  });

  it("marks every value that belongs to a tenant with a `# replace:` comment", async () => {
    const unmarked: string[] = [];
    let marked = 0;
    const files = (await readdir(dir)).filter((f) => f.endsWith(".yaml") && f !== "kustomization.yaml");
    for (const file of files) {
      for (const doc of parseAllDocuments(await readFile(join(dir, file), "utf8"))) {
        const kind = String(doc.get("kind"));
        for (const path of TENANT_VALUES[kind] ?? []) {
          for (const node of nodesAt(doc.contents, path)) {
            if (isScalar(node) && node.comment?.trim().startsWith("replace:")) marked++;
            else unmarked.push(`${file}: ${kind} ${path.join(".")}`);
          }
        }
      }
    }
    expect(unmarked).toEqual([]);
    expect(marked).toBeGreaterThan(15);
  });

  it("the simulator overlay sets only values a sample marks `# replace:`, to ones the seed has", async () => {
    const docs = await samples();
    // What the seed offers: its integrations, their repositories (owner/name and URL), its listeners.
    const seed = await loadSeed(SEED);
    const repos = seededRepos(seed);
    const seedValues = new Set<string>([
      ...repos.keys(),
      ...[...repos.values()].flat().flatMap((r) => [`${r.owner}/${r.name}`, r.url]),
      ...(seed.deployments ?? []).flatMap((d) => {
        const listener = (d.source_config as { listener_id?: string } | undefined)?.listener_id;
        return listener ? [listener] : [];
      }),
    ]);
    const leaves = (value: unknown, path: string[] = []): [string[], unknown][] =>
      typeof value === "object" && value !== null && !Array.isArray(value)
        ? Object.entries(value).flatMap(([k, v]) => leaves(v, [...path, k]))
        : [[path, value]];
    const patches = overlayPatches();
    expect(patches.length).toBeGreaterThan(0);
    for (const patch of patches) {
      const name = (patch.metadata as { name: string }).name;
      const target = docs.find(
        (d) => d.object.kind === patch.kind && (d.object.metadata as { name: string }).name === name,
      );
      expect(target, `${patch.kind}/${name}`).toBeDefined();
      const text = await readFile(join(dir, target?.file ?? ""), "utf8");
      const document = parseAllDocuments(text).find((d) => d.get("kind") === patch.kind);
      for (const [path, value] of leaves({ spec: patch.spec })) {
        const [node] = nodesAt(document?.contents, path);
        expect(
          isScalar(node) && node.comment?.trim().startsWith("replace:"),
          `${name} ${path.join(".")}`,
        ).toBe(true);
        // The integration, repositories and listener come from the seed (an image is the simulator's to accept).
        if (path.at(-1) !== "imageUri") expect([...seedValues], `${name} ${path.join(".")}`).toContain(value);
      }
    }
  });

  it("every Deployment, with the simulator's values, plans a create the service's request schema accepts, against the example seed", async () => {
    const docs = await simulatorSamples();
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
