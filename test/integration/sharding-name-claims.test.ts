// Two Deployment resources that claim one service name on one connection: unsharded, the older
// keeps the name and the other stalls (NameConflict), so the service never gets two writers for
// one deployment (src/reconcile/inputs.ts). Under `run --sharded` the claim check reads the
// replica's label-selected cache, which holds its own share only: a rival owned by another
// replica must still be seen, or both replicas write the same deployment. The ring places
// resources by claim, so rivals always share a replica.
import { afterAll, describe, expect, it } from "vitest";
import type { DeploymentSpec } from "../../src/crd/schema.ts";
import { claimOf } from "../../src/reconcile/inputs.ts";
import { OWNER_LABEL } from "../../src/sharding/labels.ts";
import { waitFor } from "../support/cluster.ts";
import { ClusterUser, hasCondition } from "../support/resources.ts";
import { type ShardedRing, type ShardedWorld, shardedWorld } from "../support/sharded-replicas.ts";

/**
 * Pairs of rivals. Placed by uid, each pair would land on two replicas with probability 1/2; the
 * ring places resources by claim (connection + service name), so rivals always share a replica
 * while the pairs still spread over both: half of the pairs' names are placed on each replica,
 * whichever of the two leads (names drawn at random would all land on the replica that does not
 * lead, whose share is larger, once in about 320 runs).
 */
const PAIRS = 12;
const spec = (name: string, tag: string): DeploymentSpec => ({
  name,
  source: "internal_docker",
  sourceRevisionConfig: { imageUri: `registry.example.com/claims:${tag}` },
});

describe("sharding: one service name claimed by two resources", () => {
  const user = new ClusterUser();
  let world: ShardedWorld | undefined;
  afterAll(async () => world?.stop());

  // Its own timeout: longer than its waits together, so a wait that times out names what it missed.
  it("stalls one of the two claimants even when the two are owned by different replicas", {
    timeout: 150_000,
  }, async () => {
    const w = await shardedWorld("cl", 2, { requestRecordLimit: 100_000 });
    world = w;
    const { namespace, simulator, ring: r } = w;
    // Created once both replicas hold their Leases. A loaded leader may still place the first
    // resources by a ring without the newcomer and move their claims to it once it sees it (a
    // handover, rivals together): the wait below is for the spread over both, not only for
    // every resource settled.
    await r.untilMembers(user);
    const names = await spreadNames(r, user, namespace);
    for (let i = 0; i < PAIRS; i++) await user.create(namespace, `p${i}-old`, spec(names[i] ?? "", "old"));
    for (let i = 0; i < PAIRS; i++) await user.create(namespace, `p${i}-new`, spec(names[i] ?? "", "new"));
    // Every resource owned, both replicas owning some, and settled one way or the other (Ready, or
    // stalled on the conflict).
    let unsettled = "no listing yet";
    const items = await waitFor(
      async () => {
        const all = await r.list(user);
        unsettled = `${all.length} resources; owners ${[...new Set(all.map((o) => o.metadata.labels?.[OWNER_LABEL]))].join(", ")}; unsettled: ${all
          .filter(
            (o) =>
              !(
                o.status?.observedGeneration === o.metadata.generation &&
                (hasCondition(o, "Ready", "True") || hasCondition(o, "Stalled", "True"))
              ),
          )
          .map((o) => o.metadata.name)
          .join(", ")}`;
        return all.length === 2 * PAIRS &&
          new Set(all.map((o) => o.metadata.labels?.[OWNER_LABEL])).size === 2 &&
          all.every(
            (o) =>
              o.metadata.labels?.[OWNER_LABEL] !== undefined &&
              o.status?.observedGeneration === o.metadata.generation &&
              (hasCondition(o, "Ready", "True") || hasCondition(o, "Stalled", "True")),
          )
          ? all
          : undefined;
      },
      {
        timeoutMs: 60_000,
        intervalMs: 1_000,
        description: () =>
          `every resource owned by one of the two replicas, both owning some, and settled (${unsettled})`,
      },
    );
    const split = Array.from({ length: PAIRS }, (_, i) => i).filter((i) => {
      const owner = (n: string) => items.find((o) => o.metadata.name === n)?.metadata.labels?.[OWNER_LABEL];
      return owner(`p${i}-old`) !== owner(`p${i}-new`);
    });
    console.log(`pairs split over two replicas: ${split.join(", ") || "none"}`);
    expect(split, "rivals share a replica").toEqual([]);
    const rows = Array.from({ length: PAIRS }, (_, i) => {
      const stalled = items.filter(
        (o) => o.metadata.name.startsWith(`p${i}-`) && hasCondition(o, "Stalled", "True"),
      ).length;
      const id = simulator.store.getByName(names[i] ?? "")?.id ?? "";
      const writers = new Set(
        simulator
          .requests()
          .filter((q) => q.method !== "GET" && q.url.startsWith(`/v2/deployments/${id}`))
          .map((q) => q.userAgent),
      );
      return {
        pair: i,
        split: split.includes(i),
        stalled,
        writers: [...writers],
        image: JSON.stringify(simulator.store.getByName(names[i] ?? "")).match(/claims:(\w+)/)?.[1],
      };
    });
    console.log(JSON.stringify(rows));
    for (const row of rows) {
      // The claim rule (older creationTimestamp, then namespace/name) leaves exactly one holder.
      expect(row.stalled, JSON.stringify(row)).toBe(1);
      expect(row.writers.length, JSON.stringify(row)).toBeLessThanOrEqual(1);
    }
  });
});

/**
 * {@link PAIRS} service names, half of them placed on each of the two replicas whichever leads
 * (`shared-<n>`, the first that qualify).
 */
async function spreadNames(r: ShardedRing, user: ClusterUser, namespace: string): Promise<string[]> {
  const place = await r.placementUnderAnyLeader(user);
  const byReplica = new Map<string, string[]>(r.live().map((m) => [m, []]));
  for (let n = 0; [...byReplica.values()].some((names) => names.length < PAIRS / 2); n++) {
    const name = `shared-${n}`;
    const owner = place(claimOf({ metadata: { name: `p-${n}`, namespace }, spec: spec(name, "old") }));
    const names = owner === undefined ? undefined : byReplica.get(owner);
    if (names !== undefined && names.length < PAIRS / 2) names.push(name);
    if (n > 10_000) throw new Error(`no spread of ${PAIRS} names over ${r.live().join(", ")}`);
  }
  return [...byReplica.values()].flat();
}
