import { describe, expect, it } from "vitest";
import { NamespaceOrder } from "../../src/connection/namespace-order.ts";
import { ConnectionRegistry, type ConnectionRegistryOptions } from "../../src/connection/registry.ts";
import type { ConnectionObject, KubeConnections } from "../../src/kube/connections.ts";
import type { KubeDeployments } from "../../src/kube/deployments.ts";
import { RuntimeMetrics } from "../../src/runtime/metrics.ts";
import { registerCacheMetrics } from "../../src/wiring/operator-metrics.ts";

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

describe("dms_connection_ready", () => {
  it("has no series for the ServiceConnections past --max-connections-per-namespace: a tenant's thousand do not make a thousand", async () => {
    const all = Array.from({ length: 500 }, (_, i) => connection(`c-${String(i).padStart(4, "0")}`, i));
    const order = new NamespaceOrder();
    for (const c of all) order.upsert(c);
    const registry = new ConnectionRegistry({
      connections: {} as ConnectionRegistryOptions["connections"],
      defaultSession: {} as ConnectionRegistryOptions["defaultSession"],
      connect: () => {
        throw new Error("not called");
      },
      session: () => {
        throw new Error("not called");
      },
      maxPerNamespace: 20,
      order,
    });
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
