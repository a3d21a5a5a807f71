/**
 * A sharder's pass, phase one: the walk. Every resource is read once, in place, and given its
 * next step ({@link nextAction}); only a resource that needs a write allocates anything. The moves
 * kept are shared by namespace: at most half of {@link CANDIDATES_PER_PASS} of one, and the first
 * of each whatever the others took.
 */
import { nextAction, type RingView, type ShardLabels } from "./assignment.ts";
import {
  CANDIDATES_PER_PASS,
  type Drain,
  effectiveOwner,
  forgets,
  type Move,
  type PlannedWrite,
  type ShardedResource,
  type WriteBudget,
} from "./pass.ts";

/** What the walk reads. */
export interface WalkInput<R extends ShardedResource> {
  resources: Iterable<R>;
  /** The labels the sharder remembers (by uid) of the resources changed since it read them. */
  before: ReadonlyMap<string, ShardLabels>;
  ring: RingView;
  /** The ring's choice for a resource. */
  desired(resource: R): string | undefined;
  /** Room for the writes decided here: a resource given back to the replica that holds it. */
  budget: WriteBudget;
  /** Moves and drains kept at most (the rest counted as later). */
  candidates?: number;
}

/** What the walk found. */
export interface Walk<R extends ShardedResource> {
  /** The resources read (with a uid). */
  seen: number;
  /** How many resources name each owner (the label, or the one remembered). */
  owners: Map<string, number>;
  /** The members whose Lease is to be taken before their resources move. */
  toHold: Set<string>;
  /** Writes decided already: an owner written back to the replica that holds the resource. */
  writes: PlannedWrite<R>[];
  /** Moves onto a new owner and drains: decided once each claim's holders are known. */
  moves: Move<R>[];
  drains: Drain<R>[];
  /** The uids whose remembered labels are to be forgotten (their records hold them). */
  forget: string[];
  /** Drains under way (the owner has not let go yet). */
  waiting: number;
  /** Moves and drains past {@link CANDIDATES_PER_PASS}: for a later pass. */
  later: number;
}

/** See the module comment. */
export function walk<R extends ShardedResource>(input: WalkInput<R>): Walk<R> {
  const { ring, before: remembered, budget, candidates = CANDIDATES_PER_PASS } = input;
  // Moves kept per namespace, at most half the candidates: a namespace's thousands of new
  // resources do not take every place (the choice then writes the namespaces in turn,
  // pass-choose.ts), and a namespace's writes behind a thousand that failed last pass are retried
  // after the others'.
  const perNamespace = candidates / 2;
  const kept = new Map<string, number>();
  const keeps = (resource: R): boolean => {
    const namespace = resource.metadata.namespace ?? "";
    const had = kept.get(namespace) ?? 0;
    // A namespace's first move is kept past the candidates too (up to twice as many in all).
    const room =
      had === 0 ? found.moves.length < 2 * candidates : found.moves.length < candidates && had < perNamespace;
    if (room) kept.set(namespace, had + 1);
    return room;
  };
  const found: Walk<R> = {
    seen: 0,
    owners: new Map(),
    toHold: new Set(),
    writes: [],
    moves: [],
    drains: [],
    forget: [],
    waiting: 0,
    later: 0,
  };
  for (const resource of input.resources) {
    if (resource.uid === "") continue;
    found.seen += 1;
    const before = remembered.get(resource.uid);
    const action = nextAction(resource.claim, resource, before, ring, input.desired(resource));
    const owner = resource.owner ?? before?.owner;
    if (owner !== undefined) found.owners.set(owner, (found.owners.get(owner) ?? 0) + 1);
    switch (action.kind) {
      case "assign":
        if (action.to !== effectiveOwner(resource, before)) {
          if (keeps(resource)) found.moves.push({ resource, owner, to: action.to });
          else found.later += 1;
        } else if (budget.take(resource.uid))
          found.writes.push({ kind: "assign", resource, to: action.to, from: owner });
        break;
      case "drain":
        if (found.drains.length < candidates) found.drains.push({ resource, to: action.to });
        else found.later += 1;
        break;
      default:
        if (forgets(resource, before)) found.forget.push(resource.uid);
        if (action.kind === "wait") found.waiting += 1;
        else if (action.kind === "hold") found.toHold.add(action.member);
    }
  }
  return found;
}
