// spec.export through the operator against a real API server and the simulator: the ConfigMap is
// created with the resource's controller ownerReference (the test control plane runs no garbage
// collector, so the reference itself is what is checked), replaced when a new revision goes live,
// written back when deleted or edited by another hand (the label-selected, metadata-only watch),
// deleted when the export names another, and a ConfigMap of that name the resource does not own
// is refused (ExportConflict, a Warning) and left as it was.
import { describe, expect, it } from "vitest";
import type { DeploymentSpec } from "../../src/crd/schema.ts";
import { isNotFound } from "../../src/kube/errors.ts";
import { waitFor } from "../support/cluster.ts";
import { type ClusterUser, conditionOf } from "../support/resources.ts";
import { useScenarios } from "../support/scenario.ts";

interface ConfigMap {
  metadata: {
    uid: string;
    resourceVersion: string;
    labels?: Record<string, string>;
    ownerReferences?: Record<string, unknown>[];
  };
  data?: Record<string, string>;
}

const spec = (configMapName: string, image = "registry.example.com/agent:1"): DeploymentSpec => ({
  source: "internal_docker",
  sourceConfig: { customUrl: "https://agent.example.com" },
  sourceRevisionConfig: { imageUri: image },
  export: { configMapName },
});

async function configMap(user: ClusterUser, namespace: string, name: string): Promise<ConfigMap | undefined> {
  try {
    return (await user.client.request({
      method: "GET",
      path: `/api/v1/namespaces/${namespace}/configmaps/${name}`,
    })) as ConfigMap;
  } catch (error) {
    if (isNotFound(error)) return undefined;
    throw error;
  }
}

