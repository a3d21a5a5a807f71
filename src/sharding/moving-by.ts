/**
 * The ring a replica moves its own resources by, as its Lease says it: each replica writes on its
 * own Lease, with every renewal, the ring it sees (the live members and the leader's replica), so
 * that owners and the sharder can tell whether they place by the same ring (`ring-moves.ts`).
 */
import { decodeInheritance, encodeInheritance, type Inheritance } from "./inheritance.ts";

/** On each replica's own Lease, written with every renewal: the ring it sees and moves its resources by. */
export const MOVING_BY_ANNOTATION = "sharding.dms.dev/moving-by";

/** The ring as one process sees it: the live members (sorted) and the leader's replica while it is one of them. */
export function ringOf(live: readonly string[], leader: string | undefined): Inheritance {
  const members = [...new Set(live)].sort();
  return { members, leader: leader !== undefined && members.includes(leader) ? leader : undefined };
}

/** The annotation's value for `ring` (the encoding of a taken Lease's record). */
export const encodeMovingBy = encodeInheritance;

/** The ring an annotation's value names; undefined when there is none or it cannot be read. */
export const decodeMovingBy = decodeInheritance;
