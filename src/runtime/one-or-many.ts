/**
 * A map's value that is one item or a set of them: the item itself while there is one, a Set
 * from two. Where nearly every key has one item (a claimed name has one resource, a service name
 * one deployment), a Set or an array per key would cost ~100–250 bytes each at 10,000 keys, for
 * nothing. Imports nothing.
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
