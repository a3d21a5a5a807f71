/**
 * Rollout windows: when a change that makes a new revision may go out. Pure, with the instant
 * always given (never read from a clock here), so every answer is a function of its inputs.
 *
 * Semantics are Argo CD's sync windows: a window starts at each fire time `s` of its cron
 * schedule (read in its time zone) and is active on `[s, s + duration)`; a rollout is allowed at
 * `t` when no deny window is active at `t` and, if there are allow windows at all, one of them is.
 * Durations are elapsed time, not wall-clock time: a `2h` window that starts at 01:00 on a
 * fall-back night ends at 02:00 local time (two real hours later).
 *
 * Daylight-saving changes are croner's rules for 5-field schedules: a schedule with one fixed
 * minute and hour (`30 2 * * *`) whose time falls in a spring-forward gap fires at the first valid
 * time after the gap (03:00 in Europe/Berlin on that day), and fires once, at the first
 * occurrence, when its time occurs twice on a fall-back night (01:30 EDT, not 01:30 EST, in
 * America/New_York). A schedule with a wildcard or a step in its minute or hour skips times in a
 * gap and fires on both occurrences of a repeated time.
 */
import { Cron } from "croner";
import { parseDuration } from "../config.ts";
import { InvalidSpecError } from "../crd/errors.ts";
import { type RolloutWindowSpec, WINDOW_KINDS } from "../crd/rollout-windows-schema.ts";

export type { RolloutWindowSpec } from "../crd/rollout-windows-schema.ts";

/** A window ready for arithmetic: its schedule parsed, its duration in milliseconds. */
export interface RolloutWindow {
  kind: RolloutWindowSpec["kind"];
  schedule: string;
  durationMs: number;
  timeZone: string;
  /** Position in the list it came from, for messages (`spec.rolloutWindows[2]`). */
  index: number;
  cron: Cron;
}

/** Longest window: a year and a day. A longer one is always on, which `kind` says more plainly. */
export const MAX_WINDOW_DURATION_MS = 366 * 24 * 3_600_000;

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

/** The time zone of a window that names none. */
export const DEFAULT_TIME_ZONE = "UTC";

/**
 * Checks `specs` without building their schedules: what every reconcile of a resource with
 * windows does, so that a bad window is reported at once, not when a change comes. `field` names
 * the list in messages (`spec.rolloutWindows`). Throws an {@link InvalidSpecError} naming the
 * item, what is wrong with it and the fix: a schedule croner cannot read, a duration that is not
 * a Go duration (or is zero, or longer than a year), a time zone `Intl` does not know.
 */
export function checkWindows(specs: readonly RolloutWindowSpec[], field: string): void {
  specs.forEach((spec, index) => {
    checkWindow(spec, `${field}[${index}]`);
  });
}

/**
 * The windows of `specs`, checked and parsed for arithmetic (see {@link checkWindows} for what
 * it throws). Built when a change would be held, never kept: one parsed schedule holds about
 * 80 KB (croner's table of years), too much to keep for every resource.
 */
export function compileWindows(specs: readonly RolloutWindowSpec[], field: string): RolloutWindow[] {
  return specs.map((spec, index) => {
    const { durationMs, zone } = checkWindow(spec, `${field}[${index}]`);
    // 5 fields as Argo CD and Kubernetes CronJobs read them; day-of-month and day-of-week are
    // OR-ed as in Vixie cron (croner's default). UTC has no daylight saving: a fixed offset
    // spares croner its `Intl` conversions. Other zones go by their canonical name, so that
    // croner's own cache of formatters holds one per real zone, whatever the case written.
    const where = zone === "UTC" || zone === "Etc/UTC" ? { utcOffset: 0 } : { timezone: zone };
    const cron = new Cron(spec.schedule, { ...where, paused: true, mode: "5-part" });
    return { kind: spec.kind, schedule: spec.schedule, durationMs, timeZone: zone, index, cron };
  });
}

/**
 * Canonical zone names by the name written, for the names `Intl` knows: building a formatter to
 * ask costs about 400 µs. Cleared when full (a tenant can write many spellings of one zone).
 */
const ZONES = new Map<string, string>();
/** Schedules croner has read (it costs about 100 µs); cleared when full. */
const SCHEDULES = new Set<string>();
const MAX_MEMO = 1_024;

function checkWindow(spec: RolloutWindowSpec, field: string): { durationMs: number; zone: string } {
  if (!(WINDOW_KINDS as readonly string[]).includes(spec.kind))
    throw new InvalidSpecError(
      `${field}.kind`,
      `${JSON.stringify(spec.kind)} is not a window kind: use allow or deny`,
    );
  const zone = canonicalZone(spec.timeZone ?? DEFAULT_TIME_ZONE, `${field}.timeZone`);
  const durationMs = parseDuration(spec.duration);
  if (durationMs === undefined || durationMs > MAX_WINDOW_DURATION_MS)
    throw new InvalidSpecError(
      `${field}.duration`,
      `${JSON.stringify(spec.duration)} is not a duration between 1ms and 8784h (366 days): use a Go duration such as 1h, 90m or 8h30m`,
    );
  if (!SCHEDULES.has(spec.schedule)) {
    try {
      new Cron(spec.schedule, { utcOffset: 0, paused: true, mode: "5-part" });
    } catch (error) {
      const detail = error instanceof Error ? error.message : String(error);
      throw new InvalidSpecError(
        `${field}.schedule`,
        `${JSON.stringify(spec.schedule)} is not a cron schedule (${detail}): use 5 fields, minute hour day-of-month month day-of-week, such as "0 22 * * 1-5", or @daily`,
        { cause: error },
      );
    }
    if (SCHEDULES.size >= MAX_MEMO) SCHEDULES.clear();
    SCHEDULES.add(spec.schedule);
  }
  return { durationMs, zone };
}

