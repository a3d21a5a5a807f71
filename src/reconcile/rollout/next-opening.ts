/**
 * The search for the next opening of rollout windows, within its step and time budgets, and the
 * rule it answers to: whether a rollout is allowed at an instant. Pure, with the instant always
 * given (never read from a clock here), so every answer is a function of its inputs, but for the
 * search's time budget, read on the counter its caller gives (`performance.now` unless given; the
 * operator and the CLI give the thread's CPU time, `workMs`).
 *
 * Semantics are Argo CD's sync windows: a window starts at each fire time `s` of its cron
 * schedule (read in its time zone) and is active on `[s, s + duration)`; a rollout is allowed at
 * `t` when no deny window is active at `t` and, if there are allow windows at all, one of them is.
 * Durations are elapsed time, not wall-clock time: a `2h` window that starts at 01:00 on a
 * fall-back night ends at 02:00 local time (two real hours later).
 */
import type { RolloutWindow } from "./rollout-windows.ts";

/** How far ahead {@link nextOpening} looks by default: a year and a day. */
export const OPENING_HORIZON_MS = 366 * 24 * 3_600_000;

/**
 * Most schedule evaluations one {@link nextOpening} may make. One costs croner 10 to 300 µs (time
 * zones go through `Intl`), on the event loop every resource shares, and a tenant writes the
 * schedules: a deny window of a minute every minute would otherwise walk a whole year minute by
 * minute. Real windows need a few dozen. Past it, the search reports how far it got (nothing
 * opens before that) instead of an answer.
 */
export const MAX_OPENING_STEPS = 400;

/**
 * Most time (ms on its counter; the operator's is CPU time) one {@link nextOpening} may take besides
 * its steps: a step's cost depends on the schedule and the zone (a schedule that fires rarely
 * makes croner search far), so a step count alone does not bound the time the event loop is held.
 * Real windows need well under 5 ms; past this, the search reports how far it got, as for steps.
 */
export const OPENING_BUDGET_MS = 40;

/**
 * Evaluations a search makes before its time budget applies: more than real windows need. The
 * first evaluations of a zone in a process are slow (croner and `Intl` load its rules, the code
 * is not compiled yet: 100 ms and more on a busy machine), and a search of real windows cut for
 * that would fail a resource that did nothing wrong. Past them, each costs a few ms at most: a
 * schedule that would make croner search far is refused before (the fire check, `fire-check.ts`).
 */
export const UNTIMED_STEPS = 32;

/** A reading of a counter in ms (the thread's CPU time, `workMs`), for the search's time budget. */
export type Counter = () => number;

/**
 * Counts schedule evaluations against a step budget ({@link MAX_OPENING_STEPS}) and the time
 * they take against a deadline on `counter` ({@link OPENING_BUDGET_MS}).
 */
class Steps {
  used = 0;
  readonly max: number;
  readonly deadline: number;
  readonly counter: Counter;
  constructor(max: number, budgetMs = Number.POSITIVE_INFINITY, counter: Counter = () => 0) {
    this.max = max;
    this.counter = counter;
    this.deadline = counter() + budgetMs;
  }
  /** Why the search must stop: out of steps, out of time, or not (undefined). */
  get spentOn(): "steps" | "time" | undefined {
    if (this.used >= this.max) return "steps";
    if (this.used < UNTIMED_STEPS) return undefined;
    return this.counter() >= this.deadline ? "time" : undefined;
  }
  get spent(): boolean {
    return this.spentOn !== undefined;
  }
  latestStart(w: RolloutWindow, t: number): number | undefined {
    this.used++;
    // The latest fire time at or before t: croner's previous runs are strictly before the
    // reference's second, and fire times are whole minutes, so 1 ms past t includes t itself.
    return w.cron.previousRuns(1, new Date(t + 1))[0]?.getTime();
  }
  nextStart(w: RolloutWindow, t: number): number | undefined {
    this.used++;
    return w.cron.nextRun(new Date(t))?.getTime();
  }
}

/**
 * Whether `w` is active at `t`: some fire time `s` has `s <= t < s + duration`. The latest fire
 * time at or before `t` settles it, since every instance of one window lasts as long.
 */
export function isActive(w: RolloutWindow, t: number): boolean {
  return activeSince(w, t, new Steps(Number.POSITIVE_INFINITY)) !== undefined;
}

function activeSince(w: RolloutWindow, t: number, steps: Steps): number | undefined {
  const start = steps.latestStart(w, t);
  return start !== undefined && t < start + w.durationMs ? start : undefined;
}

/**
 * When `w`, active at `t`, stops being active: the end of the run of overlapping or touching
 * instances that covers `t` (a window longer than its schedule's period covers it until a gap
 * in the schedule). Each step jumps to the latest start within the current end, past every start
 * before it: by about the whole duration when it is many periods long. Undefined when `w` is not
 * active at `t`; the end reached when it passed `limit` (the search's horizon) or the steps ran
 * out (then the search is over anyway).
 */
function coverEnd(w: RolloutWindow, t: number, limit: number, steps: Steps): number | undefined {
  let start = activeSince(w, t, steps);
  if (start === undefined) return undefined;
  let end = start + w.durationMs;
  while (!steps.spent && end <= limit) {
    const latest = steps.latestStart(w, end);
    if (latest === undefined || latest === start) return end;
    start = latest;
    end = latest + w.durationMs;
  }
  return end;
}

/**
 * Whether a change may roll out at `t` under `windows` (no windows: always): no deny window of
 * any list is active, and each list that has allow windows has one active.
 */
