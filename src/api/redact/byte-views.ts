/**
 * The decoded readings' bytes: each byte read from base64, hex or percent-encoded text, and the
 * span of the original it was read from ({@link ByteReading}), in room kept between searches for
 * ordinary texts; a reading is searched as a latin1 string of its bytes.
 */
import type { TextView } from "./views.ts";

/** Fewest bytes of a value searched in decoded (base64, hex) text: shorter ones match decoding noise. */
export const MIN_DECODED_BYTES = 4;

/** A decoded reading of a text, and the shortest pattern worth searching in it. */
export interface DecodedView {
  view: TextView;
  minLength: number;
}

/**
 * Room kept between searches for the readings of ordinary texts (a condition message, a log
 * tail): typed arrays allocated for every message cost more than decoding it. Larger readings
 * get room of their own, freed after. One reading is alive at a time (each is searched before the
 * next is made), and a search is synchronous, so one room serves all.
 */
const KEPT_ROOM = 1 << 16;
let room = { bytes: new Uint8Array(256), start: new Int32Array(256), end: new Int32Array(256) };
let positionsRoom = new Int32Array(256);

/** An Int32Array of at least `n` entries, for the positions of a text's base64 characters. */
export function positionsFor(n: number): Int32Array {
  if (n <= positionsRoom.length) return positionsRoom;
  const made = new Int32Array(n);
  if (n <= KEPT_ROOM) positionsRoom = made;
  return made;
}

/** Bytes decoded and, for each, the span of the original it was read from (at most `size`). */
export class ByteReading {
  readonly bytes: Uint8Array;
  readonly start: Int32Array;
  readonly end: Int32Array;
  n = 0;
  constructor(size: number) {
    if (size > room.bytes.length) {
      const made = { bytes: new Uint8Array(size), start: new Int32Array(size), end: new Int32Array(size) };
      if (size <= KEPT_ROOM) room = made;
      this.bytes = made.bytes;
      this.start = made.start;
      this.end = made.end;
      return;
    }
    this.bytes = room.bytes;
    this.start = room.start;
    this.end = room.end;
  }
  push(byte: number, from: number, to: number): void {
    this.bytes[this.n] = byte;
    this.start[this.n] = from;
    this.end[this.n] = to;
    this.n++;
  }
  view(): TextView {
    return {
      text: Buffer.from(this.bytes.buffer, 0, this.n).toString("latin1"),
      start: this.start.subarray(0, this.n),
      end: this.end.subarray(0, this.n),
    };
  }
}
