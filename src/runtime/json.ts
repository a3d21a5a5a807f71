/**
 * Narrowing of parsed JSON (service responses, Kubernetes objects, manifests): one place, so every
 * layer agrees on what counts as an object. Depends on nothing and knows nothing of this product:
 * it sits in the lowest layer, so any module may import it.
 */

/** Whether `value` is a plain JSON object (not null, not an array); narrows it to a record. */
export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
