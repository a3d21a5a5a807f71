/**
 * The forms of a list of secret values that are searched (see `redact.ts`'s note): the values,
 * trimmed and their lines, those a JSON encoder may write otherwise, their UTF-8 bytes; and what
 * is compiled of them once per list and kept with it: the index of the patterns by their first
 * characters, their periods, the values' borders, the values' samples.
 */
import type { RedactionBudget } from "./budget.ts";
import { GRAM, HashFilter, MIN_SHARED_BYTES, SampleIndex, sampleHash } from "./samples.ts";

/** Shortest line of a multi-line value searched on its own: `-----`, `}` or `END` are everywhere. */
export const MIN_LINE_CHARS = 8;

/**
 * The most characters one UTF-16 unit of a value becomes in any form searched: hex bytes apart
 * (three bytes of UTF-8, `0xe2, 0x82, 0xac, `), percent-encoded UTF-8 (`%E2%82%AC`), JSON-escaped
 * twice (`\\u00e9`), base64 and hex below that; one more for the characters around a decoded byte.
 */
export const FORM_WIDTH = 19;
/** Characters no JSON encoder escapes: a value made of them only reads the same escaped or not. */
const NEVER_ESCAPED = /^[\x20-\x7e]*$/;
const SOMETIMES_ESCAPED = /["\\/<>&']/;

/** The forms of a set of values searched (see `redact.ts`'s note). */
export interface SecretForms {
  /** The values, trimmed values and lines: searched in the text and its JSON readings. */
  text: string[];
  /** Of those, the ones a JSON encoder may write differently. */
  escapable: string[];
  /** Each of {@link text} as its UTF-8 bytes (a latin1 string): searched in decoded readings. */
  bytes: string[];
  /** The values as given: what a piece of the text is looked for in. */
  whole: string[];
  /** The values as given, as UTF-8 bytes: what a piece of a decoded reading is looked for in. */
  wholeBytes: string[];
  longest: number;
  /** Index of {@link text} and {@link bytes} by their first {@link GRAM} characters, when built. */
  index: Map<string[], PatternIndex>;
  /** Smallest periods of the patterns that were found, by pattern. */
  periods: Map<string, number>;
  /** The values reversed and their prefix functions, by value, when a split was looked for. */
  borders: Map<string, Borders>;
  /** The samples of the values as given (`text`) and of their UTF-8 bytes, when built. */
  samples: { text?: SampleIndex; bytes?: SampleIndex };
  /** {@link text} without white space, those of {@link MIN_LINE_CHARS} or more, when built. */
  squeezed?: string[];
}

/** The prefix function of `p`: for each position, the longest proper border of `p` up to it. */
function prefixFunction(p: string): Int32Array {
  const border = new Int32Array(p.length);
  for (let i = 1, k = 0; i < p.length; i++) {
    while (k > 0 && p.charCodeAt(i) !== p.charCodeAt(k)) k = border[k - 1] ?? 0;
    if (p.charCodeAt(i) === p.charCodeAt(k)) k++;
    border[i] = k;
  }
  return border;
}

/** The smallest period of `p` (its length when it has none shorter), by the prefix function. */
export function periodOf(forms: SecretForms, p: string): number {
  const known = forms.periods.get(p);
  if (known !== undefined) return known;
  const period = p.length - (prefixFunction(p)[p.length - 1] ?? 0);
  forms.periods.set(p, period);
  return period;
}

/** `value` reversed, and the prefix functions of both (for `coverSplitValue`, parts.ts). */
export function bordersOf(forms: SecretForms, value: string): Borders {
  const known = forms.borders.get(value);
  if (known) return known;
  // Reversed by UTF-16 unit, not by character: matched against text read backwards unit by unit.
  const reversed = Array.from({ length: value.length }, (_, i) => value[value.length - 1 - i]).join("");
  const made = { reversed, border: prefixFunction(value), reversedBorder: prefixFunction(reversed) };
  forms.borders.set(value, made);
  return made;
}

interface Borders {
  reversed: string;
  border: Int32Array;
  reversedBorder: Int32Array;
}

/** Patterns shorter than {@link GRAM} characters, and the longer ones by their first characters. */
interface PatternIndex {
  short: string[];
  /** The long ones by the hash of their first {@link GRAM} characters ({@link sampleHash}). */
  byGram: Map<number, string[]>;
  filter: HashFilter;
}

/**
 * Compiled forms of the value lists seen, with the values they were compiled from: a reconcile
 * redacts many texts of the same list, and a list changed since is compiled again.
 */
const compiled = new WeakMap<object, { from: string[]; forms: SecretForms }>();

/**
 * The forms of no value: shared, for most texts are redacted of none (a resource without
 * secrets, every reconcile of a resync pass). Its maps are never written: nothing is searched.
 */
const NO_FORMS: SecretForms = {
  text: [],
  escapable: [],
  bytes: [],
  whole: [],
  wholeBytes: [],
  longest: 0,
  index: new Map(),
  periods: new Map(),
  borders: new Map(),
  samples: {},
};

export function formsOf(values: Iterable<string>): SecretForms {
  const given = [...values];
  if (!given.some((v) => v.length > 0)) return NO_FORMS;
  const cached = typeof values === "object" ? compiled.get(values) : undefined;
  if (cached && cached.from.length === given.length && cached.from.every((v, i) => v === given[i]))
    return cached.forms;
  const text = new Set<string>();
  let longest = 0;
  for (const value of given) {
    if (value.length === 0) continue;
    longest = Math.max(longest, value.length);
    text.add(value);
    const trimmed = value.trim();
    if (trimmed !== "") text.add(trimmed);
    if (!/[\r\n]/.test(trimmed)) continue;
    for (const line of trimmed.split(/\r\n|[\n\r]/)) {
      const kept = line.trim();
      if (kept.length >= MIN_LINE_CHARS) text.add(kept);
    }
  }
  const list = [...text];
  const whole = [...new Set(given.filter((v) => v.length > 0))];
  const forms: SecretForms = {
    text: list,
    escapable: list.filter((v) => !NEVER_ESCAPED.test(v) || SOMETIMES_ESCAPED.test(v)),
    bytes: list.map((v) => Buffer.from(v, "utf8").toString("latin1")),
    whole,
    wholeBytes: whole.map((v) => Buffer.from(v, "utf8").toString("latin1")),
    longest,
    index: new Map(),
    periods: new Map(),
    borders: new Map(),
    samples: {},
  };
  if (typeof values === "object") compiled.set(values, { from: given, forms });
  return forms;
}

/** The index of `patterns` (a list of the forms) by their first {@link GRAM} characters, built once. */
export function patternIndexOf(forms: SecretForms, patterns: string[]): PatternIndex {
  const known = forms.index.get(patterns);
  if (known) return known;
  const short: string[] = [];
  const byGram = new Map<number, string[]>();
  const filter = new HashFilter(patterns.length);
  for (const p of patterns) {
    if (p.length < GRAM) {
      short.push(p);
      continue;
    }
    const gram = sampleHash(p, 0);
    filter.add(gram);
    const group = byGram.get(gram);
    if (group) group.push(p);
    else byGram.set(gram, [p]);
  }
  const built = { short, byGram, filter };
  forms.index.set(patterns, built);
  return built;
}

/** The sample index of the values as given (`text`) or as UTF-8 bytes, built once per value list. */
export function samplesOf(forms: SecretForms, kind: "text" | "bytes", budget: RedactionBudget): SampleIndex {
  const known = forms.samples[kind];
  if (known) return known;
  const built = new SampleIndex(sharedValues(forms, kind).values, budget);
  forms.samples[kind] = built;
  return built;
}

/** The values of `kind` long enough to share a piece, and their characters in all. */
export function sharedValues(
  forms: SecretForms,
  kind: "text" | "bytes",
): { values: string[]; chars: number } {
  const values = (kind === "text" ? forms.whole : forms.wholeBytes).filter(
    (v) => v.length >= MIN_SHARED_BYTES,
  );
  return { values, chars: values.reduce((n, v) => n + v.length, 0) };
}
