/**
 * The characters text meant for people never shows raw, defined once: the console log
 * (`log.ts`), the sanitizers of `api/printable.ts` (Events, conditions) and the escapes of
 * `api/terminal-text.ts` (the commands' output) read this rule. It lives at the bottom layer so that the log, which imports nothing above it,
 * can use it too. Pure, a leaf.
 *
 * The characters: the C0 controls (U+0000–U+001F), DEL, the C1 controls (U+0080–U+009F, U+009B
 * is CSI to some terminals), the line and paragraph separators U+2028/U+2029, every format
 * character (category Cf: the bidirectional controls, zero-width space and joiners, the soft
 * hyphen, U+FEFF, tags), and the invisible characters outside Cf: the Hangul fillers (U+115F,
 * U+1160, U+3164, U+FFA0), the combining grapheme joiner (U+034F), the Khmer inherent vowels
 * (U+17B4, U+17B5), the Mongolian free variation selectors (U+180B–U+180F) and the variation
 * selectors (U+FE00–U+FE0F, U+E0100–U+E01EF). Each either drives a terminal, reorders what is
 * read, or makes two texts that read the same differ.
 */

/** Format characters and the invisible ones outside Cf, as a class body for a `u` regular expression. */
export const INVISIBLE =
  "\\p{Cf}\\u034f\\u115f\\u1160\\u17b4\\u17b5\\u180b-\\u180f\\u3164\\ufe00-\\ufe0f\\uffa0\\u{e0100}-\\u{e01ef}";

/** Every character of the rule but the tab (a class body for a `u` regular expression). */
export const UNPRINTABLE = `\\x00-\\x08\\x0a-\\x1f\\x7f-\\x9f\\u2028\\u2029${INVISIBLE}`;

const UNPRINTABLE_OR_TAB = new RegExp(`[\\t${UNPRINTABLE}]`, "gu");

/**
 * `text` with every character of the rule, tabs included, written as `\uXXXX` escapes (one per
 * UTF-16 unit, as JSON writes them): one line, nothing invisible, readable back as JSON text.
 */
export function escapeAsUnicode(text: string): string {
  return text.replace(UNPRINTABLE_OR_TAB, unicodeEscapes);
}

/** `c` as `\\uXXXX` escapes, one per UTF-16 unit (a surrogate pair past U+FFFF). */
export function unicodeEscapes(c: string): string {
  let out = "";
  for (let i = 0; i < c.length; i++) out += `\\u${c.charCodeAt(i).toString(16).padStart(4, "0")}`;
  return out;
}
