/**
 * Time as a port: everything in the runtime that waits or measures goes through a {@link Clock},
 * so unit tests drive time by hand (vitest fake timers or a manual clock) instead of sleeping.
 * The service's client takes the part it needs ({@link ApiClock}: it reads `now()` and waits with
 * `sleep`), so tests of the rate limit and retry back-off run on a manual clock too; any `Clock`
 * can be passed as one, and {@link systemApiClock} is its real, monotonic one.
 */

/** Cancels a timer started with {@link Clock.setTimer}; calling it twice, or after it fired, is harmless. */
export type CancelTimer = () => void;

/**
 * Source of time and timers.
 *
 * Contract: `now()` is milliseconds since the epoch and never goes backwards within one clock;
 * `setTimer` runs `fn` once, no earlier than `ms` from now, unless cancelled; `sleep` resolves
 * after `ms`, or rejects with `signal.reason` as soon as `signal` aborts (at once if it already has).
 */
export interface Clock {
  now(): number;
  setTimer(ms: number, fn: () => void): CancelTimer;
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
}

/**
 * The real clock. It looks up `Date.now`/`setTimeout` on every call (never caches them), so
 * `vi.useFakeTimers()` drives it in tests. Timers are `unref`ed: a pending resync or backoff
 * timer must never keep a process alive that has otherwise finished.
 */
export const systemClock: Clock = {
  now: () => Date.now(),
  setTimer(ms, fn) {
    const handle = setTimeout(fn, Math.max(0, ms));
    handle.unref?.();
    return () => clearTimeout(handle);
  },
  sleep: (ms, signal) => sleepOn(systemClock, ms, signal),
};

/**
 * `sleep` built from `setTimer`: resolves after `ms` or rejects with `signal.reason` on abort.
 * Exported so other {@link Clock} implementations (test clocks) get identical abort semantics.
 */
export function sleepOn(clock: Pick<Clock, "setTimer">, ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const onAbort = () => {
      cancel();
      reject(signal?.reason);
    };
    const cancel = clock.setTimer(ms, () => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    });
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/**
 * The part of {@link Clock} the service's client uses, under the same contract, except that the client
 * reads only differences of `now()`: its own clock need not count from the epoch.
 */
export type ApiClock = Pick<Clock, "now" | "sleep">;

/** Node's timers, not `unref`ed: a CLI waiting out a `Retry-After` must stay alive until it can retry. */
const keptTimers: Pick<Clock, "setTimer"> = {
  setTimer(ms, fn) {
    const handle = setTimeout(fn, Math.max(0, ms));
    return () => clearTimeout(handle);
  },
};

/** The client's real clock: monotonic (`performance.now()`, which no wall-clock step moves), kept timers. */
export const systemApiClock: ApiClock = {
  now: () => performance.now(),
  sleep: (ms, signal) => sleepOn(keptTimers, ms, signal),
};
