/**
 * Rendezvous (highest random weight) hashing: which live replica owns a resource. Every replica
 * and the sharder compute the same answer from the same member names, with no table to share;
 * when a member joins or leaves, only the resources whose highest weight it held (or now holds)
 * move: 1/N of them on average.
 *
 * The hash is keyed with a seed, the install key (`wiring/install-key.ts`): a tenant sees replica
 * names (the owner label on its resources) and its own claims, and with a plain hash could choose
 * a name that lands on a victim's replica; without the key it cannot tell where a name lands.
 * Every replica reads the same key before it takes part, so every leader computes the same ring.
 * The seed is a secret prefix of the hashed text rather than an HMAC key: no weight is ever shown
 * (only which member wins), so a length extension gains nothing, and an HMAC cost twice as much
 * per weight (the sharder hashes every claim once per live member and membership).
 */
import { createHash } from "node:crypto";

/**
 * The weight of `member` for `key`: the first 48 bits of sha256(seed member NUL key), the seed
 * (the install key's bytes) empty when none is given.
 */
export function weight(member: string, key: string, seed?: Uint8Array): number {
  const hash = createHash("sha256");
  if (seed !== undefined) hash.update(seed);
  return hash.update(member).update("\0").update(key).digest().readUIntBE(0, 6);
}

/** 2^48: {@link weight}'s values are below it. */
const WEIGHTS = 2 ** 48;

/**
 * The member of `members` with the highest weight for `key` (ties broken by the smaller name, so
 * the answer does not depend on the order given); undefined when there is none.
 *
 * With `share`, a member's expected share of keys is `share(member)` against the others' (the
 * weighted rendezvous score `share / -ln(u)`, `u` the weight read as a number in (0, 1)): a
 * member's share can be made smaller and still only the keys it gives up move. When every share
 * is equal the answer is the unweighted one. `seed` keys the hash (see the module comment).
 */
export function ownerOf(
  key: string,
  members: readonly string[],
  share?: (member: string) => number,
  seed?: Uint8Array,
): string | undefined {
  let best: string | undefined;
  let bestScore = -1;
  for (const member of members) {
    const w = weight(member, key, seed);
    const score = share === undefined ? w : share(member) / -Math.log((w + 1) / (WEIGHTS + 1));
    if (score > bestScore || (score === bestScore && best !== undefined && member < best)) {
      best = member;
      bestScore = score;
    }
  }
  return best;
}

/**
 * The share of the replica that runs the sharder, against 1 for each other replica. The sharder
 * keeps a record of every resource of the ring, which costs its replica about a sixth of what
 * reconciling as many resources costs (steady RSS: the leader's above the others' at 3 × 10,000,
 * per resource of the ring, over a replica's per resource of its share; docs/benchmarks.md,
 * "Sharded replicas"). Equal memory on R replicas asks `o·N + s·N = (N − s·N) / (R − 1)` for
 * the sharder's fraction `s` with `o` that cost: at three (the component's default) and `o` of
 * 0.16–0.17 (two runs of 28 November 2026), 0.22–0.23 of the resources, a share of 0.56–0.59
 * against 1, rounded up to 0.6 so that a failover's survivor holds fewer. It was a tenth, and the share 0.75, until the others' garbage per resource fell
 * and the record's did not. It is a constant, not a function of R: a share that changed with the
 * ring's size would move resources between members that stayed when one joins or leaves, where
 * a constant one moves only those of the member that changed.
 */
export const SHARDER_REPLICA_SHARE = 0.6;

/**
 * The shares of a ring whose sharder runs in the replica `sharder`: {@link SHARDER_REPLICA_SHARE}
 * for it while it is among `live`, 1 for the others; undefined when every share is even.
 * `ownerOf(claim, live, ringShares(live, sharder))` is the replica the sharder labels.
 */
export function ringShares(
  live: readonly string[],
  sharder: string | undefined,
): ((member: string) => number) | undefined {
  if (sharder === undefined || !live.includes(sharder)) return undefined;
  return (member) => (member === sharder ? SHARDER_REPLICA_SHARE : 1);
}
