/**
 * Client-side rate limit: one token bucket per client, shared by every caller of that client, so
 * a busy controller with many workers stays under one requests-per-second budget, and a 429 from
 * the service pauses all of them, not only the caller that received it.
 */

import { DeferredError } from "../runtime/abort.ts";
import type { ApiClock } from "../runtime/clock.ts";

/**
 * A call of a reconcile would wait for its token longer than the reconcile has left (deadline.ts):
 * it was not sent, no token was taken, and the reconcile may come back in `afterMs`, when a token
 * is due. Thrown by the transport instead of holding the reconcile's worker in the wait.
 */
export class TokenWaitTooLongError extends DeferredError {
  override readonly name: string = "TokenWaitTooLongError";
}

/**
 * How long a reserved token is kept for its holder past the moment it is due: a deferred
 * reconcile comes back then, give or take its turn in its connection's queue. One not taken by
 * then is dropped (its token is spent).
 */
export const RESERVATION_KEPT_MS = 600_000;

/**
 * A token bucket that refills `qps` tokens per second up to `burst`, and can be paused.
 *
 * Contract: {@link acquire} resolves when the caller may send one request. Callers are served
 * in arrival order (a waiter reserves its token on arrival, so a later caller never overtakes an
 * earlier one); over any window of `t` seconds at most `burst + qps·t` acquisitions resolve. An
 * acquisition aborted while waiting gives its reservation back and rejects with the signal's
 * reason. While paused ({@link pause}) no acquisition resolves; afterwards the bucket holds at
 * most one token, so work resumes at `qps` rather than in a burst. A caller that will not wait
 * may {@link reserve} its token instead, in the same order, and send once it is due without
 * acquiring ({@link reservedFor}, {@link take}): a deferred reconcile keeps its place in the
 * line instead of losing every token to the callers that wait.
 */
export class TokenBucket {
  readonly #fullQps: number;
  readonly #fullBurst: number;
  readonly #share: () => number;
  readonly #clock: ApiClock;
  #tokens: number;
  #updatedAt: number;
  #pausedUntil = Number.NEGATIVE_INFINITY;
  /** Counts pauses, so that a waiter can tell that one began while it slept. */
  #pauses = 0;
  /** Tokens reserved and not taken yet: holder → when due (clock ms), in the order reserved. */
  readonly #reserved = new Map<string, number>();

  /**
   * `share` (default 1) is this process's part of the budget, read at each refill: replicas that
   * split one connection's work split its `qps` and `burst` the same way (a burst never below 1).
   */
  constructor(options: { qps: number; burst: number; clock: ApiClock; share?: () => number }) {
    if (!(options.qps > 0)) throw new RangeError(`qps must be > 0, got ${options.qps}`);
    if (!(options.burst >= 1)) throw new RangeError(`burst must be >= 1, got ${options.burst}`);
    this.#fullQps = options.qps;
    this.#fullBurst = options.burst;
    this.#share = options.share ?? (() => 1);
    this.#clock = options.clock;
    this.#tokens = options.burst;
    this.#updatedAt = options.clock.now();
  }

  /** Waits for a token; see the class contract. */
  async acquire(signal?: AbortSignal): Promise<void> {
    for (;;) {
      if (signal?.aborted) throw signal.reason;
      const paused = this.pausedForMs();
      if (paused > 0) {
        await this.#clock.sleep(paused, signal);
        continue;
      }
      this.#refill();
      // Reserve first, even into debt: the debt is what orders waiters fairly.
      this.#tokens -= 1;
      if (this.#tokens >= 0) return;
      const waitMs = (-this.#tokens / this.#qps) * 1000;
      const pausesBefore = this.#pauses;
      try {
        await this.#clock.sleep(waitMs, signal);
      } catch (error) {
        this.#giveBack();
        throw error;
      }
      if (this.#pauses === pausesBefore) return;
      // A pause began while this caller waited: its turn is after the pause, in a new queue.
      this.#giveBack();
    }
  }

  /**
   * Pauses every acquisition for `ms` from now (a longer pause already in force is kept) and
   * drains the bucket to one token, so that the requests after the pause come at `qps`.
   */
  pause(ms: number): void {
    if (!(ms > 0)) return;
    this.#refill();
    this.#pausedUntil = Math.max(this.#pausedUntil, this.#clock.now() + ms);
    // One token left: the first request after the pause goes at once, the next ones at `qps`.
    this.#tokens = Math.min(this.#tokens, 1);
    this.#pauses += 1;
  }

  /**
   * How long a caller arriving now would wait for its token, in ms (the pause left included),
   * without reserving one: what the callers before it reserved is in it.
   */
  waitMs(): number {
    this.#refill();
    const paused = this.pausedForMs();
    const owed = 1 - this.#tokens;
    return paused + (owed > 0 ? (owed / this.#qps) * 1000 : 0);
  }

  /**
   * Reserves the next token for `holder`, unless it holds one, and returns the ms until it is due
   * (the pause left included). The token is counted as taken now, in arrival order among the
   * waiters; the holder sends once it is due, after {@link take}.
   */
  reserve(holder: string): number {
    const now = this.#clock.now();
    this.#dropStale(now);
    const at = this.#reserved.get(holder);
    if (at !== undefined) return Math.max(0, at - now);
    this.#refill();
    this.#tokens -= 1;
    const waitMs = this.pausedForMs() + (this.#tokens < 0 ? (-this.#tokens / this.#qps) * 1000 : 0);
    this.#reserved.set(holder, now + waitMs);
    return waitMs;
  }

  /** The ms until `holder`'s reserved token is due (0: due), or undefined when it holds none. */
  reservedFor(holder: string): number | undefined {
    const at = this.#reserved.get(holder);
    return at === undefined ? undefined : Math.max(0, at - this.#clock.now());
  }

  /** Takes `holder`'s reserved token: its request goes without {@link acquire}. */
  take(holder: string): void {
    this.#reserved.delete(holder);
  }

  /** Drops the reservations due more than {@link RESERVATION_KEPT_MS} ago (the oldest first). */
  #dropStale(now: number): void {
    for (const [holder, at] of this.#reserved) {
      if (at >= now - RESERVATION_KEPT_MS) return;
      this.#reserved.delete(holder);
    }
  }

  /** The requests per second this process may send now (its share of the budget). */
  get qps(): number {
    return this.#qps;
  }

  /** How long the current pause still lasts, in ms (0 when not paused). */
  pausedForMs(): number {
    return Math.max(0, this.#pausedUntil - this.#clock.now());
  }

  get #qps(): number {
    return this.#fullQps * this.#part();
  }

  get #burst(): number {
    return Math.max(1, this.#fullBurst * this.#part());
  }

  #part(): number {
    const share = this.#share();
    return share > 0 && share <= 1 ? share : 1;
  }

  #giveBack(): void {
    this.#refill();
    this.#tokens = Math.min(this.#burst, this.#tokens + 1);
  }

  #refill(): void {
    const now = this.#clock.now();
    // No tokens accrue during a pause.
    const from = Math.max(this.#updatedAt, Math.min(now, this.#pausedUntil));
    const elapsed = Math.max(0, now - from) / 1000;
    this.#updatedAt = now;
    this.#tokens = Math.min(this.#burst, this.#tokens + elapsed * this.#qps);
  }
}
