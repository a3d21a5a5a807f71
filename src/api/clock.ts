/**
 * The time the client depends on: the runtime's {@link Clock}, of which it reads `now()` and
 * waits with `sleep`. Injected so tests of the rate limit and retry back-off run on a manual
 * clock instead of sleeping; any runtime `Clock` can be passed as is.
 */
import { type Clock, sleepOn } from "../runtime/clock.ts";

/**
 * The part of {@link Clock} the client uses, under the same contract, except that the client
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
