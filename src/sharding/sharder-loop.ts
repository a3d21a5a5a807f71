/**
 * The sharder as the leader runs it: a store of every Deployment resource in scope (kept while it
 * leads), a pass after each change it decides on, at the latest every period or at the moment a
 * Lease not renewed expires, and never two passes closer than a short gap.
 */
import type { Logger } from "pino";
import type { Clock } from "../runtime/clock.ts";
import { untilAborted } from "../runtime/clock.ts";
import type { LeasePort } from "../runtime/leader.ts";
import { LeaseConflictError, type LeaseRecord } from "../runtime/leader.ts";
import type { Runnable } from "../runtime/manager.ts";
import type { ClusterUserCounts } from "./cluster-users.ts";
import type { Inheritance } from "./inheritance.ts";
import type { RingLease, RingMembership } from "./membership.ts";
import type { ShardedResource } from "./pass.ts";
import type { Release } from "./release.ts";
import { Sharder } from "./sharder.ts";

/** How often the sharder looks again when nothing changed (Leases expire with time alone). */
export const SHARDER_PERIOD_MS = 2_000;
/** A pass for a Lease's expiry runs this long after it (the expiry is `<=`: one tick suffices). */
const EXPIRY_SLACK_MS = 5;
/** Shortest gap between two sharder passes, so a burst of events makes one pass. */
export const SHARDER_MIN_GAP_MS = 200;

/** The handlers of a watch: called after a record was added, replaced or removed. */
export interface WatchHandlers<T> {
  onAdd?(obj: T): void;
  onUpdate?(old: T, obj: T): void;
  onDelete?(obj: T): void;
}

/** A record of the sharder's store: what it places, and the connection it uses. */
export interface ShardRecord extends ShardedResource {
  readonly metadata: {
    readonly name: string;
    readonly namespace?: string | undefined;
    readonly resourceVersion: string;
  };
  /** The replica the drain label names, if it names one. */
  readonly drainTo: string | undefined;
  /** The key of the connection the resource uses. */
  readonly connection: string;
}

/** The sharder's store of every Deployment resource in scope (a watch, made for one term). */
export interface ShardStore<R extends ShardRecord> {
  run(signal: AbortSignal): Promise<void>;
  readonly synced: Promise<void>;
  hasSynced(): boolean;
  /** Every record, read in place. */
  values(): Iterable<R>;
  /** The records using the connection `key`. */
  usersOf(key: string): readonly R[];
  subscribe(handlers: WatchHandlers<R>): () => void;
}

/** The ring's Leases as the Kubernetes adapter gives them. */
export interface RingLeaseObject {
  readonly metadata: { readonly name: string; readonly resourceVersion: string };
  readonly record: LeaseRecord;
  /** The ring a taken Lease carries (`inheritance.ts`). */
  readonly inheritance?: Inheritance | undefined;
  /** The ring a replica's own Lease says it moves its resources by (`moving-by.ts`). */
  readonly movingBy?: Inheritance | undefined;
  /** The share a replica's own Lease says it released to a joined replica (`release.ts`). */
  readonly released?: Release | undefined;
  /** The replicas whose released share a joined replica's own Lease says it has listed (`release.ts`). */
  readonly holding?: readonly string[] | undefined;
  /** What a replica's ring depends on, from its own Lease (`membership.ts`). */
  readonly fingerprint?: string | undefined;
}

/** One Lease of the ring, to write: a replica's own, or one the sharder takes. */
export interface ShardLease extends LeasePort {
  /** Deletes it if still at `resourceVersion`. */
  delete(resourceVersion: string, signal: AbortSignal): Promise<boolean>;
}

