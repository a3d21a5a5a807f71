// A replica started with another scope than the leader's (`--namespaces`, `--label-selector`: a
// rollout that changes them, a pod edited by hand) or another ring key joins the ring all the
// same. The sharder labels resources of its own scope for that replica, whose label-selected
// watch never shows them: they are reconciled by nobody. Each replica writes on its Lease a
// fingerprint of its ring key and scope, and a replica whose fingerprint differs from the leader's
// gets no share (src/sharding/membership.ts).
import { readFile } from "node:fs/promises";
import { afterAll, describe, expect, it } from "vitest";
import { OWNER_LABEL } from "../../src/sharding/labels.ts";
import { STRANGER } from "../../src/sharding/membership.ts";
import { waitFor } from "../support/cluster.ts";
import { ClusterUser, hasCondition } from "../support/resources.ts";
import { type ShardedWorld, shardedWorld } from "../support/sharded-replicas.ts";

const RESOURCES = 16;

describe("sharding: a replica whose scope differs from the leader's", () => {
  const user = new ClusterUser();
  let world: ShardedWorld | undefined;
  afterAll(async () => world?.stop());

  it("gets no share, and every resource in the leader's scope is reconciled", {
    timeout: 150_000,
  }, async () => {
    const w = await shardedWorld("scope", 1);
    world = w;
    const { namespace, ring: r } = w;
    const leader = await waitFor(async () => r.leader(user), { timeoutMs: 60_000, description: "a leader" });
    // A second replica that watches another namespace only (a later flag wins).
    const other = r.start([`--namespaces=${namespace}-elsewhere`]);
    await r.untilMembers(user);
    for (let i = 0; i < RESOURCES; i++)
      await user.create(namespace, `s${i}`, {
        source: "internal_docker",
        sourceRevisionConfig: { imageUri: `registry.example.com/scope:${i}` },
      });
    let unsettled = "no listing yet";
    await waitFor(
      async () => {
        const items = await r.list(user);
        const pending = items.filter(
          (o) =>
            !(o.status?.observedGeneration === o.metadata.generation && hasCondition(o, "Ready", "True")),
        );
        unsettled = pending.map((o) => `${o.metadata.name}@${o.metadata.labels?.[OWNER_LABEL]}`).join(", ");
        return items.length === RESOURCES && pending.length === 0 ? true : undefined;
      },
      {
        timeoutMs: 60_000,
        intervalMs: 500,
        description: () => `every resource Ready (not yet: ${unsettled})`,
      },
    );
    const owners = new Set((await r.list(user)).map((o) => o.metadata.labels?.[OWNER_LABEL]));
    expect([...owners]).toEqual([leader.name]);
    other.process.assertRunning();
    // Both sides say why: each logs the other once.
    const warned = (text: string, replica: string) =>
      text.split("\n").some((line) => line.includes(STRANGER) && line.includes(`"member":"${replica}"`));
    expect(warned(await readFile(leader.process.logPath, "utf8"), other.name)).toBe(true);
    expect(warned(await readFile(other.process.logPath, "utf8"), leader.name)).toBe(true);
  });
});
