/**
 * The annotations users set on a resource to steer the controller, read defensively: a value the
 * controller cannot use is ignored (and reported by the caller), never a crash.
 */
import {
  ANNOTATION_PAUSED,
  ANNOTATION_RECONCILE_INTERVAL,
  ANNOTATION_RECONCILE_REQUESTED_AT,
  ANNOTATION_ROLLOUT_NOW,
} from "../crd/schema.ts";
import { parseDuration } from "../duration.ts";

type Annotated = { metadata: { annotations?: Record<string, string> } };

/** True when `dms.dev/paused` is `"true"`. */
export function isPaused(obj: Annotated): boolean {
  return obj.metadata.annotations?.[ANNOTATION_PAUSED] === "true";
}

/** The value of `dms.dev/reconcile-requested-at`, if set. */
export function reconcileRequestedAt(obj: Annotated): string | undefined {
  return obj.metadata.annotations?.[ANNOTATION_RECONCILE_REQUESTED_AT] || undefined;
}

/** The value of `dms.dev/rollout-now`, if set. */
export function rolloutNow(obj: Annotated): string | undefined {
  return obj.metadata.annotations?.[ANNOTATION_ROLLOUT_NOW] || undefined;
}

/** Shortest interval honoured: a smaller one would poll the service hot. */
export const MIN_RECONCILE_INTERVAL_MS = 10_000;

/**
 * The check interval asked by `dms.dev/reconcile-interval`, floored at
 * {@link MIN_RECONCILE_INTERVAL_MS}; undefined when absent or malformed. The reconciler returns it
 * with `Action.done` (the controller reconciles the object again after it) and, at that
 * reconcile, asks the service about the object's deployment rather than reading the periodic
 * pass's listing, which may be a whole `--resync-period` old.
 */
export function reconcileInterval(obj: Annotated): number | undefined {
  const raw = obj.metadata.annotations?.[ANNOTATION_RECONCILE_INTERVAL];
  if (raw === undefined) return undefined;
  const ms = parseDuration(raw);
  return ms === undefined ? undefined : Math.max(ms, MIN_RECONCILE_INTERVAL_MS);
}