/** The ring's Leases, watched by every replica. */
export interface RingLeases<L extends RingLeaseObject = RingLeaseObject> {
  list(): readonly L[];
  subscribe(handlers: WatchHandlers<L>): () => void;
  /**
   * The Lease `name`, written with `inheritance` when given; a replica's own with the ring
   * `movingBy` returns at each write, the release `released` returns, and the replicas whose
   * released share `holding` says is listed.
   */
  lease(
    name: string,
    inheritance?: Inheritance,
    movingBy?: () => Inheritance | undefined,
    released?: () => Release | undefined,
    holding?: () => Iterable<string>,
    fingerprint?: () => string | undefined,
  ): ShardLease;
  run(signal: AbortSignal): Promise<void>;
  readonly synced: Promise<void>;
}

/** A Lease of the ring as the sharder reads it. */
export function ringLease(lease: RingLeaseObject): RingLease {
  return {
    name: lease.metadata.name,
    resourceVersion: lease.metadata.resourceVersion,
    record: lease.record,
    ...(lease.inheritance ? { inheritance: lease.inheritance } : {}),
    ...(lease.movingBy ? { movingBy: lease.movingBy } : {}),
    ...(lease.released ? { released: lease.released } : {}),
    ...(lease.fingerprint ? { fingerprint: lease.fingerprint } : {}),
  };
}

/** Whether an update changed what the sharder decides on: the shard labels or the claim. */
export function shardInputsChanged(old: ShardRecord, now: ShardRecord): boolean {
  return (
    old.claim !== now.claim ||
    old.owner !== now.owner ||
    old.drain !== now.drain ||
    old.drainTo !== now.drainTo ||
    old.uid !== now.uid
  );
}

/**
 * Whether an update asks for a pass before the period's: it changed what the sharder decides on
 * ({@link shardInputsChanged}) and did not leave the same resource, with the same claim, where
 * the last pass's ring places it, undrained (`placed`). A join's hand-overs by the ring are one
 * label write each, thousands of events, and each would have started a pass over every resource
 * in scope (a pass's cost grows with them, the passes with the moves); the pass at the period
 * still reads them, and a rival they leave behind is moved by it.
 */
export function asksPass<R extends ShardRecord>(old: R, now: R, placed: (resource: R) => boolean): boolean {
  if (!shardInputsChanged(old, now)) return false;
  return old.claim !== now.claim || old.uid !== now.uid || !placed(now);
}

/**
 * When the next pass starts: after the gap, and then at once if something changed since the last
 * one began ({@link poke}), else at the period, the next expiry, or a change, whichever is first.
 */
export class PassSchedule {
  readonly #clock: Clock;
  /** A change seen since the last pass began: the next one starts without waiting for the period. */
  #dirty = false;
  #wake: () => void = () => {};

  constructor(clock: Clock) {
    this.#clock = clock;
  }

  /** Something the sharder decides on changed. */
  readonly poke = (): void => {
    this.#dirty = true;
    this.#wake();
  };

  /** Resolves when the next pass is due (or `signal` aborted); `nextExpiry` as {@link Sharder.nextExpiry}. */
  async next(signal: AbortSignal, nextExpiry: (now: number) => number | undefined): Promise<void> {
    await this.#wait(SHARDER_MIN_GAP_MS, signal, false);
    if (!this.#dirty && !signal.aborted) {
      const now = this.#clock.now();
      const expiry = nextExpiry(now);
      const wait =
        expiry === undefined
          ? SHARDER_PERIOD_MS
          : Math.min(SHARDER_PERIOD_MS, expiry - now + EXPIRY_SLACK_MS);
      await this.#wait(wait, signal, true);
    }
    this.#dirty = false;
  }

  /** Waits `ms`, or until `signal` aborts; a {@link poke} ends it too when `wakeable`. */
  async #wait(ms: number, signal: AbortSignal, wakeable: boolean): Promise<void> {
    let cancel = () => {};
    const timer = new Promise<void>((resolve) => {
      const stop = this.#clock.setTimer(ms, () => resolve());
      cancel = () => {
        stop();
        resolve();
      };
    });
    if (wakeable) this.#wake = cancel;
    try {
      await untilAborted(timer, signal);
    } finally {
      cancel();
      this.#wake = () => {};
    }
  }
}

