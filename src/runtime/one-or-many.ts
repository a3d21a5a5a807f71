/**
 * A map's value that is one item or a set of them: the item itself while there is one, a Set
 * from two. Where nearly every key has one item (a claimed name has one resource, a service name
 * one deployment), a Set or an array per key would cost ~100–250 bytes each at 10,000 keys, for
 * nothing. Imports nothing.
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

/** Whether `held` has `item`. */
export function hasItem<T extends string | number>(held: OneOrMany<T> | undefined, item: T): boolean {
  return held instanceof Set ? held.has(item) : held === item;
}

/** The items of `held`, in the order they were added (the Set itself when it is one, not a copy). */
export function itemsOf<T extends string | number>(held: OneOrMany<T> | undefined): Iterable<T> {
  return held === undefined ? [] : held instanceof Set ? held : [held];
}

/** How many items `held` has. */
export function countOf<T extends string | number>(held: OneOrMany<T> | undefined): number {
  return held === undefined ? 0 : held instanceof Set ? held.size : 1;
}
