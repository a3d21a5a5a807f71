/**
 * The time the client depends on: reading a monotonic "now" and waiting. Injected so tests of
 * the rate limit and retry back-off run on a manual clock instead of sleeping. Structurally a
 * subset of the runtime's `Clock`, which can be passed as is.
 */
import { setTimeout as delay } from "node:timers/promises";

/**
 * Contract: `now()` is in milliseconds and never goes backwards; `sleep(ms, signal)` resolves
 * after `ms` or rejects with `signal.reason` once `signal` aborts (at once if it already has).
 */
export interface ApiClock {
  now(): number;
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
}

/**
 * The real clock: `performance.now()` and Node's timers. Timers are not `unref`ed on purpose: a
 * CLI waiting out a `Retry-After` must stay alive until it can retry.
 */
export const systemApiClock: ApiClock = {
  now: () => performance.now(),
  async sleep(ms, signal) {
    if (signal?.aborted) throw signal.reason;
    try {
      await delay(Math.max(0, ms), undefined, signal ? { signal } : undefined);
    } catch (error) {
      // timers/promises rejects with its own AbortError; the contract is the signal's reason.
      if (signal?.aborted) throw signal.reason;
      throw error;
    }
  },
};
