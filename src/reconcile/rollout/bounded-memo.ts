/**
 * A map that keeps its `max` most recently used entries: the memos of rollout windows (verdicts
 * on schedules and zones, the gate's answers) are keyed by what a tenant writes, so their size
 * must not follow it.
 */
export class BoundedMemo<K, V> {
  readonly #entries = new Map<K, V>();
  readonly #max: number;
  constructor(max: number) {
    this.#max = max;
  }
  get size(): number {
    return this.#entries.size;
  }
  get(key: K): V | undefined {
    const value = this.#entries.get(key);
    if (value === undefined) return undefined;
    // Re-inserted: a Map iterates in insertion order, so the first key is the least recently used.
    this.#entries.delete(key);
    this.#entries.set(key, value);
    return value;
  }
  delete(key: K): void {
    this.#entries.delete(key);
  }
  set(key: K, value: V): void {
    this.#entries.delete(key);
    this.#entries.set(key, value);
    if (this.#entries.size <= this.#max) return;
    const oldest = this.#entries.keys().next();
    if (!oldest.done) this.#entries.delete(oldest.value);
  }
}
