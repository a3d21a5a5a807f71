/**
 * The fire check: whether a schedule starts a window at all in the years ahead, in its zone,
 * answered without asking croner for a run (croner searches up to 400 years for one that does
 * not exist). Pure, with the instant given.
 */
import { Cron, CronDate, CronPattern } from "croner";
import { zoneOffset } from "./zones.ts";

/**
 * How far ahead a schedule must fire at least once (in its zone) to be accepted: eight years, so
 * that 29 February (every four years, and eight across 2100) is a date a schedule may name. A
 * schedule that never fires (30 February, 31 April, only times the clocks skip) would make croner
 * search hundreds of years at each evaluation: 20 to 140 ms each.
 */
export const FIRE_HORIZON_DAYS = 8 * 366;

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
