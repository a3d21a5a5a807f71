/**
 * JSON values, in one place so every layer agrees on them: narrowing of parsed JSON (service
 * responses, Kubernetes objects, manifests: what counts as an object), and their comparison,
 * display and copy, which the planner and every status writer use. Pure; depends on nothing and
 * knows nothing of this product: it sits in the lowest layer, so any module may import it.
 *
 * The service and the API server both speak JSON, so values are compared as JSON values: numbers
 * numerically (`1` and `1.0` are the same number), objects by their keys whatever the key order,
 * lists element by element in order (a Kubernetes list such as `env` is ordered).
 */

/** Whether `value` is a plain JSON object (not null, not an array); narrows it to a record. */
export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/**
 * True when `a` and `b` are the same JSON value. `undefined` and `null` are both "absent" at the
 * top level of a comparison only when the caller says so; here `null` equals only `null`, and an
 * object key whose value is `undefined` counts as missing.
 */
export function jsonEqual(a: unknown, b: unknown): boolean {
  return equal(a, b, (v) => v === undefined);
}

/**
 * True when writing the status `b` over `a` would change nothing (a controller then skips the
 * write), for every kind the operator writes the status of.
 */
export function statusEqual<T extends object>(a: T | undefined, b: T | undefined): boolean {
  return jsonEqual(a ?? {}, b ?? {});
}

/**
 * The fields of a status that differ between `a` and `b` (top-level names; a condition as
 * `conditions.<type>`), for the debug line of a status write: a status written again and again
 * says which field keeps changing.
 */
export function changedStatusFields<T extends { conditions?: readonly { type: string }[] }>(
  a: T | undefined,
  b: T | undefined,
): string[] {
  const x: Record<string, unknown> = a ?? {};
  const y: Record<string, unknown> = b ?? {};
  const changed: string[] = [];
  for (const key of new Set([...Object.keys(x), ...Object.keys(y)])) {
    if (key !== "conditions") {
      if (!jsonEqual(x[key], y[key])) changed.push(key);
      continue;
    }
    const types = new Set([...(a?.conditions ?? []), ...(b?.conditions ?? [])].map((c) => c.type));
    for (const type of types) {
      const before = a?.conditions?.find((c) => c.type === type);
      const after = b?.conditions?.find((c) => c.type === type);
      if (!jsonEqual(before, after)) changed.push(`conditions.${type}`);
    }
  }
  return changed;
}

/**
 * {@link jsonEqual} for values read from the service: an object key whose value is `null` counts
 * as missing too, at any depth, because the service answers `null` for nested fields that are
 * not set (`sidecars[0].env: null` is the same as no `env`). Such a null never causes a PATCH.
 */
export function wireEqual(a: unknown, b: unknown): boolean {
  return equal(a, b, (v) => v === undefined || v === null);
}

function equal(a: unknown, b: unknown, missing: (value: unknown) => boolean): boolean {
  if (a === b) return true;
  if (typeof a === "number" && typeof b === "number") return a === b || (Number.isNaN(a) && Number.isNaN(b));
  if (Array.isArray(a) || Array.isArray(b)) {
    if (!Array.isArray(a) || !Array.isArray(b) || a.length !== b.length) return false;
    return a.every((item, i) => equal(item, b[i], missing));
  }
  if (isRecord(a) && isRecord(b)) {
    const keysA = Object.keys(a).filter((key) => !missing(a[key]));
    const keysB = Object.keys(b).filter((key) => !missing(b[key]));
    if (keysA.length !== keysB.length) return false;
    return keysA.every((key) => Object.hasOwn(b, key) && equal(a[key], b[key], missing));
  }
  return false;
}

/** Longest rendering of one value in a summary line before it is cut with an ellipsis. */
const MAX_VALUE_WIDTH = 120;

/**
 * A short, single-line rendering of a value for a diff summary: strings bare, `(unset)` for
 * `undefined`/`null`, other values as compact JSON, cut at {@link MAX_VALUE_WIDTH} characters.
 * Never call it with a secret value.
 */
export function displayValue(value: unknown): string {
  if (value === undefined || value === null) return "(unset)";
  const text = typeof value === "string" ? value : (JSON.stringify(value) ?? String(value));
  const line = text.replace(/\s+/g, " ");
  return line.length > MAX_VALUE_WIDTH ? `${line.slice(0, MAX_VALUE_WIDTH - 1)}…` : line;
}

/** A deep copy of a JSON value, so a plan never shares mutable state with its inputs. */
export function cloneJson<T>(value: T): T {
  return structuredClone(value);
}
