/**
 * Compact holders, memory techniques of the 10,000-resource budget: a map's value that is one
 * item or a Set ({@link OneOrMany}), and the secondary indexes of a watch cache made of them
 * ({@link CacheIndexes}); a record held as JSON text ({@link packRecord}). Imports nothing.
 */

/*
 * A map's value that is one item or a set of them: the item itself while there is one, a Set
 * from two. Where nearly every key has one item (a claimed name has one resource, a service name
 * one deployment), a Set or an array per key would cost ~100–250 bytes each at 10,000 keys, for
 * nothing.
 *
 * Its main holder is here too: {@link CacheIndexes}, the secondary indexes of a watch cache (index
 * name → value → the keys under it, one key or a Set), which the reflector keeps beside its cache.
 *
 * The helpers take and return the value held under a key (`undefined` for none), for the
 * caller to store back: `map.set(key, addItem(map.get(key), item))`.
 */

/** One item, or a Set of two or more. Items are primitives (a Set cannot be told from an item). */
export type OneOrMany<T extends string | number> = T | Set<T>;

/** `held` with `item` added (the same Set when it is one; no duplicates). */
export function addItem<T extends string | number>(held: OneOrMany<T> | undefined, item: T): OneOrMany<T> {
  if (held === undefined) return item;
  if (held instanceof Set) return held.add(item);
  return held === item ? held : new Set([held, item]);
}

/** `held` without `item`: the last item itself when one is left, `undefined` when none is. */
export function removeItem<T extends string | number>(
  held: OneOrMany<T> | undefined,
  item: T,
): OneOrMany<T> | undefined {
  if (held === undefined || held === item) return undefined;
  if (!(held instanceof Set)) return held;
  held.delete(item);
  return held.size === 1 ? (held.values().next().value as T) : held;
}

/** The items of `held`, in the order they were added (the Set itself when it is one, not a copy). */
export function itemsOf<T extends string | number>(held: OneOrMany<T> | undefined): Iterable<T> {
  return held === undefined ? [] : held instanceof Set ? held : [held];
}

/**
 * The secondary indexes of one cache (client-go's Indexers): index name → value → the keys of the
 * objects under that value.
 *
 * Contract: `update(key, old, next)` is called on every change of the cache (`old` undefined for
 * an add, `next` undefined for a delete); `keys(index, value)` then answers exactly the keys of
 * the cached objects whose indexer gives `value`, in O(1) for any cache size.
 */
export class CacheIndexes<T> {
  readonly #indexers: Record<string, (obj: T) => readonly string[]>;
  /**
   * Index name → value → its keys: the key itself while a value has one (a claimed name nearly
   * always does: a Set per resource would cost ~250 bytes each at 10,000), a Set from two.
   */
  readonly #byIndex = new Map<string, Map<string, OneOrMany<string>>>();

  constructor(indexers: Record<string, (obj: T) => readonly string[]>) {
    this.#indexers = indexers;
    for (const name of Object.keys(indexers)) this.#byIndex.set(name, new Map());
  }

