/**
 * Leader election over a coordination.k8s.io Lease, with client-go's semantics, written against
 * the small {@link LeasePort} so this file knows nothing about the Kubernetes client
 * (`src/kube/` implements the port).
 */
import type { Logger } from "pino";
import { pino } from "pino";
import { type Clock, systemClock } from "./clock.ts";

/**
 * The fields of a Lease's `spec` that leader election reads and writes.
 * `holderIdentity` is `""` when nobody holds the lease (after a release).
 */
export interface LeaseRecord {
  holderIdentity: string;
  leaseDurationSeconds: number;
  /** When the current holder acquired it; undefined on a lease never held. */
  acquireTime: Date | undefined;
  /** Last renewal by the current holder; undefined on a lease never held. */
  renewTime: Date | undefined;
  leaseTransitions: number;
}

/** A Lease as read from the API server: its record and the object's `metadata.resourceVersion`. */
export interface LeaseSnapshot {
  record: LeaseRecord;
  resourceVersion: string;
  /** The Lease's annotations, as read (none when it has none). */
  annotations?: Readonly<Record<string, string>>;
}

/**
 * Thrown by a {@link LeasePort} when the write lost a race: `create` of a lease that already
 * exists (HTTP 409 AlreadyExists) or `update` with a stale resourceVersion (HTTP 409 Conflict).
 * It means someone else wrote the lease; the elector re-reads and tries again on its next tick.
 */
export class LeaseConflictError extends Error {
  override readonly name = "LeaseConflictError";
}

/**
 * Access to ONE Lease object (its namespace and name are fixed when the adapter is built).
 *
 * Contract:
 * - `get` resolves `undefined` when the lease does not exist (404), the snapshot otherwise.
 * - `create` creates it with `record`; throws {@link LeaseConflictError} when it already exists.
 * - `update` replaces the spec with `record` only if the object is still at `resourceVersion`
 *   (optimistic concurrency, a PUT with metadata.resourceVersion); throws
 *   {@link LeaseConflictError} on a 409 conflict.
 * - Every call honours `signal` (rejects when it aborts). Any other failure rejects with an Error.
 * - Times are whole `Date`s; the adapter maps them to/from the Lease's MicroTime strings.
 */
export interface LeasePort {
  get(signal: AbortSignal): Promise<LeaseSnapshot | undefined>;
  create(record: LeaseRecord, signal: AbortSignal): Promise<LeaseSnapshot>;
  update(record: LeaseRecord, resourceVersion: string, signal: AbortSignal): Promise<LeaseSnapshot>;
}

/** The reason a leading signal aborts with when the lease was lost (not renewed, or taken). */
export class LeadershipLostError extends Error {
  override readonly name = "LeadershipLostError";
}

/** Options of {@link LeaderElector}; durations default to client-go's 15 s / 10 s / 2 s. */
export interface LeaderElectionOptions {
  lease: LeasePort;
  /** Unique per process (e.g. pod name + random suffix): two holders must never share it. */
  identity: string;
  leaseDurationMs?: number;
  renewDeadlineMs?: number;
  retryPeriodMs?: number;
  /** On a graceful stop, hand the lease back at once instead of letting it expire. Default true. */
  releaseOnCancel?: boolean;
  clock?: Clock;
  random?: () => number;
  logger?: Logger;
  /** Called with true when this process starts leading and false when it stops (metrics gauge). */
  onLeadingChange?(leading: boolean): void;
  /** Called when a different holder is observed (logs; a sharded replica's request budget). */
  onNewLeader?(identity: string): void;
  /**
   * Called after each successful acquire or renewal with the local time its write was sent: the
   * API server stored it no earlier, so nobody else can hold the lease before that time plus the
   * lease duration (a write fence counts from it, never from when the answer arrived, which may
   * have been delayed).
   */
  onRenewed?(startedAt: number): void;
}

/** How one term of {@link LeaderElector.run} ended. */
export type ElectionOutcome = "lost" | "stopped";

/** client-go's JitterFactor for the acquire loop: retries land in [retry, 2.2 × retry]. */
const ACQUIRE_JITTER = 1.2;
/** An attempt timed for a lease's expiry is made this long after it (expiry is strict). */
const EXPIRY_SLACK_MS = 5;

/**
 * Leader election with client-go semantics.
 *
 * - Acquire: when the lease does not exist, is released (empty holder), is ours, or has not
 *   changed for `leaseDuration` as observed on OUR clock (so clock skew between nodes is harmless).
 * - Renew every `retryPeriod`; if no renewal succeeds within `renewDeadline` of the last one, or
 *   another holder is observed, leadership is lost and the leading signal aborts at once with
 *   {@link LeadershipLostError}. renewDeadline < leaseDuration leaves a margin in which nobody
 *   else can have acquired the lease yet.
 * - Conflicts (409) are expected races: the attempt just fails and is retried.
 * - Release on a graceful stop: holder "" and leaseDurationSeconds 1, like ReleaseOnCancel.
 */
