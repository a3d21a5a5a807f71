/** Secondary indexes of a watch cache. */
import { addItem, itemsOf, type OneOrMany, removeItem } from "../runtime/one-or-many.ts";

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
