/**
 * Rollout windows: when a change that makes a new revision may go out. Pure, with the instant
 * always given (never read from a clock here), so every answer is a function of its inputs, but
 * for the search's time budget, read on a monotonic counter (`performance.now` unless given).
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
import { Cron, CronDate, CronPattern } from "croner";
import { InvalidSpecError } from "../../crd/errors.ts";
import { type RolloutWindowSpec, WINDOW_KINDS } from "../../crd/rollout-windows-schema.ts";
import { parseDuration } from "../../duration.ts";

export type { RolloutWindowSpec } from "../../crd/rollout-windows-schema.ts";

/** A window ready for arithmetic: its schedule parsed, its duration in milliseconds. */
export interface RolloutWindow {
  kind: RolloutWindowSpec["kind"];
  schedule: string;
  durationMs: number;
  timeZone: string;
  /** Position in the list it came from, for messages (`spec.rolloutWindows[2]`). */
  index: number;
  /**
   * The list it came from, when windows of several lists rule together (a resource's own and its
   * connection's binding ones): a rollout needs every list to allow it. Absent: list 0.
   */
  list?: number;
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
 * schedule that would make croner search far is refused before (see {@link FIRE_HORIZON_DAYS}).
 */
export const UNTIMED_STEPS = 32;

/**
 * How far ahead a schedule must fire at least once (in its zone) to be accepted: eight years, so
 * that 29 February (every four years, and eight across 2100) is a date a schedule may name. A
 * schedule that never fires (30 February, 31 April, only times the clocks skip) would make croner
 * search hundreds of years at each evaluation: 20 to 140 ms each.
 */
export const FIRE_HORIZON_DAYS = 8 * 366;

/** The time zone of a window that names none. */
export const DEFAULT_TIME_ZONE = "UTC";

/**
 * Checks `specs` without keeping their schedules: what every reconcile of a resource with
 * windows does, so that a bad window is reported at once, not when a change comes. `field` names
 * the list in messages (`spec.rolloutWindows`). Throws an {@link InvalidSpecError} naming the
 * item, what is wrong with it and the fix: a schedule croner cannot read, a duration that is not
 * a Go duration (or is zero, or longer than a year), a time zone `Intl` does not know, and, when
 * `now` is given, a schedule that does not fire within {@link FIRE_HORIZON_DAYS} of `now` in its
 * zone. Each verdict is remembered per schedule text (and zone): a few ms the first time, then
 * nothing.
 */
export function checkWindows(specs: readonly RolloutWindowSpec[], field: string, now?: number): void {
  specs.forEach((spec, index) => {
    checkWindow(spec, `${field}[${index}]`, now);
  });
}

/**
 * The windows of `specs`, checked and parsed for arithmetic (see {@link checkWindows} for what
 * it throws). Built when a change would be held, never kept: one parsed schedule holds about
 * 80 KB (croner's table of years), too much to keep for every resource.
 */
export function compileWindows(
  specs: readonly RolloutWindowSpec[],
  field: string,
  list?: number,
): RolloutWindow[] {
  return specs.map((spec, index) => {
    const { durationMs, zone } = checkWindow(spec, `${field}[${index}]`);
    // 5 fields as Argo CD and Kubernetes CronJobs read them; day-of-month and day-of-week are
    // OR-ed as in Vixie cron (croner's default). UTC has no daylight saving: a fixed offset
    // spares croner its `Intl` conversions. Other zones go by their canonical name, so that
    // croner's own cache of formatters holds one per real zone, whatever the case written.
    const where = zone === "UTC" || zone === "Etc/UTC" ? { utcOffset: 0 } : { timezone: zone };
    const cron = new Cron(spec.schedule, { ...where, paused: true, mode: "5-part" });
    const window = { kind: spec.kind, schedule: spec.schedule, durationMs, timeZone: zone, index, cron };
    return list === undefined ? window : { ...window, list };
  });
}

/**
 * A map that keeps its `max` most recently used entries: the memos below are keyed by what a
 * tenant writes, so their size must not follow it.
 */
export class BoundedMemo<K, V> {
  readonly #entries = new Map<K, V>();
  readonly #max: number;
  constructor(max: number) {
    this.#max = max;
  }
  get size(): number {
    return this.#entries.size;
  }
  get(key: K): V | undefined {
    const value = this.#entries.get(key);
    if (value === undefined) return undefined;
    // Re-inserted: a Map iterates in insertion order, so the first key is the least recently used.
    this.#entries.delete(key);
    this.#entries.set(key, value);
    return value;
  }
  delete(key: K): void {
    this.#entries.delete(key);
  }
  set(key: K, value: V): void {
    this.#entries.delete(key);
    this.#entries.set(key, value);
    if (this.#entries.size <= this.#max) return;
    const oldest = this.#entries.keys().next();
    if (!oldest.done) this.#entries.delete(oldest.value);
  }
}

const MAX_MEMO = 1_024;
/**
 * Canonical zone names by the name written, for the names `Intl` knows: building a formatter to
 * ask costs about 400 µs (a tenant can write many spellings of one zone).
 */
const ZONES = new BoundedMemo<string, string>(MAX_MEMO);
/**
 * Schedules croner has read (it costs about 100 µs), by text, and whether each fires within
 * {@link FIRE_HORIZON_DAYS}, by zone and text (it costs a few ms).
 */
const SCHEDULES = new BoundedMemo<string, true>(MAX_MEMO);
const FIRES = new BoundedMemo<string, boolean>(MAX_MEMO);

function checkWindow(
  spec: RolloutWindowSpec,
  field: string,
  now?: number,
): { durationMs: number; zone: string } {
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
  if (!SCHEDULES.get(spec.schedule)) {
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
    SCHEDULES.set(spec.schedule, true);
  }
  if (now !== undefined && !firesSoon(spec.schedule, zone, now))
    throw new InvalidSpecError(
      `${field}.schedule`,
      `${JSON.stringify(spec.schedule)} never starts a window within ${FIRE_HORIZON_DAYS / 366} years in ${zone}: its day of month does not exist in its months (February has 28 or 29 days; April, June, September and November 30), or its times are ones the clocks skip there; use a date that exists, such as "0 0 L 2 *" for the last day of February, or "0 0 28 2 *"`,
    );
  return { durationMs, zone };
}

/** {@link firesWithin}, remembered per zone and schedule text. */
function firesSoon(schedule: string, zone: string, now: number): boolean {
  const key = `${zone} ${schedule}`;
  const known = FIRES.get(key);
  if (known !== undefined) return known;
  const fires = firesWithin(schedule, zone, now);
  FIRES.set(key, fires);
  return fires;
}

const HOUR_MS = 3_600_000;
const DAY_MS = 24 * HOUR_MS;

/**
 * Whether `schedule` (read by croner already) starts a window within {@link FIRE_HORIZON_DAYS}
 * of `now` in `zone`, found without asking croner for a run: croner searches up to 400 years for
 * one that does not exist. The days are matched one by one (a date's day of month, month and day
 * of week, as croner reads them, with `L`, `W` and `#`), at most {@link FIRE_HORIZON_DAYS} of
 * them; a matching day has a start unless the zone's clocks skip every time the schedule names
 * that day, which only a schedule that is not fixed-time can suffer (croner starts a fixed-time
 * one at the first valid time after the gap) and only on the day the clocks go forward. Costs at
 * most a few ms.
 */
export function firesWithin(schedule: string, zone: string, now: number): boolean {
  const text = schedule.trim();
  // croner's nicknames (@yearly to @hourly) are all fixed times on dates every year has.
  if (text.startsWith("@")) return true;
  const [, , dayOfMonth, month, dayOfWeek] = text.split(/\s+/);
  // The date fields alone, at midnight, matched by croner's own rules on one reused date: its
  // fields are set, never converted from an instant (a Date per day costs several times more).
  const days = new Cron(`0 0 ${dayOfMonth} ${month} ${dayOfWeek}`, {
    utcOffset: 0,
    paused: true,
    mode: "5-part",
  });
  const dayPattern = new CronPattern(`0 0 ${dayOfMonth} ${month} ${dayOfWeek}`, undefined, {
    mode: "5-part",
  });
  const pattern = new CronPattern(text, undefined, { mode: "5-part" });
  const utc = zone === "UTC" || zone === "Etc/UTC";
  // From the day before `now` in UTC: no zone's date is more than a day behind it.
  const first = Math.floor(now / DAY_MS) * DAY_MS - DAY_MS;
  const date = new CronDate(new Date(first), 0);
  for (let day = first; day <= first + FIRE_HORIZON_DAYS * DAY_MS; day += DAY_MS) {
    const d = new Date(day);
    // The month first: a schedule of one month tries a twelfth of the days.
    if (!pattern.month[d.getUTCMonth()]) continue;
    date.year = d.getUTCFullYear();
    date.month = d.getUTCMonth();
    date.day = d.getUTCDate();
    date.hour = 0;
    date.minute = 0;
    date.second = 0;
    if (!date.match(dayPattern, days.options)) continue;
    if (utc || pattern.isFixedTime || startsOn(pattern, zone, day)) return true;
  }
  return false;
}

/**
 * Whether some time `pattern` names on the local date `day` (midnight of that date, as UTC ms)
 * exists in `zone`. Every one does unless the clocks go forward that date: then the gap is found
 * (by halving, to the minute) and the times are compared with it.
 */
function startsOn(pattern: CronPattern, zone: string, day: number): boolean {
  // The instants of the local date in any zone (offsets run from -12h to +14h).
  let before = day - 14 * HOUR_MS;
  let after = day + DAY_MS + 12 * HOUR_MS;
  const offsetBefore = zoneOffset(zone, before);
  const offsetAfter = zoneOffset(zone, after);
  // The same offset, or clocks that go back: every local time of the date exists.
  if (offsetAfter <= offsetBefore) return true;
  while (after - before > 60_000) {
    const middle = before + Math.floor((after - before) / 120_000) * 60_000;
    if (zoneOffset(zone, middle) === offsetBefore) before = middle;
    else after = middle;
  }
  // Local times (as UTC ms) in [gapStart, gapEnd) do not exist: the clocks jump over them.
  const gapStart = after + offsetBefore;
  const gapEnd = after + offsetAfter;
  for (let hour = 0; hour < 24; hour++) {
    if (!pattern.hour[hour]) continue;
    for (let minute = 0; minute < 60; minute++) {
      if (!pattern.minute[minute]) continue;
      const local = day + hour * HOUR_MS + minute * 60_000;
      if (local < gapStart || local >= gapEnd) return true;
    }
  }
  return false;
}

/** Formatters by canonical zone, to read a zone's offset (croner keeps its own). */
const OFFSET_FORMATS = new BoundedMemo<string, Intl.DateTimeFormat>(64);

/** The offset of `zone` from UTC at instant `at`, in ms (local = UTC + offset). */
function zoneOffset(zone: string, at: number): number {
  let format = OFFSET_FORMATS.get(zone);
  if (!format) {
    format = new Intl.DateTimeFormat("en-US", {
      timeZone: zone,
      hourCycle: "h23",
      year: "numeric",
      month: "numeric",
      day: "numeric",
      hour: "numeric",
      minute: "numeric",
      second: "numeric",
    });
    OFFSET_FORMATS.set(zone, format);
  }
  const fields: Partial<Record<Intl.DateTimeFormatPartTypes, number>> = {};
  for (const part of format.formatToParts(new Date(at))) fields[part.type] = Number(part.value);
  const { year = 0, month = 1, day = 1, hour = 0, minute = 0, second = 0 } = fields;
  return Date.UTC(year, month - 1, day, hour, minute, second) - Math.floor(at / 1000) * 1000;
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
  ZONES.set(timeZone, zone);
  return zone;
}

/** A reading of a monotonic counter in ms (`performance.now`), for the search's time budget. */
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
  /** The monotonic counter the time is read on. Default `performance.now`. */
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
