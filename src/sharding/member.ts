/**
 * One replica's side of sharding: whether it may write to the service now (its write fence), which
 * of its resources it may reconcile, and the acknowledgement of a drain once no reconcile of that
 * resource is running. Kubernetes is reached through the two functions given; the Lease itself is
 * renewed by a {@link LeaderElector} that reports each renewal here.
 */
import { AsyncLocalStorage } from "node:async_hooks";
import type { Logger } from "pino";
import { type Clock, systemClock } from "../runtime/clock.ts";
import { Action, type Reconciler } from "../runtime/controller.ts";

/**
 * What the member reads of a resource in its cache: whether it is to be let go (it carries the
 * drain label, or the ring moves it), and how long it is held here, not reconciled, if it is.
 */
export interface OwnedResource {
  drain: boolean;
  holdMs?: number;
  /** Not reconciled here, nor let go, and not looked at again: queued once that ends, by whoever ends it. */
  parked?: boolean;
}

/** Options of {@link ShardMember}. */
export interface ShardMemberOptions {
  /** This replica's name (its pod's): its Lease's name and its owner label value. */
  name: string;
  /** The Lease's duration: nobody else holds it before a renewal's start plus this. */
  leaseDurationMs: number;

  /** The resource `key` in this replica's cache (which holds only what is labelled for it). */
  owned(key: string): OwnedResource | undefined;
  /**
   * Removes this replica's owner label and the drain label of `key`, if the resource is still as
   * cached (a resourceVersion precondition); resolves false when it lost that race.
   */
  acknowledge(key: string, signal: AbortSignal): Promise<boolean>;
  clock?: Clock;
  logger: Logger;
}

/**
 * A write allowed to start now: it must end within `withinMs`, and the transport calls `ended`
 * once when it ends, with how much longer it may still run at the service: 0 when it was answered
 * (or never sent), the timeout it was given when it got no answer (timed out, connection lost,
 * halted): the service may still be carrying it out after the client gave up.
 */
export interface ShardWriteGrant {
  withinMs: number;
  ended(mayRunForMs: number): void;
}

/** How long before retrying an acknowledgement that lost a race or failed. */
export const ACK_RETRY_MS = 1_000;

/**
 * How often a held resource's guard is asked again while its hold lasts (see
 * {@link OwnedResource.holdMs}): a look at two maps, no reconcile, for the few rivals held.
 */
export const HOLD_RECHECK_MS = 2_000;

/**
 * Acknowledgements sent at once: a join drains thousands of one replica's resources within
 * seconds, and one request each at once would exceed the API server's in-flight limit (429s,
 * each retried a second later) instead of keeping it busy.
 */
export const ACK_CONCURRENCY = 8;

/**
 * Kept between the end of any write and the earliest moment the Lease could be declared expired
 * by another process: the clocks' rates may differ a little, and the sharder acts on what it saw.
 */
export const FENCE_MARGIN_MS = 1_000;

/** The least time a write is given; less than this left on the Lease, writes wait for a renewal. */
export const MIN_WRITE_MS = 1_000;

/**
 * A replica of the ring. Contract:
 * - {@link writeWithinMs} is how long a write started now may take so that it ends before
 *   anyone could declare the Lease expired: `renewalSent + leaseDuration - margin - now` while
 *   the Lease is held, 0 otherwise; {@link mayWrite} says whether that is at least
 *   {@link MIN_WRITE_MS}.
 * - {@link guard} wraps the reconciler: a key not in the cache, to be let go, held, or met
 *   before the Lease is held or after {@link stop} is not reconciled (the wrapped reconciler is
 *   not called; a held key is tried again every {@link HOLD_RECHECK_MS} until its hold ends, a
 *   parked one only when queued again);
 *   keys in reconcile are counted, and a drained key is acknowledged once its last reconcile
 *   ended.
 * - {@link changed} is called on each cache change of a key: a drained key not in reconcile is
 *   acknowledged then.
 */
export class ShardMember {
  readonly name: string;
  readonly #opts: ShardMemberOptions;
  readonly #clock: Clock;
  readonly #inFlight = new Map<string, number>();
  readonly #acking = new Set<string>();
  readonly #idle = new Set<() => void>();
  readonly #stop = new AbortController();
  /** The key whose reconcile is running, in that reconcile's async context (its writes' gate). */
  readonly #reconciling = new AsyncLocalStorage<string>();
  /** Per key (`""`: no key), the writes that may still run at the service, by when. */
  readonly #mayRun = new Map<string, Set<{ until: number }>>();
  readonly #held = new Set<() => void>();
  /** Acknowledgements sending now, and those waiting for one of {@link ACK_CONCURRENCY} slots. */
  #acksSending = 0;
  readonly #ackWaiting: (() => void)[] = [];
  #holding = false;
  #renewalStart = Number.NEGATIVE_INFINITY;

