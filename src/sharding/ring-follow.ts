/**
 * Moves by the ring, without a drain label per resource. The sharder publishes the ring it places
 * resources by (the live members and the replica it runs in) on its own replica's Lease, as the
 * {@link FOLLOWS_ANNOTATION} written with each renewal; every other replica reads it from the
 * leader's Lease and writes the same annotation on its own Lease once it follows that ring: it
 * acknowledges, in its renewal, that it hands over by it itself. A replica following a ring lets go
 * of each resource the ring gives another live member exactly as it answers a drain: no reconcile
 * of it starts, the ones in flight end, a write of it that got no answer has had its time, then one
 * label write of its own under a resourceVersion precondition names the new owner. The sharder
 * writes no drain label for a resource whose live owner follows its ring (and waits a grace for an
 * owner that follows an older one): a join moves each resource by that one write, sent by every
 * old owner at once, instead of a drain and its answer.
 *
 * No resource has two writers: until that write, the resource is labelled for its owner alone
 * (nobody else watches it: an inherited share is only one whose Lease a sharder took), and the
 * owner stopped writing it before the write; a ring that changes meanwhile only changes whom the
 * write names, or lets the owner keep the resource (it never gave it away). See docs/operating.
 */
import { heirOf, type Inheritance, sameInheritance } from "./inheritance.ts";

/** On a replica's Lease: the ring it hands its resources over by (the leader's: the sharder's ring). */
export const FOLLOWS_ANNOTATION = "sharding.dms.dev/follows";

/** Options of {@link RingFollower}. */
export interface RingFollowerOptions {
  /** This replica's name. */
  self: string;
  /** The ring's key (the install key); undefined while it is not read (a keyed ring follows nothing then). */
  seed(): Uint8Array | undefined;
  /** False when the ring is keyed and its key is not read yet. */
  seedKnown(): boolean;
}

/**
 * The ring one replica follows, and to whom it hands each of its resources over. Contract:
 * - {@link follow} adopts a ring only if it names this replica (a ring without it is one it cannot
 *   be a member of: nothing is followed then), and only once the key is read;
 * - {@link handoverTo} is the live member, other than this replica, that the followed ring gives
 *   the claim; undefined when nothing is followed, the ring keeps the claim here, or that member is
 *   not live as this replica sees the Leases (the resource stays until it is).
 */
export class RingFollower {
  readonly #o: RingFollowerOptions;
  #ring: Inheritance | undefined;
  #live: ReadonlySet<string> = new Set();

  constructor(options: RingFollowerOptions) {
    this.#o = options;
  }

  /** The ring followed now (written on this replica's Lease with its next renewal). */
  get followed(): Inheritance | undefined {
    return this.#ring;
  }

  /**
   * Follows `ring` (undefined: none) with `live` the members live as this replica sees them;
   * true when the handovers may have changed (the ring, or who is live).
   */
  follow(ring: Inheritance | undefined, live: readonly string[]): boolean {
    const next = ring?.members.includes(this.#o.self) && this.#o.seedKnown() ? ring : undefined;
    const liveChanged = live.length !== this.#live.size || live.some((m) => !this.#live.has(m));
    if (sameInheritance(next, this.#ring) && !liveChanged) return false;
    this.#ring = next;
    this.#live = new Set(live);
    return true;
  }

  /** See the class comment. */
  handoverTo(claim: string): string | undefined {
    const ring = this.#ring;
    if (ring === undefined) return undefined;
    const heir = heirOf(claim, ring, this.#o.seed());
    return heir !== undefined && heir !== this.#o.self && this.#live.has(heir) ? heir : undefined;
  }
}

/** A Lease of the ring as the sharder reads whom it follows. */
export interface FollowingLease {
  follows?: Inheritance | undefined;
}

/**
 * Whether the sharder leaves a live member's resources to be handed over by the member itself
 * (no drain label): its Lease says it follows `current`, the ring the sharder places by; or it
 * follows another ring (it reads the leader's Lease, then renews its own: a few renew periods)
 * while the ring changed less than `graceMs` ago (`since`). A member that follows nothing (an
 * older version, a ring key not read) is drained as before.
 */
export function followsRing(
  lease: FollowingLease | undefined,
  current: Inheritance,
  since: number,
  now: number,
  graceMs: number,
): boolean {
  const follows = lease?.follows;
  if (follows === undefined) return false;
  return sameInheritance(follows, current) || now < since + graceMs;
}