export class LeaderElector {
  readonly identity: string;
  readonly #lease: LeasePort;
  readonly #leaseMs: number;
  readonly #renewDeadlineMs: number;
  readonly #retryMs: number;
  readonly #releaseOnCancel: boolean;
  readonly #clock: Clock;
  readonly #random: () => number;
  readonly #log: Logger;
  readonly #opts: LeaderElectionOptions;
  #observed: LeaseSnapshot | undefined;
  /** Local time at which the observed record last changed. */
  #observedAt = 0;
  #leading = false;

  constructor(options: LeaderElectionOptions) {
    this.#opts = options;
    this.identity = options.identity;
    this.#lease = options.lease;
    this.#leaseMs = options.leaseDurationMs ?? 15_000;
    this.#renewDeadlineMs = options.renewDeadlineMs ?? 10_000;
    this.#retryMs = options.retryPeriodMs ?? 2_000;
    this.#releaseOnCancel = options.releaseOnCancel ?? true;
    this.#clock = options.clock ?? systemClock;
    this.#random = options.random ?? Math.random;
    this.#log = (options.logger ?? pino({ level: "silent" })).child({ component: "leader-election" });
    if (options.identity === "") throw new RangeError("leader election needs a non-empty identity");
    if (!(this.#leaseMs > this.#renewDeadlineMs && this.#renewDeadlineMs > ACQUIRE_JITTER * this.#retryMs)) {
      throw new RangeError(
        "leader election needs leaseDuration > renewDeadline > 1.2 × retryPeriod " +
          `(got ${this.#leaseMs} / ${this.#renewDeadlineMs} / ${this.#retryMs} ms)`,
      );
    }
  }

  /** True while this process holds the lease. */
  isLeader(): boolean {
    return this.#leading;
  }

  /**
   * One term: campaigns until the lease is acquired (or `signal` aborts: "stopped"), then calls
   * `onStartedLeading(leading)` and keeps renewing until the promise it returned settles.
   * `leading` aborts at once when the lease is lost; `run` then waits for the promise and
   * resolves "lost". When the promise settles while still leading (the caller drained after
   * `signal` aborted), the lease is released (if configured) and `run` resolves "stopped".
   * Renewal continues after `signal` aborts, so a graceful drain keeps the lease until it ends.
   */
  async run(
    signal: AbortSignal,
    onStartedLeading: (leading: AbortSignal) => Promise<void>,
  ): Promise<ElectionOutcome> {
    if (!(await this.#campaign(signal))) return "stopped";
    this.#setLeading(true);
    const leading = new AbortController();
    const workDone = new AbortController();
    const work = Promise.resolve()
      .then(() => onStartedLeading(leading.signal))
      .catch((err: unknown) => this.#log.error({ err }, "leader work failed"))
      .finally(() => workDone.abort());
    const outcome = await this.#renewUntil(workDone.signal);
    if (outcome === "lost") {
      this.#setLeading(false);
      leading.abort(new LeadershipLostError(`lost the lease as ${this.identity}`));
      this.#log.warn("leadership lost");
      await work;
      return "lost";
    }
    await work;
    if (this.#releaseOnCancel) await this.#release();
    this.#setLeading(false);
    leading.abort(new LeadershipLostError(`released the lease as ${this.identity}`));
    return "stopped";
  }

  async #campaign(signal: AbortSignal): Promise<boolean> {
    this.#log.info({ identity: this.identity }, "attempting to acquire the lease");
    for (;;) {
      if (signal.aborted) return false;
      if (await this.#attempt(this.#renewDeadlineMs)) return true;
      // Retry with client-go's jitter, but no later than the moment the holder's lease expires
      // by our clock if it is not renewed: a dead leader is replaced a duration after its last
      // renewal was seen, not up to a whole retry later.
      const jittered = this.#retryMs * (1 + ACQUIRE_JITTER * this.#random());
      const expiresIn = this.#heldByOther() ? this.#otherExpiresIn() : undefined;
      const wait = expiresIn === undefined ? jittered : Math.min(jittered, expiresIn + EXPIRY_SLACK_MS);
      try {
        await this.#clock.sleep(wait, signal);
      } catch {
        return false;
      }
    }
  }

  async #renewUntil(stop: AbortSignal): Promise<ElectionOutcome> {
    let lastRenew = this.#clock.now();
    for (;;) {
      try {
        await this.#clock.sleep(this.#retryMs, stop);
      } catch {
        return "stopped";
      }
      for (;;) {
        const remaining = lastRenew + this.#renewDeadlineMs - this.#clock.now();
        if (remaining <= 0) return "lost";
        if (await this.#attempt(remaining)) {
          lastRenew = this.#clock.now();
          break;
        }
        if (this.#heldByOther()) return "lost";
        if (stop.aborted) return "stopped";
        try {
          await this.#clock.sleep(Math.min(this.#retryMs, remaining), stop);
        } catch {
          return "stopped";
        }
      }
    }
  }

  /** One tryAcquireOrRenew, abandoned after `budgetMs` even if the port ignores its signal. */
  async #attempt(budgetMs: number): Promise<boolean> {
    const timeout = new AbortController();
    const cancel = this.#clock.setTimer(budgetMs, () => timeout.abort(new Error("lease call timed out")));
    const expired = new Promise<boolean>((resolve) =>
      timeout.signal.addEventListener("abort", () => resolve(false), { once: true }),
    );
    try {
      return await Promise.race([this.#tryAcquireOrRenew(timeout.signal), expired]);
    } finally {
      cancel();
    }
  }

  async #tryAcquireOrRenew(signal: AbortSignal): Promise<boolean> {
    const now = new Date(this.#clock.now());
    try {
      const current = await this.#lease.get(signal);
      if (!current) {
        const writing = this.#clock.now();
        this.#observe(await this.#lease.create(this.#record(now, now, 0), signal));
        this.#opts.onRenewed?.(writing);
        return true;
      }
      this.#observe(current);
      if (this.#heldByOther()) return false;
      const old = current.record;
      const ours = old.holderIdentity === this.identity;
      const record = ours
        ? this.#record(old.acquireTime ?? now, now, old.leaseTransitions)
        : this.#record(now, now, old.leaseTransitions + 1);
      const writing = this.#clock.now();
      this.#observe(await this.#lease.update(record, current.resourceVersion, signal));
      this.#opts.onRenewed?.(writing);
      return true;
    } catch (err) {
      if (err instanceof LeaseConflictError) this.#log.debug("lease write conflict; retrying");
      else this.#log.warn({ err }, "lease call failed");
      return false;
    }
  }

  async #release(): Promise<void> {
    const observed = this.#observed;
    if (!observed || observed.record.holderIdentity !== this.identity) return;
    const now = new Date(this.#clock.now());
    const record: LeaseRecord = {
      holderIdentity: "",
      leaseDurationSeconds: 1,
      acquireTime: now,
      renewTime: now,
      leaseTransitions: observed.record.leaseTransitions,
    };
    const timeout = new AbortController();
    const cancel = this.#clock.setTimer(this.#renewDeadlineMs, () =>
      timeout.abort(new Error("release timed out")),
    );
    try {
      this.#observe(await this.#lease.update(record, observed.resourceVersion, timeout.signal));
      this.#log.info("lease released");
    } catch (err) {
      this.#log.warn({ err }, "could not release the lease; it will expire");
    } finally {
      cancel();
    }
  }

  #record(acquireTime: Date, renewTime: Date, leaseTransitions: number): LeaseRecord {
    const leaseDurationSeconds = Math.ceil(this.#leaseMs / 1000);
    return { holderIdentity: this.identity, leaseDurationSeconds, acquireTime, renewTime, leaseTransitions };
  }

  #observe(snapshot: LeaseSnapshot): void {
    const before = this.#observed?.record;
    if (!before || !sameRecord(before, snapshot.record)) {
      this.#observedAt = this.#clock.now();
      const holder = snapshot.record.holderIdentity;
      if (holder !== "" && holder !== this.identity && holder !== before?.holderIdentity) {
        this.#log.info({ leader: holder }, "new leader observed");
        this.#opts.onNewLeader?.(holder);
      }
    }
    this.#observed = snapshot;
  }

  /** Another identity holds the lease and, by our clock, it has not expired. */
  #heldByOther(): boolean {
    const record = this.#observed?.record;
    if (!record || record.holderIdentity === "" || record.holderIdentity === this.identity) return false;
    return this.#otherExpiresIn() > 0;
  }

  /** How long, by our clock, until the observed record expires if it does not change. */
  #otherExpiresIn(): number {
    const seconds = this.#observed?.record.leaseDurationSeconds ?? 0;
    return this.#observedAt + seconds * 1000 - this.#clock.now();
  }

  #setLeading(leading: boolean): void {
    if (this.#leading === leading) return;
    this.#leading = leading;
    this.#opts.onLeadingChange?.(leading);
  }
}

function sameRecord(a: LeaseRecord, b: LeaseRecord): boolean {
  return (
    a.holderIdentity === b.holderIdentity &&
    a.leaseDurationSeconds === b.leaseDurationSeconds &&
    a.leaseTransitions === b.leaseTransitions &&
    a.acquireTime?.getTime() === b.acquireTime?.getTime() &&
    a.renewTime?.getTime() === b.renewTime?.getTime()
  );
}
