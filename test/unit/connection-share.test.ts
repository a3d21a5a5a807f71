/**
 * The wiring of each connection's share (connection/access.ts, its flows crd/conventions.ts): a key's flow from the watch
 * cache, and the report of a resource waiting at its connection's cap, one status write per wait.
 */
import { pino } from "pino";
import { describe, expect, it, vi } from "vitest";
import { connectionShares, shareWaitMessage } from "../../src/connection/access.ts";
import { connectionCheckFlowOf, connectionFlowOf } from "../../src/crd/conventions.ts";
import type { DeploymentResourceStatus } from "../../src/crd/schema.ts";
import type { KubeDeployments } from "../../src/kube/custom-resources.ts";
import { ConflictError } from "../../src/kube/errors.ts";
import { Controller } from "../../src/runtime/controller.ts";
import { inTurns } from "../../src/runtime/in-turns.ts";
import { WorkQueue } from "../../src/runtime/queue.ts";
import type { ObjectRef } from "../../src/runtime/queue-records.ts";
import { CONNECTION_CHECKS_PER_NAMESPACE, CONNECTION_CONCURRENCY } from "../../src/wiring/operator-config.ts";
import { ManualClock } from "../support/manual-clock.ts";

type Stored = {
  metadata: { name: string; namespace: string; generation: number; resourceVersion: string };
  spec: Record<string, unknown>;
  status?: DeploymentResourceStatus;
};

function cache(objects: Stored[]) {
  const byKey = new Map(objects.map((o) => [`${o.metadata.namespace}/${o.metadata.name}`, o]));
  const writes: Array<{ key: string; status: DeploymentResourceStatus; resourceVersion?: string }> = [];
  let conflict = false;
  const deployments = {
    get: (ref: ObjectRef) => byKey.get(`${ref.namespace}/${ref.name}`),
    patchStatus: async (
      ref: ObjectRef,
      status: DeploymentResourceStatus,
      _signal: AbortSignal,
      resourceVersion?: string,
    ) => {
      if (conflict) throw new ConflictError(409, "Conflict", "changed meanwhile");
      writes.push({
        key: `${ref.namespace}/${ref.name}`,
        status,
        ...(resourceVersion ? { resourceVersion } : {}),
      });
      const stored = byKey.get(`${ref.namespace}/${ref.name}`);
      if (stored) stored.status = status;
      return stored;
    },
  } as unknown as KubeDeployments;
  return { deployments, writes, conflictNext: () => (conflict = true) };
}

const resource = (namespace: string, name: string, connectionRef?: object): Stored => ({
  metadata: { name, namespace, generation: 3, resourceVersion: "41" },
  spec: connectionRef ? { connectionRef } : {},
  status: {
    observedGeneration: 3,
    conditions: [
      {
        type: "Ready",
        status: "False",
        reason: "RolloutInProgress",
        message: "rolling out",
        lastTransitionTime: "2026-01-01T00:00:00Z",
        observedGeneration: 3,
      },
      {
        type: "Synced",
        status: "True",
        reason: "ReconcileSuccess",
        message: "in line",
        lastTransitionTime: "2026-01-01T00:00:00Z",
        observedGeneration: 3,
      },
    ],
    deploymentId: "0c3d9a1e-6f2b-4c8d-9e7a-1b2c3d4e5f60",
  } as DeploymentResourceStatus,
});

/**
 * Starts the controller `make` builds under fake time, runs `body` on it, then stops it and lets
 * its reconciles end (however long they sleep).
 */
async function underFakeTime(make: () => Controller, body: (controller: Controller) => Promise<void>) {
  vi.useFakeTimers({ now: 0 });
  try {
    const controller = make();
    const stop = new AbortController();
    const running = controller.start(stop.signal);
    await body(controller);
    stop.abort();
    await vi.advanceTimersByTimeAsync(200_000);
    await running;
  } finally {
    vi.useRealTimers();
  }
}