function canonicalZone(timeZone: string, field: string): string {
  const known = ZONES.get(timeZone);
  if (known) return known;
  let zone: string;
  try {
    zone = new Intl.DateTimeFormat("en", { timeZone }).resolvedOptions().timeZone;
  } catch (error) {
    throw new InvalidSpecError(
      field,
      `${JSON.stringify(timeZone)} is not an IANA time zone this operator knows: use a name such as Europe/Berlin, America/New_York or UTC (leave it out for UTC)`,
      { cause: error },
    );
  }
  if (ZONES.size >= MAX_MEMO) ZONES.clear();
  ZONES.set(timeZone, zone);
  return zone;
}

/** Counts schedule evaluations against {@link MAX_OPENING_STEPS}. */
class Steps {
  used = 0;
  readonly max: number;
  constructor(max: number) {
    this.max = max;
  }
  get spent(): boolean {
    return this.used >= this.max;
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

/** Whether a change may roll out at `t` under `windows` (no windows: always). */
export function rolloutAllowed(windows: readonly RolloutWindow[], t: number): boolean {
  const allows = windows.filter((w) => w.kind === "allow");
  if (windows.some((w) => w.kind === "deny" && isActive(w, t))) return false;
  return allows.length === 0 || allows.some((w) => isActive(w, t));
}

/**
 * The answer of {@link nextOpening}:
 * - `now`: a rollout is allowed at the instant asked about;
 * - `at`: first allowed at `at` (ms since the epoch), when `window` starts (an allow window) or
 *   ends (a deny window);
 * - `none`: nothing opens before `searchedUntil`, which is always later than the instant asked
 *   about; `exhausted` when the search stopped at its step budget before its horizon (it may open
 *   later: ask again from `searchedUntil`), rather than at the horizon.
 */
export type Opening =
  | { kind: "now" }
  | { kind: "at"; at: number; window: RolloutWindow }
  | { kind: "none"; searchedUntil: number; exhausted: boolean };

/** Bounds of {@link nextOpening}'s search. */
export interface OpeningSearch {
  /** How far past `from` to look. Default {@link OPENING_HORIZON_MS}. */
  horizonMs?: number;
  /** Most schedule evaluations. Default {@link MAX_OPENING_STEPS}. */
  maxSteps?: number;
}

/**
 * The earliest instant at or after `from` at which a rollout is allowed under `windows`.
 *
 * Walks from change point to change point, never minute by minute: inside a deny window it jumps
 * to the end of that window's covering run (the latest such end among the deny windows active);
 * outside every allow window (when there are some) it jumps to the next start of one. Each jump
 * passes only instants that cannot be allowed, so the first instant found allowed is the earliest.
 */
export function nextOpening(
  windows: readonly RolloutWindow[],
  from: number,
  { horizonMs = OPENING_HORIZON_MS, maxSteps = MAX_OPENING_STEPS }: OpeningSearch = {},
): Opening {
  const steps = new Steps(maxSteps);
  const allows = windows.filter((w) => w.kind === "allow");
  const denies = windows.filter((w) => w.kind === "deny");
  const horizon = from + horizonMs;
  let t = from;
  let cause: RolloutWindow | undefined;
  // Every step out of the loop on a spent budget comes after a jump, so `searchedUntil` is past
  // `from`: a caller that looks again then makes progress, never asks again at once.
  while (t <= horizon) {
    let denyEnd: number | undefined;
    for (const w of denies) {
      const end = coverEnd(w, t, horizon, steps);
      if (end !== undefined && (denyEnd === undefined || end > denyEnd)) {
        denyEnd = end;
        cause = w;
      }
    }
    if (denyEnd !== undefined) {
      // Denied on [t, denyEnd): the cover reached so far, even when the budget cut it short.
      t = denyEnd;
      if (steps.spent && t <= horizon) return { kind: "none", searchedUntil: t, exhausted: true };
      continue;
    }
    if (allows.length === 0 || allows.some((w) => activeSince(w, t, steps) !== undefined))
      return t === from || !cause ? { kind: "now" } : { kind: "at", at: t, window: cause };
    let next: number | undefined;
    for (const w of allows) {
      const start = steps.nextStart(w, t);
      if (start !== undefined && (next === undefined || start < next)) {
        next = start;
        cause = w;
      }
    }
    if (next === undefined) break;
    // No allow window is active on [t, next): the next start is strictly after t.
    t = next;
    if (steps.spent && t <= horizon) return { kind: "none", searchedUntil: t, exhausted: true };
  }
  return { kind: "none", searchedUntil: horizon, exhausted: false };
}

/**
 * `at` as a person in `timeZone` reads it, offset included so that a time repeated on a
 * fall-back night is unambiguous: `2026-11-24 22:00 Europe/Berlin (GMT+01:00)`.
 */
export function localTime(at: number, timeZone: string): string {
  const parts = new Intl.DateTimeFormat("en-US", {
    timeZone,
    year: "numeric",
    month: "2-digit",
    day: "2-digit",
    hour: "2-digit",
    minute: "2-digit",
    hourCycle: "h23",
    timeZoneName: "longOffset",
  }).formatToParts(new Date(at));
  const part = (type: Intl.DateTimeFormatPartTypes) => parts.find((p) => p.type === type)?.value ?? "";
  return `${part("year")}-${part("month")}-${part("day")} ${part("hour")}:${part("minute")} ${timeZone} (${part("timeZoneName")})`;
}
