/**
 * The characters of `text` that can drive a terminal or reorder what is read: C0 controls but a
 * tab and a newline, DEL, C1 controls, the line and paragraph separators and the bidirectional
 * formatting characters. Written with code points, not a pattern of control characters.
 */
export function unsafeCharacters(text: string): string[] {
  return [...text].filter((c) => {
    const n = c.codePointAt(0) ?? 0;
    return (
      (n < 0x20 && n !== 0x09 && n !== 0x0a) ||
      (n >= 0x7f && n <= 0x9f) ||
      n === 0x061c ||
      n === 0x200e ||
      n === 0x200f ||
      n === 0x2028 ||
      n === 0x2029 ||
      (n >= 0x202a && n <= 0x202e) ||
      (n >= 0x2066 && n <= 0x2069)
    );
  });
}
