// A ring scaled down from three replicas to one (two stopped together, the leader among them) and
// up to three again (two started together), every resource edited at each step while its edits
// take a while at the service: every resource must end owned by the ring's choice with its latest
// edit applied, each edit reaching the service once, and no deployment written by two replicas at
// once (each write's span at the service, as the chaos test reads them).
import { afterAll, describe, expect, it } from "vitest";
import type { DeploymentSpec } from "../../src/crd/schema.ts";
import { waitFor } from "../support/cluster.ts";
import { ClusterUser } from "../support/resources.ts";
import { type ShardedWorld, shardedWorld, untilSettled } from "../support/sharded-replicas.ts";
import { handovers } from "../support/write-spans.ts";

const RESOURCES = 30;
const EDIT_LATENCY_MS = 500;
const image = (tag: number) => `registry.example.com/scale:${tag}`;
const spec = (tag: number): DeploymentSpec => ({
  source: "internal_docker",
  sourceRevisionConfig: { imageUri: image(tag) },
});

describe("sharding: scaled from three replicas to one and back", () => {
  const user = new ClusterUser();
  let world: ShardedWorld | undefined;
  afterAll(async () => world?.stop());

  it("keeps every resource owned once, its edits applied once, with one writer at a time", {
    timeout: 300_000,
  }, async () => {
    const w = await shardedWorld("sc", 3, { requestRecordLimit: 100_000 });
    world = w;
    const { namespace, simulator, ring: r } = w;
    await r.untilMembers(user);
    simulator.faults.set({
      latency: [{ route: "PATCH /v2/deployments/{deployment_id}", ms: EDIT_LATENCY_MS }],
    });
    const tags = new Map<string, number>();
    const names = Array.from({ length: RESOURCES }, (_, i) => `d${i}`);
    for (const name of names) {
      tags.set(name, 1);
      await user.create(namespace, name, spec(1));
    }
    const until = async (what: string) => {
      const place = await r.placement(user);
      await untilSettled(r, user, {
        what,
        count: RESOURCES,
        imageOf: (name) => image(tags.get(name) ?? 0),
        owned: (owner, claim) => owner === place(claim),
      });
    };
    let tag = 1;
    const editAll = () =>
      Promise.all(
        names.map(async (name) => {
          tag += 1;
          tags.set(name, tag);
          await user.patch(namespace, name, { spec: { sourceRevisionConfig: { imageUri: image(tag) } } });
        }),
      );
    await until("three replicas");

    // Down to one: the leader and one other stopped together, while edits are under way.
    const leader = await waitFor(async () => r.leader(user), { timeoutMs: 30_000, description: "a leader" });
    const [kept] = r.live().filter((n) => n !== leader.name);
    const stopping = [...r.replicas.values()].filter((x) => x.name !== kept);
    expect(stopping.map((x) => x.name)).toContain(leader.name);
    await editAll();
    await Promise.all(stopping.map((x) => r.stop(x)));
    await until("one replica");

    // Up to three again, two started together, while edits are under way.
    await editAll();
    r.start();
    r.start();
    await r.untilMembers(user);
    await until("three replicas again");

    for (const replica of r.replicas.values()) replica.process.assertRunning();
    const spans = handovers(simulator.requests());
    expect(spans.overlaps).toEqual([]);
    // Each image reached the service at most once per deployment (a PATCH never repeated).
    const patches = simulator
      .requests({ route: "PATCH /v2/deployments/{deployment_id}" })
      .filter((q) => q.status?.startsWith("2"));
    expect(patches.length).toBeLessThanOrEqual(2 * RESOURCES);
  });
});
