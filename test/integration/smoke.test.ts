// Smoke tests of the control plane the cluster tests run on, with the project's own CRD installed:
// if one of these fails, every other integration test's result is suspect.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { CustomObjectsApi, KubeConfig, Watch } from "@kubernetes/client-node";
import { beforeAll, describe, expect, it } from "vitest";
import { parse } from "yaml";
import { freshNamespace, kubectl, kubectlOk, testKubeconfigPath, waitFor } from "../support/cluster.ts";

const ROOT = join(import.meta.dirname, "..", "..");

interface CrdFile {
  metadata: { name: string };
  spec: { group: string; names: { plural: string }; versions: { name: string; storage: boolean }[] };
}

/** Coordinates of the Deployment CRD as generated into crds/, so a version bump needs no test edit. */
function deploymentCrd() {
  const crd = parse(readFileSync(join(ROOT, "crds", "dms.dev_deployments.yaml"), "utf8")) as CrdFile;
  const version = crd.spec.versions.find((v) => v.storage)?.name;
  if (!version) throw new Error("crds/dms.dev_deployments.yaml has no storage version");
  return { name: crd.metadata.name, group: crd.spec.group, plural: crd.spec.names.plural, version };
}

interface DeploymentObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; generation?: number; resourceVersion?: string };
  spec: Record<string, unknown>;
  status?: Record<string, unknown>;
}

describe("control plane with the Deployment CRD", () => {
  const crd = deploymentCrd();
  const kc = new KubeConfig();
  let api: CustomObjectsApi;
  let namespace: string;

  const object = (name: string, spec: Record<string, unknown> = {}): DeploymentObject => ({
    apiVersion: `${crd.group}/${crd.version}`,
    kind: "Deployment",
    metadata: { name },
    spec: { source: "external_docker", name: `smoke-${name}`, ...spec },
  });
  const create = async (body: DeploymentObject): Promise<DeploymentObject> =>
    api.createNamespacedCustomObject({ ...crd, namespace, body });
  const get = async (name: string): Promise<DeploymentObject> =>
    api.getNamespacedCustomObject({ ...crd, namespace, name });

  beforeAll(async () => {
    kc.loadFromFile(testKubeconfigPath());
    api = kc.makeApiClient(CustomObjectsApi);
    namespace = await freshNamespace("smoke");
  });

  it("installs the CRD from crds/ and it becomes Established and served", async () => {
    const status = await kubectlOk([
      "get",
      "crd",
      crd.name,
      "-o",
      'jsonpath={.status.conditions[?(@.type=="Established")].status}',
    ]);
    expect(status).toBe("True");
    const listed = await kubectl(["get", crd.name, "-n", namespace]);
    expect(listed.stderr).toContain("No resources found");
    expect(listed.code).toBe(0);
  });

  it("round-trips a resource, with the schema's defaults filled in", async () => {
    const sent = object("round-trip", { sourceConfig: { customUrl: "https://agent.example.com" } });
    await create(sent);
    const got = await get("round-trip");
    expect(got.spec).toMatchObject(sent.spec);
    expect(got.spec).toMatchObject({ managementPolicy: "Manage", deletionPolicy: "Orphan" });
    expect(got.metadata.generation).toBe(1);
  });

  it("rejects what the schema forbids, so users learn at apply time", async () => {
    const rejected = await create(object("bad-source", { source: "ftp" })).then(
      () => undefined,
      (error: { code?: number; body?: string }) => error,
    );
    expect(rejected?.code).toBe(422);
    expect(rejected?.body).toContain("spec.source: Unsupported value");
  });

  it("writes status through the status subresource without bumping generation", async () => {
    const created = await create(object("status"));
    const status = { observedGeneration: 1, remoteStatus: "READY" };
    const updated: DeploymentObject = await api.replaceNamespacedCustomObjectStatus({
      ...crd,
      namespace,
      name: "status",
      body: { ...created, status },
    });
    expect(updated.status).toEqual(status);
    expect(updated.metadata.generation).toBe(1);
    expect(updated.metadata.resourceVersion).not.toBe(created.metadata.resourceVersion);

    // The main resource ignores status, and a spec change is what moves generation.
    const replaced: DeploymentObject = await api.replaceNamespacedCustomObject({
      ...crd,
      namespace,
      name: "status",
      body: {
        ...updated,
        spec: { ...updated.spec, managementPolicy: "ObserveOnly" },
        status: { remoteStatus: "UNUSED" },
      },
    });
    expect(replaced.metadata.generation).toBe(2);
    expect(replaced.status).toEqual(status);
  });

  it("resumes a watch from a resourceVersion, delivering only what happened after it", async () => {
    const first = await create(object("watched"));
    const resumeFrom = first.metadata.resourceVersion;
    // Changes made while nobody watches: a resumed watch must replay exactly these.
    await kubectlOk(["label", crd.name, "watched", "-n", namespace, "step=one"]);
    await kubectlOk(["label", crd.name, "watched", "-n", namespace, "step=two", "--overwrite"]);

    const events: { type: string; step?: string; resourceVersion?: string }[] = [];
    const watch = new Watch(kc);
    const controller = await watch.watch(
      `/apis/${crd.group}/${crd.version}/namespaces/${namespace}/${crd.plural}`,
      { resourceVersion: resumeFrom, allowWatchBookmarks: false },
      (type: string, obj: { metadata?: { labels?: Record<string, string>; resourceVersion?: string } }) => {
        events.push({
          type,
          step: obj.metadata?.labels?.step,
          resourceVersion: obj.metadata?.resourceVersion,
        });
      },
      () => {},
    );
    try {
      await waitFor(() => events.length >= 2, { description: "the two replayed events" });
      await kubectlOk(["label", crd.name, "watched", "-n", namespace, "step=three", "--overwrite"]);
      await waitFor(() => events.length >= 3, { description: "a live event after the replay" });
    } finally {
      controller.abort();
    }
    expect(events.map((e) => [e.type, e.step])).toEqual([
      ["MODIFIED", "one"],
      ["MODIFIED", "two"],
      ["MODIFIED", "three"],
    ]);
  });

  it("accepts kubectl apply --dry-run=server -k manifests/default", async () => {
    // A server-side dry run creates nothing, so the install namespace must exist for the
    // namespaced objects to validate; creating it is what the first real apply does anyway.
    const kustomization = parse(
      readFileSync(join(ROOT, "manifests", "default", "kustomization.yaml"), "utf8"),
    ) as { namespace?: string };
    if (kustomization.namespace) {
      const created = await kubectl(["create", "namespace", kustomization.namespace]);
      expect(created.code === 0 || created.stderr.includes("AlreadyExists")).toBe(true);
    }
    const result = await kubectl(["apply", "--dry-run=server", "-k", join(ROOT, "manifests", "default")]);
    // kubectl warns (and carries on) about objects created without it; anything else is an error.
    const problems = result.stderr.split("\n").filter((line) => line.trim() && !line.startsWith("Warning:"));
    expect(problems).toEqual([]);
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(
      /customresourcedefinition.* (configured|unchanged|created) \(server dry run\)/,
    );
  });
});