export function rolloutAllowed(windows: readonly RolloutWindow[], t: number): boolean {
  if (windows.some((w) => w.kind === "deny" && isActive(w, t))) return false;
  return allowLists(windows).every((allows) => allows.some((w) => isActive(w, t)));
}

/** The allow windows of `windows`, by the list they came from (lists without any left out). */
function allowLists(windows: readonly RolloutWindow[]): RolloutWindow[][] {
  const lists = new Map<number, RolloutWindow[]>();
  for (const w of windows) {
    if (w.kind !== "allow") continue;
    const list = lists.get(w.list ?? 0);
    if (list) list.push(w);
    else lists.set(w.list ?? 0, [w]);
  }
  return [...lists.values()];
}

/**
 * The answer of {@link nextOpening}:
 * - `now`: a rollout is allowed at the instant asked about;
 * - `at`: first allowed at `at` (ms since the epoch), when `window` starts (an allow window) or
 *   ends (a deny window);
 * - `none`: nothing opens before `searchedUntil`, which is always later than the instant asked
 *   about; `exhausted` says which budget stopped the search before its horizon (`steps` or
 *   `time`: it may open later, ask again from `searchedUntil`), false when it reached the horizon.
 */
export type Opening =
  | { kind: "now" }
  | { kind: "at"; at: number; window: RolloutWindow }
  | { kind: "none"; searchedUntil: number; exhausted: false | "steps" | "time" };

/** Bounds of {@link nextOpening}'s search. */
export interface OpeningSearch {
  /** Most schedule evaluations. Default {@link MAX_OPENING_STEPS}. */
  maxSteps?: number;
  /** Most time on `counter`, in ms. Default {@link OPENING_BUDGET_MS}. */
  budgetMs?: number;
  /**
   * The counter the time is read on. Default `performance.now`; the operator's gate and the CLI
   * give the thread's CPU time (`workMs`), which a machine busy elsewhere does not stretch.
   */
  counter?: Counter;
}

/**
 * The earliest instant at or after `from` at which a rollout is allowed under `windows` (of
 * several lists: allowed by each, see {@link rolloutAllowed}).
 *
 * Walks from change point to change point, never minute by minute: inside a deny window it jumps
 * to the end of that window's covering run (the latest such end among the deny windows active);
 * outside every allow window of a list that has some, it jumps to the next start of one (the
 * latest such start among those lists). Each jump passes only instants that cannot be allowed, so
 * the first instant found allowed is the earliest.
 * Out of steps or time, it says how far it got: the budgets are checked after each evaluation
 * once the search has made a jump (one round of the windows at most before it), the time once
 * {@link UNTIMED_STEPS} evaluations are made, so one search holds the event loop for its time
 * budget and one evaluation past it, or for those first evaluations.
 */
export function nextOpening(
  windows: readonly RolloutWindow[],
  from: number,
  {
    maxSteps = MAX_OPENING_STEPS,
    budgetMs = OPENING_BUDGET_MS,
    counter = () => performance.now(),
  }: OpeningSearch = {},
): Opening {
  const steps = new Steps(maxSteps, budgetMs, counter);
  const lists = allowLists(windows);
  const denies = windows.filter((w) => w.kind === "deny");
  const horizon = from + OPENING_HORIZON_MS;
  let t = from;
  let cause: RolloutWindow | undefined;
  // Every step out of the loop on a spent budget comes after a jump, so `searchedUntil` is past
  // `from`: a caller that looks again then makes progress, never asks again at once.
  // Past the first round, a spent budget stops the search between two evaluations: every instant
  // before `t` was passed over as closed, so `t` is how far it got.
  const stop = () => steps.spent && t > from;
  while (t <= horizon) {
    let denyEnd: number | undefined;
    for (const w of denies) {
      if (stop()) return exhausted(t, steps);
      const end = coverEnd(w, t, horizon, steps);
      if (end !== undefined && (denyEnd === undefined || end > denyEnd)) {
        denyEnd = end;
        cause = w;
      }
    }
    if (denyEnd !== undefined) {
      // Denied on [t, denyEnd): the cover reached so far, even when the budget cut it short.
      t = denyEnd;
      if (steps.spent && t <= horizon) return exhausted(t, steps);
      continue;
    }
    // The lists without an allow window active at t: each stays closed until one of its starts.
    const closed: RolloutWindow[][] = [];
    for (const allows of lists) {
      let active = false;
      for (const w of allows) {
        if (active) break;
        if (stop()) return exhausted(t, steps);
        active = activeSince(w, t, steps) !== undefined;
      }
      if (!active) closed.push(allows);
    }
    if (closed.length === 0)
      return t === from || !cause ? { kind: "now" } : { kind: "at", at: t, window: cause };
    let next: number | undefined;
    for (const allows of closed) {
      let first: number | undefined;
      let opener: RolloutWindow | undefined;
      for (const w of allows) {
        if (stop()) return exhausted(t, steps);
        const start = steps.nextStart(w, t);
        if (start !== undefined && (first === undefined || start < first)) {
          first = start;
          opener = w;
        }
      }
      // A list that never opens again closes the search.
      if (first === undefined) {
        next = undefined;
        break;
      }
      if (next === undefined || first > next) {
        next = first;
        cause = opener;
      }
    }
    if (next === undefined) break;
    // No allow window is active on [t, next): the next start is strictly after t.
    t = next;
    if (steps.spent && t <= horizon) return exhausted(t, steps);
  }
  return { kind: "none", searchedUntil: horizon, exhausted: false };
}

/** The search's answer when a budget stopped it at `t`. */
function exhausted(t: number, steps: Steps): Opening {
  return { kind: "none", searchedUntil: t, exhausted: steps.spentOn ?? "steps" };
}
