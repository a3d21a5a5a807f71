/**
 * The readings of bytes written as hex digits: hex text in either case, at both alignments; hex
 * bytes written apart (`73 33`, `73:33`, `\x73\x33`, `0x73, 0x33`, `xxd`'s `7333 6372`); and
 * percent-encoded text (`%XX`, `+` for a space or not).
 */
import type { RedactionBudget } from "./budget.ts";
import { ByteReading, type DecodedView, MIN_DECODED_BYTES } from "./byte-views.ts";

export const hexValue = (code: number): number =>
  code >= 48 && code <= 57
    ? code - 48
    : code >= 97 && code <= 102
      ? code - 87
      : code >= 65 && code <= 70
        ? code - 55
        : -1;

/** The hex readings of `text`'s runs of at least `minHex` characters (see `decodedViews`, coverage.ts). */
export function* hexViews(text: string, minHex: number, budget: RedactionBudget): Generator<DecodedView> {
  // Both passes in one reading, one after the other.
  const reading = new ByteReading(2 * (text.length >> 1));
  for (let offset = 0; offset < 2; offset++) {
    for (let i = 0; i < text.length; ) {
      budget.step();
      if (hexValue(text.charCodeAt(i)) < 0) {
        i++;
        continue;
      }
      let j = i;
      while (j < text.length && hexValue(text.charCodeAt(j)) >= 0) j++;
      if (j - i - offset >= minHex) {
        for (let k = i + offset; k + 1 < j; k += 2)
          reading.push((hexValue(text.charCodeAt(k)) << 4) | hexValue(text.charCodeAt(k + 1)), k, k + 2);
      }
      budget.step(j - i);
      i = j;
    }
  }
  if (reading.n >= MIN_DECODED_BYTES) yield { view: reading.view(), minLength: MIN_DECODED_BYTES };
}

/** Characters that separate the groups of hex bytes: `73 33`, `73:33`, `73-33`, `0x73, 0x33`. */
const isHexSeparator = (code: number): boolean => code === 32 || code === 58 || code === 45 || code === 44;

/** Most hex digits of a group of bytes written apart (`xxd` groups two bytes, `xxd -g 4` four). */
const HEX_GROUP_DIGITS = 8;

/**
 * The group of hex bytes written at `at`: `\x` or `0x` and two digits, or an even number of digits
 * (two to {@link HEX_GROUP_DIGITS}) with no hex digit on either side. Its mark's length and its
 * digits' (0 when none is there).
 */
function hexGroupAt(text: string, at: number): { mark: number; digits: number } {
  const code = text.charCodeAt(at);
  const mark = (code === 92 || code === 48) && (text.charCodeAt(at + 1) | 32) === 120 ? 2 : 0;
  const none = { mark: 0, digits: 0 };
  if (mark === 0 && at > 0 && hexValue(text.charCodeAt(at - 1)) >= 0) return none;
  let digits = 0;
  while (digits <= HEX_GROUP_DIGITS && hexValue(text.charCodeAt(at + mark + digits)) >= 0) digits++;
  if (digits < 2 || digits % 2 !== 0 || digits > (mark === 0 ? HEX_GROUP_DIGITS : 2)) return none;
  return { mark, digits };
}

/**
 * The reading of `text`'s hex bytes written apart (see `decodedViews`, coverage.ts): runs of at least
 * `minBytes` bytes in groups of two hex digits after `\x` or `0x` (`\x73\x33`, `0x73, 0x33`), or
 * of two to eight digits (`73 33`, `73:33`, `7333 6372` as `xxd` prints), one or two separators
 * between groups (none needed before a `\x` or `0x`). Each byte stands for its digits, the first
 * of a group for its mark too; a run's separators lie between two covered bytes.
 */
export function* hexApartViews(
  text: string,
  minBytes: number,
  budget: RedactionBudget,
): Generator<DecodedView> {
  const reading = new ByteReading(text.length >> 1);
  for (let i = 0; i < text.length; ) {
    budget.step();
    const code = text.charCodeAt(i);
    let group = code === 92 || hexValue(code) >= 0 ? hexGroupAt(text, i) : { mark: 0, digits: 0 };
    if (group.digits === 0) {
      i++;
      continue;
    }
    const first = reading.n;
    let at = i;
    for (;;) {
      for (let d = 0; d < group.digits; d += 2) {
        const digit = at + group.mark + d;
        const byte = (hexValue(text.charCodeAt(digit)) << 4) | hexValue(text.charCodeAt(digit + 1));
        reading.push(byte, d === 0 ? at : digit, digit + 2);
      }
      at += group.mark + group.digits;
      let gap = 0;
      while (gap < 2 && isHexSeparator(text.charCodeAt(at + gap))) gap++;
      group = hexGroupAt(text, at + gap);
      // Groups written without a separator need their mark (`\x73\x33`): `7333` is hex text.
      if (group.digits === 0 || (gap === 0 && group.mark === 0)) break;
      at += gap;
    }
    budget.step(at - i);
    if (reading.n - first < Math.max(2, minBytes)) reading.n = first;
    i = at;
  }
  if (reading.n >= MIN_DECODED_BYTES) yield { view: reading.view(), minLength: MIN_DECODED_BYTES };
}

/** `text` with its `%XX` escapes decoded, `+` as itself and as a space (see `decodedViews`, coverage.ts). */
export function* percentViews(text: string, budget: RedactionBudget): Generator<DecodedView> {
  for (const plusIsSpace of text.includes("+") ? [false, true] : [false]) {
    const reading = new ByteReading(Buffer.byteLength(text, "utf8"));
    for (let i = 0; i < text.length; ) {
      budget.step();
      const code = text.charCodeAt(i);
      if (code === 37) {
        const high = hexValue(text.charCodeAt(i + 1));
        const low = hexValue(text.charCodeAt(i + 2));
        if (high >= 0 && low >= 0) {
          reading.push((high << 4) | low, i, i + 3);
          i += 3;
          continue;
        }
      }
      if (code < 0x80) {
        reading.push(plusIsSpace && code === 43 ? 32 : code, i, i + 1);
        i++;
        continue;
      }
      const point = text.codePointAt(i) ?? code;
      const width = point > 0xffff ? 2 : 1;
      for (const byte of Buffer.from(String.fromCodePoint(point), "utf8")) reading.push(byte, i, i + width);
      i += width;
    }
    yield { view: reading.view(), minLength: 1 };
  }
}
