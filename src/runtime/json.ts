/**
 * JSON values, in one place so every layer agrees on them: narrowing of parsed JSON (service
 * responses, Kubernetes objects, manifests: what counts as an object), and their comparison,
 * display and copy, which the planner and every status writer use; and one copy of equal values,
 * a memory technique of the 10,000-resource budget. Pure; depends on nothing and knows nothing of
 * this product: it sits in the lowest layer, so any module may import it.
 *
 * The service and the API server both speak JSON, so values are compared as JSON values: numbers
 * numerically (`1` and `1.0` are the same number), objects by their keys whatever the key order,
 * lists element by element in order (a Kubernetes list such as `env` is ordered).
 *
 * One copy of equal values: `JSON.parse` makes a new string for every value longer than a few
 * characters, so a value most cached objects share (an apiVersion, a tenant id, a condition's
 * reason and message) is otherwise held once per object: at 10,000 Deployment resources, about
 * 2.4 MiB of the watch cache ({@link Interner}, {@link SharedObjects}, {@link keepEqualStrings}).
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

/**
 * A bounded table of strings: {@link Interner.of} gives the copy it holds of an equal string.
 * Once full the table starts again, so values met once (an id, a time) never accumulate, and a
 * shared value is back in it at its next use. Whoever decodes objects holds the instance (the
 * Deployment decoder's is `DEPLOYMENT_STRINGS` in `kube/object.ts`).
 */
export class Interner {
  readonly #table = new Map<string, string>();
  readonly #max: number;

  /** A table of at most `max` strings. */
  constructor(max: number) {
    this.#max = max;
  }

  /** The held string equal to `value`, holding `value` when there is none. */
  of(value: string): string {
    const known = this.#table.get(value);
    if (known !== undefined) return known;
    if (this.#table.size >= this.#max) this.#table.clear();
    this.#table.set(value, value);
    return value;
  }

  /** How many strings the table holds now. */
  get size(): number {
    return this.#table.size;
  }
}

/**
 * Gives each of `fields` of `obj` that holds a string the interner's copy (in place), and
 * returns `obj`. Fields absent or of another type are left as they are.
 */
export function internFields<T extends object>(
  interner: Interner,
  obj: T,
  fields: ReadonlyArray<keyof T & string>,
): T {
  const record = obj as Record<string, unknown>;
  for (const field of fields) {
    const value = record[field];
    if (typeof value === "string") record[field] = interner.of(value);
  }
  return obj;
}

/**
 * Makes field `copy` of `obj` hold the very string of field `source` when the two are equal
 * strings (in place): two fields parsed from JSON are two copies, however often they are equal
 * (a settled rollout's active revision id is its latest). Nothing changes otherwise; an absent
 * field stays absent.
 */
export function shareEqualString<T extends object>(
  obj: T,
  source: keyof T & string,
  copy: keyof T & string,
): void {
  const record = obj as Record<string, unknown>;
  const value = record[source];
  if (typeof value === "string" && record[copy] === value) record[copy] = value;
}

/**
 * Makes field `field` of `obj` hold the very string of the first of `sources` equal to it (in
 * place): a value the object repeats elsewhere (a live revision's image, which the spec names
 * too) is then held once. Nothing changes when none is equal or the field holds no string.
 */
export function shareFrom<T extends object>(
  obj: T,
  field: keyof T & string,
  sources: readonly unknown[],
): void {
  const record = obj as Record<string, unknown>;
  const value = record[field];
  if (typeof value !== "string") return;
  const same = sources.find((s) => s === value);
  if (same !== undefined) record[field] = same;
}

/** The longest JSON text of a value {@link SharedObjects} holds; a larger value stays its own. */
export const SHARED_OBJECT_MAX_CHARS = 512;

/**
 * One frozen copy of equal JSON objects and arrays, as {@link Interner} is of strings: what many
 * cached objects hold alike (a source configuration, a settled condition of the same second and
 * generation, the operator's own finalizer list) is then held once, not once per resource: an
 * object costs 24 bytes and 8 a field before its strings. Values are compared by their JSON text,
 * so only values parsed from JSON (plain objects, arrays, strings, numbers, booleans, null)
 * belong here. A held value is a deep copy of the first one met, frozen, so that no holder can
 * change it under the others (a write to it throws); the value given is never modified. What in
 * it is frozen all the way down already (a value held before: a list of held conditions) is
 * held as it is, not copied. Bounded
 * as {@link Interner} is, by count and by the length of a value's text.
 */
export class SharedObjects {
  readonly #table = new Map<string, object>();
  readonly #max: number;

