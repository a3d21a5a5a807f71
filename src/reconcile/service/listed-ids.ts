/**
 * The ids a sharded replica's whole listing showed, by name, kept compactly
 * ({@link ListedIds}); the lookup that reads one is `byListedId` (snapshot.ts).
 *
 * A whole listing holds only the deployments whose name a resource of the replica claims while it
 * is read. A resource that arrives while that listing still answers (the ring handed it over as
 * the listing was read, a label changed) finds its name listed but not held, and would ask the
 * service by name, a call of its own. Of every name the listing showed, the id it showed is kept:
 * that resource reads the id instead, with the lookups by id of other resources (`IdBatches`,
 * a hundred per call), and adopts the deployment if the service answers with exactly its name.
 * Anything else (the id gone, another name, a name shown twice, a name the index does not know)
 * asks the service by name as before: the index only ever finds a deployment, it never says that
 * a name is free, so a create is decided on a whole listing or a live lookup, never on it.
 */

/** Slot states: nothing, one id, a name that answers nothing (shown twice, or without a uuid). */
const EMPTY = 0;
const ONE = 1;
const NONE = 2;

/**
 * A listing's names (as 32-bit hashes, seeded per process) and the 16-byte id each one showed, in
 * an open-addressed table of typed arrays: 21 bytes a slot, at most half the slots used (about
 * 46 bytes a name at 30,000 names, 1.3 MiB). A name shown twice (or two names of one hash) answers
 * nothing; past `cap` names, no more are added, but a name already there that shows again
 * still becomes ambiguous. An unreadable item of the listing makes its name answer nothing, and
 * one without a name (it could be any name's) the whole index.
 */
export class ListedIds {
  readonly #cap: number;
  readonly #hash: (name: string) => number;
  #hashes = new Uint32Array(0);
  #ids = new Uint32Array(0);
  #states = new Uint8Array(0);
  #count = 0;
  /** An unreadable item without a name was listed: no name is answered. */
  #void = false;

  /** An index of at most `cap` names, its first table sized for `expected` of them. */
  constructor(cap: number, expected = 0, hash: (name: string) => number = nameHash) {
    this.#cap = Math.max(0, cap);
    this.#hash = hash;
    if (this.#cap > 0) this.#resize(slotsFor(Math.min(expected, this.#cap)));
  }

  /** Names held. */
  get size(): number {
    return this.#count;
  }

  /** Bytes its tables hold. */
  get bytes(): number {
    return this.#hashes.byteLength + this.#ids.byteLength + this.#states.byteLength;
  }

  /** The listing showed `id` under `name`. */
  add(name: string, id: string): void {
    // An unsharded listing passes one of no room (NO_LISTED_IDS): no hash, no parse per item.
    if (this.#cap === 0) return;
    const words = uuidWords(id);
    const hash = this.#hash(name);
    const slot = this.#slot(hash);
    if (slot === undefined) return;
    if (this.#states[slot] === EMPTY) {
      if (this.#count < this.#cap) this.#fill(slot, hash, words === undefined ? NONE : ONE, words);
      return;
    }
    if (this.#states[slot] === ONE && (words === undefined || !this.#holds(slot, words)))
      this.#states[slot] = NONE;
  }

  /** The listing had an item it could not read, named `name` if it had a name. */
  unreadable(name: string | undefined): void {
    if (this.#cap === 0) return;
    if (name === undefined) {
      this.#void = true;
      return;
    }
    const hash = this.#hash(name);
    const slot = this.#slot(hash);
    if (slot === undefined) return;
    if (this.#states[slot] === EMPTY) {
      if (this.#count < this.#cap) this.#fill(slot, hash, NONE, undefined);
    } else this.#states[slot] = NONE;
  }

  /** The id the listing showed under `name`, if it showed one id and only one under its hash. */
  idOf(name: string): string | undefined {
    if (this.#void || this.#count === 0) return undefined;
    const slot = this.#slot(this.#hash(name));
    if (slot === undefined || this.#states[slot] !== ONE) return undefined;
    const ids = this.#ids;
    const hex = [0, 1, 2, 3].map((i) => (ids[slot * 4 + i] ?? 0).toString(16).padStart(8, "0")).join("");
    return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
  }

  /** The slot of `hash`: where it is, or the empty one it would go to; undefined without a table. */
  #slot(hash: number): number | undefined {
    const slots = this.#states.length;
    if (slots === 0) return undefined;
    const mask = slots - 1;
    for (let slot = mix(hash) & mask; ; slot = (slot + 1) & mask)
      if (this.#states[slot] === EMPTY || this.#hashes[slot] === hash) return slot;
  }

  #holds(slot: number, words: Uint32Array): boolean {
    return words.every((word, i) => this.#ids[slot * 4 + i] === word);
  }

  #fill(slot: number, hash: number, state: number, words: Uint32Array | undefined): void {
    this.#hashes[slot] = hash;
    this.#states[slot] = state;
    if (words) this.#ids.set(words, slot * 4);
    this.#count += 1;
    if (2 * this.#count > this.#states.length) this.#resize(2 * this.#states.length);
  }

  #resize(slots: number): void {
    const [hashes, ids, states] = [this.#hashes, this.#ids, this.#states];
    this.#hashes = new Uint32Array(slots);
    this.#ids = new Uint32Array(4 * slots);
    this.#states = new Uint8Array(slots);
    for (let old = 0; old < states.length; old += 1) {
      if (states[old] === EMPTY) continue;
      const hash = hashes[old] ?? 0;
      const slot = this.#slot(hash) ?? 0;
      this.#hashes[slot] = hash;
      this.#states[slot] = states[old] ?? NONE;
      this.#ids.set(ids.subarray(old * 4, old * 4 + 4), slot * 4);
    }
  }
}

/** An index that answers nothing: before any whole listing, and after a read of the share by id. */
export const NO_LISTED_IDS = new ListedIds(0);

/** Slots for `names` names at most half full, a power of two. */
function slotsFor(names: number): number {
  let slots = 16;
  while (slots < 2 * names) slots *= 2;
  return slots;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** The 16 bytes of a uuid in its canonical (lower-case) form; undefined for any other id. */
function uuidWords(id: string): Uint32Array | undefined {
  if (!UUID.test(id)) return undefined;
  const hex = id.replaceAll("-", "");
  return Uint32Array.from([0, 8, 16, 24], (at) => Number.parseInt(hex.slice(at, at + 8), 16));
}

/** Seeded per process: the names a tenant's service lists cannot be chosen to collide. */
const SEED = (Math.random() * 0x1_0000_0000) >>> 0;

/** A 32-bit hash of `name` (FNV-1a over its UTF-16 units from a random basis, then mixed). */
function nameHash(name: string): number {
  let h = (0x811c9dc5 ^ SEED) >>> 0;
  for (let i = 0; i < name.length; i += 1) h = Math.imul(h ^ name.charCodeAt(i), 0x01000193);
  return mix(h);
}

/** murmur3's finalizer: every bit of `h` moves the low bits a slot is taken from. */
function mix(h: number): number {
  let x = h >>> 0;
  x = Math.imul(x ^ (x >>> 16), 0x85ebca6b);
  x = Math.imul(x ^ (x >>> 13), 0xc2b2ae35);
  return (x ^ (x >>> 16)) >>> 0;
}
