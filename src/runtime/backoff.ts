/**
 * Exponential backoff with jitter: the one implementation shared by the work queue (per-key
 * failure backoff), watch restarts and leader election, so every retry in the runtime spreads out
 * the same way instead of three subtly different loops.
 */

/** Tuning for {@link Backoff}. Every field has a default. */
export interface BackoffOptions {
  /** Ceiling of the first retry. Default 1 000 ms. */
  baseMs?: number;
  /** Largest ceiling any retry can reach. Default 300 000 ms (5 min). */
  maxMs?: number;
  /** Growth per attempt. Default 2. */
  factor?: number;
  /**
   * Fraction of the ceiling that is randomised, in [0, 1]. 1 is "full jitter" (uniform in
   * [0, ceiling]), the default: retries of many keys that failed together spread over the whole
   * window instead of arriving in waves. 0 gives the plain exponential sequence.
   */
  jitter?: number;
  /** Uniform random source in [0, 1). Default `Math.random`; tests inject a fixed one. */
  random?: () => number;
}

/**
 * Maps an attempt number to a delay.
 *
 * Contract: `ceilingMs(n) = min(maxMs, baseMs * factor^n)` for n >= 0 (non-decreasing, capped),
 * and `delayMs(n)` lies in `[ceilingMs(n) * (1 - jitter), ceilingMs(n)]`.
 */
export class Backoff {
  readonly baseMs: number;
  readonly maxMs: number;
  readonly factor: number;
  readonly jitter: number;
  readonly #random: () => number;

  constructor(options: BackoffOptions = {}) {
    this.baseMs = options.baseMs ?? 1_000;
    this.maxMs = options.maxMs ?? 300_000;
    this.factor = options.factor ?? 2;
    this.jitter = Math.min(1, Math.max(0, options.jitter ?? 1));
    this.#random = options.random ?? Math.random;
    if (!(this.baseMs >= 0 && this.maxMs >= this.baseMs && this.factor >= 1)) {
      throw new RangeError(
        `backoff needs 0 <= baseMs <= maxMs and factor >= 1 (got ${this.baseMs}, ${this.maxMs}, ${this.factor})`,
      );
    }
  }

  /** The un-jittered delay for attempt `n` (0 = first retry). */
  ceilingMs(attempt: number): number {
    // Exponentiation overflows to Infinity long before attempt counts get silly; min() caps it.
    return Math.min(this.maxMs, this.baseMs * this.factor ** Math.max(0, attempt));
  }

  /** A jittered delay for attempt `n` (0 = first retry). */
  delayMs(attempt: number): number {
    const ceiling = this.ceilingMs(attempt);
    return Math.round(ceiling * (1 - this.jitter * this.#random()));
  }
}

/**
 * `periodMs` spread by ±`fraction` (uniform): the drift resync uses it so that resources created
 * together do not all resync at the same instant forever after.
 */
export function spread(periodMs: number, fraction: number, random: () => number = Math.random): number {
  const f = Math.min(1, Math.max(0, fraction));
  return Math.max(0, Math.round(periodMs * (1 + f * (2 * random() - 1))));
}
