/**
 * The search of whole forms in a reading: each pattern by the text's `indexOf`, a run of a pattern repeating
 * its period marked at once; past {@link INDEXED_PAST} patterns, the long ones in one pass through
 * the index of the hash of their first characters, not one scan each.
 */
import type { RedactionBudget } from "./budget.ts";
import { patternIndexOf, periodOf, type SecretForms } from "./forms.ts";
import { GRAM, rollHash, sampleHash } from "./samples.ts";
import { coverSpan, endOf, startOf, type TextView } from "./views.ts";

/** Patterns searched through the index of their first {@link GRAM} characters past this many. */
const INDEXED_PAST = 16;

/** Marks in `covered` every occurrence in `view` of each of `patterns` at least `minLength` long. */
export function searchView(
  view: TextView,
  forms: SecretForms,
  patterns: string[],
  minLength: number,
  covered: Uint8Array,
  budget: RedactionBudget,
  breaks: Int32Array | undefined,
): void {
  const source = view.text;
  // [markedFrom, marked) of the original is marked: an occurrence starting in it only marks the
  // part past its end. A reading whose passes are concatenated may go back in the original.
  let markedFrom = 0;
  let marked = 0;
  const mark = (at: number, length: number) => {
    if (breaks !== undefined) {
      // A decoded reading: the characters of each byte, not the lines' prefixes between them.
      budget.step(1 + (length >> 4));
      coverSpan(view, at, length, covered, breaks);
      return;
    }
    const start = startOf(view, at);
    const to = endOf(view, at + length - 1);
    const onward = start >= markedFrom;
    const from = onward ? Math.max(start, marked) : start;
    if (to > from) covered.fill(1, from, to);
    marked = onward ? Math.max(marked, to) : to;
    markedFrom = start;
    budget.step();
  };
  const findAll = (p: string) => {
    if (p.length < minLength || p.length > source.length) return;
    markedFrom = 0;
    marked = 0;
    budget.step(1 + (source.length >> 6));
    for (let at = source.indexOf(p); at !== -1; ) {
      // Where the text goes on repeating the pattern's period, the pattern occurs again every
      // period: one run, marked at once (a key of one repeated character in a body of it is one
      // pass, not an occurrence per character). Occurrences off that grid lie inside the run.
      const period = periodOf(forms, p);
      let end = at + p.length;
      while (end < source.length && source.charCodeAt(end) === source.charCodeAt(end - period)) end++;
      budget.step((end - at - p.length) >> 4);
      const last = at + Math.floor((end - at - p.length) / period) * period;
      mark(at, last + p.length - at);
      at = source.indexOf(p, last + 1);
    }
  };
  if (patterns.length <= INDEXED_PAST) {
    for (const p of patterns) findAll(p);
    return;
  }
  const { short, byGram, filter } = patternIndexOf(forms, patterns);
  for (const p of short) findAll(p);
  // The long ones in one pass: at each position, those that start with the text found there
  // (the hash of its next GRAM characters, rolled on).
  markedFrom = 0;
  marked = 0;
  let h = source.length >= GRAM ? sampleHash(source, 0) : 0;
  for (let at = 0; at + GRAM <= source.length; at++) {
    if ((at & 63) === 0) budget.step(64);
    if (at > 0) h = rollHash(h, source.charCodeAt(at - 1), source.charCodeAt(at + GRAM - 1));
    const group = filter.has(h) ? byGram.get(h) : undefined;
    if (group === undefined) continue;
    for (const p of group) {
      budget.step(1 + (p.length >> 6));
      if (p.length >= minLength && source.startsWith(p, at)) mark(at, p.length);
    }
  }
}
