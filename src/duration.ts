/**
 * Durations as flags, variables, annotations and specs write them: Go's form (`90s`, `5m`,
 * `1h30m`, `1.5h`, `500ms`), read into milliseconds and written back for messages. One home, so
 * that `--listing-deadline`, `spec.rolloutTimeout`, a rollout window's `duration` and
 * `dms.dev/reconcile-interval` are read alike. A leaf: it imports nothing.
 */

const UNIT_MS: Record<string, number> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000 };

/** A Go duration of the units above: one or more amounts, each with its unit. */
export const GO_DURATION = /^(\d+(\.\d+)?(ms|s|m|h))+$/;

/**
 * Parses a Go-style duration (`90s`, `5m`, `1h30m`, `500ms`), as flags, variables and annotations
 * give them. Undefined when malformed or zero (see {@link isZeroDuration} to tell them apart).
 */
export function parseDuration(text: string): number | undefined {
  const trimmed = text.trim();
  if (!GO_DURATION.test(trimmed)) return undefined;
  let total = 0;
  for (const [, amount, , unit] of trimmed.matchAll(/(\d+(\.\d+)?)(ms|s|m|h)/g)) {
    total += Number(amount) * (UNIT_MS[unit ?? "s"] ?? 0);
  }
  return total > 0 ? Math.round(total) : undefined;
}

/**
 * Whether `text` is `0` or a Go duration whose every amount is zero (`0s`, `0m0s`, `0.0h`).
 * {@link parseDuration} cannot say: it answers undefined for zero and for nonsense alike.
 */
export function isZeroDuration(text: string): boolean {
  const trimmed = text.trim();
  if (/^0+$/.test(trimmed)) return true;
  if (!GO_DURATION.test(trimmed)) return false;
  return [...trimmed.matchAll(/\d+(\.\d+)?/g)].every(([amount]) => Number(amount) === 0);
}

/**
 * `ms` as a flag takes it, in its largest whole unit: `1m`, `90s`, `1500ms`, `2h`; `none` when
 * not finite (no bound).
 */
export function flagDuration(ms: number): string {
  if (!Number.isFinite(ms)) return "none";
  if (ms % 3_600_000 === 0) return `${ms / 3_600_000}h`;
  if (ms % 60_000 === 0) return `${ms / 60_000}m`;
  if (ms % 1_000 === 0) return `${ms / 1_000}s`;
  return `${ms}ms`;
}

/** `ms` spelled out in hours, minutes and seconds: `8h30m`, `1m30s`, `0.5s`; `0s` for none. */
export function describeDuration(ms: number): string {
  const h = Math.floor(ms / 3_600_000);
  const m = Math.floor((ms % 3_600_000) / 60_000);
  const rest = ms % 60_000;
  const parts = [h ? `${h}h` : "", m ? `${m}m` : "", rest ? `${rest / 1000}s` : ""].filter(Boolean);
  return parts.join("") || "0s";
}
