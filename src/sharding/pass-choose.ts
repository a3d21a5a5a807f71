/**
 * A sharder's pass, phase two: the moves and drains the walk found, decided once each claim's
 * holders are known (a second walk, only when there are any).
 */
import { inTurns } from "../runtime/in-turns.ts";
import { heirOfHeld, type RingView, type ShardLabels } from "./assignment.ts";
import { DRAIN_ANY } from "./labels.ts";
import {
  type AssignWrite,
  createdBefore,
  type Drain,
  effectiveOwner,
  forgets,
  type Move,
  type PlannedWrite,
  type ShardedResource,
  type WriteBudget,
} from "./pass.ts";

/** What the choice decided. */
export interface Choice<R extends ShardedResource> {
  /**
   * The moves off a held replica first (a dead one's share: nobody reconciles those resources),
   * then the drains, then the other moves, each a namespace at a time in turn (`inTurns`), each
   * namespace's in the order found.
   */
  writes: PlannedWrite<R>[];
  /** Moves that wait for a rival (same claim) to be let go by another replica. */
  deferred: number;
  /** Drains not written: their owners hand the resources over by the ring themselves (`ring-moves.ts`). */
  byOwners: number;
  /** The uids whose remembered labels are to be forgotten (a deferred move's record holds them). */
  forget: string[];
}

/**
 * A drain names the next owner when the resource has no rival: the owner then hands it over in the
 * write that lets it go (one write and no second pass per move). Rivals are let go without a name
 * and move together, once none is held. A resource without rivals whose owner moves by the ring
 * (`RingView.movesItself`) gets no drain at all: the owner hands it over unasked.
 *
 * A resource moves to `to` only while no rival of its claim is held by another replica that may
 * still write (not one whose Lease the sharder holds): the rival must be let go first, or two
 * replicas would each judge the claim with one of the rivals only. And rivals reach `to` oldest
 * first: a claim's moves are one chain of writes, oldest first, each made once the one before it
 * was, and a rival moves only after every older one of its claim (none left behind for another
 * pass). The replica's watch sends label changes in the order they were written, so it always
 * finds the resource that holds the name before a younger rival, which would otherwise take the
 * name for a moment and write its own spec to the deployment.
 */
