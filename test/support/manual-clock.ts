/**
 * A clock that moves only when a test says so, for everything that takes a {@link Clock} (the
 * runtime, the reconciler, the service client's rate limit and back-off, the simulator's `now`).
 * Tests then check timeouts, grace periods and listing lag without waiting.
 */
import { type CancelTimer, type Clock, sleepOn, systemClock } from "../../src/runtime/clock.ts";

/** Options of {@link ManualClock}. */
export interface ManualClockOptions {
  /** The first reading of `now()`, ms since the epoch. Default 0. */
  start?: number;
  /**
   * `sleep` moves time forward by its duration and resolves at once (a client waiting out a
   * back-off finishes without the test advancing time). Timers still fire only on `advance`.
   */
  sleepsInstantly?: boolean;
}

/**
 * A {@link Clock} whose time and timers move only on {@link ManualClock.advance}. Timers due at
 * the same instant fire in the order they were set; a timer set by a firing timer fires on a
 * later `advance` if it is due by then.
 */
export class ManualClock implements Clock {
  #now: number;
  readonly #instant: boolean;
  #timers: { at: number; fn: () => void }[] = [];
  /** Every duration `sleep` was called with, in order. */
  readonly sleeps: number[] = [];

  constructor(options: ManualClockOptions = {}) {
    this.#now = options.start ?? 0;
    this.#instant = options.sleepsInstantly ?? false;
  }

  /** Bound, so it can be handed on alone (`startSimulator({ now: clock.now })`). */
  readonly now = (): number => this.#now;

  setTimer(ms: number, fn: () => void): CancelTimer {
    const timer = { at: this.#now + Math.max(0, ms), fn };
    this.#timers.push(timer);
    return () => {
      this.#timers = this.#timers.filter((t) => t !== timer);
    };
  }

  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    this.sleeps.push(ms);
    if (!this.#instant) return sleepOn(this, ms, signal);
    if (signal?.aborted) return Promise.reject(signal.reason);
    this.#now += Math.max(0, ms);
    return Promise.resolve();
  }

  /** Timers (and sleeps) not yet fired or cancelled. */
  get pending(): number {
    return this.#timers.length;
  }

  /** When the next timer (or sleep) is due, or undefined when none is pending. */
  get nextAt(): number | undefined {
    return this.#timers.length === 0 ? undefined : Math.min(...this.#timers.map((t) => t.at));
  }

  /** Moves time forward by `ms` and fires every timer due by then. */
  advance(ms: number): void {
    this.#now += ms;
    const due = this.#timers.filter((t) => t.at <= this.#now);
    this.#timers = this.#timers.filter((t) => t.at > this.#now);
    for (const timer of due) timer.fn();
  }
}

/** The system clock (fake timers drive it in tests), counting the timers set through it. */
export function countingClock(): { clock: Clock; timers: () => number } {
  let timers = 0;
  const clock: Clock = {
    ...systemClock,
    setTimer: (ms, fn) => {
      timers++;
      return systemClock.setTimer(ms, fn);
    },
  };
  return { clock, timers: () => timers };
}
