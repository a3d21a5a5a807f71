// `run --sharded`'s parts before they run: the replica's name checked, its label selector, what
// every service client is given (User-Agent, share, fence), and the metrics it exports.
import { pino } from "pino";
import { describe, expect, it } from "vitest";
import { KubeClient } from "../../src/kube/client.ts";
import { systemClock } from "../../src/runtime/clock.ts";
import { Action } from "../../src/runtime/controller.ts";
import { RuntimeMetrics } from "../../src/runtime/metrics.ts";
import { podOfIdentity } from "../../src/sharding/release.ts";
import { budgetShare } from "../../src/sharding/replica.ts";
import { SHARDER_REPLICA_SHARE } from "../../src/sharding/ring.ts";
import { VERSION } from "../../src/version.ts";
import { joinSelectors, replicaRole, sharding } from "../../src/wiring/sharding.ts";

// No request is made: nothing here runs.
const client = new KubeClient({
  getCurrentCluster: () => ({ server: "http://127.0.0.1:9" }),
  applyToHTTPSOptions: async () => {},
});
const leaderElection = {
  enabled: true,
  name: "dms-operator-leader",
  leaseDurationMs: 15_000,
  renewDeadlineMs: 10_000,
  retryPeriodMs: 2_000,
};
const parts = (podName: string, metrics = new RuntimeMetrics({ processMetrics: false })) =>
  sharding({
    config: { leaderElection, namespaces: [] },
    client,
    namespace: "dms-system",
    podName,
    identity: `${podName}_1a2b3c4d`,
    metrics,
    clock: systemClock,
    logger: pino({ level: "silent" }),
  });

describe("the sharded operator's parts", () => {
  it("refuses a replica name that cannot be a Lease name and a label value, naming the fix", () => {
    expect(() => parts("Not_A_Pod")).toThrow(/POD_NAME.*DNS label of at most 63 lower-case characters/);
    expect(() => parts("x".repeat(64))).toThrow(/--sharded/);
  });

  it("selects its own resources, names itself on the wire, and holds writes back until its Lease is held", () => {
    const s = parts("dms-operator-5d9f8-x2x7q");
    expect(s.selector).toBe("shard.dms.dev/owner=dms-operator-5d9f8-x2x7q");
    expect(joinSelectors("team=a", s.selector)).toBe("team=a,shard.dms.dev/owner=dms-operator-5d9f8-x2x7q");
    expect(joinSelectors(undefined, s.selector)).toBe(s.selector);
    expect(s.clientIdentity.userAgent).toBe(`dms-operator/${VERSION} (dms-operator-5d9f8-x2x7q)`);
    expect(s.clientIdentity.writeGate?.()).toMatchObject({ refuse: expect.stringContaining("shard Lease") });
    s.member.renewed(Date.now());
    expect(s.clientIdentity.writeGate?.()).toMatchObject({ withinMs: expect.any(Number) });
    // No Lease seen yet: the whole budget (a share of 1).
    expect(s.clientIdentity.qpsShare?.()).toBe(1);
    expect(s.runnables.map((r) => [r.name, r.needLeaderElection])).toEqual([
      ["shard-lease", false],
      ["shard-inheritance", false],
      ["shard-lease-informer", false],
      ["sharder", true],
    ]);
  });

  it("exports its share, the ring it sees, its Lease and its drains", async () => {
    const metrics = new RuntimeMetrics({ processMetrics: false });
    parts("dms-operator-5d9f8-x2x7q", metrics);
    const text = await metrics.registry.metrics();
    for (const line of [
      'dms_shard_resources{replica="dms-operator-5d9f8-x2x7q"} 0',
      "dms_shard_ring_members 0",
      'dms_shard_lease_held{replica="dms-operator-5d9f8-x2x7q"} 0',
      "dms_shard_drains_acknowledged_total 0",
    ])
      expect(text).toContain(line);
  });
});

describe("the replica's role", () => {
  const others = { leaderElection, namespaces: [], labelSelector: "team=a" };
  const parts = () => ({
    client,
    identity: "dms-operator-0_1a2b3c4d",
    metrics: new RuntimeMetrics({ processMetrics: false }),
    clock: systemClock,
    logger: pino({ level: "silent" }),
  });
  const poller = { name: "rollout-poller", needLeaderElection: true, start: async () => {} };

  it("unsharded: the leader alone reconciles and polls every resource", () => {
    const role = replicaRole({ ...others, podName: "dms-operator-0" }, "dms-system", parts());
    const reconcile = async () => Action.done();
    expect(role.scope(others).labelSelector).toBe("team=a");
    expect(role.leaderOnly).toBe(true);
    expect(role.guard(reconcile)).toBe(reconcile);
    expect(role.ownShare(poller)).toBe(poller);
    expect(role.users).toBeUndefined();
    expect(role.runnables).toEqual([]);
    expect(role.clientIdentity).toEqual({ userAgent: `dms-operator/${VERSION} (dms-operator-0)` });
  });

  it("sharded: every replica reconciles and polls its own share, the leader runs the sharder", () => {
    const role = replicaRole({ ...others, sharded: true, podName: "dms-operator-0" }, "dms-system", parts());
    expect(role.scope(others).labelSelector).toBe("team=a,shard.dms.dev/owner=dms-operator-0");
    expect(role.leaderOnly).toBe(false);
    expect(role.ownShare(poller)).toMatchObject({ name: "rollout-poller", needLeaderElection: false });
    expect(role.users?.ready()).toBe(false);
    expect(role.runnables.map((r) => r.name)).toEqual([
      "shard-lease",
      "shard-inheritance",
      "shard-lease-informer",
      "sharder",
    ]);
  });
});

describe("a replica's part of each connection's request budget", () => {
  const live = ["a", "b", "c"];

  it("is its ring weight over the members': the leader's replica takes the sharder's smaller share", () => {
    expect(budgetShare("a", live, "a")).toBeCloseTo(SHARDER_REPLICA_SHARE / (SHARDER_REPLICA_SHARE + 2));
    expect(budgetShare("b", live, "a")).toBeCloseTo(1 / (SHARDER_REPLICA_SHARE + 2));
    // The parts of the replicas that agree on the leader add up to the whole budget.
    expect(live.reduce((sum, r) => sum + budgetShare(r, live, "a"), 0)).toBeCloseTo(1);
  });

  it("is an even split when no live member is known to lead, and counts itself before it sees itself live", () => {
    expect(budgetShare("b", live, undefined)).toBeCloseTo(1 / 3);
    expect(budgetShare("b", live, "gone")).toBeCloseTo(1 / 3);
    expect(budgetShare("d", live, undefined)).toBeCloseTo(1 / 4);
    expect(budgetShare("d", live, "a")).toBeCloseTo(1 / (SHARDER_REPLICA_SHARE + 3));
    expect(budgetShare("a", [], undefined)).toBe(1);
  });

  it("never adds up to more than the budget while the replicas see different leaders, one of them the true one", () => {
    // "b" just took the leadership: it knows, "a" still sees itself, "c" still sees "a".
    const parts = budgetShare("a", live, "a") + budgetShare("b", live, "b") + budgetShare("c", live, "a");
    expect(parts).toBeLessThanOrEqual(1 + 1e-9);
  });

  it("reads the leader's replica from its identity `<pod name>_<suffix>`", () => {
    expect(podOfIdentity("dms-operator-5d9f8-x2x7q_1a2b3c4d")).toBe("dms-operator-5d9f8-x2x7q");
    expect(podOfIdentity("plain")).toBe("plain");
  });
});