  constructor(options: ShardMemberOptions) {
    this.name = options.name;
    this.#opts = options;
    this.#clock = options.clock ?? systemClock;
  }

  /** The Lease was acquired or renewed by a call that began at `startedAt`. */
  renewed(startedAt: number): void {
    if (this.#stop.signal.aborted) return;
    this.#holding = true;
    this.#renewalStart = Math.max(this.#renewalStart, startedAt);
    for (const wake of this.#held) wake();
  }

  /** The Lease is no longer held (lost, or about to be released): no write from now on. */
  released(): void {
    this.#holding = false;
  }

  /** How long a service write started now may take (0: none may start). */
  writeWithinMs(): number {
    if (!this.#holding) return 0;
    const left = this.#renewalStart + this.#opts.leaseDurationMs - FENCE_MARGIN_MS - this.#clock.now();
    return Math.max(0, left);
  }

  /** True while a write may start (with at least {@link MIN_WRITE_MS} to end in). */
  mayWrite(): boolean {
    return this.writeWithinMs() >= MIN_WRITE_MS;
  }

  /**
   * Allows a write starting now (call only when {@link mayWrite}) and keeps it, until it ends, as
   * one that may run until `now + 2 × withinMs` (it ends at the client within `withinMs`, and
   * unanswered may run as long again); once ended, until `now + mayRunForMs`.
   */
  grant(): ShardWriteGrant {
    const withinMs = this.writeWithinMs();
    const key = this.#reconciling.getStore() ?? "";
    const write = { until: this.#clock.now() + 2 * withinMs };
    this.#writesOf(key).add(write);
    let ended = false;
    return {
      withinMs,
      ended: (mayRunForMs) => {
        if (ended) return;
        ended = true;
        if (mayRunForMs > 0) {
          write.until = this.#clock.now() + mayRunForMs;
          this.#writesOf(key).add(write);
          this.#opts.logger.debug(
            { key, mayRunForMs },
            "a write got no answer: it may still run at the service",
          );
          return;
        }
        const writes = this.#mayRun.get(key);
        writes?.delete(write);
        if (writes?.size === 0) this.#mayRun.delete(key);
      },
    };
  }

  /**
   * Until when a write of `key` (or, without one, of any key) may still run at the service; -∞
   * when none may. Writes made outside any reconcile count for every key.
   */
  mayRunUntil(key?: string): number {
    const now = this.#clock.now();
    let until = Number.NEGATIVE_INFINITY;
    for (const [k, writes] of this.#mayRun) {
      if (key !== undefined && k !== key && k !== "") continue;
      for (const w of writes) {
        if (w.until <= now - FENCE_MARGIN_MS) writes.delete(w);
        else until = Math.max(until, w.until);
      }
      if (writes.size === 0) this.#mayRun.delete(k);
    }
    return until;
  }

  /**
   * Resolves once no write may still run at the service (each one's {@link mayRunUntil} plus
   * {@link FENCE_MARGIN_MS} passed), or when `signal` aborts. Awaited before the Lease is
   * released: a released Lease lets the sharder move the share at once.
   */
  async settled(signal: AbortSignal): Promise<void> {
    for (;;) {
      const wait = this.mayRunUntil() + FENCE_MARGIN_MS - this.#clock.now();
      if (wait <= 0 || signal.aborted) return;
      this.#opts.logger.info(
        { waitMs: wait },
        "writes that got no answer may still run at the service: waiting before letting the share go",
      );
      try {
        await this.#clock.sleep(wait, signal);
      } catch {
        return;
      }
    }
  }

  #writesOf(key: string): Set<{ until: number }> {
    let writes = this.#mayRun.get(key);
    if (!writes) {
      writes = new Set();
      this.#mayRun.set(key, writes);
    }
    return writes;
  }

  /** The keys with a reconcile running or a write that may still run at the service. */
  busyKeys(): string[] {
    this.mayRunUntil();
    return [...new Set([...this.#inFlight.keys(), ...this.#mayRun.keys()])].filter((k) => k !== "");
  }

  /** True once the Lease has been held (the replica is in the ring). */
  get holding(): boolean {
    return this.#holding;
  }

  /** Reconciles in flight. */
  get busy(): number {
    let n = 0;
    for (const count of this.#inFlight.values()) n += count;
    return n;
  }

  guard(reconcile: Reconciler): Reconciler {
    return async (key, signal) => {
      if (this.#stop.signal.aborted) return Action.gone();
      // Not in the ring yet: nothing is reconciled before the first renewal, which is waited for
      // here (a replica restarted in its pod waits up to a Lease duration for its own Lease).
      if (!this.#holding) await this.#untilHolding(signal);
      if (this.#stop.signal.aborted) return Action.gone();
      if (!this.#holding) return Action.requeueAfter(ACK_RETRY_MS);
      const resource = this.#opts.owned(key);
      if (!resource) return Action.gone();
      if (resource.drain) {
        this.#acknowledgeSoon(key);
        return Action.gone();
      }
      if (resource.parked) return Action.gone();
      // Looked at again every HOLD_RECHECK_MS, not only at the hold's end: the older resource it
      // waits for may come back within seconds, and the hold then ends at once.
      if (resource.holdMs !== undefined && resource.holdMs > 0)
        return Action.requeueAfter(Math.min(resource.holdMs, HOLD_RECHECK_MS));
      this.#inFlight.set(key, (this.#inFlight.get(key) ?? 0) + 1);
      try {
        return await this.#reconciling.run(key, () => reconcile(key, signal));
      } finally {
        const left = (this.#inFlight.get(key) ?? 1) - 1;
        if (left > 0) this.#inFlight.set(key, left);
        else this.#inFlight.delete(key);
        if (this.#opts.owned(key)?.drain) this.#acknowledgeSoon(key);
        if (this.#inFlight.size === 0) for (const wake of this.#idle) wake();
      }
    };
  }

  /** The cached resource `key` changed. */
  changed(key: string): void {
    if (this.#opts.owned(key)?.drain && !this.#inFlight.has(key)) this.#acknowledgeSoon(key);
  }

  /**
   * Stops taking work (every later reconcile is skipped) and resolves once no reconcile is in
   * flight, or when `signal` aborts.
   */
  async stop(signal: AbortSignal): Promise<void> {
    this.#stop.abort();
    for (const wake of this.#held) wake();
    if (this.#inFlight.size === 0 || signal.aborted) return;
    await new Promise<void>((resolve) => {
      const done = () => {
        this.#idle.delete(done);
        signal.removeEventListener("abort", done);
        resolve();
      };
      this.#idle.add(done);
      signal.addEventListener("abort", done, { once: true });
    });
  }

  /** Resolves at the first renewal, on {@link stop}, or when `signal` aborts. */
  #untilHolding(signal: AbortSignal): Promise<void> {
    return new Promise<void>((resolve) => {
      const done = () => {
        this.#held.delete(done);
        signal.removeEventListener("abort", done);
        resolve();
      };
      if (signal.aborted || this.#holding || this.#stop.signal.aborted) return resolve();
      this.#held.add(done);
      signal.addEventListener("abort", done, { once: true });
    });
  }

  /** Whether a reconcile of `key` is running. */
  reconciling(key: string): boolean {
    return this.#inFlight.has(key);
  }

  #acknowledgeSoon(key: string): void {
    if (this.#acking.has(key) || this.#stop.signal.aborted) return;
    this.#acking.add(key);
    void this.#acknowledge(key).finally(() => this.#acking.delete(key));
  }

  /** Resolves once an acknowledgement may be sent (one of {@link ACK_CONCURRENCY}). */
  #ackSlot(): Promise<void> {
    if (this.#acksSending < ACK_CONCURRENCY) {
      this.#acksSending += 1;
      return Promise.resolve();
    }
    return new Promise((resolve) => this.#ackWaiting.push(resolve));
  }

  /** An acknowledgement ended: its slot passes to the next waiting, if any. */
  #ackDone(): void {
    const next = this.#ackWaiting.shift();
    if (next) next();
    else this.#acksSending -= 1;
  }

  async #acknowledge(key: string): Promise<void> {
    const signal = this.#stop.signal;
    while (!signal.aborted && !this.#inFlight.has(key) && this.#opts.owned(key)?.drain) {
      // A write of this key that got no answer may still run at the service: the new owner's
      // first write must come after it could have, so the drain waits for it.
      const wait = this.mayRunUntil(key) + FENCE_MARGIN_MS - this.#clock.now();
      if (wait > 0) {
        this.#opts.logger.debug({ key, waitMs: wait }, "drain waits for a write that got no answer");
        try {
          await this.#clock.sleep(wait, signal);
        } catch {
          return;
        }
        continue;
      }
      await this.#ackSlot();
      try {
        // Checked again, all of it: the slot may have come after the drain was lifted, a reconcile
        // began, or a write made meanwhile got no answer (the loop then waits for it first).
        if (
          signal.aborted ||
          this.#inFlight.has(key) ||
          !this.#opts.owned(key)?.drain ||
          this.mayRunUntil(key) + FENCE_MARGIN_MS > this.#clock.now()
        )
          continue;
        if (await this.#opts.acknowledge(key, signal)) {
          this.#opts.logger.debug({ key }, "drain acknowledged");
          return;
        }
      } catch (err) {
        this.#opts.logger.warn({ err, key }, "could not acknowledge a drain; retrying");
      } finally {
        this.#ackDone();
      }
      try {
        await this.#clock.sleep(ACK_RETRY_MS, signal);
      } catch {
        return;
      }
    }
  }
}
