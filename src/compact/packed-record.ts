/**
 * A record held as JSON text: a listing of 10,000 deployments then costs about its size on the
 * wire, not the several times more of parsed objects. The text leaves out the id and the name,
 * which the holder keeps once anyway (as its key and in its index by name), and the names of the
 * other fields: those are the record's shape, one array for all the records of a holder that
 * have the same fields in the same order ({@link Shapes}). A deployment's field names are more
 * than a third of its JSON. A record with a larger shape than {@link SHAPE_MAX_KEYS} names or
 * {@link SHAPE_MAX_CHARS} characters of them is held as the JSON of the whole object instead, so
 * a server's odd record costs what its text costs. Imports nothing.
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
 * `record` packed (see {@link PackedRecord}), its shape held in `shapes` when it is small enough
 * to share. A record parsed from JSON comes back as it went in: a field JSON leaves out of an
 * object (undefined, a function, a symbol) is left out here too.
 */
export function packRecord<T extends Identified>(record: T, shapes: Shapes): PackedRecord {
  const { id: _id, name, ...rest } = record;
  const fields = rest as Record<string, unknown>;
  const names = Object.keys(fields);
  if (names.length > SHAPE_MAX_KEYS || charsOf(names) > SHAPE_MAX_CHARS)
    return { name, keys: undefined, text: JSON.stringify(rest) };
  const keys: string[] = [];
  const values: unknown[] = [];
  for (const key of names) {
    const value = fields[key];
    if (value === undefined || typeof value === "function" || typeof value === "symbol") continue;
    keys.push(key);
    values.push(value);
  }
  return { name, keys: shapes.of(keys), text: JSON.stringify(values) };
}

function charsOf(names: readonly string[]): number {
  let chars = 0;
  for (const name of names) chars += name.length;
  return chars;
}

/** The record `id` that {@link packRecord} packed into `packed`, parsed anew. */
export function unpackRecord<T extends Identified>(id: string, packed: PackedRecord): T {
  const { keys } = packed;
  if (keys === undefined)
    return { id, name: packed.name, ...(JSON.parse(packed.text) as Omit<T, "id" | "name">) } as T;
  const values = JSON.parse(packed.text) as unknown[];
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