/**
 * Resolves once the ring has been quiet for `quietMs` (no member joined for that long, by
 * `membership`'s record of this process's Lease watch), or `boundMs` after `startedAt`, whichever
 * comes first (or when `signal` aborts). A new sharder's first pass waits for it: replicas started
 * together create their Leases within a renew period of one another, and a pass planned by a ring
 * of the first one alone labels most resources for it, to drain them again a moment later (two
 * writes, and a lookup by id on each side, per resource). A leader elected long after the members
 * joined (a failover) does not wait.
 */
export async function ringSettled(o: {
  membership: Pick<RingMembership, "joinedAt">;
  clock: Clock;
  startedAt: number;
  quietMs: number;
  boundMs: number;
  signal: AbortSignal;
}): Promise<void> {
  const bound = o.startedAt + o.boundMs;
  while (!o.signal.aborted) {
    const now = o.clock.now();
    const due = Math.min(bound, (o.membership.joinedAt ?? Number.NEGATIVE_INFINITY) + o.quietMs);
    if (due <= now) return;
    await o.clock.sleep(due - now, o.signal).catch(() => undefined);
  }
}

/** Options of {@link sharderRunnable}. */
export interface SharderRunOptions<R extends ShardRecord> {
  /** A new store of every resource in scope, for one leadership term. */
  store(): ShardStore<R>;
  leases: RingLeases;
  /** This process's Lease watch's membership (see {@link RingMembership}). */
  membership: RingMembership;
  /**
   * Sets the shard labels of `resource` if it is still at its resourceVersion: false when it lost
   * the race or is gone; rejects with `ShardLabelsDenied` when admission denied it.
   */
  setLabels(resource: R, labels: Record<string, string | null>, signal: AbortSignal): Promise<boolean>;
  /** The counts of each connection's users, read from the store while it runs. */
  users: ClusterUserCounts;
  identity: string;
  /** The replica the sharder runs in. */
  self: string;
  leaseDurationMs: number;
  renewDeadlineMs: number;
  /** How often a member renews its Lease: how long the ring stays quiet before a first pass. */
  retryPeriodMs: number;
  onPass(live: readonly string[], owned: ReadonlyMap<string, number>): void;
  /** The ring's key (the install key), awaited before the sharder starts; none: an unkeyed ring. */
  ringSeed?: (signal: AbortSignal) => Promise<Uint8Array>;
  clock: Clock;
  logger: Logger;
}