  /** A table of at most `max` values. */
  constructor(max: number) {
    this.#max = max;
  }

  /** The held value equal to `value` (a frozen copy of it when there was none); `value` itself when too large. */
  of<T extends object>(value: T): T {
    const text = JSON.stringify(value);
    if (text === undefined || text.length > SHARED_OBJECT_MAX_CHARS) return value;
    const known = this.#table.get(text);
    if (known !== undefined) return known as T;
    if (this.#table.size >= this.#max) this.#table.clear();
    const held = frozenCopy(value);
    this.#table.set(text, held);
    return held;
  }

  /** How many values the table holds now. */
  get size(): number {
    return this.#table.size;
  }
}

/**
 * A deep, frozen copy of the JSON value `value`; its strings are the same strings. A part frozen
 * all the way down is that part itself.
 */
function frozenCopy<T>(value: T): T {
  if (typeof value !== "object" || value === null) return value;
  // What is frozen all the way down (a value held already) is shared as it is, not copied.
  if (Array.isArray(value)) {
    const items = value.map(frozenCopy);
    return (
      Object.isFrozen(value) && items.every((item, i) => item === value[i]) ? value : Object.freeze(items)
    ) as T;
  }
  // A spread keeps the object's layout (its fields in the object itself, as JSON.parse made it)
  // and an own field named __proto__ as a field; a field set again keeps its place.
  const copy = { ...value } as Record<string, unknown>;
  let same = Object.isFrozen(value);
  for (const key of Object.keys(copy)) {
    const field = copy[key];
    if (typeof field !== "object" || field === null) continue;
    const held = frozenCopy(field);
    if (held !== field) same = false;
    copy[key] = held;
  }
  return (same ? value : Object.freeze(copy)) as T;
}

/**
 * Makes `next` hold the very strings of `previous` wherever it holds a string equal to one of
 * `previous` (a field of an object, an item of an array, at any depth, wherever it is in either),
 * in place. A cache that replaces an object by its next version then keeps the strings it already
 * held (a name, a uid, an id): whatever else still holds them from the earlier version (an index's
 * key, the event recorder's bucket of that uid) holds the cache's copy rather than one of its own,
 * the next version's copies die young, and the strings an object repeats (a revision id in four
 * places, an image in the spec and the live revision) stay one string even where the earlier
 * version had only some of them. Nothing changes that a reader could see (strings are compared
 * by value); frozen objects (shared ones, {@link SharedObjects}) are left as they are.
 */
export function keepEqualStrings(next: unknown, previous: unknown): void {
  const held = new Map<string, string>();
  stringsOf(previous, held);
  if (held.size > 0) heldStrings(next, held);
}

function stringsOf(value: unknown, into: Map<string, string>): void {
  if (typeof value === "string") {
    if (!into.has(value)) into.set(value, value);
  } else if (Array.isArray(value)) for (const item of value) stringsOf(item, into);
  else if (typeof value === "object" && value !== null)
    for (const key of Object.keys(value)) stringsOf((value as Record<string, unknown>)[key], into);
}

function heldStrings(value: unknown, held: ReadonlyMap<string, string>): void {
  if (typeof value !== "object" || value === null || Object.isFrozen(value)) return;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const item: unknown = value[i];
      if (typeof item !== "string") heldStrings(item, held);
      else if (held.has(item)) value[i] = held.get(item);
    }
    return;
  }
  const fields = value as Record<string, unknown>;
  for (const key of Object.keys(fields)) {
    // A field named __proto__ (JSON.parse makes one) is a setter's name on assignment: left alone.
    if (key === "__proto__") continue;
    const item = fields[key];
    if (typeof item !== "string") heldStrings(item, held);
    else if (held.has(item)) fields[key] = held.get(item);
  }
}

/**
 * `text` as a string of its own. V8 keeps a cut of a long string (`slice`, `substring`) as a view
 * into the whole: a 64-character label cut from a service's 8 MiB answer kept the 8 MiB for as
 * long as the label lived. A copy holds only its own characters (each UTF-16 unit as it is, a
 * lone surrogate too). For a cut of text from outside that is kept.
 */
export function ownCopy(text: string): string {
  return Buffer.from(text, "utf16le").toString("utf16le");
}
