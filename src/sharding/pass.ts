/**
 * What one pass of the sharder reads, decides and reports: the resources as it reads them, the
 * label writes it decides on, the room it has for them, and its report. The pass's phases (walk,
 * choose, write, holds: see {@link Sharder}) speak these.
 */

import { keyOfMeta } from "../runtime/queue-records.ts";
import type { ShardLabels } from "./assignment.ts";
import type { RingChoice } from "./ring-choices.ts";

/**
 * A Deployment resource as the sharder reads it: its shard labels as fields (the owner label's
 * value, undefined when absent or empty; whether the drain label is set). The store's records are
 * read in place, a pass allocating nothing per resource that needs no write.
 */
export interface ShardedResource extends ShardLabels {
  readonly uid: string;
  readonly metadata: {
    readonly resourceVersion: string;
    readonly name: string;
    readonly namespace?: string | undefined;
  };
  /**
   * When the resource was created, in whole seconds since the epoch ({@link createdSeconds}):
   * with its namespace and name, the order in which rivals hold a name ({@link createdBefore}).
   */
  readonly created: number;
  readonly owner: string | undefined;
  readonly drain: boolean;
  /**
   * What the resource claims: its service name on its connection. The ring places resources by
   * it, so that rivals for one name are always judged by one replica.
   */
  readonly claim: string;
  /**
   * The sharder's note of the ring's choice for this record (see {@link RingChoices}): an object
   * it alone reads and writes, undefined until it chose. Kept on the record, not in a map by
   * claim: a pass over 30,000 resources hashes each claim once per membership at the cost of a field.
   */
  ringChoice?: RingChoice | undefined;
}

/**
 * Leases taken in one pass at most: an owner label naming a replica that is not live costs a
 * Lease write, and whoever may label resources (a tenant, without the admission policy) must not
 * make one pass write thousands.
 */
export const MAX_TAKES_PER_PASS = 16;

/**
 * Label writes in one pass at most: a first pass over 30,000 unassigned resources reports, and
 * reads the Leases and the resources' versions again, every thousand writes.
 */
export const MAX_WRITES_PER_PASS = 1_000;

/**
 * Moves and drains a pass considers at most (a few times the writes it makes: a move deferred for
 * a rival, which writes nothing, must not take a drain's place).
 */
export const CANDIDATES_PER_PASS = 4 * MAX_WRITES_PER_PASS;

/** A label write a pass decided on. */
export type PlannedWrite<R extends ShardedResource = ShardedResource> =
  | AssignWrite<R>
  /** The drain label set to `value` (the next owner's name, or `DRAIN_ANY`). */
  | { kind: "drain"; resource: R; value: string };

/**
 * `owner=to`, drain removed; `from` is the replica that holds it now (see {@link effectiveOwner}).
 * `after`: the younger rivals of its claim, oldest first, each written once the one before it was.
 */
export interface AssignWrite<R extends ShardedResource = ShardedResource> {
  kind: "assign";
  resource: R;
  to: string;
  from: string | undefined;
  after?: AssignWrite<R>[];
}

/** A move onto a new owner, found by the walk and decided once each claim's holders are known. */
export interface Move<R extends ShardedResource = ShardedResource> {
  resource: R;
  /** The owner label's value, or the one remembered. */
  owner: string | undefined;
  to: string;
}

/** A drain found by the walk: the live owner is to let go for `to`. */
export interface Drain<R extends ShardedResource = ShardedResource> {
  resource: R;
  to: string;
}

/**
 * Room for label writes in one pass, taken when a write is decided on: a first pass over 30,000
 * unassigned resources makes a thousand writes, not 30,000 (the rest wait for the next pass, which
 * their writes' events start). Writes that failed last pass have room of their own, so they
 * cannot crowd out the others.
 */
export class WriteBudget {
  readonly #failedBefore: ReadonlySet<string>;
  readonly #max: number;
  #fresh = 0;
  #retried = 0;
  /** Writes refused room: left for a later pass. */
  later = 0;

  constructor(failedBefore: ReadonlySet<string>, max = MAX_WRITES_PER_PASS) {
    this.#failedBefore = failedBefore;
    this.#max = max;
  }

  /** Takes room for a write of the resource `uid`; false (counted as later) when there is none. */
  take(uid: string): boolean {
    const failed = this.#failedBefore.has(uid);
    if ((failed ? this.#retried : this.#fresh) >= this.#max) {
      this.later += 1;
      return false;
    }
    if (failed) this.#retried += 1;
    else this.#fresh += 1;
    return true;
  }
}

/**
 * `created` of a resource whose `creationTimestamp` is missing or unreadable: younger than any
 * other, as the reconciler reads it. The largest small integer, so the field stays one.
 */
export const NOT_CREATED = 2 ** 31 - 1;

/**
 * A `creationTimestamp` in whole seconds since the epoch. The API server writes it to the second
 * (RFC 3339, UTC), so the number orders resources as the reconciler's comparison of the strings
 * does (`olderThan` in reconcile/inputs.ts), in a small integer of the record rather than a string.
 */
export function createdSeconds(timestamp: unknown): number {
  const ms = typeof timestamp === "string" ? Date.parse(timestamp) : Number.NaN;
  return Number.isFinite(ms) && ms >= 0 && ms / 1000 < NOT_CREATED ? Math.floor(ms / 1000) : NOT_CREATED;
}

/**
 * Whether `a` was created before `b`, ties broken by namespace, then name: the reconciler's order
 * of the rivals for one name (`olderThan` in reconcile/inputs.ts), the older one holding it.
 */
export function createdBefore(a: ShardedResource, b: ShardedResource): boolean {
  if (a.created !== b.created) return a.created < b.created;
  return keyOfMeta(a) < keyOfMeta(b);
}

/** The replica that holds a resource now: its owner label, or the previous one if removed unacknowledged. */
export function effectiveOwner(labels: ShardLabels, before: ShardLabels | undefined): string | undefined {
  if (labels.owner !== undefined) return labels.owner;
  return before?.owner !== undefined && !before.drain ? before.owner : undefined;
}

/**
 * Whether the sharder forgets the labels it remembered of a resource now read with `labels`: the
 * record holds them, unless an owner was removed by someone else (remembered until written back).
 */
export function forgets(labels: ShardLabels, before: ShardLabels | undefined): boolean {
  const removed = labels.owner === undefined && before?.owner !== undefined && !before.drain;
  return !removed && before !== undefined;
}

/** The outcome of one pass, for tests and logs. */
export interface PassReport {
  live: string[];
  assigned: number;
  drained: number;
  waiting: number;
  held: string[];
  deleted: string[];
  /** Resources whose move waits for a rival (same claim) to be let go by another replica. */
  deferred: number;
  /** Label writes admission denied. */
  denied: number;
  /** Label writes that lost a race (the resource changed since it was read): tried again next pass. */
  lost: number;
  /**
   * Label writes due but left for the next pass (more than {@link MAX_WRITES_PER_PASS}, or
   * planned by a ring that changed while the pass wrote).
   */
  later: number;
  /** The live members changed while the pass wrote: it stopped writing, the next plans again. */
  ringChanged: boolean;
}
