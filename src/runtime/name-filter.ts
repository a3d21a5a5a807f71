/**
 * A Bloom filter of names: what a holder keeps of names it does not hold, so that it never says
 * a name is absent that it was shown. The service snapshot keeps the names of a listing's
 * deployments that no resource claims in one (`reconcile/service/snapshot-reader.ts` fills it,
 * `snapshot-store.ts` holds it). Imports nothing.
 */

/**
 * A Bloom filter of names: `has` is true for every name added, and for a few others (about 1% when
 * it was sized for the names it holds). Sized after the count of the previous listing of the same
 * connection, between 128 bytes and 128 KiB: about 1.25 bytes per name, where holding the
 * deployment would cost hundreds. Past its size it only answers `true` more often, which costs
 * live lookups, never a wrong "none".
 */
export class NameFilter {
  /** How many names were added. */
  count = 0;
  readonly #bits: Uint32Array;
  readonly #mask: number;

  /** A filter for about `expected` names. */
  constructor(expected: number) {
    const wanted = Math.min(Math.max(expected * 10, MIN_FILTER_BITS), MAX_FILTER_BITS);
    const size = 2 ** Math.ceil(Math.log2(wanted));
    this.#bits = new Uint32Array(size / 32);
    this.#mask = size - 1;
  }

  add(name: string): void {
    this.count += 1;
    const [a, b] = hashes(name);
    for (let i = 0; i < FILTER_HASHES; i++) {
      const bit = (a + i * b) & this.#mask;
      this.#bits[bit >>> 5] = (this.#bits[bit >>> 5] as number) | (1 << (bit & 31));
    }
  }

  has(name: string): boolean {
    if (this.count === 0) return false;
    const [a, b] = hashes(name);
    for (let i = 0; i < FILTER_HASHES; i++) {
      const bit = (a + i * b) & this.#mask;
      if (((this.#bits[bit >>> 5] as number) & (1 << (bit & 31))) === 0) return false;
    }
    return true;
  }
}

const MIN_FILTER_BITS = 1 << 10;
const MAX_FILTER_BITS = 1 << 20;
const FILTER_HASHES = 4;

/** Two 32-bit hashes of `name` (FNV-1a and a multiplicative one), the second odd. */
function hashes(name: string): [number, number] {
  let a = 0x811c9dc5;
  let b = 0x9e3779b9;
  for (let i = 0; i < name.length; i++) {
    const c = name.charCodeAt(i);
    a = Math.imul(a ^ c, 0x01000193);
    b = Math.imul(b ^ c, 0x85ebca6b) ^ (b >>> 13);
  }
  return [a >>> 0, (b | 1) >>> 0];
}
