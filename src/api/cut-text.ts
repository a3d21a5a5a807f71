/**
 * Text cut to a budget, the one way: whole characters only (a multi-byte UTF-8 character or a
 * surrogate pair is never split), and `…` at the end when anything was cut, counted in the budget.
 * In UTF-8 bytes where a limit is in bytes (an Event's note), in UTF-16 code units where it is in
 * JavaScript string length (a service error's detail, a condition's message).
 */

/** The mark of a cut text. */
export const ELLIPSIS = "…";

/** Bytes of `codePoint` in UTF-8 (a lone surrogate is written as U+FFFD: 3). */
function utf8Bytes(codePoint: number): number {
  if (codePoint < 0x80) return 1;
  if (codePoint < 0x800) return 2;
  return codePoint < 0x10000 ? 3 : 4;
}

/** UTF-16 code units of `codePoint`: 2 for one a surrogate pair holds. */
const utf16Units = (codePoint: number) => (codePoint > 0xffff ? 2 : 1);

/**
 * The longest start of `text` whose characters measure at most `budget` by `size`, then `…`.
 * A budget smaller than the mark itself gives the mark alone.
 */
function cut(text: string, budget: number, size: (codePoint: number) => number): string {
  let used = 0;
  let end = 0;
  for (const ch of text) {
    const n = size(ch.codePointAt(0) ?? 0);
    if (used + n > budget) break;
    used += n;
    end += ch.length;
  }
  return `${text.slice(0, end)}${ELLIPSIS}`;
}

/** `text` cut to at most `maxBytes` UTF-8 bytes on a character boundary, ending with `…` when cut. */
export function cutToBytes(text: string, maxBytes: number): string {
  if (Buffer.byteLength(text) <= maxBytes) return text;
  return cut(text, maxBytes - Buffer.byteLength(ELLIPSIS), utf8Bytes);
}

/**
 * `text` cut to at most `maxLength` UTF-16 code units (JavaScript's `length`), never inside a
 * surrogate pair, ending with `…` when cut.
 */
export function cutToLength(text: string, maxLength: number): string {
  if (text.length <= maxLength) return text;
  return cut(text, maxLength - ELLIPSIS.length, utf16Units);
}