describe("connectionFlowOf", () => {
  it("is a ServiceConnection's namespace with the connection as its part, and a shared connection's key with the namespace as its part", () => {
    const { deployments } = cache([
      resource("team-a", "own", { kind: "ServiceConnection", name: "prod" }),
      resource("team-a", "shared", { kind: "ClusterServiceConnection", name: "platform" }),
      resource("team-b", "default"),
    ]);
    const flowOf = connectionFlowOf(deployments);
    expect(flowOf("team-a/own")).toEqual({
      flow: "namespace/team-a",
      part: "ServiceConnection/team-a/prod",
      label: "ServiceConnection/team-a/prod",
    });
    expect(flowOf("team-a/shared")).toEqual({ flow: "ClusterServiceConnection/platform", part: "team-a" });
    expect(flowOf("team-b/default")).toEqual({ flow: "default", part: "team-b" });
    // Gone from the cache: the default's flow (its reconcile only says it is gone).
    expect(flowOf("team-c/gone")).toEqual({ flow: "default", part: "team-c" });
  });

  it("holds a namespace's ServiceConnections to one cap together: another namespace's resource runs at once", async () => {
    let inFlight = 0;
    let most = 0;
    const started: string[] = [];
    // Team a: 8 ServiceConnections to a service that takes 10 s a reconcile, 10 resources each.
    const objects = [resource("team-b", "edit", { kind: "ServiceConnection", name: "prod" })];
    for (let c = 0; c < 8; c++)
      for (let r = 0; r < 10; r++)
        objects.push(resource("team-a", `c${c}-r${r}`, { kind: "ServiceConnection", name: `slow-${c}` }));
    await underFakeTime(
      () => {
        const { deployments } = cache(objects);
        const shares = connectionShares(
          { concurrency: 16 },
          deployments,
          new ManualClock(),
          pino({ level: "silent" }),
        );
        return new Controller({
          name: "test",
          concurrency: 16,
          flowOf: shares.flowOf,
          maxPerFlow: shares.maxPerFlow,
          borrowMs: shares.borrowMs,
          reconcile: async (key) => {
            started.push(key);
            inFlight += 1;
            most = Math.max(most, inFlight);
            if (key.startsWith("team-a/")) await new Promise((r) => setTimeout(r, 10_000));
            inFlight -= 1;
            return { kind: "done" };
          },
        });
      },
      async (controller) => {
        for (const o of objects.slice(1)) controller.enqueue(`${o.metadata.namespace}/${o.metadata.name}`);
        await vi.advanceTimersByTimeAsync(1_000);
        // The namespace's cap (4 of 16), not a cap per connection (which would be all 16).
        expect(started).toHaveLength(4);
        expect(started.every((k) => k.startsWith("team-a/"))).toBe(true);
        controller.enqueue("team-b/edit");
        await vi.advanceTimersByTimeAsync(0);
        expect(started.at(-1)).toBe("team-b/edit");
        await vi.advanceTimersByTimeAsync(10_000);
        expect(most).toBe(5);
      },
    );
  });
});

describe("dms_connection_waiting_reconciles of a namespace's ServiceConnections", () => {
  it("counts a connection apart only while it holds seats: a namespace's thousand names of connections are one series", async () => {
    const objects = [0, 1, 2, 3].map((i) =>
      resource("team-a", `slow-${i}`, { kind: "ServiceConnection", name: "slow" }),
    );
    // A thousand resources naming a thousand ServiceConnections that do not exist.
    for (let i = 0; i < 1000; i++)
      objects.push(resource("team-a", `r${i}`, { kind: "ServiceConnection", name: `missing-${i}` }));
    const { deployments } = cache(objects);
    const queue = new WorkQueue({ flowOf: connectionFlowOf(deployments), maxPerFlow: 4, workers: 16 });
    for (let i = 0; i < 4; i++) queue.add(`team-a/slow-${i}`);
    for (let i = 0; i < 4; i++) expect(await queue.get()).toBe(`team-a/slow-${i}`);
    for (let i = 0; i < 1000; i++) queue.add(`team-a/r${i}`);
    expect(queue.waitingAtCap()).toEqual(new Map([["namespace/team-a", 1000]]));
    queue.shutDown();
  });
});

