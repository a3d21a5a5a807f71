/**
 * A dead replica's share, inherited without waiting for its labels. When the sharder takes the
 * Lease of a replica that stopped renewing it, it writes on that Lease the ring it moves the share
 * by: the live members and the replica the sharder runs in (whose share is smaller). Every
 * survivor reads the same record from the Lease, so every survivor computes the same heir for each
 * claim ({@link heirOf}): one heir per claim, whatever each survivor's own view of the ring. An heir
 * reconciles the resources the record gives it at once (its second watch, `owner=<dead>`), while
 * the sharder labels each one for its heir in the background; the dead replica cannot write (its
 * Lease was taken after it expired), and no other survivor takes a resource the record gives one.
 *
 * The record is kept by every later holder of the Lease (a new leader taking the hold over copies
 * it) until the Lease is deleted, once no resource names the dead replica.
 */
import { isReplicaName } from "./labels.ts";
import { ownerOf, ringShares } from "./ring.ts";

/** The annotation of a taken Lease that carries its {@link Inheritance}. */
export const INHERITANCE_ANNOTATION = "sharding.dms.dev/heirs";

/** Members a record names at most (a ring of more replicas than this is not one this operator runs). */
export const MAX_HEIRS = 256;

/** The ring a dead replica's share moves by, as the sharder wrote it on the replica's Lease. */
export interface Inheritance {
  /** The live members when the Lease was taken (sorted, without the dead replica). */
  readonly members: readonly string[];
  /** The replica the sharder ran in (its share is smaller while it is a member); none: even shares. */
  readonly leader: string | undefined;
}

/** The record `ring` as the annotation's value: `<leader>;<member>,<member>…` (leader may be empty). */
export function encodeInheritance(ring: Inheritance): string {
  return `${ring.leader ?? ""};${ring.members.join(",")}`;
}

/**
 * The record an annotation's value holds; undefined when there is none or it cannot be read
 * (every name a replica's, at most {@link MAX_HEIRS}, at least one member): such a Lease gives
 * nobody anything, and its resources wait for the sharder's labels as before.
 */
export function decodeInheritance(value: string | undefined): Inheritance | undefined {
  if (value === undefined) return undefined;
  const cut = value.indexOf(";");
  if (cut < 0) return undefined;
  const leader = value.slice(0, cut);
  const members = value.slice(cut + 1).split(",");
  if (members.length > MAX_HEIRS || !members.every(isReplicaName)) return undefined;
  if (leader !== "" && !isReplicaName(leader)) return undefined;
  return { members: [...new Set(members)].sort(), leader: leader === "" ? undefined : leader };
}

/** Whether two records are the same ring. */
export function sameInheritance(a: Inheritance | undefined, b: Inheritance | undefined): boolean {
  if (a === undefined || b === undefined) return a === b;
  return encodeInheritance(a) === encodeInheritance(b);
}

/**
 * The heir of `claim` under the record `ring`: the ring's choice among its members, with the
 * leader's smaller share, keyed with `seed` (the install key): exactly what the sharder labels the
 * resource with when its live members are the record's.
 */
export function heirOf(claim: string, ring: Inheritance, seed?: Uint8Array): string | undefined {
  return ownerOf(claim, ring.members, ringShares(ring.members, ring.leader), seed);
}

/**
 * The last heir of a chain from `owner`: `next(member)` is the heir its record gives the claim
 * while `member` is itself a dead replica whose Lease carries a record (undefined: the chain ends
 * at `member`). A second death during a failover thus hands the first dead replica's resources
 * of a claim to the same survivor as the second's: rivals for one name, some still labelled for
 * the first and some already for the second, are judged together by one replica. Undefined when
 * `owner` has no heir or the chain comes back to a name it passed (each name once: bounded by the
 * number of Leases).
 */
export function lastHeir(owner: string, next: (member: string) => string | undefined): string | undefined {
  const seen = new Set([owner]);
  for (let heir = next(owner); heir !== undefined; ) {
    if (seen.has(heir)) return undefined;
    seen.add(heir);
    const after = next(heir);
    if (after === undefined) return heir;
    heir = after;
  }
  return undefined;
}