export function chooseMoves<R extends ShardedResource>(
  found: { moves: readonly Move<R>[]; drains: readonly Drain<R>[] },
  resources: Iterable<R>,
  before: ReadonlyMap<string, ShardLabels>,
  ring: RingView,
  budget: WriteBudget,
): Choice<R> {
  const choice: Choice<R> = { writes: [], deferred: 0, byOwners: 0, forget: [] };
  const { drains } = found;
  // The namespaces in turn: the write budget reaches another namespace's new resource while one
  // namespace has thousands waiting to be labelled.
  const moves = inTurns(found.moves, (m) => m.resource.metadata.namespace ?? "");
  if (moves.length === 0 && drains.length === 0) return choice;
  // Who holds each moving claim, and how many resources share each drained one.
  const holders = new Map<string, Set<string>>(moves.map((m) => [m.resource.claim, new Set()]));
  const claimants = new Map<string, R[]>(moves.map((m) => [m.resource.claim, []]));
  const sharing = new Map<string, number>(drains.map((d) => [d.resource.claim, 0]));
  for (const resource of resources) {
    if (resource.uid === "") continue;
    const held = holders.get(resource.claim);
    if (held !== undefined) {
      const owner = effectiveOwner(resource, before.get(resource.uid));
      if (owner !== undefined) held.add(owner);
      claimants.get(resource.claim)?.push(resource);
    }
    const shared = sharing.get(resource.claim);
    if (shared !== undefined) sharing.set(resource.claim, shared + 1);
  }
  const defer = (resource: R) => {
    choice.deferred += 1;
    if (forgets(resource, before.get(resource.uid))) choice.forget.push(resource.uid);
  };
  // The moves of each claim with rivals, decided together at the claim's first.
  const rivalMoves = new Map<string, Move<R>[] | null>();
  for (const m of moves) {
    if ((claimants.get(m.resource.claim)?.length ?? 0) < 2) continue;
    const claimMoves = rivalMoves.get(m.resource.claim);
    if (claimMoves) claimMoves.push(m);
    else rivalMoves.set(m.resource.claim, [m]);
  }
  const move = (m: Move<R>) => {
    const { resource, owner } = m;
    const rivals = rivalMoves.get(resource.claim);
    if (rivals === null) return; // decided with the claim's first move
    const others = [...(holders.get(resource.claim) ?? [])];
    // A rival of a held replica's resource goes to that resource's heir (who reconciles it already).
    const to = heirAmong(others, resource.claim, ring) ?? m.to;
    if (others.some((other) => other !== to && ring.state(other) !== "held")) {
      for (const r of rivals ?? [m]) defer(r.resource);
    } else if (rivals === undefined) {
      if (budget.take(resource.uid)) choice.writes.push({ kind: "assign", resource, to, from: owner });
    } else {
      const chain = rivalChain(rivals, claimants.get(resource.claim) ?? [], to, budget);
      const [head, ...after] = chain;
      if (head) choice.writes.push(after.length > 0 ? { ...head, after } : head);
      const chained = new Set(chain.map((w) => w.resource));
      for (const r of rivals) if (!chained.has(r.resource)) defer(r.resource);
    }
    if (rivals !== undefined) rivalMoves.set(resource.claim, null);
  };
  const offHeld = (m: Move<R>) => m.owner !== undefined && ring.state(m.owner) === "held";
  for (const m of moves) if (offHeld(m)) move(m);
  for (const { resource, to } of drains) {
    const alone = sharing.get(resource.claim) === 1;
    // Without rivals and without a drain label yet, an owner that moves by the ring hands it over.
    if (alone && !resource.drain && resource.owner !== undefined && ring.movesItself?.(resource.owner)) {
      choice.byOwners += 1;
      continue;
    }
    if (!budget.take(resource.uid)) continue;
    const value = alone ? to : DRAIN_ANY;
    choice.writes.push({ kind: "drain", resource, value });
  }
  for (const m of moves) if (!offHeld(m)) move(m);
  return choice;
}

/**
 * Rivals of one claim moved in one pass at most: their writes are made one after another, and a
 * tenant's thousand rivals of one name must not hold the pass (and every other move) that long.
 */
export const RIVALS_PER_PASS = 16;

/**
 * The writes moving a claim's rivals to `to`, oldest first: every resource of the claim not
 * labelled for `to` yet, in age order, as long as each is among `moves` and has room, at most
 * {@link RIVALS_PER_PASS}. The first that is not (moved in a later pass) stops the chain: a
 * younger rival never arrives before it.
 */
function rivalChain<R extends ShardedResource>(
  moves: readonly Move<R>[],
  claimants: readonly R[],
  to: string,
  budget: WriteBudget,
): AssignWrite<R>[] {
  const moving = new Map(moves.map((m) => [m.resource, m]));
  const chain: AssignWrite<R>[] = [];
  const waiting = claimants.filter((r) => r.owner !== to).sort((a, b) => (createdBefore(a, b) ? -1 : 1));
  for (const resource of waiting) {
    const m = moving.get(resource);
    if (m === undefined || chain.length === RIVALS_PER_PASS || !budget.take(resource.uid)) break;
    chain.push({ kind: "assign", resource, to, from: m.owner });
  }
  return chain;
}

/** The live heir (`heirOfHeld`: the chain of heirs) of `claim` of one of the held `owners`, if any. */
function heirAmong(owners: readonly string[], claim: string, ring: RingView): string | undefined {
  for (const owner of owners) {
    if (ring.state(owner) !== "held") continue;
    const heir = heirOfHeld(owner, claim, ring);
    if (heir !== undefined && ring.state(heir) === "live") return heir;
  }
  return undefined;
}