describe("connectionCheckFlowOf", () => {
  it("is a ServiceConnection's namespace, a part each, and a cluster connection's own key", () => {
    expect(connectionCheckFlowOf("ServiceConnection/team-a/prod")).toEqual({
      flow: "namespace/team-a",
      part: "ServiceConnection/team-a/prod",
    });
    expect(connectionCheckFlowOf("ClusterServiceConnection/platform")).toEqual({
      flow: "ClusterServiceConnection/platform",
    });
    expect(connectionCheckFlowOf("default")).toEqual({ flow: "default" });
  });
});

describe("the connection check's shares", () => {
  it("checks another namespace's new connection at once while one namespace's hundred probes hang", async () => {
    const started: string[] = [];
    await underFakeTime(
      () =>
        new Controller({
          name: "connection",
          concurrency: CONNECTION_CONCURRENCY,
          flowOf: connectionCheckFlowOf,
          maxPerFlow: CONNECTION_CHECKS_PER_NAMESPACE,
          reconcile: async (key) => {
            started.push(key);
            // Team a's service never answers: each probe waits for its 10 s deadline.
            if (key.startsWith("ServiceConnection/team-a/")) await new Promise((r) => setTimeout(r, 10_000));
            return { kind: "done" };
          },
        }),
      async (controller) => {
        for (let i = 0; i < 100; i++) controller.enqueue(`ServiceConnection/team-a/hole-${i}`);
        await vi.advanceTimersByTimeAsync(1_000);
        expect(started).toHaveLength(CONNECTION_CHECKS_PER_NAMESPACE);
        controller.enqueue("ServiceConnection/team-b/late");
        await vi.advanceTimersByTimeAsync(0);
        expect(started.at(-1)).toBe("ServiceConnection/team-b/late");
      },
    );
  });
});

describe("inTurns", () => {
  it("takes a key of each namespace in turn, each namespace's in order, up to the most", () => {
    const many = Array.from({ length: 1000 }, (_, i) => `team-a/r${i}`);
    const keys = [...many, "team-b/x", "team-c/y", "team-b/z"];
    const namespaceOf = (key: string) => key.slice(0, key.indexOf("/"));
    expect(inTurns(keys, namespaceOf, 5)).toEqual([
      "team-a/r0",
      "team-b/x",
      "team-c/y",
      "team-a/r1",
      "team-b/z",
    ]);
    expect(inTurns(keys, namespaceOf, 2000)).toHaveLength(1003);
    expect(inTurns(keys, namespaceOf).slice(-997)).toEqual(many.slice(3));
    expect(inTurns([], namespaceOf, 500)).toEqual([]);
  });
});

