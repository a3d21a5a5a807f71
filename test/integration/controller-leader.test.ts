// Leader election on a short Lease: only the holder reconciles; when it stops, the other instance
// takes over and reconciles the next change, their reconciling never overlapping; and a leader
// that loses its lease stops reconciling at once.
import { describe, expect, it } from "vitest";
import type { DeploymentSpec } from "../../src/crd/schema.ts";
import { toMicroTime } from "../../src/kube/client.ts";
import type { RunningSimulator } from "../../src/simulator/server.ts";
import { freshNamespace, waitFor } from "../support/cluster.ts";
import { startOperator, startTestSimulator, type TestOperator } from "../support/operator.ts";
import { ClusterUser, hasCondition } from "../support/resources.ts";
import { useScenarios } from "../support/scenario.ts";

const LEASE = "dms-operator-leader";
const spec = (image: string): DeploymentSpec => ({
  source: "internal_docker",
  sourceRevisionConfig: { imageUri: image },
});
const image = (tag: number) => ({
  spec: { sourceRevisionConfig: { imageUri: `registry.example.com/agent:${tag}` } },
});

/**
 * When the instance's Deployment workers started and stopped (ms since the epoch), from its own
 * log (the connection controller's workers follow the same leadership, and log alike).
 */
function workerSpans(op: TestOperator): { started: number[]; stopped: number[] } {
  const times = (msg: string) =>
    op.logs
      .find(msg)
      .filter((l) => l.record.controller === "deployment")
      .map((l) => l.record.time);
  return { started: times("starting workers"), stopped: times("workers stopped") };
}

describe("controller: leader election", () => {
  const user = new ClusterUser();
  const scenarios = useScenarios();
  let namespace = "";
  let sim: RunningSimulator;
  const setup = async (prefix: string) => {
    namespace = await freshNamespace(prefix);
    sim = await startTestSimulator();
    scenarios.defer(() => sim.close());
  };
  const leasePath = () => `/apis/coordination.k8s.io/v1/namespaces/${namespace}/leases/${LEASE}`;
  const holder = async () => {
    const lease = (await user.client.request({ method: "GET", path: leasePath() })) as {
      spec?: { holderIdentity?: string };
    };
    return lease.spec?.holderIdentity ?? "";
  };
  /** Rewrites the Lease's spec with `changes`, as another holder (or its release) would. */
  const rewriteLease = async (changes: Record<string, unknown>) => {
    const lease = (await user.client.request({ method: "GET", path: leasePath() })) as Record<
      string,
      unknown
    >;
    await user.client.request({
      method: "PUT",
      path: leasePath(),
      body: { ...lease, spec: { ...(lease.spec as object), ...changes } },
    });
  };
  const instance = (identity: string) => {
    const op = startOperator({
      simulator: sim,
      namespaces: [namespace],
      identity,
      leaderElection: { namespace },
    });
    scenarios.defer(() => op.stop());
    return op;
  };

  it("hands over to the other instance, which reconciles the next change; never both at once", async () => {
    await setup("ctl-leader");
    const first = instance("instance-a");
    await waitFor(async () => (await holder()) === "instance-a", { description: "instance-a leading" });
    const second = instance("instance-b");

    await user.create(namespace, "led", spec("registry.example.com/agent:1"));
    await user.waitReady(namespace, "led");
    expect((await user.waitForEvent(namespace, "led", "Created")).reportingInstance).toBe("instance-a");
    // The follower campaigns and sees the leader, but never reconciles.
    await waitFor(
      () => second.logs.find("new leader observed").some((l) => l.record.leader === "instance-a"),
      {
        description: "instance-b seeing instance-a lead",
      },
    );
    expect(await second.reconciles()).toBe(0);

    await first.stop();
    await waitFor(async () => (await holder()) === "instance-b", { description: "instance-b leading" });
    await user.patch(namespace, "led", image(2));

    const updated = await user.waitFor(
      namespace,
      "led",
      (o) => o?.status?.observedGeneration === 2 && hasCondition(o, "Ready", "True"),
      "the change reconciled by instance-b",
    );
    expect(updated.status?.latestRevisionId).toBe(sim.store.getByName("led")?.latest_revision_id);
    expect((await user.waitForEvent(namespace, "led", "Updated")).reportingInstance).toBe("instance-b");
    // The second's workers started only after the first's had stopped.
    const a = workerSpans(first);
    const b = workerSpans(second);
    expect([a.started.length, a.stopped.length, b.started.length]).toEqual([1, 1, 1]);
    expect(b.started[0]).toBeGreaterThanOrEqual(a.stopped[0] ?? Number.POSITIVE_INFINITY);
    expect(sim.counters()["POST /v2/deployments"]).toEqual({ "201": 1 });
  });

  it("stops reconciling as soon as someone else holds the lease, and resumes when it is free", async () => {
    await setup("ctl-lease-lost");
    const op = instance("instance-c");
    await user.create(namespace, "contested", spec("registry.example.com/agent:1"));
    await user.waitReady(namespace, "contested");

    // Another holder takes the lease (as a newer deployment of the operator might).
    await rewriteLease({
      holderIdentity: "intruder",
      renewTime: toMicroTime(new Date()),
      leaseDurationSeconds: 3600,
    });
    await waitFor(() => workerSpans(op).stopped.length === 1, { description: "the workers stopped" });
    await user.patch(namespace, "contested", image(2));
    // Nobody reconciles while others hold the lease: the lease passes to two more holders after
    // the change, and the instance, campaigning all along, sees each of them lead.
    for (const other of ["intruder-2", "intruder-3"]) {
      await rewriteLease({ holderIdentity: other, renewTime: toMicroTime(new Date()) });
      await waitFor(() => op.logs.find("new leader observed").some((l) => l.record.leader === other), {
        description: `instance-c seeing ${other} lead`,
      });
    }
    expect((await user.get(namespace, "contested"))?.status?.observedGeneration).toBe(1);
    expect(sim.counters()["PATCH /v2/deployments/{deployment_id}"]).toBeUndefined();

    // Released: the instance campaigns again, wins, and catches up.
    await rewriteLease({ holderIdentity: "" });
    await user.waitFor(
      namespace,
      "contested",
      (o) => o?.status?.observedGeneration === 2 && hasCondition(o, "Ready", "True"),
      "reconciled after winning the lease back",
    );
    expect(workerSpans(op).started).toHaveLength(2);
  });
});
