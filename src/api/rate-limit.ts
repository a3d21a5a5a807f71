/**
 * Client-side rate limit: one token bucket per client, shared by every caller of that client, so
 * a busy controller with many workers stays under one requests-per-second budget.
 */
import type { ApiClock } from "./clock.ts";

/**
 * A token bucket that refills `qps` tokens per second up to `burst`.
 *
 * Contract: {@link acquire} resolves when the caller may send one request. Callers are served
 * in arrival order (a waiter reserves its token on arrival, so a later caller never overtakes an
 * earlier one); over any window of `t` seconds at most `burst + qps·t` acquisitions resolve. An
 * acquisition aborted while waiting gives its reservation back and rejects with the signal's reason.
 */
export class TokenBucket {
  readonly #qps: number;
  readonly #burst: number;
  readonly #clock: ApiClock;
  #tokens: number;
  #updatedAt: number;

  constructor(options: { qps: number; burst: number; clock: ApiClock }) {
    if (!(options.qps > 0)) throw new RangeError(`qps must be > 0, got ${options.qps}`);
    if (!(options.burst >= 1)) throw new RangeError(`burst must be >= 1, got ${options.burst}`);
    this.#qps = options.qps;
    this.#burst = options.burst;
    this.#clock = options.clock;
    this.#tokens = options.burst;
    this.#updatedAt = options.clock.now();
  }

  /** Waits for a token; see the class contract. */
  async acquire(signal?: AbortSignal): Promise<void> {
    if (signal?.aborted) throw signal.reason;
    this.#refill();
    // Reserve first, even into debt: the debt is what orders waiters fairly.
    this.#tokens -= 1;
    if (this.#tokens >= 0) return;
    const waitMs = (-this.#tokens / this.#qps) * 1000;
    try {
      await this.#clock.sleep(waitMs, signal);
    } catch (error) {
      this.#refill();
      this.#tokens = Math.min(this.#burst, this.#tokens + 1);
      throw error;
    }
  }

  #refill(): void {
    const now = this.#clock.now();
    const elapsed = Math.max(0, now - this.#updatedAt) / 1000;
    this.#updatedAt = now;
    this.#tokens = Math.min(this.#burst, this.#tokens + elapsed * this.#qps);
  }
}
