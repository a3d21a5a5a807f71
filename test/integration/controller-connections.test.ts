// Several tenants from one operator: two simulators stand for two tenants with different keys,
// reached through a ServiceConnection and a ClusterServiceConnection. The same name lives on
// both; a wrong key shows on the connection and on its Deployments, and a corrected Secret heals
// both without a restart; a ServiceConnection of another namespace cannot be used; a 429 on one
// tenant does not hold back the other; deleting a connection in use is held until none uses it.
// Who may use a connection: a ClusterServiceConnection's namespaceSelector and the default
// connection's selector refuse the other namespaces before any service call, and a namespace's
// new labels heal its resources. A service name spelled to look like another connection's claim
// holds nothing there.
import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ConnectionStatus } from "../../src/crd/connection-schema.ts";
import type { DeploymentSpec } from "../../src/crd/schema.ts";
import type { RunningSimulator } from "../../src/simulator/server.ts";
import { freshNamespace, kubectl, kubectlOk, waitFor } from "../support/cluster.ts";
import { startOperator, startTestSimulator, TEST_API_KEY, type TestOperator } from "../support/operator.ts";
import { ClusterUser, conditionOf, hasCondition } from "../support/resources.ts";

const KEY_B = "tenant-b-key-5f2c0e9a7d";
const TENANT_A = "6f1c1d2e-0000-4000-8000-00000000000a";
const TENANT_B = "6f1c1d2e-0000-4000-8000-00000000000b";
const PROVIDER = (id: string) => ({ provider_id: id, name: id });

const spec = (connectionRef?: DeploymentSpec["connectionRef"]): DeploymentSpec => ({
  source: "internal_docker",
  sourceConfig: { resourceSpec: { minScale: 1, maxScale: 2 } },
  sourceRevisionConfig: { imageUri: "registry.example.com/shop:1" },
  ...(connectionRef ? { connectionRef } : {}),
});

/** How many answers with `status` a simulator gave, over all routes (its own counters). */
const answered = (sim: RunningSimulator, status: string) =>
  Object.values(sim.counters()).reduce((sum, byStatus) => sum + (byStatus[status] ?? 0), 0);

interface Connection {
  metadata?: { deletionTimestamp?: string; finalizers?: string[] };
  status?: ConnectionStatus;
}