describe("controller: spec.export", () => {
  const scenarios = useScenarios();

  it("creates the ConfigMap owned by the resource, replaces it on a new revision, writes it back when deleted", async () => {
    const s = await scenarios.start("ctl-export");
    const created = await s.user.create(s.namespace, "agent", spec("agent-endpoint"));
    const ready = await s.user.waitReady(s.namespace, "agent");
    const first = await waitFor(
      async () => {
        const cm = await configMap(s.user, s.namespace, "agent-endpoint");
        return cm?.data?.activeRevisionId === ready.status?.activeRevisionId && cm?.data?.imageUri
          ? cm
          : undefined;
      },
      { description: "the ConfigMap with the active revision" },
    );
    expect(first.metadata.ownerReferences).toEqual([
      {
        apiVersion: "dms.dev/v1alpha1",
        kind: "Deployment",
        name: "agent",
        uid: created.metadata.uid,
        controller: true,
        blockOwnerDeletion: true,
      },
    ]);
    expect(first.metadata.labels).toEqual({ "dms.dev/export": "true" });
    expect(first.data).toEqual({
      url: "https://agent.example.com",
      deploymentId: ready.status?.deploymentId,
      activeRevisionId: ready.status?.activeRevisionId,
      imageUri: "registry.example.com/agent:1",
    });
    const exported = await s.user.waitFor(
      s.namespace,
      "agent",
      (o) =>
        conditionOf(o, "Exported")?.status === "True" && o?.status?.exportedConfigMap === "agent-endpoint",
      "Exported=True",
    );
    expect(conditionOf(exported, "Exported")?.reason).toBe("Exported");

    // Unchanged: a reconcile of the resource reads and writes no ConfigMap (its watch shows it).
    const served = () =>
      Promise.all(["GET", "POST", "PUT", "DELETE"].map((verb) => s.user.requestsServed("configmaps", verb)));
    const before = await served();
    await s.user.annotate(s.namespace, "agent", { "dms.dev/reconcile-requested-at": "steady" });
    await s.user.waitFor(
      s.namespace,
      "agent",
      (o) => o?.status?.lastHandledReconcileAt === "steady",
      "the reconcile asked for",
    );
    expect(await served()).toEqual(before);

    // A new revision: the same ConfigMap, replaced with the revision now live.
    await s.user.patch(s.namespace, "agent", {
      spec: { sourceRevisionConfig: { imageUri: "registry.example.com/agent:2" } },
    });
    const second = await waitFor(
      async () => {
        const cm = await configMap(s.user, s.namespace, "agent-endpoint");
        return cm?.data?.imageUri === "registry.example.com/agent:2" ? cm : undefined;
      },
      { description: "the ConfigMap with the second revision" },
    );
    const live = await s.user.waitReady(s.namespace, "agent");
    expect(second.metadata.uid).toBe(first.metadata.uid);
    expect(second.data?.activeRevisionId).not.toBe(first.data?.activeRevisionId);
    expect(second.data?.activeRevisionId).toBe(live.status?.activeRevisionId);

    // Deleted by another hand: the watch of exported ConfigMaps brings the resource back, which writes it.
    await s.user.client.request({
      method: "DELETE",
      path: `/api/v1/namespaces/${s.namespace}/configmaps/agent-endpoint`,
    });
    const back = await waitFor(
      async () => {
        const cm = await configMap(s.user, s.namespace, "agent-endpoint");
        return cm && cm.metadata.uid !== first.metadata.uid ? cm : undefined;
      },
      { description: "the ConfigMap written back" },
    );
    expect(back.data).toEqual(second.data);

    // Its data edited by another hand: the watch (metadata only) sees a version the operator did
    // not write, the resource reads the ConfigMap once and writes its data back.
    await s.user.client.request({
      method: "PUT",
      path: `/api/v1/namespaces/${s.namespace}/configmaps/agent-endpoint`,
      body: { ...back, data: { ...back.data, url: "https://elsewhere.example.com" } },
    });
    await waitFor(
      async () => {
        const cm = await configMap(s.user, s.namespace, "agent-endpoint");
        return cm?.data?.url === "https://agent.example.com" ? cm : undefined;
      },
      { description: "the edited ConfigMap written back" },
    );

    // Renamed: the new ConfigMap written, the old one deleted (at the version seen).
    await s.user.patch(s.namespace, "agent", { spec: { export: { configMapName: "agent-endpoint-v2" } } });
    const renamed = await waitFor(() => configMap(s.user, s.namespace, "agent-endpoint-v2"), {
      description: "the renamed ConfigMap",
    });
    expect(renamed.data).toEqual(second.data);
    await waitFor(async () => (await configMap(s.user, s.namespace, "agent-endpoint")) === undefined, {
      description: "the old ConfigMap deleted",
    });
    await s.user.waitFor(
      s.namespace,
      "agent",
      (o) => o?.status?.exportedConfigMap === "agent-endpoint-v2",
      "status.exportedConfigMap renamed",
    );
  });

  it("refuses a ConfigMap of that name it does not own, with ExportConflict and a Warning, and never writes it", async () => {
    const s = await scenarios.start("ctl-export-conflict");
    const theirs = { app: "https://theirs.example.com" };
    await s.user.client.request({
      method: "POST",
      path: `/api/v1/namespaces/${s.namespace}/configmaps`,
      body: { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "taken" }, data: theirs },
    });
    const before = await configMap(s.user, s.namespace, "taken");
    await s.user.create(s.namespace, "agent", spec("taken"));
    const refused = await s.user.waitFor(
      s.namespace,
      "agent",
      (o) => conditionOf(o, "Exported")?.reason === "ExportConflict",
      "Exported=False ExportConflict",
    );
    expect(conditionOf(refused, "Exported")?.status).toBe("False");
    expect(conditionOf(refused, "Exported")?.message).toContain(
      "ConfigMap taken exists and has no controller, not this resource",
    );
    expect(refused.status?.exportedConfigMap).toBeUndefined();
    const warning = await s.user.waitForEvent(s.namespace, "agent", "ExportConflict");
    expect(warning.type).toBe("Warning");
    await s.user.waitReady(s.namespace, "agent");
    const after = await configMap(s.user, s.namespace, "taken");
    expect(after?.metadata.resourceVersion).toBe(before?.metadata.resourceVersion);
    expect(after?.data).toEqual(theirs);
    expect(after?.metadata.ownerReferences).toBeUndefined();
  });
});
