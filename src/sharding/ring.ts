/**
 * Rendezvous (highest random weight) hashing: which live replica owns a resource. Every replica
 * and the sharder compute the same answer from the same member names, with no table to share;
 * when a member joins or leaves, only the resources whose highest weight it held (or now holds)
 * move: 1/N of them on average.
 */
import { createHash } from "node:crypto";

/** The weight of `member` for `key`: the first 48 bits of sha256(member NUL key). */
export function weight(member: string, key: string): number {
  return createHash("sha256").update(member).update("\0").update(key).digest().readUIntBE(0, 6);
}

/**
 * The member of `members` with the highest weight for `key` (ties broken by the smaller name, so
 * the answer does not depend on the order given); undefined when there is none.
 */
export function ownerOf(key: string, members: readonly string[]): string | undefined {
  let best: string | undefined;
  let bestWeight = -1;
  for (const member of members) {
    const w = weight(member, key);
    if (w > bestWeight || (w === bestWeight && best !== undefined && member < best)) {
      best = member;
      bestWeight = w;
    }
  }
  return best;
}