  /** The keys under `value` of `index` (none for an unknown index). */
  keys(index: string, value: string): Iterable<string> {
    return itemsOf(this.#byIndex.get(index)?.get(value));
  }

  /** Moves `key` from the values `old` had to the values `next` has. */
  update(key: string, old: T | undefined, next: T | undefined): void {
    for (const [name, indexer] of Object.entries(this.#indexers)) {
      const values = this.#byIndex.get(name);
      if (!values) continue;
      const before = old ? indexer(old) : [];
      const after = next ? indexer(next) : [];
      for (const value of before) {
        if (after.includes(value)) continue;
        const keys = removeItem(values.get(value), key);
        if (keys === undefined) values.delete(value);
        else values.set(value, keys);
      }
      for (const value of after) values.set(value, addItem(values.get(value), key));
    }
  }
}

/*
 * A record held as JSON text: a listing of 10,000 deployments then costs about its size on the
 * wire, not the several times more of parsed objects. The text leaves out the id and the name,
 * which the holder keeps once anyway (as its key and in its index by name), and the names of the
 * other fields: those are the record's shape, one array for all the records of a holder that
 * have the same fields in the same order ({@link Shapes}). A deployment's field names are more
 * than a third of its JSON. A record with a larger shape than {@link SHAPE_MAX_KEYS} names or
 * {@link SHAPE_MAX_CHARS} characters of them is held as the JSON of the whole object instead, so
 * a server's odd record costs what its text costs.
 *
 * Of the values, a field's value that many records share (a tenant id, a source and its
 * configuration, a status) is held once too, in the holder's table of shared values
 * ({@link SharedValues}), and a value the record repeats (a settled rollout's active revision id
 * is its latest; an untouched deployment's update time its creation time) once in the record:
 * the text then holds a reference of a few characters instead ({@link REF}). That is most of what
 * remained of a deployment's text.
 */

/** What a record needs to be packed: its id and name, kept apart from the text. */
export interface Identified {
  id: string;
  name: string;
}

/**
 * A packed record: its name, and either the names of its other fields in their order (`keys`,
 * shared with the holder's other records of that shape) with the JSON text of an array of their
 * values in that order (`text`), or, for a shape too large to share (`keys` undefined), the JSON
 * text of an object of those fields. Its id is the holder's key.
 */
export interface PackedRecord {
  name: string;
  keys: readonly string[] | undefined;
  text: string;
}

/** How many shapes a {@link Shapes} table holds before it starts again. */
export const SHAPES_KEPT = 32;

/** The most field names a shared shape has; a record with more is held as an object's JSON. */
export const SHAPE_MAX_KEYS = 64;

/** The most characters a shared shape's names have in all; beyond, as for {@link SHAPE_MAX_KEYS}. */
export const SHAPE_MAX_CHARS = 2048;

/**
 * A bounded table of shapes (lists of field names), so that records with the same fields hold
 * one array. The fields come from whoever answered (a tenant's server): the table holds at most
 * {@link SHAPES_KEPT} shapes, each of at most {@link SHAPE_MAX_KEYS} names and
 * {@link SHAPE_MAX_CHARS} characters, and once full it starts again, so odd shapes never
 * accumulate; a record of a forgotten shape keeps its own array, and the next record of that
 * shape is held once again.
 */
export class Shapes {
  readonly #table = new Map<string, readonly string[]>();
  /** The shape met last: a listing's records are mostly of one, found without a lookup. */
  #last: readonly string[] | undefined;

  /** The held array equal to `keys`, holding a frozen copy of `keys` when there is none. */
  of(keys: readonly string[]): readonly string[] {
    if (this.#last !== undefined && sameKeys(this.#last, keys)) return this.#last;
    const id = JSON.stringify(keys);
    let held = this.#table.get(id);
    if (held === undefined) {
      if (this.#table.size >= SHAPES_KEPT) this.#table.clear();
      held = Object.freeze([...keys]);
      this.#table.set(id, held);
    }
    this.#last = held;
    return held;
  }

  /** How many shapes the table holds now. */
  get size(): number {
    return this.#table.size;
  }
}

function sameKeys(a: readonly string[], b: readonly string[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/**
 * The character that starts a reference in a packed text, in place of a field's value: `§3` is
 * the third value of the holder's table of shared values, `§^2` the record's own value at
 * position 2 again. A string value that itself starts with it is held with it doubled (`§§…`).
 * It is one byte in V8's strings (Latin-1) and JSON leaves it as it is.
 */
export const REF = "\u00a7";

/** How many values a {@link SharedValues} table holds at most; it never forgets one. */
export const SHARED_VALUES_KEPT = 64;

/** The longest JSON text of a value the table holds. */
const SHARED_VALUE_MAX_CHARS = 512;

/** Values shorter than this (as JSON) are held as they are: a reference would save little. */
const MIN_SHARED_CHARS = 8;

/** A value becomes shared once this many records held it since the table last started counting. */
const SHARED_AFTER = 4;

/** How many distinct values the table counts before it starts counting again. */
const COUNTED = 1024;

/**
 * A holder's table of the values its records share (by their JSON text): a value is held in it
 * once {@link SHARED_AFTER} records had it, at most {@link SHARED_VALUES_KEPT} values of at most
 * {@link SHARED_VALUE_MAX_CHARS} characters. Records refer to a value by its position, so the
 * table never forgets one: once full, other values stay in their records. The values not yet
 * shared are counted by a 31-bit digest of their text, never held: at most {@link COUNTED} of
 * them (it starts again once full), so values met once (an id, a time) cost nothing lasting. Two
 * values of one digest only count together (one may be shared a little early); what is shared
 * is found by its whole text. The values come from whoever answered (a tenant's server): what
 * the table holds is bounded by its size, not by what it is shown.
 */
export class SharedValues {
  readonly #texts: string[] = [];
  readonly #index = new Map<string, number>();
  readonly #seen = new Map<number, number>();

  /** The position of the value of JSON text `text`, counting one more record that has it; undefined when not shared. */
  refer(text: string): number | undefined {
    const at = this.#index.get(text);
    if (at !== undefined) return at;
    if (this.#texts.length >= SHARED_VALUES_KEPT || text.length < MIN_SHARED_CHARS) return undefined;
    if (text.length > SHARED_VALUE_MAX_CHARS) return undefined;
    const digest = digestOf(text);
    const count = (this.#seen.get(digest) ?? 0) + 1;
    if (count < SHARED_AFTER) {
      if (this.#seen.size >= COUNTED) this.#seen.clear();
      this.#seen.set(digest, count);
      return undefined;
    }
    this.#seen.delete(digest);
    // Full from now on: nothing more is counted.
    if (this.#texts.length + 1 >= SHARED_VALUES_KEPT) this.#seen.clear();
    this.#texts.push(text);
    this.#index.set(text, this.#texts.length - 1);
    return this.#texts.length - 1;
  }

  /** The JSON text of the shared value at `at`. */
  text(at: number): string {
    const text = this.#texts[at];
    if (text === undefined)
      throw new Error(`no shared value at ${at}: the record was packed with another table`);
    return text;
  }

  /** How many values the table holds. */
  get size(): number {
    return this.#texts.length;
  }
}

/** FNV-1a of `text`'s UTF-16 code units, as a 31-bit integer (V8 then holds it in place). */
function digestOf(text: string): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) hash = Math.imul(hash ^ text.charCodeAt(i), 0x01000193);
  return hash >>> 1;
}

/**
 * `record` packed (see {@link PackedRecord}), its shape held in `shapes` when it is small enough
 * to share, the values many records share held in `values` when given (see the packed records' comment above).
 * A record parsed from JSON comes back as it went in: a field JSON leaves out of an object
 * (undefined, a function, a symbol) is left out here too.
 */
export function packRecord<T extends Identified>(
  record: T,
  shapes: Shapes,
  values?: SharedValues,
): PackedRecord {
  const { id: _id, name, ...rest } = record;
  const fields = rest as Record<string, unknown>;
  const names = Object.keys(fields);
  if (names.length > SHAPE_MAX_KEYS || charsOf(names) > SHAPE_MAX_CHARS)
    return { name, keys: undefined, text: JSON.stringify(rest) };
  const keys: string[] = [];
  const texts: string[] = [];
  /** The position of each value text of this record held whole (the first of equal ones). */
  const own = new Map<string, number>();
  for (const key of names) {
    const value = fields[key];
    if (value === undefined || typeof value === "function" || typeof value === "symbol") continue;
    keys.push(key);
    const text = JSON.stringify(typeof value === "string" && value.startsWith(REF) ? REF + value : value);
    const again = text.length >= MIN_SHARED_CHARS ? own.get(text) : undefined;
    const shared = again === undefined ? values?.refer(text) : undefined;
    if (again !== undefined) texts.push(`"${REF}^${again}"`);
    else if (shared !== undefined) texts.push(`"${REF}${shared}"`);
    else {
      if (!own.has(text)) own.set(text, texts.length);
      texts.push(text);
    }
  }
  // One join makes one flat string: brackets added around a joined text would make a rope of
  // three (two more objects of 32 bytes each, for every record).
  if (texts.length === 0) return { name, keys: shapes.of(keys), text: "[]" };
  texts[0] = `[${texts[0]}`;
  texts[texts.length - 1] = `${texts[texts.length - 1]}]`;
  return { name, keys: shapes.of(keys), text: texts.join(",") };
}

function charsOf(names: readonly string[]): number {
  let chars = 0;
  for (const name of names) chars += name.length;
  return chars;
}

/**
 * The record `id` that {@link packRecord} packed into `packed`, parsed anew (with the table of
 * shared values it was packed with, if it was).
 */
export function unpackRecord<T extends Identified>(
  id: string,
  packed: PackedRecord,
  shared?: SharedValues,
): T {
  const { keys } = packed;
  if (keys === undefined)
    return { id, name: packed.name, ...(JSON.parse(packed.text) as Omit<T, "id" | "name">) } as T;
  const values = JSON.parse(packed.text) as unknown[];
  for (let i = 0; i < values.length; i++) {
    const value = values[i];
    if (typeof value !== "string" || !value.startsWith(REF)) continue;
    values[i] = resolved(value, values, shared);
  }
  const out: Record<string, unknown> = { id, name: packed.name };
  for (let i = 0; i < keys.length; i++) {
    const key = keys[i] as string;
    // An own field named __proto__ (JSON.parse makes one) stays a field, as it was.
    if (key === "__proto__")
      Object.defineProperty(out, key, {
        value: values[i],
        writable: true,
        enumerable: true,
        configurable: true,
      });
    else out[key] = values[i];
  }
  return out as T;
}

/** What the reference (or escaped string) `value` of a packed text stands for (see {@link REF}). */
function resolved(value: string, values: readonly unknown[], shared: SharedValues | undefined): unknown {
  const rest = value.slice(REF.length);
  if (rest.startsWith(REF)) return rest;
  if (rest.startsWith("^")) {
    // The record's own earlier value, as a copy of its own: a change to one leaves the other.
    const earlier = values[Number(rest.slice(1))];
    return typeof earlier === "object" && earlier !== null ? structuredClone(earlier) : earlier;
  }
  if (shared === undefined) throw new Error("the record refers to shared values: unpack it with its table");
  const sharedValue = JSON.parse(shared.text(Number(rest))) as unknown;
  // A shared string is held as the record held it: escaped when it starts with REF.
  return typeof sharedValue === "string" && sharedValue.startsWith(REF)
    ? sharedValue.slice(REF.length)
    : sharedValue;
}
