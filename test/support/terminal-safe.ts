/**
 * The characters of `text` that can drive a terminal, reorder what is read or hide in it: C0
 * controls but a tab and a newline, DEL, C1 controls, the line and paragraph separators, every
 * format character (category Cf: the bidirectional ones, zero-width space and joiners, the soft
 * hyphen, U+FEFF, tags) and the invisible characters outside Cf (the Hangul fillers, the
 * combining grapheme joiner, the Khmer inherent vowels, the Mongolian free variation selectors
 * and the variation selectors). Written with code points here, apart from the rule the code reads
 * (src/runtime/unprintable.ts), so that a character dropped from that rule fails a test.
 */
export function unsafeCharacters(text: string): string[] {
  return [...text].filter((c) => {
    const n = c.codePointAt(0) ?? 0;
    return (
      (n < 0x20 && n !== 0x09 && n !== 0x0a) ||
      (n >= 0x7f && n <= 0x9f) ||
      n === 0x2028 ||
      n === 0x2029 ||
      FORMAT.test(c) ||
      INVISIBLE.some(([from, to]) => n >= from && n <= to)
    );
  });
}

const FORMAT = /^\p{Cf}$/u;

/** The invisible characters outside Cf, as ranges of code points. */
const INVISIBLE: ReadonlyArray<readonly [number, number]> = [
  [0x034f, 0x034f],
  [0x115f, 0x1160],
  [0x17b4, 0x17b5],
  [0x180b, 0x180f],
  [0x3164, 0x3164],
  [0xfe00, 0xfe0f],
  [0xffa0, 0xffa0],
  [0xe0100, 0xe01ef],
];
