/**
 * The annotations users set on a resource to steer the controller, read defensively: a value the
 * controller cannot use is ignored (and reported by the caller), never a crash.
 */
import {
  ANNOTATION_PAUSED,
  ANNOTATION_RECONCILE_INTERVAL,
  ANNOTATION_RECONCILE_REQUESTED_AT,
} from "../crd/schema.ts";

type Annotated = { metadata: { annotations?: Record<string, string> } };

/** True when `dms.dev/paused` is `"true"`. */
export function isPaused(obj: Annotated): boolean {
  return obj.metadata.annotations?.[ANNOTATION_PAUSED] === "true";
}

/** The value of `dms.dev/reconcile-requested-at`, if set. */
export function reconcileRequestedAt(obj: Annotated): string | undefined {
  return obj.metadata.annotations?.[ANNOTATION_RECONCILE_REQUESTED_AT] || undefined;
}

const UNIT_MS: Record<string, number> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000 };
/** Shortest interval honoured: a smaller one would poll the service hot. */
export const MIN_RECONCILE_INTERVAL_MS = 10_000;

/**
 * Parses a Go-style duration (`90s`, `5m`, `1h30m`, `500ms`). Undefined when malformed or zero.
 */
export function parseDuration(text: string): number | undefined {
  const trimmed = text.trim();
  if (!/^(\d+(\.\d+)?(ms|s|m|h))+$/.test(trimmed)) return undefined;
  let total = 0;
  for (const [, amount, , unit] of trimmed.matchAll(/(\d+(\.\d+)?)(ms|s|m|h)/g)) {
    total += Number(amount) * (UNIT_MS[unit ?? "s"] ?? 0);
  }
  return total > 0 ? Math.round(total) : undefined;
}

/**
 * The drift-resync interval asked by `dms.dev/reconcile-interval`, floored at
 * {@link MIN_RECONCILE_INTERVAL_MS}; undefined when absent or malformed.
 */
export function reconcileInterval(obj: Annotated): number | undefined {
  const raw = obj.metadata.annotations?.[ANNOTATION_RECONCILE_INTERVAL];
  if (raw === undefined) return undefined;
  const ms = parseDuration(raw);
  return ms === undefined ? undefined : Math.max(ms, MIN_RECONCILE_INTERVAL_MS);
}
