/**
 * The annotations users set on a resource to steer the controller, read defensively: a value the
 * controller cannot use is ignored (and reported by the caller), never a crash.
 */
import { createHash } from "node:crypto";
import { unprintableIn } from "../api/printable.ts";
import {
  ANNOTATION_PAUSED,
  ANNOTATION_REBUILD_REQUESTED_AT,
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
  const value = obj.metadata.annotations?.[ANNOTATION_RECONCILE_REQUESTED_AT];
  return value ? keptAnnotationValue(value) : undefined;
}

/**
 * The longest annotation value kept as given. Every value the operator acts on is short (`true`,
 * a duration, a timestamp or a token); a longer one is kept as its digest ({@link keptAnnotationValue}).
 */
export const MAX_ANNOTATION_VALUE = 1024;

/**
 * An annotation's value as the operator keeps it (in its cache, and in the status fields that
 * record a value acted on): as given up to {@link MAX_ANNOTATION_VALUE} characters and within
 * the printable rule, else `sha256:<hex>`, still a different value when the original changes,
 * never `true` or a duration. A value the status could not record as given would otherwise be
 * left unset there (the status sink), and so acted on again at every reconcile. The same whether applied once or twice (a digest is short).
 */
export function keptAnnotationValue(value: string): string {
  return value.length <= MAX_ANNOTATION_VALUE && unprintableIn(value) === undefined
    ? value
    : `sha256:${createHash("sha256").update(value).digest("hex")}`;
}

/**
 * The value of `dms.dev/rollout-now`, if set, as kept ({@link keptAnnotationValue}): what
 * `status.lastHandledRolloutNow` holds once it was acted on, whether `obj` came from the cache or
 * from a file.
 */
export function rolloutNow(obj: Annotated): string | undefined {
  const value = obj.metadata.annotations?.[ANNOTATION_ROLLOUT_NOW];
  return value ? keptAnnotationValue(value) : undefined;
}

/**
 * The value of `dms.dev/rebuild-requested-at`, if set, as kept ({@link keptAnnotationValue}): a
 * value other than `status.lastHandledRebuildAt` asks for one new revision.
 */
export function rebuildRequestedAt(obj: Annotated): string | undefined {
  const value = obj.metadata.annotations?.[ANNOTATION_REBUILD_REQUESTED_AT];
  return value ? keptAnnotationValue(value) : undefined;
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
