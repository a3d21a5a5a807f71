/**
 * Instants read in a time zone, with `Intl`: a zone's offset from UTC at an instant (to find the
 * local times its clocks skip) and an instant as a person there reads it (for messages). The zone
 * is a canonical name `Intl` knows (see `checkWindows`).
 */
import { BoundedMemo } from "./bounded-memo.ts";

/** Formatters by canonical zone, to read a zone's offset (croner keeps its own). */
const OFFSET_FORMATS = new BoundedMemo<string, Intl.DateTimeFormat>(64);

/** The offset of `zone` from UTC at instant `at`, in ms (local = UTC + offset). */
export function zoneOffset(zone: string, at: number): number {
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
