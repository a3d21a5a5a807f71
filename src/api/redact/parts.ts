/**
 * A text searched as parts joined (a log tail, its entries) and shown apart: a value is also
 * found across two parts joined with nothing between them, and split over two parts with others
 * between them (the end of one and the start of a later one that together make it).
 */
import type { RedactionBudget } from "./budget.ts";
import { coverageOf } from "./coverage.ts";
import { bordersOf, formsOf, MIN_LINE_CHARS, type SecretForms } from "./forms.ts";
import { isLineSpace } from "./views.ts";

/**
 * Which characters of `parts.join(separator)` some form of some value covers (1) or not (0),
 * throwing `RedactionBudgetError` past `budget`; with `applyCoverage` (redact.ts), for a caller
 * that searches a joined text (a log tail) and shows its parts apart. A value is also found
 * across the parts joined with nothing between them: a value a log split over two entries
 * (`pw=s3cr3t-Pa`, `ssw0rd!` for `s3cr3t-Passw0rd!`) is marked in both parts. The separators are
 * never marked by that second search. And a value split over two parts with others between them is marked in
 * both: the end of one part and the start of a later one that together hold the whole value
 * (values of {@link MIN_LINE_CHARS} characters or more: a shorter one's halves end every other line).
 */
export function partsCoverage(
  parts: readonly string[],
  separator: string,
  values: Iterable<string>,
  budget: RedactionBudget,
): Uint8Array {
  const forms = formsOf(values);
  const joined = parts.join(separator);
  const covered = coverageOf(joined, forms, budget);
  if (parts.length < 2 || separator === "" || forms.text.length === 0) return covered;
  // Joined with nothing between, the decoded readings cover a value across parts up to each part's
  // end, as across a line break: not the next part's prefix.
  const ends: number[] = [];
  for (const part of parts) ends.push((ends.at(-1) ?? -1) + part.length);
  const flat = coverageOf(parts.join(""), forms, budget, ends);
  let at = 0;
  let flatAt = 0;
  const starts: number[] = [];
  for (const part of parts) {
    for (let k = 0; k < part.length; k++) if (flat[flatAt + k]) covered[at + k] = 1;
    starts.push(at);
    at += part.length + separator.length;
    flatAt += part.length;
  }
  for (const value of forms.text)
    if (value.length >= MIN_LINE_CHARS) coverSplitValue(parts, starts, value, forms, covered, budget);
  return covered;
}

/**
 * Marks in `covered` (of the parts joined, each part from its `starts`) the end of a part and the
 * start of a later one that together make `value` (each a proper piece of it, their lengths
 * adding up to the value's or more).
 */
function coverSplitValue(
  parts: readonly string[],
  starts: readonly number[],
  value: string,
  forms: SecretForms,
  covered: Uint8Array,
  budget: RedactionBudget,
): void {
  const { reversed, border, reversedBorder } = bordersOf(forms, value);
  const n = value.length;
  // The longest end of each part that starts the value, and the longest start that ends it.
  // At most n - 1 characters are read: a piece, never the whole value (found by the search).
  const tails = parts.map((part) =>
    matchState(part, Math.max(0, part.length - n + 1), part.length, value, border, budget),
  );
  // A start: the part's, or a word's past the part's prefix (a time, a step).
  const heads = parts.map((part) => {
    let best = { length: 0, at: 0 };
    for (let at = 0; at < part.length && at <= HEAD_PREFIX_CHARS; at++) {
      if (at > 0 && !isLineSpace(part.charCodeAt(at - 1))) continue;
      const from = Math.min(part.length, at + n - 1) - 1;
      const length = matchState(part, from, at - 1, reversed, reversedBorder, budget);
      if (length > best.length) best = { length, at };
    }
    return best;
  });
  let bestTail = 0;
  for (let j = 0; j < parts.length; j++) {
    const head = heads[j] ?? { length: 0, at: 0 };
    const from = (starts[j] ?? 0) + head.at;
    if (head.length > 0 && bestTail > 0 && bestTail + head.length >= n)
      covered.fill(1, from, from + head.length);
    bestTail = Math.max(bestTail, tails[j] ?? 0);
  }
  let bestHead = 0;
  for (let i = parts.length - 1; i >= 0; i--) {
    const tail = tails[i] ?? 0;
    const end = (starts[i] ?? 0) + (parts[i]?.length ?? 0);
    if (tail > 0 && bestHead > 0 && bestHead + tail >= n) covered.fill(1, end - tail, end);
    bestHead = Math.max(bestHead, heads[i]?.length ?? 0);
  }
}

/** How far into a part the rest of a value split over parts may start (past the part's prefix). */
const HEAD_PREFIX_CHARS = 48;

/**
 * The state of matching `pattern` (with its prefix function `border`) after the characters of
 * `text` from `from` to `to` (exclusive; backwards when `to` is below `from`): the longest start
 * of the pattern that the characters read end with.
 */
function matchState(
  text: string,
  from: number,
  to: number,
  pattern: string,
  border: Int32Array,
  budget: RedactionBudget,
): number {
  const step = to >= from ? 1 : -1;
  budget.step(1 + (Math.abs(to - from) >> 4));
  let q = 0;
  for (let i = from; i !== to; i += step) {
    const c = text.charCodeAt(i);
    while (q > 0 && pattern.charCodeAt(q) !== c) q = border[q - 1] ?? 0;
    if (pattern.charCodeAt(q) === c) q++;
  }
  return q;
}
