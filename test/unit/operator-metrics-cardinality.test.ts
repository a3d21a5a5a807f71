import { describe, expect, it } from "vitest";
import { NamespaceBound, NamespaceOrder } from "../../src/connection/namespace-bound.ts";
import { ConnectionRegistry, type ConnectionRegistryOptions } from "../../src/connection/registry.ts";
import type { ConnectionObject, KubeConnections } from "../../src/kube/connections.ts";
import type { KubeDeployments } from "../../src/kube/custom-resources.ts";
import { RuntimeMetrics } from "../../src/runtime/metrics.ts";
import {
  EXTERNAL_CHANGES_METRIC,
  externalChangeCounter,
  registerCacheMetrics,
} from "../../src/wiring/operator-metrics.ts";

const connection = (name: string, second: number): ConnectionObject =>
  ({
    apiVersion: "dms.dev/v1alpha1",
    kind: "ServiceConnection",
    metadata: {
      name,
      namespace: "team-a",
      uid: name,
      creationTimestamp: new Date(Date.UTC(2025, 0, 1, 0, 0, second)).toISOString(),
    },
    spec: {},
    status: { conditions: [{ type: "Ready", status: "False", reason: "TooManyConnections" }] },
  }) as unknown as ConnectionObject;

/** A registry that serves the oldest 20 ServiceConnections of each namespace of `order`, and nothing else. */
const servingTwenty = (order: NamespaceOrder) =>
  new ConnectionRegistry({
    connections: {} as ConnectionRegistryOptions["connections"],
    defaultSession: {} as ConnectionRegistryOptions["defaultSession"],
    connect: () => {
      throw new Error("not called");
    },
    session: () => {
      throw new Error("not called");
    },
    bound: new NamespaceBound(20, order),
  });

describe("dms_connection_ready", () => {
  it("has no series for the ServiceConnections past --max-connections-per-namespace: a tenant's thousand do not make a thousand", async () => {
    const all = Array.from({ length: 500 }, (_, i) => connection(`c-${String(i).padStart(4, "0")}`, i));
    const order = new NamespaceOrder();
    for (const c of all) order.upsert(c);
    const registry = servingTwenty(order);
    const metrics = new RuntimeMetrics({ processMetrics: false });
    const deployments = { list: () => [] } as unknown as KubeDeployments;
    const kubeConnections = { all: [{ list: () => all }] } as unknown as KubeConnections;
    registerCacheMetrics(metrics, deployments, kubeConnections, registry);
    const text = await metrics.registry.getSingleMetricAsString("dms_connection_ready");
    const series = text.split("\n").filter((l) => l.startsWith("dms_connection_ready{"));
    expect(series).toHaveLength(20);
    // The oldest 20, the ones served, keep theirs.
    expect(text).toContain('connection="ServiceConnection/team-a/c-0000"');
    expect(text).toContain('connection="ServiceConnection/team-a/c-0019"');
    expect(text).not.toContain('connection="ServiceConnection/team-a/c-0020"');
  });
});

describe("dms_external_changes_total", () => {
  /** `count` ServiceConnections of `namespace`, created a second apart, the first `first`. */
  const many = (namespace: string, count: number, first = 0) =>
    Array.from({ length: count }, (_, i) => {
      const c = connection(`c-${String(first + i).padStart(4, "0")}`, first + i);
      return { ...c, metadata: { ...c.metadata, namespace, uid: `${namespace}/${c.metadata.name}` } };
    });

  it("keeps no series for a connection deleted or unserved: a tenant's 5,000 names made and deleted do not make 5,000", async () => {
    // team-b holds 5,000 ServiceConnections (all but the oldest 20 unserved), its first 1,000 with
    // a change counted; team-a makes one connection under a new name in turn, deleting the one before, a
    // change counted under each.
    const teamB = many("team-b", 5_000);
    const order = new NamespaceOrder();
    for (const c of teamB) order.upsert(c);
    const registry = servingTwenty(order);
    let teamA: ConnectionObject[] = [];
    const kubeConnections = { all: [{ list: () => [...teamA, ...teamB] }] } as unknown as KubeConnections;
    const metrics = new RuntimeMetrics({ processMetrics: false });
    const count = externalChangeCounter(metrics, kubeConnections, registry);
    const counter = metrics.registry.getSingleMetric(EXTERNAL_CHANGES_METRIC) as unknown as {
      hashMap: Record<string, unknown>;
    };
    for (let i = 0; i < 5_000; i++) {
      for (const c of teamA) order.remove(c);
      teamA = many("team-a", 1, i);
      for (const c of teamA) order.upsert(c);
      count(`ServiceConnection/team-a/${teamA[0]?.metadata.name}`, "revision");
      if (i < 1_000) count(`ServiceConnection/team-b/${teamB[i]?.metadata.name}`, "fields");
    }
    // Between scrapes (or with none at all: --metrics-bind-address=0) the series held stay bounded
    // (prom-client's own table of them).
    expect(Object.keys(counter.hashMap).length).toBeLessThan(200);
    const text = await metrics.registry.getSingleMetricAsString(EXTERNAL_CHANGES_METRIC);
    const series = text.split("\n").filter((l) => l.includes('connection="ServiceConnection/'));
    // Served connections only: team-b's oldest 20 (c-0000…c-0019), team-a's c-4999.
    expect(series).toHaveLength(21);
    expect(series).toContain(
      `${EXTERNAL_CHANGES_METRIC}{connection="ServiceConnection/team-b/c-0019",kind="fields"} 1`,
    );
    expect(series).toContain(
      `${EXTERNAL_CHANGES_METRIC}{connection="ServiceConnection/team-a/c-4999",kind="revision"} 1`,
    );
    expect(text).toContain(`${EXTERNAL_CHANGES_METRIC}{connection="default",kind="revision"} 0`);
  });

  it("leaves no series behind for a change counted under a connection no longer served, between scrapes", async () => {
    const metrics = new RuntimeMetrics({ processMetrics: false });
    const nothing = { all: [{ list: () => [] }] } as unknown as KubeConnections;
    const count = externalChangeCounter(metrics, nothing, { bound: { overLimit: () => undefined } });
    // The 65th name makes the counter look, when every name it holds is gone, this one too.
    for (let i = 0; i < 65; i++) count(`ServiceConnection/team-a/gone-${i}`, "fields");
    const text = await metrics.registry.getSingleMetricAsString(EXTERNAL_CHANGES_METRIC);
    expect(text.split("\n").filter((l) => l.includes('connection="ServiceConnection/'))).toEqual([]);
  });
});