/** The leader's runnable `sharder`: see the module comment. */
export function sharderRunnable<R extends ShardRecord>(o: SharderRunOptions<R>): Runnable {
  const { leases, users, clock, logger } = o;
  return {
    name: "sharder",
    needLeaderElection: true,
    start: async (signal) => {
      const startedAt = clock.now();
      const ringSeed = o.ringSeed ? await o.ringSeed(signal).catch(() => undefined) : undefined;
      // No key: the key's runnable failed (and stops the manager) or this term is over.
      if (o.ringSeed && ringSeed === undefined) return;
      const resources = o.store();
      users.use(resources);
      const watching = resources.run(signal);
      const sharder = new Sharder<R>({
        identity: o.identity,
        self: o.self,
        leaseDurationMs: o.leaseDurationMs,
        holdMarginMs: Math.max(o.leaseDurationMs - o.renewDeadlineMs, 1_000),
        membership: o.membership,
        ...(ringSeed ? { ringSeed } : {}),
        clock,
        logger,
        ports: {
          leases: () => leases.list().map(ringLease),
          resources: () => resources.values(),
          subscribe: ({ updated, deleted }) => resources.subscribe({ onUpdate: updated, onDelete: deleted }),
          setLabels: o.setLabels,
          writeLease: async (name, rv, record, inheritance, s) => {
            const lease = leases.lease(name, inheritance);
            try {
              const written =
                rv === undefined ? await lease.create(record, s) : await lease.update(record, rv, s);
              return written.resourceVersion;
            } catch (err) {
              if (err instanceof LeaseConflictError) return undefined;
              throw err;
            }
          },
          deleteLease: (name, rv, s) => leases.lease(name).delete(rv, s),
        },
        onPass: o.onPass,
      });
      const schedule = new PassSchedule(clock);
      const { poke } = schedule;
      const unsubscribe = [
        // A pass for what it decides on: a resource added or gone, its shard labels or its claim
        // changed; not a status write (most updates), which changes none of them, nor a move onto
        // the ring's choice (see asksPass).
        resources.subscribe({
          onAdd: (r) => {
            poke();
            users.changed(r.connection);
          },
          onUpdate: (old, r) => {
            if (asksPass(old, r, (resource) => sharder.placed(resource))) poke();
            if (old.connection !== r.connection) {
              users.changed(old.connection);
              users.changed(r.connection);
            }
          },
          onDelete: (r) => {
            poke();
            users.changed(r.connection);
          },
        }),
        // A renewal changes nothing the sharder decides on; a new holder does (expiry is the period's).
        leases.subscribe({
          onAdd: poke,
          onDelete: poke,
          onUpdate: (old, lease) => {
            if (old.record.holderIdentity !== lease.record.holderIdentity) poke();
          },
        }),
      ];
      try {
        await untilAborted(leases.synced, signal);
        // The whole Lease list seen, and no member joining for a renew period: see ringSettled.
        const { membership, retryPeriodMs: quietMs, leaseDurationMs: boundMs } = o;
        await ringSettled({ membership, clock, startedAt, quietMs, boundMs, signal });
        // A failover: the dead leader's Lease is taken now, not after the listing of every
        // resource below, and its heirs reconcile its share meanwhile (`inheritance.ts`). Again
        // each renew period while the listing lasts: that Lease and the leader's election Lease
        // were renewed together and last as long, so it may expire a moment after this
        // leadership began, and would otherwise wait for the first pass, after the listing.
        // (Each Lease taken is logged by the take; a write that failed is logged and left to a pass.)
        const takeDown = () =>
          sharder.takeDown(signal).catch((err: unknown) => {
            if (!signal.aborted)
              logger.warn({ err }, "could not take the Leases of replicas that stopped renewing");
          });
        await takeDown();
        const listed = resources.synced.then(
          () => true,
          () => true,
        );
        while (!signal.aborted && !resources.hasSynced()) {
          const ended = await Promise.race([
            listed,
            clock.sleep(quietMs, signal).then(
              () => false,
              () => true,
            ),
          ]);
          if (ended || resources.hasSynced()) break;
          await takeDown();
        }
        await untilAborted(resources.synced, signal);
        if (resources.hasSynced()) users.changed(undefined);
        logger.info("sharder started");
        while (!signal.aborted) {
          try {
            const report = await sharder.pass(signal);
            // A write that lost a race to an update the sharder does not wake for: again soon. So
            // with writes left for later, while writes go through (denied ones wait a period), and
            // after a Lease taken (its replica's resources move in the next pass).
            if (
              report.lost > 0 ||
              report.held.length > 0 ||
              report.ringChanged ||
              (report.later > 0 && report.assigned + report.drained > 0)
            )
              poke();
            if (report.assigned + report.drained + report.held.length + report.deleted.length > 0)
              logger.info({ ...report, live: report.live.length }, "sharder pass");
          } catch (err) {
            if (!signal.aborted) logger.warn({ err }, "sharder pass failed; trying again");
          }
          await schedule.next(signal, (now) => sharder.nextExpiry(now));
        }
      } finally {
        sharder.close();
        users.release(resources);
        for (const u of unsubscribe) u();
        await watching;
      }
    },
  };
}
