/**
 * The ring's choice for each resource, noted on its record while the members stay the same: a
 * pass over 30,000 resources hashes each claim once per membership, not once per pass.
 */
import { ownerOf, ringShares } from "./ring.ts";

/**
 * A note of the ring's choice: one shared object per member of one membership of one
 * {@link RingChoices}, so a note costs a record a field and no object. A note is read as a choice
 * only by the {@link RingChoices} that made it and only for the membership it was made for: a note
 * of another sharder sharing the records (a new leadership term's), or of an earlier membership,
 * never passes for a current one.
 */
export interface RingChoice {
  /** The membership the note was made for (compared by identity). */
  readonly ring: object;
  readonly owner: string;
}

/** See the module comment. {@link use} the live members, then ask {@link desired} of each resource. */
export class RingChoices {
  readonly #seed: Uint8Array | undefined;
  #key: string | undefined;
  #ring: object = {};
  #live: readonly string[] = [];
  #share: ((member: string) => number) | undefined;
  #notes = new Map<string, RingChoice>();

  /** `seed`: the ring's key (the install key), the same on every replica. */
  constructor(seed?: Uint8Array) {
    this.#seed = seed;
  }

  /**
   * The members of this pass: `live`, and the replica the sharder runs in (`self`), whose share is
   * smaller while it is live. A membership other than the last makes every note made before stale.
   */
  use(live: readonly string[], self: string | undefined): void {
    const share = ringShares(live, self);
    const key = `${live.join(",")}${share ? `;${self}` : ""}`;
    if (key === this.#key) return;
    this.#key = key;
    this.#ring = {};
    this.#live = live;
    this.#share = share;
    this.#notes = new Map();
  }

  /** The ring's choice for `resource`: from its note while the members are the same, else noted. */
  desired(resource: { readonly claim: string; ringChoice?: RingChoice | undefined }): string | undefined {
    const note = resource.ringChoice;
    if (note !== undefined && note.ring === this.#ring) return note.owner;
    const owner = ownerOf(resource.claim, this.#live, this.#share, this.#seed);
    if (owner !== undefined) resource.ringChoice = this.#noteOf(owner);
    return owner;
  }

  #noteOf(owner: string): RingChoice {
    let note = this.#notes.get(owner);
    if (note === undefined) {
      note = Object.freeze({ ring: this.#ring, owner });
      this.#notes.set(owner, note);
    }
    return note;
  }
}
