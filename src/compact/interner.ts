/**
 * One copy of equal strings. `JSON.parse` makes a new string for every value longer than a few
 * characters, so a value most cached objects share (an apiVersion, a tenant id, a condition's
 * reason and message) is otherwise held once per object: at 10,000 Deployment resources, about
 * 2.4 MiB of the watch cache. Imports nothing.
 */

/**
 * A bounded table of strings: {@link Interner.of} gives the copy it holds of an equal string.
 * Once full the table starts again, so values met once (an id, a time) never accumulate, and a
 * shared value is back in it at its next use. Whoever decodes objects holds the instance (the
 * Deployment decoder's is `DEPLOYMENT_STRINGS` in `kube/deployments.ts`).
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
