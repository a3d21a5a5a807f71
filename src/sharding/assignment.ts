/**
 * What the sharder does next with one Deployment resource: a pure function of the resource's
 * shard labels (and those of the version before, as the sharder last saw it) and of the ring.
 *
 * The rule it keeps: a resource is written to by at most one replica at a time. Its owner lets go
 * before anyone else gets it: by acknowledging a drain (removing its own owner label, under a
 * resourceVersion precondition), or by being down, which the sharder only acts on after it took
 * the owner's Lease (so that replica can neither renew it nor write: its fence expired first).
 */
import { lastHeir } from "./inheritance.ts";
import { ownerOf } from "./ring.ts";

/** The shard labels of one resource. */
export interface ShardLabels {
  owner?: string | undefined;
  drain: boolean;
  /** The replica the drain label names, if it names one (see `drainTarget`). */
  drainTo?: string | undefined;
}

/**
 * A member's state as the sharder sees it: `live` (its Lease renewed within its duration),
 * `held` (the sharder took its Lease and the hold is still valid: its resources may move),
 * `down` (not live, not held: take its Lease first).
 */
export type MemberState = "live" | "held" | "down";

/** The ring as the sharder sees it. */
export interface RingView {
  /** The live members (any order). */
  live: readonly string[];
  state(member: string): MemberState;
  /**
   * The heir of `claim` by the ring written on the held `member`'s Lease when it was taken
   * (`inheritance.ts`): the survivor already reconciling that member's resources of the claim.
   * Undefined when the Lease carries no ring, or its heir is the ring's choice now.
   */
  heir?(member: string, claim: string): string | undefined;
  /**
   * Whether the live `member` moves its own resources by the ring (`ring-moves.ts`): its Lease
   * shows the ring the sharder places by, or shows a ring and the sharder's changed a moment ago.
   * A drain of its resource without rivals is then not written: the owner hands it over itself.
   */
  movesItself?(member: string): boolean;
}

/** The next step for one resource. */
export type ShardAction =
  /** Nothing to do. */
  | { kind: "none" }
  /** Write `owner=to` and remove the drain label. */
  | { kind: "assign"; to: string }
  /** Set the drain label: the live owner must let go before the resource moves to `to`. */
  | { kind: "drain"; to: string }
  /** Take `member`'s Lease before moving its resources. */
  | { kind: "hold"; member: string }
  /** A drain is under way: the owner has not acknowledged yet. */
  | { kind: "wait" };

/**
 * The next step for a resource that claims `claim` (its service name on its connection: the ring
 * places resources by it, so rivals for one name share a replica) with `labels`, `before` being
 * its previous labels as the sharder saw them (undefined when it has not seen it before, or they
 * are `labels`); `desired` is the ring's choice for the claim (a caller may have it noted).
 *
 * A resource whose owner label vanished without a drain (someone else removed it; an
 * acknowledgement removes the drain label with it) is treated as still owned by its previous
 * owner: that replica may still be reconciling it, so it is given back to it (or moved the usual
 * way) instead of to a second replica at once.
 */
export function nextAction(
  claim: string,
  labels: ShardLabels,
  before: ShardLabels | undefined,
  ring: RingView,
  desired: string | undefined = ownerOf(claim, ring.live),
): ShardAction {
  if (desired === undefined) return { kind: "none" };
  const unacknowledged = labels.owner === undefined && before?.owner !== undefined && !before.drain;
  const owner = unacknowledged ? before.owner : labels.owner;
  if (owner === undefined) return { kind: "assign", to: desired };
  switch (ring.state(owner)) {
    case "live":
      if (owner === desired)
        return labels.drain || labels.owner !== owner ? { kind: "assign", to: owner } : { kind: "none" };
      if (labels.owner !== owner) return { kind: "assign", to: owner };
      if (!labels.drain) return { kind: "drain", to: desired };
      // A drain that names a replica the ring no longer chooses (it changed since): named again,
      // before the owner hands the resource to a replica that would only pass it on.
      return labels.drainTo !== undefined && labels.drainTo !== desired
        ? { kind: "drain", to: desired }
        : { kind: "wait" };
    case "held":
      return offHeld(claim, owner, ring, desired);
    case "down":
      return { kind: "hold", member: owner };
  }
}

/**
 * The heir of the held `owner`'s resources of `claim`: the heir its Lease's ring names, or, when
 * that heir is held too and its own Lease carries a ring, that ring's heir, and so on
 * (`lastHeir`): the survivor that inherits them (every survivor follows the same chain). Undefined
 * when the Lease carries no ring, its heir is the ring's choice now, or the chain loops.
 */
export function heirOfHeld(owner: string, claim: string, ring: RingView): string | undefined {
  return lastHeir(owner, (member) =>
    member === owner || ring.state(member) === "held" ? ring.heir?.(member, claim) : undefined,
  );
}

/**
 * The step for a resource of the held `owner`: to the heir of the chain its Lease's ring starts
 * ({@link heirOfHeld}: who reconciles it already: a label for it alone, a later move being a
 * drain as for any live owner), unless that heir is gone too (its Lease taken first; held, the
 * chain ending there: its Lease carries no ring, so nobody inherited from it, or the ring of now,
 * whose heir is the ring's choice: the ring's choice either way).
 */
function offHeld(claim: string, owner: string, ring: RingView, desired: string): ShardAction {
  const heir = heirOfHeld(owner, claim, ring);
  if (heir === undefined || heir === desired) return { kind: "assign", to: desired };
  switch (ring.state(heir)) {
    case "live":
      return { kind: "assign", to: heir };
    case "down":
      return { kind: "hold", member: heir };
    case "held":
      return { kind: "assign", to: desired };
  }
}
