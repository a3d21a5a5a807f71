/**
 * Readings of a text searched for values: each a text and, for each of its characters, the span
 * of the original it stands for ({@link TextView}). Here the text without its white space (a
 * value wrapped over lines, cut into words, spaced out) and with its JSON string escapes decoded;
 * its line breaks; and how a span found in a reading is marked in the original ({@link coverSpan}:
 * in a decoded reading of a value wrapped over lines, not the lines' prefixes).
 */
import type { RedactionBudget } from "./budget.ts";

/**
 * A reading of the original text: `text`, and for each of its characters the span of the
 * original it stands for (absent: the original itself, character for character).
 */
export interface TextView {
  text: string;
  start: Int32Array | undefined;
  end: Int32Array | undefined;
}

export const startOf = (view: TextView, i: number): number => view.start?.[i] ?? i;
export const endOf = (view: TextView, i: number): number => view.end?.[i] ?? i + 1;

/** White space a value may be broken by in a text. */
export const WHITE_SPACE = /\s+/g;

/**
 * `text` without its white space, each character mapped to its place; undefined: it has none.
 * The places are found only once a value is (rarely): the text alone is one native replace.
 */
export function squeezedView(text: string, budget: RedactionBudget): TextView | undefined {
  if (!/\s/.test(text)) return undefined;
  const squeezed = text.replace(WHITE_SPACE, "");
  budget.step(1 + (text.length >> 6));
  let places: Int32Array | undefined;
  const placesOf = (): Int32Array => {
    if (places) return places;
    places = new Int32Array(squeezed.length);
    let n = 0;
    for (const run of text.matchAll(/\S+/g)) {
      for (let k = 0; k < run[0].length; k++) places[n++] = run.index + k;
      budget.step(1 + (run[0].length >> 4));
    }
    return places;
  };
  let ends: Int32Array | undefined;
  return {
    text: squeezed,
    get start() {
      return placesOf();
    },
    get end() {
      ends ??= placesOf().map((at) => at + 1);
      return ends;
    },
  };
}

/** Where `text`'s line feeds are, in order, ending with {@link NO_BREAK}. */
export function lineBreaks(text: string, budget: RedactionBudget): Int32Array {
  const found: number[] = [];
  for (let at = text.indexOf("\n"); at !== -1; at = text.indexOf("\n", at + 1)) found.push(at);
  found.push(NO_BREAK);
  budget.step(1 + (text.length >> 6) + found.length);
  return Int32Array.from(found);
}

/** Past every line break. */
export const NO_BREAK = 0x7fffffff;

/** The first of `breaks` at `at` or past it. */
function breakFrom(breaks: Int32Array, at: number): number {
  let low = 0;
  let high = breaks.length - 1;
  while (low < high) {
    const middle = (low + high) >> 1;
    if ((breaks[middle] ?? NO_BREAK) < at) low = middle + 1;
    else high = middle;
  }
  return breaks[low] ?? NO_BREAK;
}

/**
 * Marks in `covered` the characters of the original that the characters `[at, at + length)` of
 * `view` stand for. In a decoded reading (with the original's line `breaks`), those of a value
 * wrapped over lines: each line's part up to its end, and the next line's from the first
 * character that holds a bit of the value, not the prefix between them.
 */
export function coverSpan(
  view: TextView,
  at: number,
  length: number,
  covered: Uint8Array,
  breaks: Int32Array | undefined,
): void {
  const last = at + length - 1;
  let from = startOf(view, at);
  const to = endOf(view, last);
  if (breaks === undefined) {
    covered.fill(1, from, to);
    return;
  }
  let k = at;
  for (let line = breakFrom(breaks, from); line < to; line = breakFrom(breaks, from)) {
    covered.fill(1, from, line + 1);
    // The first character past the break that a character of the span was read from: the
    // second of a byte read across it, or the first of the next byte.
    while (k <= last && endOf(view, k) - 1 <= line) k++;
    if (k > last) return;
    const start = startOf(view, k);
    from = start > line ? start : endOf(view, k) - 1;
  }
  covered.fill(1, from, to);
}

const SIMPLE_ESCAPES: Record<string, string> = {
  '"': '"',
  "\\": "\\",
  "/": "/",
  b: "\b",
  f: "\f",
  n: "\n",
  r: "\r",
  t: "\t",
};

/**
 * `view` with its JSON string escapes decoded, each decoded character mapped to the span of the
 * original its escape covers. A backslash that starts no escape stays as it is. Runs without a
 * backslash are copied whole: a long text costs a few passes, not a string per character.
 */
export function unescapeJson(view: TextView, budget: RedactionBudget): TextView {
  const source = view.text;
  const parts: string[] = [];
  const start = new Int32Array(source.length);
  const end = new Int32Array(source.length);
  let n = 0;
  for (let i = 0; i < source.length; ) {
    budget.step();
    const slash = source.indexOf("\\", i);
    const runEnd = slash === -1 ? source.length : slash;
    if (runEnd > i) {
      parts.push(source.slice(i, runEnd));
      if (view.start === undefined || view.end === undefined) {
        for (let k = i; k < runEnd; k++, n++) {
          start[n] = k;
          end[n] = k + 1;
        }
      } else {
        start.set(view.start.subarray(i, runEnd), n);
        end.set(view.end.subarray(i, runEnd), n);
        n += runEnd - i;
      }
      budget.step(runEnd - i);
      i = runEnd;
      continue;
    }
    let char = "\\";
    let width = 1;
    const next = source[i + 1] ?? "";
    const simple = SIMPLE_ESCAPES[next];
    if (simple !== undefined) {
      char = simple;
      width = 2;
    } else if (next === "u" && /^[0-9a-fA-F]{4}$/.test(source.slice(i + 2, i + 6))) {
      char = String.fromCharCode(Number.parseInt(source.slice(i + 2, i + 6), 16));
      width = 6;
    }
    parts.push(char);
    start[n] = startOf(view, i);
    end[n] = endOf(view, i + width - 1);
    n++;
    i += width;
  }
  return { text: parts.join(""), start: start.subarray(0, n), end: end.subarray(0, n) };
}

/** A space, a tab or a carriage return: what may end a line after its text. */
export const isLineSpace = (code: number): boolean => code === 32 || code === 9 || code === 13;
