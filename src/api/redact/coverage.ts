/**
 * Which characters of a text some form of some value covers: every reading of the text searched
 * (the text itself, without its white space, its JSON escapes decoded once or twice, its base64,
 * hex and percent-encoded readings), for the whole forms and for the pieces shared with a value.
 */
import { base64Views } from "./base64.ts";
import type { RedactionBudget } from "./budget.ts";
import { type DecodedView, MIN_DECODED_BYTES } from "./byte-views.ts";
import { MIN_LINE_CHARS, type SecretForms } from "./forms.ts";
import { hexApartViews, hexValue, hexViews, percentViews } from "./hex.ts";
import { MIN_SHARED_BYTES } from "./samples.ts";
import { searchView } from "./search.ts";
import { coverShared } from "./shared.ts";
import { lineBreaks, NO_BREAK, squeezedView, type TextView, unescapeJson, WHITE_SPACE } from "./views.ts";

/** Characters of a text read as base64, hex and percent-encoded text (its start). */
export const DECODE_WINDOW_CHARS = 1 << 18;

/**
 * How many times a value may have been JSON-escaped and still be found: once for a value inside
 * a JSON body, twice for JSON carried as a string inside JSON (a detail quoting a request body).
 */
const ESCAPE_DEPTH = 2;

/** The coverage of every form of `forms` in `text` (see `redact.ts`'s note). */
export function coverageOf(
  text: string,
  forms: SecretForms,
  budget: RedactionBudget,
  partEnds?: readonly number[],
): Uint8Array {
  // One byte per character, however many occurrences overlap (a key of one repeated character
  // in a body of that character included).
  const covered = new Uint8Array(text.length);
  if (forms.text.length === 0 || text.length === 0) return covered;
  const plain: TextView = { text, start: undefined, end: undefined };
  searchView(plain, forms, forms.text, 1, covered, budget, undefined);
  coverShared(plain, forms, "text", covered, budget, undefined);
  // A value broken by white space (wrapped over lines, cut into words, spaced out) is whole once
  // the white space is left out; what is found covers the white space between its pieces too.
  // Whole values only: a piece shared across white space would take in the next word's start.
  forms.squeezed ??= [
    ...new Set(forms.text.map((v) => v.replace(WHITE_SPACE, "")).filter((v) => v.length >= MIN_LINE_CHARS)),
  ];
  const squeezed = forms.squeezed.length > 0 ? squeezedView(text, budget) : undefined;
  if (squeezed !== undefined) searchView(squeezed, forms, forms.squeezed, 1, covered, budget, undefined);
  // Only a value with a character some encoder escapes can look different in JSON text, but any
  // value can be written as `\uNNNN` escapes.
  const patterns = text.includes("\\u") ? forms.text : forms.escapable;
  let view = plain;
  for (let depth = 0; depth < ESCAPE_DEPTH && patterns.length > 0 && view.text.includes("\\"); depth++) {
    view = unescapeJson(view, budget);
    searchView(view, forms, patterns, 1, covered, budget, undefined);
  }
  const window = text.length > DECODE_WINDOW_CHARS ? text.slice(0, DECODE_WINDOW_CHARS) : text;
  const shortest = forms.bytes.reduce(
    (n, b) => (b.length >= MIN_DECODED_BYTES ? Math.min(n, b.length) : n),
    Number.POSITIVE_INFINITY,
  );
  let breaks: Int32Array | undefined;
  for (const decoded of decodedViews(window, shortest, budget)) {
    breaks ??= partEnds
      ? Int32Array.from([...partEnds.filter((e) => e >= 0), NO_BREAK])
      : lineBreaks(window, budget);
    searchView(decoded.view, forms, forms.bytes, decoded.minLength, covered, budget, breaks);
    coverShared(decoded.view, forms, "bytes", covered, budget, breaks);
  }
  return covered;
}

/**
 * The decoded readings of `text`, one at a time: its base64 runs read from each of the four
 * first characters (one of them is where the encoded text began, whatever preceded it), each
 * line's runs on their own and runs joined over lines; its hex runs from each of the first two,
 * and its hex bytes written apart; and the text with its `%XX` escapes decoded (with `+` as
 * itself, and as a space when the text has one).
 */
function* decodedViews(text: string, shortest: number, budget: RedactionBudget): Generator<DecodedView> {
  // A run too short to hold the shortest value, or a piece worth looking for, is not decoded
  // (most words of a text).
  const minBytes = Math.min(shortest, MIN_SHARED_BYTES);
  const minHex = 2 * minBytes;
  let hexRun = 0;
  let longestHex = 0;
  for (let i = 0; i < text.length; i++) {
    hexRun = hexValue(text.charCodeAt(i)) >= 0 ? hexRun + 1 : 0;
    longestHex = Math.max(longestHex, hexRun);
  }
  budget.step(text.length);
  yield* base64Views(text, Math.ceil((minBytes * 4) / 3), budget);
  if (longestHex >= minHex) yield* hexViews(text, minHex, budget);
  yield* hexApartViews(text, minBytes, budget);
  if (text.includes("%")) yield* percentViews(text, budget);
}
