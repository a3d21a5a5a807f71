/**
 * The wiring of each connection's share (connection/access.ts): a key's flow from the watch
 * cache, and the report of a resource waiting at its connection's cap, one status write per wait.
 */
import { pino } from "pino";
import { describe, expect, it } from "vitest";
import { connectionFlowOf, connectionShares, shareWaitMessage } from "../../src/connection/access.ts";
import type { DeploymentResourceStatus } from "../../src/crd/schema.ts";
import type { KubeDeployments } from "../../src/kube/deployments.ts";
import { ConflictError } from "../../src/kube/errors.ts";
import type { ObjectRef } from "../../src/runtime/queue-lines.ts";
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

describe("connectionFlowOf", () => {
  it("is a ServiceConnection's key alone, and a shared connection's key with the namespace as its part", () => {
    const { deployments } = cache([
      resource("team-a", "own", { kind: "ServiceConnection", name: "prod" }),
      resource("team-a", "shared", { kind: "ClusterServiceConnection", name: "platform" }),
      resource("team-b", "default"),
    ]);
    const flowOf = connectionFlowOf(deployments);
    expect(flowOf("team-a/own")).toEqual({ flow: "ServiceConnection/team-a/prod" });
    expect(flowOf("team-a/shared")).toEqual({ flow: "ClusterServiceConnection/platform", part: "team-a" });
    expect(flowOf("team-b/default")).toEqual({ flow: "default", part: "team-b" });
    // Gone from the cache: the default's flow (its reconcile only says it is gone).
    expect(flowOf("team-c/gone")).toEqual({ flow: "default", part: "team-c" });
  });
});

describe("connectionShares", () => {
  it("caps at a quarter of the workers by default, and reports a waiting resource once, keeping its status", async () => {
    const { deployments, writes } = cache([
      resource("team-a", "slow", { kind: "ServiceConnection", name: "prod" }),
    ]);
    const clock = new ManualClock({ start: Date.parse("2026-05-01T12:00:00Z"), sleepsInstantly: true });
    const shares = connectionShares({ concurrency: 16 }, deployments, clock, pino({ level: "silent" }));
    expect(shares.maxPerFlow).toBe(4);
    shares.waiting?.report(["team-a/slow"]);
    await new Promise((r) => setImmediate(r));
    expect(writes).toHaveLength(1);
    const [write] = writes;
    expect(write?.resourceVersion).toBe("41");
    expect(write?.status.deploymentId).toBe("0c3d9a1e-6f2b-4c8d-9e7a-1b2c3d4e5f60");
    const byType = Object.fromEntries((write?.status.conditions ?? []).map((c) => [c.type, c]));
    expect(byType.Synced).toMatchObject({
      status: "False",
      reason: "WaitingForConnectionShare",
      message: shareWaitMessage(4),
      lastTransitionTime: "2026-05-01T12:00:00Z",
    });
    expect(byType.Reconciling).toMatchObject({ status: "True", reason: "WaitingForConnectionShare" });
    expect(byType.Ready).toMatchObject({ status: "False", reason: "RolloutInProgress" });
    // Said already: no second write, and no pause after none.
    shares.waiting?.report(["team-a/slow"]);
    await new Promise((r) => setImmediate(r));
    expect(writes).toHaveLength(1);
    expect(clock.sleeps).toEqual([25]);
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
    shares.waiting?.report(["team-a/slow", "team-a/gone"]);
    await new Promise((r) => setImmediate(r));
    expect(writes).toEqual([]);
  });
});
