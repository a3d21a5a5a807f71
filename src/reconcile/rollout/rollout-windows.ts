/**
 * Rollout windows: when a change that makes a new revision may go out. This file reads them: a
 * window's fields checked (its cron schedule, its duration, its time zone), each verdict
 * remembered, and its schedule parsed by croner for the arithmetic of `next-opening.ts`. Pure,
 * with the instant always given (never read from a clock here).
 *
 * Daylight-saving changes are croner's rules for 5-field schedules: a schedule with one fixed
 * minute and hour (`30 2 * * *`) whose time falls in a spring-forward gap fires at the first valid
 * time after the gap (03:00 in Europe/Berlin on that day), and fires once, at the first
 * occurrence, when its time occurs twice on a fall-back night (01:30 EDT, not 01:30 EST, in
 * America/New_York). A schedule with a wildcard or a step in its minute or hour skips times in a
 * gap and fires on both occurrences of a repeated time.
 */
import { Cron } from "croner";
import { InvalidSpecError } from "../../crd/errors.ts";
import { type RolloutWindowSpec, WINDOW_KINDS } from "../../crd/rollout-windows-schema.ts";
import { parseDuration } from "../../duration.ts";
import { BoundedMemo } from "./bounded-memo.ts";
import { FIRE_HORIZON_DAYS, firesWithin } from "./fire-check.ts";

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
