/**
 * Kubernetes timestamps. `MicroTime` fields (Lease renewTime/acquireTime, Event eventTime and
 * series.lastObservedTime) must carry exactly six fractional digits: the API server parses them
 * with Go's RFC3339Micro layout and rejects JavaScript's millisecond ISO strings.
 */

/** `date` as a MicroTime string, e.g. `2024-05-01T12:00:00.123000Z`. */
export function toMicroTime(date: Date): string {
  return date.toISOString().replace(/\.(\d{3})Z$/, ".$1000Z");
}

/** Parses a Time or MicroTime string; `undefined` for a missing or unparsable value. */
export function parseKubeTime(value: unknown): Date | undefined {
  if (typeof value !== "string" || value === "") return undefined;
  const date = new Date(value);
  return Number.isNaN(date.getTime()) ? undefined : date;
}
