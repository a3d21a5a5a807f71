/**
 * The samples a piece shared with a value is found by: {@link SAMPLE} characters every
 * {@link SAMPLE_STEP} of the values (every run of {@link MIN_SHARED_BYTES} characters holds one),
 * their hash and the hash rolled along a text, the table of the values' samples
 * ({@link SampleIndex}) and the filter most lookups of a text's hashes end in ({@link HashFilter}).
 */
import type { RedactionBudget } from "./budget.ts";

/**
 * Fewest consecutive characters (bytes, in a decoded reading) a piece of text shares with a value
 * to be covered: the part of a value that shows on one line when it straddles two.
 */
export const MIN_SHARED_BYTES = 12;
/** Length of the samples of the values indexed to find the pieces a text shares with them. */
export const SAMPLE = 8;
/**
 * Offsets of the samples in a value: every run of {@link MIN_SHARED_BYTES} characters of a value
 * holds a whole sample at an offset that is a multiple of this.
 */
export const SAMPLE_STEP = MIN_SHARED_BYTES - SAMPLE;
/** Most places of the values one sample is kept for (a value of one repeated character has many). */
const SAMPLE_PLACES = 4;

/** As long as a sample, so that one hash serves both (and no longer than a line searched alone). */
export const GRAM = SAMPLE;

/**
 * Samples of the values ({@link SAMPLE} characters every {@link SAMPLE_STEP}) by their hash, at
 * most {@link SAMPLE_PLACES} places each: a table of open addressing in two typed arrays, two to
 * four times as many slots as samples (8 bytes a slot: 4 MiB for 1 MiB of values, kept with the
 * compiled forms).
 */
export class SampleIndex {
  readonly values: readonly string[];
  readonly size: number;
  readonly #hashes: Int32Array;
  /** Each slot's place: 1 + its offset in the values one after the other; 0 when empty. */
  readonly #places: Int32Array;
  /** Where each value starts in the values one after the other. */
  readonly #starts: Int32Array;
  readonly #shift: number;
  constructor(values: readonly string[], budget: RedactionBudget) {
    this.values = values;
    const samples = values.reduce((n, v) => n + Math.ceil((v.length - SAMPLE + 1) / SAMPLE_STEP), 0);
    let bits = 4;
    while (1 << bits < 2 * samples) bits++;
    this.#shift = 32 - bits;
    this.#hashes = new Int32Array(1 << bits);
    this.#places = new Int32Array(1 << bits);
    this.#starts = new Int32Array(values.length);
    let size = 0;
    let start = 0;
    values.forEach((value, index) => {
      budget.step(1 + (value.length >> 2));
      this.#starts[index] = start;
      for (let offset = 0; offset + SAMPLE <= value.length; offset += SAMPLE_STEP) {
        const h = sampleHash(value, offset);
        let slot = this.slotOf(h);
        let same = 0;
        for (; this.#places[slot] !== 0; slot = this.next(slot)) if (this.#hashes[slot] === h) same++;
        if (same >= SAMPLE_PLACES) continue;
        this.#hashes[slot] = h;
        this.#places[slot] = 1 + start + offset;
        size++;
      }
      start += value.length;
    });
    this.size = size;
  }
  /** The first slot a sample of hash `h` is looked for in; the next ones by {@link next}. */
  slotOf(h: number): number {
    return Math.imul(h ^ (h >>> 15), 0x2c1b3c6d) >>> this.#shift;
  }
  next(slot: number): number {
    return (slot + 1) & (this.#places.length - 1);
  }
  /** Whether slot `slot` is empty: the end of a search. */
  empty(slot: number): boolean {
    return this.#places[slot] === 0;
  }
  hashAt(slot: number): number {
    return this.#hashes[slot] ?? 0;
  }
  /** The value the sample in slot `slot` was taken from, and its offset there. */
  placeAt(slot: number): { value: string; offset: number } {
    const at = (this.#places[slot] ?? 1) - 1;
    let low = 0;
    let high = this.#starts.length - 1;
    while (low < high) {
      const middle = (low + high + 1) >> 1;
      if ((this.#starts[middle] ?? 0) <= at) low = middle;
      else high = middle - 1;
    }
    return { value: this.values[low] ?? "", offset: at - (this.#starts[low] ?? 0) };
  }
}

/**
 * One bit per prefix of a hash, set for the hashes added: most lookups of a text's hashes end
 * here, before a map. About 16 bits per hash (512 at least, 2^20 at most): compiled forms are
 * kept as long as their value list, so a short list keeps a small filter.
 */
export class HashFilter {
  readonly #bits: Uint8Array;
  readonly #shift: number;
  constructor(hashes: number) {
    let width = 9;
    while (width < 20 && 1 << width < hashes * 16) width++;
    this.#shift = 32 - width;
    this.#bits = new Uint8Array(1 << (width - 3));
  }
  add(h: number): void {
    const bit = h >>> this.#shift;
    this.#bits[bit >> 3] = (this.#bits[bit >> 3] ?? 0) | (1 << (bit & 7));
  }
  has(h: number): boolean {
    const bit = h >>> this.#shift;
    return ((this.#bits[bit >> 3] ?? 0) & (1 << (bit & 7))) !== 0;
  }
}

const HASH_BASE = 0x01000193;
/** {@link HASH_BASE} to the power {@link SAMPLE} - 1, for rolling the hash on. */
const HASH_OUT = Array.from({ length: SAMPLE - 1 }).reduce<number>((h) => Math.imul(h, HASH_BASE), 1);

/** A hash of the {@link SAMPLE} characters of `text` from `at` (as many as {@link GRAM}). */
export function sampleHash(text: string, at: number): number {
  let h = 0;
  for (let k = 0; k < SAMPLE; k++) h = (Math.imul(h, HASH_BASE) + text.charCodeAt(at + k)) | 0;
  return h;
}

/** The {@link sampleHash} one character on: `out` leaves it, `into` joins it. */
export const rollHash = (h: number, out: number, into: number): number =>
  (Math.imul(h - Math.imul(out, HASH_OUT), HASH_BASE) + into) | 0;
