// The connection check's wiring under --sharded: the leader counts every replica's resources, so
// it must hear of what changes its counts even when its own share holds none of the resources.
import { pino } from "pino";
import { describe, expect, it, vi } from "vitest";
import { serviceConfigFrom } from "../../src/config.ts";
import type { ConnectionRegistry } from "../../src/connection/registry.ts";
import type { ConnectionObject } from "../../src/kube/connections.ts";
import type { KubeEventRecorder } from "../../src/kube/events.ts";
import { RuntimeMetrics } from "../../src/runtime/metrics.ts";
import { ClusterUserCounts } from "../../src/sharding/cluster-users.ts";
import type { Caches } from "../../src/wiring/caches.ts";
import { connectionCheck } from "../../src/wiring/connection-check.ts";
import { ManualClock } from "../support/manual-clock.ts";

const shared = (name: string, selected: boolean): ConnectionObject => ({
  metadata: { name, resourceVersion: "1" },
  spec: {
    baseUrl: "https://shared.example",
    apiKeySecretRef: { name: "dms", key: "api-key", namespace: "dms-system" },
    ...(selected ? { namespaceSelector: { matchLabels: { "dms.dev/tenant": "staging" } } } : {}),
  },
});

describe("the connection check, sharded", () => {
  it("counts again what a cluster connection's selector refuses when a namespace is relabelled, whatever the leader's own share holds", () => {
    const relabelled: ((name: string) => void)[] = [];
    const cluster = [shared("staging", true), shared("open", false)];
    const caches = {
      deployments: { byIndex: () => [] },
      secrets: {},
      connections: { all: [{ list: () => cluster }], cluster: { list: () => cluster } },
      namespaces: { onLabelsChange: (listener: (name: string) => void) => relabelled.push(listener) },
    } as unknown as Caches;
    const users = new ClusterUserCounts();
    users.use({ hasSynced: () => true, usersOf: () => [{ metadata: { namespace: "team-b" } }] });
    const parsed = serviceConfigFrom({ baseUrl: "https://default.example", apiKey: "k" }, {});
    if (!parsed.ok) throw new Error(parsed.problems.join("; "));
    const { controller } = connectionCheck({
      registry: {} as ConnectionRegistry,
      sharded: users,
      caches,
      recorder: {} as KubeEventRecorder,
      defaults: parsed.config,
      reconcileTimeoutMs: 1_000,
      metrics: new RuntimeMetrics({ processMetrics: false }),
      onChange: () => {},
      clock: new ManualClock({ start: 0 }),
      logger: pino({ level: "silent" }),
    });
    const enqueue = vi.spyOn(controller, "enqueue").mockImplementation(() => {});
    // The leader's own cache has no resource of team-b (they are another replica's share).
    for (const listener of relabelled) listener("team-b");
    expect(enqueue.mock.calls).toEqual([["ClusterServiceConnection/staging"]]);
  });
});
