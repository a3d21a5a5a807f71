// A live replica's Lease deleted by hand (`kubectl delete lease`, a ring "reset"), or its holder
// cleared (`kubectl edit lease`: the usual way to force a leader election Lease free). The replica
// does not know until its next renewal, and its write fence counts from its last one: it may write
// for up to a Lease duration more. The sharder finds resources naming a replica without a Lease
// (or with a Lease released) and takes that Lease: it must not move them while that replica may
// still write, or the next owner writes a deployment while the first still does.
import { afterAll, describe, expect, it } from "vitest";
import type { DeploymentSpec } from "../../src/crd/schema.ts";
import { OWNER_LABEL } from "../../src/sharding/labels.ts";
import { waitFor } from "../support/cluster.ts";
import { ClusterUser } from "../support/resources.ts";
import { type ShardedWorld, shardedWorld, untilSettled } from "../support/sharded-replicas.ts";
import { handovers } from "../support/write-spans.ts";

const RESOURCES = 24;
/** Each edit takes this long at the service: the deleted replica's edits are in flight when its Lease goes. */
const EDIT_LATENCY_MS = 3_000;
const image = (tag: number) => `registry.example.com/lease-deleted:${tag}`;
const spec = (tag: number): DeploymentSpec => ({
  source: "internal_docker",
  sourceRevisionConfig: { imageUri: image(tag) },
});

/** What is done by hand to the replica's Lease, at `path`. */
const edits = {
  deleted: (user: ClusterUser, path: string) => user.client.request({ method: "DELETE", path }),
  "its holder cleared": (user: ClusterUser, path: string) =>
    user.client.request({
      method: "PATCH",
      path,
      contentType: "application/merge-patch+json",
      body: { spec: { holderIdentity: "" } },
    }),
};

describe.each(Object.entries(edits))("sharding: a live replica's Lease edited by hand (%s)", (what, edit) => {
  const user = new ClusterUser();
  let world: ShardedWorld | undefined;
  afterAll(async () => world?.stop());

  it("moves its resources only once its writes stopped: no deployment has two writers at once", {
    timeout: 180_000,
  }, async () => {
    const w = await shardedWorld(what === "deleted" ? "ld" : "lc", 1, { requestRecordLimit: 100_000 });
    world = w;
    const { namespace, simulator, ring: r } = w;
    const leader = await waitFor(async () => r.leader(user), { timeoutMs: 60_000, description: "a leader" });
    const other = r.start();
    await r.untilMembers(user);
    const tags = new Map<string, number>();
    const names = Array.from({ length: RESOURCES }, (_, i) => `d${i}`);
    for (const name of names) {
      tags.set(name, 1);
      await user.create(namespace, name, spec(1));
    }
    const imageOf = (name: string) => image(tags.get(name) ?? 0);
    const place = await r.placement(user);
    await untilSettled(r, user, {
      what: "two replicas",
      count: RESOURCES,
      imageOf,
      owned: (owner, claim) => owner === place(claim),
      timeoutMs: 90_000,
    });
    const ofOther = (await r.list(user, `${OWNER_LABEL}=${other.name}`)).map((o) => o.metadata.name);
    expect(ofOther.length).toBeGreaterThan(0);

    // Its resources edited, each edit held 3 s at the service; once some are in flight, its Lease goes.
    simulator.faults.set({
      latency: [{ route: "PATCH /v2/deployments/{deployment_id}", ms: EDIT_LATENCY_MS }],
    });
    for (const name of ofOther) {
      tags.set(name, 2);
      await user.patch(namespace, name, { spec: { sourceRevisionConfig: { imageUri: image(2) } } });
    }
    await waitFor(
      () =>
        simulator
          .requests({ route: "PATCH /v2/deployments/{deployment_id}" })
          .some((q) => q.answeredAt === undefined && q.userAgent?.includes(`(${other.name})`)),
      { timeoutMs: 30_000, intervalMs: 20, description: `an edit by ${other.name} in flight` },
    );
    await edit(user, `/apis/coordination.k8s.io/v1/namespaces/${namespace}/leases/${other.name}`);

    // Whatever becomes of it (it may rejoin, or exit: its Lease was taken), every edit lands.
    await untilSettled(r, user, {
      what: "after the edit",
      count: RESOURCES,
      imageOf,
      owned: (owner) => owner === leader.name || owner === other.name,
      timeoutMs: 90_000,
    });
    const spans = handovers(simulator.requests());
    expect(spans.overlaps).toEqual([]);
  });
});