describe("controller: connections to several tenants", () => {
  const suffix = randomBytes(3).toString("hex");
  const clusterName = `tenant-b-${suffix}`;
  /** A ClusterServiceConnection to tenant B for the namespaces labelled `allowedLabel=yes` only. */
  const pickyName = `picky-${suffix}`;
  const allowedLabel = `dms.dev/allowed-${suffix}`;
  const defaultLabel = `dms.dev/default-${suffix}`;
  const user = new ClusterUser();
  let nsA: string;
  let nsB: string;
  let simA: RunningSimulator;
  let simB: RunningSimulator;
  let op: TestOperator;
  /** Every request a simulator received, as `METHOD /path?query` (its own record). */
  const seen = (sim: RunningSimulator) => sim.requests().map((r) => `${r.method} ${r.url}`);

  const getConnection = async (kind: string, name: string, namespace?: string) => {
    const args = ["get", kind, name, "-o", "json", ...(namespace ? ["-n", namespace] : [])];
    const result = await kubectl(args);
    return result.code === 0 ? (JSON.parse(result.stdout) as Connection) : undefined;
  };
  const ready = (c: Connection | undefined) => c?.status?.conditions?.find((x) => x.type === "Ready");
  const waitConnection = (kind: string, name: string, namespace: string | undefined, reason: string) =>
    waitFor(
      async () => {
        const c = await getConnection(kind, name, namespace);
        return ready(c)?.reason === reason ? c : undefined;
      },
      { description: `${kind} ${name} Ready reason ${reason}`, timeoutMs: 20_000 },
    );
  const apply = (object: object) => kubectlOk(["apply", "-f", "-"], { input: JSON.stringify(object) });

  beforeAll(async () => {
    nsA = await freshNamespace("conn-a");
    nsB = await freshNamespace("conn-b");
    simA = await startTestSimulator({
      tenantId: TENANT_A,
      seed: { providers: [PROVIDER("github"), PROVIDER("google")] },
    });
    simB = await startTestSimulator({
      apiKey: KEY_B,
      tenantId: TENANT_B,
      seed: { providers: [PROVIDER("github")] },
    });
    await user.putSecret(nsA, "tenant-a", { "api-key": TEST_API_KEY });
    await user.putSecret(nsB, "tenant-b", { "api-key": KEY_B });
    await apply({
      apiVersion: "dms.dev/v1alpha1",
      kind: "ServiceConnection",
      metadata: { name: "tenant-a", namespace: nsA },
      spec: { baseUrl: simA.url, apiKeySecretRef: { name: "tenant-a", key: "api-key" } },
    });
    await apply({
      apiVersion: "dms.dev/v1alpha1",
      kind: "ClusterServiceConnection",
      metadata: { name: clusterName },
      spec: { baseUrl: simB.url, apiKeySecretRef: { name: "tenant-b", key: "api-key", namespace: nsB } },
    });
    // The default connection (tenant A's simulator) is for the namespaces labelled `defaultLabel`
    // only, which neither is until a test labels one.
    op = startOperator({
      simulator: simA,
      namespaces: [nsA, nsB],
      clusterConnections: true,
      defaultConnectionNamespaceSelector: `${defaultLabel}=yes`,
    });
    await op.started();
  });

  afterAll(async () => {
    await kubectl(["delete", "clusterserviceconnection", clusterName, pickyName, "--wait=false"]);
    await kubectl(["delete", "deployments.dms.dev", "--all", "-n", nsA, "--wait=false"]);
    await kubectl(["delete", "deployments.dms.dev", "--all", "-n", nsB, "--wait=false"]);
    await waitFor(async () => (await getConnection("clusterserviceconnection", clusterName)) === undefined, {
      description: "the cluster connection to go",
      timeoutMs: 20_000,
    }).catch(() => {});
    await op?.stop();
    await simA?.close();
    await simB?.close();
  });

  it("reports each connection Ready with the providers its tenant lists", async () => {
    const a = await waitConnection("serviceconnection", "tenant-a", nsA, "Connected");
    const b = await waitConnection("clusterserviceconnection", clusterName, undefined, "Connected");
    expect(a?.status?.providers).toBe(2);
    expect(b?.status?.providers).toBe(1);
    expect(a?.status?.lastProbeTime).toMatch(/^\d{4}-\d\d-\d\dT/);
    expect(a?.metadata?.finalizers).toContain("dms.dev/connection-in-use");
    // The probe is the providers listing, with the connection's own key.
    expect(seen(simB).some((r) => r.startsWith("GET /v2/auth/providers"))).toBe(true);
  });

  it("deploys the same name to two tenants from two namespaces, without a conflict", async () => {
    await user.create(nsA, "shop", spec({ kind: "ServiceConnection", name: "tenant-a" }));
    await user.create(nsB, "shop", spec({ kind: "ClusterServiceConnection", name: clusterName }));
    const inA = await user.waitReady(nsA, "shop");
    const inB = await user.waitReady(nsB, "shop");
    expect(inA.status?.connection).toBe("ServiceConnection/tenant-a");
    expect(inB.status?.connection).toBe(`ClusterServiceConnection/${clusterName}`);
    expect(inA.status?.tenantId).toBe(TENANT_A);
    expect(inB.status?.tenantId).toBe(TENANT_B);
    expect(simA.store.list().map((d) => d.name)).toEqual(["shop"]);
    expect(simB.store.list().map((d) => d.name)).toEqual(["shop"]);
    const counted = await waitFor(
      async () => {
        const c = await getConnection("clusterserviceconnection", clusterName);
        return c?.status?.deployments === 1 ? c : undefined;
      },
      { description: "the cluster connection to count its Deployment" },
    );
    expect(counted?.status?.deployments).toBe(1);
  });

  it("cannot use a ServiceConnection of another namespace, and makes no call for it", async () => {
    const before = seen(simA).length;
    await user.create(nsB, "borrower", spec({ kind: "ServiceConnection", name: "tenant-a" }));
    const stuck = await user.waitFor(
      nsB,
      "borrower",
      (o) => hasCondition(o, "Synced", "False", "ConnectionNotReady"),
      "ConnectionNotReady",
    );
    expect(conditionOf(stuck, "Synced")?.message).toContain(`ServiceConnection ${nsB}/tenant-a not found`);
    expect(hasCondition(stuck, "Stalled", "True", "ConnectionNotReady")).toBe(true);
    const asked = seen(simA).slice(before);
    expect(asked.filter((r) => r.includes("borrower") || r.startsWith("POST"))).toEqual([]);
    expect(simA.store.list().map((d) => d.name)).toEqual(["shop"]);
  });

  it("shows a wrong key on the connection and its Deployments; a corrected Secret heals both", async () => {
    await user.putSecret(nsB, "tenant-b", { "api-key": "a-wrong-key" });
    const refused = await waitConnection("clusterserviceconnection", clusterName, undefined, "Unauthorized");
    expect(ready(refused)?.status).toBe("False");
    expect(ready(refused)?.message).not.toContain("a-wrong-key");
    // A change of the resource is not sent: its connection is not Ready.
    await user.patch(nsB, "shop", { spec: { sourceConfig: { resourceSpec: { maxScale: 3 } } } });
    const blocked = await user.waitFor(
      nsB,
      "shop",
      (o) => hasCondition(o, "Synced", "False", "ConnectionNotReady"),
      "ConnectionNotReady",
    );
    expect(conditionOf(blocked, "Synced")?.message).toContain(`ClusterServiceConnection ${clusterName}`);
    expect(conditionOf(blocked, "Synced")?.message).toContain("Unauthorized");
    expect(simB.store.list()[0]?.source_config?.resource_spec?.max_scale).toBe(2);

    await user.putSecret(nsB, "tenant-b", { "api-key": KEY_B });
    await waitConnection("clusterserviceconnection", clusterName, undefined, "Connected");
    await user.waitFor(nsB, "shop", (o) => hasCondition(o, "Synced", "True"), "Synced again");
    await waitFor(() => simB.store.list()[0]?.source_config?.resource_spec?.max_scale === 3, {
      description: "the held change to reach tenant B",
    });
  });

  it("keeps serving one tenant while the other answers 429", async () => {
    simA.faults.set({ errors: [{ status: 429, rate: 1, retryAfterSeconds: 60 }] });
    try {
      await user.patch(nsA, "shop", { spec: { sourceConfig: { resourceSpec: { maxScale: 4 } } } });
      // Tenant A has answered 429 (with Retry-After) before tenant B is asked anything.
      await waitFor(() => answered(simA, "429") > 0, { description: "tenant A to answer 429" });
      await user.patch(nsB, "shop", { spec: { sourceConfig: { resourceSpec: { maxScale: 5 } } } });
      // Tenant A waits out its Retry-After (a minute); tenant B's change goes through meanwhile.
      await waitFor(() => simB.store.list()[0]?.source_config?.resource_spec?.max_scale === 5, {
        description: "tenant B's change while tenant A is rate limited",
        timeoutMs: 20_000,
      });
      expect(simA.store.list()[0]?.source_config?.resource_spec?.max_scale).toBe(2);
    } finally {
      simA.faults.set({});
    }
  });

  it("under deletionPolicy Delete, deletes the service's deployment through the resource's own connection", async () => {
    await user.create(nsB, "preview", {
      ...spec({ kind: "ClusterServiceConnection", name: clusterName }),
      deletionPolicy: "Delete",
    });
    await user.waitReady(nsB, "preview");
    expect(simB.store.list().map((d) => d.name)).toContain("preview");
    await user.delete(nsB, "preview");
    await waitFor(async () => (await user.get(nsB, "preview")) === undefined, {
      description: "the resource to go once its deployment is deleted",
      timeoutMs: 20_000,
    });
    expect(simB.store.list().map((d) => d.name)).not.toContain("preview");
    expect(seen(simA).filter((r) => r.startsWith("DELETE"))).toEqual([]);
  });

  it("holds the deletion of a connection in use until no Deployment uses it", async () => {
    await kubectlOk(["delete", "serviceconnection", "tenant-a", "-n", nsA, "--wait=false"]);
    const held = await waitFor(
      async () => {
        const c = await getConnection("serviceconnection", "tenant-a", nsA);
        const reconciling = c?.status?.conditions?.find((x) => x.type === "Reconciling");
        return reconciling?.reason === "InUse" ? { c, reconciling } : undefined;
      },
      { description: "the held deletion's condition" },
    );
    expect(held?.c?.metadata?.deletionTimestamp).toBeDefined();
    expect(held?.reconciling.message).toContain("1 still does");

    await user.delete(nsA, "shop");
    await waitFor(async () => (await getConnection("serviceconnection", "tenant-a", nsA)) === undefined, {
      description: "the connection to go once unused",
    });
  });

  it("refuses a ClusterServiceConnection to a namespace its selector does not select: no call; a label heals it", async () => {
    await apply({
      apiVersion: "dms.dev/v1alpha1",
      kind: "ClusterServiceConnection",
      metadata: { name: pickyName },
      spec: {
        baseUrl: simB.url,
        apiKeySecretRef: { name: "tenant-b", key: "api-key", namespace: nsB },
        namespaceSelector: { matchLabels: { [allowedLabel]: "yes" } },
      },
    });
    await waitConnection("clusterserviceconnection", pickyName, undefined, "Connected");
    const before = seen(simB).length;
    await user.create(nsA, "intruder", {
      ...spec({ kind: "ClusterServiceConnection", name: pickyName }),
      deletionPolicy: "Delete",
    });
    const refused = await user.waitFor(
      nsA,
      "intruder",
      (o) => hasCondition(o, "Synced", "False", "ConnectionNotAllowed"),
      "ConnectionNotAllowed",
    );
    expect(hasCondition(refused, "Stalled", "True", "ConnectionNotAllowed")).toBe(true);
    const message = conditionOf(refused, "Synced")?.message ?? "";
    expect(message).toContain(`ClusterServiceConnection ${pickyName} may not be used from namespace ${nsA}`);
    expect(message).toContain(`(${allowedLabel}=yes)`);
    expect(message).toContain(`kubectl label namespace ${nsA} ${allowedLabel}=yes`);
    // Refused before any call: not a lookup of its name, not a write.
    const asked = () => seen(simB).slice(before);
    expect(asked().filter((r) => r.includes("intruder") || !r.startsWith("GET"))).toEqual([]);
    expect(refused.metadata.finalizers ?? []).toEqual([]);
    const counted = await waitFor(
      async () => {
        const c = await getConnection("clusterserviceconnection", pickyName);
        return c?.status?.refused === 1 ? c : undefined;
      },
      { description: "the connection to count the resource it refuses" },
    );
    expect(counted?.status?.deployments).toBe(1);
    const wide = await kubectlOk(["get", "clusterserviceconnection", pickyName, "-o", "wide"]);
    expect(wide.split("\n")[0]).toMatch(/DEPLOYMENTS\s+REFUSED/);

    // The namespace is given the label: the resource heals by itself.
    await kubectlOk(["label", "namespace", nsA, `${allowedLabel}=yes`]);
    const healed = await user.waitReady(nsA, "intruder");
    expect(healed.status?.connection).toBe(`ClusterServiceConnection/${pickyName}`);
    expect(simB.store.list().map((d) => d.name)).toContain("intruder");
    await waitFor(
      async () => (await getConnection("clusterserviceconnection", pickyName))?.status?.refused === 0,
      {
        description: "status.refused back to 0",
      },
    );
  });

  it("a resource refused after the fact is deleted without a call: its deployment stays on the tenant", async () => {
    await kubectlOk(["label", "namespace", nsA, `${allowedLabel}-`]);
    await user.waitFor(
      nsA,
      "intruder",
      (o) => hasCondition(o, "Synced", "False", "ConnectionNotAllowed"),
      "ConnectionNotAllowed once the label is gone",
    );
    const before = seen(simB).length;
    await user.delete(nsA, "intruder");
    await waitFor(async () => (await user.get(nsA, "intruder")) === undefined, {
      description: "the refused resource to go without its cleanup",
    });
    expect(
      seen(simB)
        .slice(before)
        .filter((r) => r.startsWith("DELETE") || r.includes("intruder")),
    ).toEqual([]);
    expect(simB.store.list().map((d) => d.name)).toContain("intruder");
  });

  it("a refused resource holds no name: an older one in a refused namespace cannot block a team's name", async () => {
    const picky = { kind: "ClusterServiceConnection", name: pickyName } as const;
    await user.create(nsA, "contested", spec(picky));
    await user.waitFor(
      nsA,
      "contested",
      (o) => hasCondition(o, "Synced", "False", "ConnectionNotAllowed"),
      "the older resource refused",
    );
    await kubectlOk(["label", "namespace", nsB, `${allowedLabel}=yes`]);
    await user.create(nsB, "contested", spec(picky));
    const ready = await user.waitReady(nsB, "contested");
    expect(conditionOf(ready, "Synced")?.reason).not.toBe("NameConflict");
    expect(simB.store.list().filter((d) => d.name === "contested")).toHaveLength(1);
  });

  it("the default connection serves only the namespaces its selector selects; a label heals the others", async () => {
    const before = seen(simA).length;
    await user.create(nsB, "plain", spec());
    const refused = await user.waitFor(
      nsB,
      "plain",
      (o) => hasCondition(o, "Synced", "False", "ConnectionNotAllowed"),
      "ConnectionNotAllowed",
    );
    expect(conditionOf(refused, "Synced")?.message).toContain(
      `the default connection (the operator's own credentials, for resources without spec.connectionRef) may not be used from namespace ${nsB}: --default-connection-namespace-selector (${defaultLabel}=yes)`,
    );
    expect(refused.status?.connection).toBe("default");
    expect(
      seen(simA)
        .slice(before)
        .filter((r) => r.includes("plain") || !r.startsWith("GET")),
    ).toEqual([]);

    await kubectlOk(["label", "namespace", nsB, `${defaultLabel}=yes`]);
    await user.waitReady(nsB, "plain");
    expect(simA.store.list().map((d) => d.name)).toContain("plain");
  });

  it("a spec.name that spells another connection's claim holds no name there", async () => {
    // On the default connection (nsB is labelled for it by now), created first, older than the
    // resource it means to block; a newline is what joins a connection's key and a name.
    const forger = await user.create(nsB, "forger", {
      ...spec(),
      name: `ClusterServiceConnection/${clusterName}\nvictim`,
    });
    const created = Date.parse(forger.metadata.creationTimestamp ?? "");
    await waitFor(() => Date.now() > created + 1_000, { description: "a later creation second" });
    await user.create(nsA, "victim", spec({ kind: "ClusterServiceConnection", name: clusterName }));
    const ready = await user.waitReady(nsA, "victim");
    expect(conditionOf(ready, "Synced")?.reason).not.toBe("NameConflict");
    expect(simB.store.list().map((d) => d.name)).toContain("victim");
  });
});