describe("connectionShares", () => {
  /** Every key told still waits at the report's write. */
  const waits = () => true;

  it("caps at a quarter of the workers by default, and reports a waiting resource once, keeping its status", async () => {
    const { deployments, writes } = cache([
      resource("team-a", "slow", { kind: "ServiceConnection", name: "prod" }),
    ]);
    const clock = new ManualClock({ start: Date.parse("2026-05-01T12:00:00Z"), sleepsInstantly: true });
    const shares = connectionShares({ concurrency: 16 }, deployments, clock, pino({ level: "silent" }));
    expect(shares.maxPerFlow).toBe(4);
    shares.waiting?.report(["team-a/slow"], waits);
    await new Promise((r) => setImmediate(r));
    expect(writes).toHaveLength(1);
    const [write] = writes;
    expect(write?.resourceVersion).toBe("41");
    expect(write?.status.deploymentId).toBe("0c3d9a1e-6f2b-4c8d-9e7a-1b2c3d4e5f60");
    const byType = Object.fromEntries((write?.status.conditions ?? []).map((c) => [c.type, c]));
    expect(byType.Synced).toMatchObject({
      status: "False",
      reason: "WaitingForConnectionShare",
      message: shareWaitMessage(4, true),
      lastTransitionTime: "2026-05-01T12:00:00Z",
    });
    expect(byType.Reconciling).toMatchObject({ status: "True", reason: "WaitingForConnectionShare" });
    expect(byType.Ready).toMatchObject({ status: "False", reason: "RolloutInProgress" });
    // Said already: no second write, and no pause after none.
    shares.waiting?.report(["team-a/slow"], waits);
    await new Promise((r) => setImmediate(r));
    expect(writes).toHaveLength(1);
    expect(clock.sleeps).toEqual([25]);
  });

  it("drops a condition of a type this release does not set, as the reconcile's own write does, and keeps every other field", async () => {
    const waiting = resource("team-a", "slow", { kind: "ServiceConnection", name: "prod" });
    const newer = {
      type: "DatabaseReady",
      status: "True",
      reason: "Provisioned",
      message: "written by a newer release",
      lastTransitionTime: "2026-01-01T00:00:00Z",
    };
    waiting.status = {
      ...waiting.status,
      conditions: [...(waiting.status?.conditions ?? []), newer],
      databaseEndpoint: "db.internal:5432",
    } as DeploymentResourceStatus;
    const { deployments, writes } = cache([waiting]);
    const clock = new ManualClock({ start: Date.parse("2026-05-01T12:00:00Z"), sleepsInstantly: true });
    const shares = connectionShares({ concurrency: 16 }, deployments, clock, pino({ level: "silent" }));
    shares.waiting?.report(["team-a/slow"], waits);
    await new Promise((r) => setImmediate(r));
    const status = writes[0]?.status;
    expect(status?.conditions?.map((c) => c.type).sort()).toEqual(["Ready", "Reconciling", "Synced"]);
    expect(status).toMatchObject({ databaseEndpoint: "db.internal:5432", observedGeneration: 3 });
  });

  it("writes nothing for a resource handed out since it was told: its reconcile says what it says", async () => {
    const { deployments, writes } = cache([
      resource("team-a", "slow", { kind: "ServiceConnection", name: "prod" }),
      resource("team-a", "still", { kind: "ServiceConnection", name: "prod" }),
    ]);
    const clock = new ManualClock({ start: Date.parse("2026-05-01T12:00:00Z"), sleepsInstantly: true });
    const shares = connectionShares({ concurrency: 16 }, deployments, clock, pino({ level: "silent" }));
    // Told while both waited; "slow" was picked up (its reconcile ran and wrote) before the write.
    shares.waiting?.report(["team-a/slow", "team-a/still"], (key) => key !== "team-a/slow");
    await new Promise((r) => setImmediate(r));
    expect(writes.map((w) => w.key)).toEqual(["team-a/still"]);
  });

  it("holds one look behind writes the API server is slow to answer: a newer look replaces the one waiting", async () => {
    const stored = ["a", "b", "c", "d"].map((name) => resource("team-a", name));
    const byKey = new Map(stored.map((o) => [`team-a/${o.metadata.name}`, o]));
    const written: string[] = [];
    let answer = () => {};
    const deployments = {
      get: (ref: ObjectRef) => byKey.get(`${ref.namespace}/${ref.name}`),
      // Answered only when the test says: an API server slow to take the reports.
      patchStatus: (ref: ObjectRef) =>
        new Promise<void>((resolve) => {
          written.push(ref.name);
          answer = resolve;
        }),
    } as unknown as KubeDeployments;
    const clock = new ManualClock({ sleepsInstantly: true });
    const shares = connectionShares({ concurrency: 16 }, deployments, clock, pino({ level: "silent" }));
    shares.waiting?.report(["team-a/a"], waits);
    await new Promise((r) => setImmediate(r));
    expect(written).toEqual(["a"]);
    // Three looks while the first write hangs: only the newest is written after it.
    shares.waiting?.report(["team-a/b"], waits);
    shares.waiting?.report(["team-a/c"], waits);
    shares.waiting?.report(["team-a/d"], waits);
    for (let i = 0; i < 3; i++) {
      answer();
      await new Promise((r) => setImmediate(r));
    }
    expect(written).toEqual(["a", "d"]);
  });

  it("takes the cap given, and lets a resource its reconcile wrote meanwhile be (a conflict is no failure)", async () => {
    const { deployments, writes, conflictNext } = cache([
      resource("team-a", "slow", { kind: "ServiceConnection", name: "prod" }),
    ]);
    const shares = connectionShares(
      { concurrency: 16, maxReconcilesPerConnection: 2 },
      deployments,
      new ManualClock(),
      pino({ level: "silent" }),
    );
    expect(shares.maxPerFlow).toBe(2);
    conflictNext();
    shares.waiting?.report(["team-a/slow", "team-a/gone"], waits);
    await new Promise((r) => setImmediate(r));
    expect(writes).toEqual([]);
  });
});
