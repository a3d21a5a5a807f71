/**
 * A Bloom filter of names: what a holder keeps of names it does not hold, so that it never says
 * a name is absent that it was shown. The service snapshot keeps the names of a listing's
 * deployments that no resource claims in one (`reconcile/service/snapshot-reader.ts` fills it,
 * `snapshot-store.ts` holds it). Imports nothing.
 */

/**
 * A Bloom filter of names: `has` is true for every name added, and for a few others (about 1% for
 * each of its layers that is full). Its first layer is sized after the count of the previous
 * listing of the same connection; once a layer holds as many names as it was sized for, the next
 * ones go to a new layer {@link LAYER_GROWTH} times the names so far (a scalable Bloom filter), so
 * a listing many times longer than the last one, a connection being filled, still gets its few
 * percent rather than a filter that says yes to nearly every name (96.6 % for 10,000 names in a
 * filter sized for 600). About 1.25 bytes per name (up to ~2 while it grows), where holding the
 * deployment would cost hundreds; between 128 bytes and 128 KiB in all. Past that it only answers
 * `true` more often, which costs live lookups, never a wrong "none".
 */
export class NameFilter {
  /** How many names were added. */
  count = 0;
  readonly #layers: Layer[] = [];
  /** Bits of every layer together (at most {@link MAX_FILTER_BITS}). */
  #bits = 0;

  /** A filter for about `expected` names (it grows past them). */
  constructor(expected: number) {
    this.#grow(expected);
  }

  /** Bytes its layers hold. */
  get bytes(): number {
    return this.#bits / 8;
  }

  add(name: string): void {
    this.count += 1;
    let top = this.#layers[this.#layers.length - 1] as Layer;
    if (top.count >= top.capacity && this.#grow(LAYER_GROWTH * this.count))
      top = this.#layers[this.#layers.length - 1] as Layer;
    const [a, b] = hashes(name);
    top.add(a, b);
  }

  has(name: string): boolean {
    if (this.count === 0) return false;
    const [a, b] = hashes(name);
    for (const layer of this.#layers) if (layer.count > 0 && layer.has(a, b)) return true;
    return false;
  }

  /**
   * Adds a layer for about `expected` names, within what is left of {@link MAX_FILTER_BITS}:
   * false when too little is left for one of {@link MIN_FILTER_BITS} (the last layer fills on).
   */
  #grow(expected: number): boolean {
    const left = MAX_FILTER_BITS - this.#bits;
    if (left < MIN_FILTER_BITS) return false;
    // Whole 32-bit words, never past what is left.
    const wanted = Math.min(Math.max(expected * BITS_PER_NAME, MIN_FILTER_BITS), left);
    const size = Math.ceil(wanted / 32) * 32;
    this.#layers.push(new Layer(size));
    this.#bits += size;
    return true;
  }
}

/** One Bloom filter of a {@link NameFilter}, of `size` bits (whole 32-bit words). */
class Layer {
  readonly bits: Uint32Array;
  readonly size: number;
  /** Names it was sized for: past them its false "yes" passes ~1%. */
  readonly capacity: number;
  count = 0;

  constructor(size: number) {
    this.bits = new Uint32Array(size / 32);
    this.size = size;
    this.capacity = Math.floor(size / BITS_PER_NAME);
  }

  add(a: number, b: number): void {
    this.count += 1;
    for (let i = 0; i < FILTER_HASHES; i++) {
      const bit = (a + i * b) % this.size;
      this.bits[bit >>> 5] = (this.bits[bit >>> 5] as number) | (1 << (bit & 31));
    }
  }

  has(a: number, b: number): boolean {
    for (let i = 0; i < FILTER_HASHES; i++) {
      const bit = (a + i * b) % this.size;
      if (((this.bits[bit >>> 5] as number) & (1 << (bit & 31))) === 0) return false;
    }
    return true;
  }
}

const BITS_PER_NAME = 10;
const MIN_FILTER_BITS = 1 << 10;
const MAX_FILTER_BITS = 1 << 20;
const FILTER_HASHES = 4;
/** A new layer is sized for this many times the names added so far (fewer full layers, fewer false yeses). */
const LAYER_GROWTH = 4;

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
