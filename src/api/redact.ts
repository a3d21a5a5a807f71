/**
 * Redaction of secret values from text the operator shows or logs: the service's error bodies
 * (the transport redacts the API key), conditions, events and the build logs of the failure
 * evidence. Pure.
 *
 * A value travels in more forms than the one it was given in, and each is found:
 * - as given, trimmed (a value read from a file ends with a newline its build prints without),
 *   and, for a value of several lines (a private key), each of its lines of at least
 *   {@link MIN_LINE_CHARS} characters, trimmed (a build prints a file one line per entry);
 * - each of those as any JSON encoder may have escaped it, once or twice (a service's error body
 *   quotes what it was sent);
 * - each of those written as `\uNNNN` escapes, whatever its characters;
 * - each of those (as UTF-8) inside base64 text, standard or URL-safe, padded or not, at any of
 *   the three alignments a value has inside a longer encoded text (`user:password` in a `Basic`
 *   header), also when the base64 is wrapped over lines behind a prefix on each line (a time,
 *   `#8 0.23`, `[12:00:01]`, `stage-1 |`): each line's runs are decoded on their own, and each
 *   line's last run joined with the next line's, the prefix between them left out; inside hex
 *   text, either case, also bytes apart (`73 33 63`, `73:33:63`, `\x73\x33`, `0x73,0x33`, `7333 6372`);
 *   and inside percent-encoded text (`%XX`, `+` for a space or not). The encoded text is decoded
 *   instead of each value encoded: one pass per way of reading finds every value, at every
 *   alignment, and the characters that carry any bit of the value are covered (not the prefixes
 *   of the lines a value is wrapped over). Decoded readings need a value of at least
 *   {@link MIN_DECODED_BYTES} bytes (a shorter one would match the noise of decoding ordinary
 *   words) and look at the first {@link DECODE_WINDOW_CHARS} characters of a text;
 * - each of those of at least {@link MIN_LINE_CHARS} characters broken by white space (wrapped
 *   over lines, cut into words, spaced out), as the text reads with its white space left out:
 *   pieces shorter than {@link MIN_SHARED_BYTES} each are found together;
 * - any piece of the text, or of a decoded reading, that shares at least {@link MIN_SHARED_BYTES}
 *   consecutive characters with a value (min(12, the value's length): a shorter value is searched
 *   whole): the half of a value a line shows when the value straddles two lines, or two entries;
 * - (in {@link partsCoverage}) a value split over two entries with other entries between them:
 *   the end of one and the start of a later one that make the value together.
 *
 * Bounds: a text and the values are bounded by the callers (a message, a log tail, at most
 * `--max-secret-bytes` of values); each reading is one linear pass over the text; the search of
 * many line patterns goes through an index of the hash of their first characters, not one scan
 * each; the pieces shared with a value are found by samples (8 characters every 4) of the values
 * and one rolling hash over each reading, or, for a text shorter than the values, by samples of
 * the text and one rolling hash over each value; a split over entries reads at most a value's
 * length of each entry's ends. And the whole search has a time budget, of the event loop's own
 * CPU time (`workMs`: a machine busy elsewhere does not cut an ordinary search short)
 * ({@link REDACT_BUDGET_MS}, and {@link REDACT_MS_PER_MIB} per MiB of text searched): past it
 * the text is not shown
 * ({@link RedactionBudgetError}, or the fallbacks of {@link redactSecrets} and
 * {@link redactAndTruncate}), never shown unsearched.
 */
import { workMs } from "../runtime/clock.ts";
import { cutToLength } from "./printable.ts";

/** What replaces a secret value in redacted text. */
export const REDACTED = "***";
/** Shortest line of a multi-line value searched on its own: `-----`, `}` or `END` are everywhere. */
export const MIN_LINE_CHARS = 8;
/** Fewest bytes of a value searched in decoded (base64, hex) text: shorter ones match decoding noise. */
export const MIN_DECODED_BYTES = 4;
/**
 * Fewest consecutive characters (bytes, in a decoded reading) a piece of text shares with a value
 * to be covered: the part of a value that shows on one line when it straddles two.
 */
export const MIN_SHARED_BYTES = 12;
/** Length of the samples of the values indexed to find the pieces a text shares with them. */
const SAMPLE = 8;
/**
 * Offsets of the samples in a value: every run of {@link MIN_SHARED_BYTES} characters of a value
 * holds a whole sample at an offset that is a multiple of this.
 */
const SAMPLE_STEP = MIN_SHARED_BYTES - SAMPLE;
/** Most places of the values one sample is kept for (a value of one repeated character has many). */
const SAMPLE_PLACES = 4;
/** Characters of a text read as base64, hex and percent-encoded text (its start). */
export const DECODE_WINDOW_CHARS = 1 << 18;
/** Time (the thread's CPU time) one redaction may take before the text is withheld, besides {@link REDACT_MS_PER_MIB}. */
export const REDACT_BUDGET_MS = 250;
/**
 * Time allowed per MiB of text searched, on top of {@link REDACT_BUDGET_MS}: the search
 * is linear in the text for ordinary values, so a large text (an 8 MiB error body) gets time in
 * proportion, and only a crafted one (many values sharing their start in a text of it) runs out.
 */
export const REDACT_MS_PER_MIB = 1000;
/** What a caller shows instead of a text whose search ran out of time. */
export const UNSEARCHED = "(not shown: it could not be searched for secret values within its time budget)";

/**
 * How many times a value may have been JSON-escaped and still be found: once for a value inside
 * a JSON body, twice for JSON carried as a string inside JSON (a detail quoting a request body).
 */
const ESCAPE_DEPTH = 2;
/**
 * The most characters one UTF-16 unit of a value becomes in any form searched: hex bytes apart
 * (three bytes of UTF-8, `0xe2, 0x82, 0xac, `), percent-encoded UTF-8 (`%E2%82%AC`), JSON-escaped
 * twice (`\\u00e9`), base64 and hex below that; one more for the characters around a decoded byte.
 */
const FORM_WIDTH = 19;
/** Characters no JSON encoder escapes: a value made of them only reads the same escaped or not. */
const NEVER_ESCAPED = /^[\x20-\x7e]*$/;
const SOMETIMES_ESCAPED = /["\\/<>&']/;
/** Patterns searched through the index of their first {@link GRAM} characters past this many. */
const INDEXED_PAST = 16;
/** As long as a sample, so that one hash serves both (and no longer than a line searched alone). */
const GRAM = SAMPLE;

/** A budget for searching `chars` characters. */
function budgetFor(chars: number): RedactionBudget {
  return new RedactionBudget(REDACT_BUDGET_MS + (chars / (1 << 20)) * REDACT_MS_PER_MIB);
}

/** The search ran past its time budget: the text must not be shown. */
export class RedactionBudgetError extends Error {
  override readonly name = "RedactionBudgetError";
}

/**
 * A deadline on `counter` (default the thread's CPU time, `workMs`), looked at every few thousand
 * steps of a search.
 */
export class RedactionBudget {
  readonly #deadline: number;
  readonly #counter: () => number;
  #steps = 0;
  constructor(ms = REDACT_BUDGET_MS, counter: () => number = workMs) {
    this.#counter = counter;
    this.#deadline = counter() + ms;
  }
  /** Counts `n` steps; throws {@link RedactionBudgetError} once the deadline has passed. */
  step(n = 1): void {
    this.#steps += n;
    if (this.#steps < 4096) return;
    this.#steps = 0;
    if (this.#counter() > this.#deadline)
      throw new RedactionBudgetError("redaction ran past its time budget");
  }
}

/**
 * `text` with every occurrence of each non-empty value in `values`, in every form the module's
 * note lists, replaced by `marker`. Occurrences are found in the original text (overlapping ones
 * merge into one marker), so the marker itself is never searched again. Redact the whole text
 * before cutting it to a length: a value cut in two is no longer found, and its first half would
 * show ({@link redactAndTruncate} does both). Past its time budget (`budget`, one for the text's
 * length unless given): `marker` alone.
 */
export function redactSecrets(
  text: string,
  values: Iterable<string>,
  marker = REDACTED,
  budget = budgetFor(text.length),
): string {
  try {
    return redactPrefix(text, formsOf(values), marker, text.length, budget);
  } catch (error) {
    if (error instanceof RedactionBudgetError) return marker;
    throw error;
  }
}

/**
 * `text` redacted of `values` (see {@link redactSecrets}), then cut to at most `max` characters:
 * the one order in which no part of a value can show. Every message the operator cuts to a
 * length goes through here while it has a value to hide (with none, this is `cutToLength`, and
 * a caller may cut alone). Only the start of a long text is searched, as far as a value shown
 * within `max` characters could reach, so a huge text costs no more than a short one. Past its
 * time budget ({@link RedactionBudget}, a fresh one when none is given): {@link UNSEARCHED}.
 *
 * A reconcile may show one text in several places (`Synced`, and `Stalled` or `Reconciling`),
 * each redacted of the same values: searched again each time, with a budget of its own each, a
 * text crafted to take just under the budget held the shared event loop for one budget a place.
 * So a text is searched once per array of values (the one a reconcile reads its Secrets into):
 * what it became is remembered ({@link RECENT_REDACTIONS} texts, weakly by the array). A failure's
 * message, redacted already, is not searched again at all (`redacted`, reasons.ts).
 */
export function redactAndTruncate(
  text: string,
  values: Iterable<string>,
  max: number,
  marker = REDACTED,
  budget?: RedactionBudget,
): string {
  // Remembered only for a reconcile's own values (no value: nothing to search, and a shared empty
  // array would keep its texts for the life of the process).
  if (budget !== undefined || marker !== REDACTED || !Array.isArray(values) || values.length === 0)
    return searchAndTruncate(text, values, max, marker, budget);
  // The values' count too: an array still being filled is never answered from before.
  const key = `${max}\u0000${values.length}\u0000${text}`;
  let recent = recentRedactions.get(values);
  const known = recent?.get(key);
  if (known !== undefined) return known;
  const shown = searchAndTruncate(text, values, max, marker, budget);
  if (recent === undefined || recent.size >= RECENT_REDACTIONS) {
    recent = new Map();
    recentRedactions.set(values, recent);
  }
  recent.set(key, shown);
  return shown;
}

/** How many texts {@link redactAndTruncate} remembers for one array of values. */
export const RECENT_REDACTIONS = 8;
const recentRedactions = new WeakMap<readonly string[], Map<string, string>>();

/** Searches made by {@link redactAndTruncate}, for the tests that count them. */
export const redactionSearches = { count: 0 };

function searchAndTruncate(
  text: string,
  values: Iterable<string>,
  max: number,
  marker: string,
  budget: RedactionBudget | undefined,
): string {
  redactionSearches.count += 1;
  const forms = formsOf(values);
  // Every occurrence that starts within `keep` characters ends within `keep + reach`: all found.
  const keep = 2 * max;
  const reach = FORM_WIDTH * forms.longest;
  try {
    const clock = budget ?? budgetFor(Math.min(text.length, keep + reach));
    if (text.length <= keep + reach)
      return cutToLength(redactPrefix(text, forms, marker, text.length, clock), max);
    const shown = redactPrefix(text.slice(0, keep + reach), forms, marker, keep, clock);
    return cutToLength(`${shown}…`, max);
  } catch (error) {
    if (budget === undefined && error instanceof RedactionBudgetError) return cutToLength(UNSEARCHED, max);
    throw error;
  }
}

/**
 * Which characters of `parts.join(separator)` some form of some value covers (1) or not (0),
 * throwing {@link RedactionBudgetError} past `budget`; with {@link applyCoverage}, for a caller
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

/** `text[from, to)` with each run of characters `covered` marks replaced by one `marker`. */
export function applyCoverage(
  text: string,
  covered: Uint8Array,
  from = 0,
  to = text.length,
  marker = REDACTED,
): string {
  let out = "";
  let at = from;
  while (at < to) {
    const start = covered.indexOf(1, at);
    if (start === -1 || start >= to) return out + text.slice(at, to);
    const end = covered.indexOf(0, start);
    out += text.slice(at, start) + marker;
    if (end === -1) return out;
    at = end;
  }
  return out;
}

/** `text[0, keep)` redacted, searching the whole of `text`. */
function redactPrefix(
  text: string,
  forms: SecretForms,
  marker: string,
  keep: number,
  budget: RedactionBudget,
): string {
  if (forms.text.length === 0 || text.length === 0) return text.slice(0, keep);
  return applyCoverage(text, coverageOf(text, forms, budget), 0, keep, marker);
}

/** The forms of a set of values searched (see the module's note). */
interface SecretForms {
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
function periodOf(forms: SecretForms, p: string): number {
  const known = forms.periods.get(p);
  if (known !== undefined) return known;
  const period = p.length - (prefixFunction(p)[p.length - 1] ?? 0);
  forms.periods.set(p, period);
  return period;
}

/** `value` reversed, and the prefix functions of both (for {@link coverSplitValue}). */
function bordersOf(forms: SecretForms, value: string): Borders {
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

function formsOf(values: Iterable<string>): SecretForms {
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

function indexOf(forms: SecretForms, patterns: string[]): PatternIndex {
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

/**
 * A reading of the original text: `text`, and for each of its characters the span of the
 * original it stands for (absent: the original itself, character for character).
 */
interface TextView {
  text: string;
  start: Int32Array | undefined;
  end: Int32Array | undefined;
}

const startOf = (view: TextView, i: number): number => view.start?.[i] ?? i;
const endOf = (view: TextView, i: number): number => view.end?.[i] ?? i + 1;

/** The coverage of every form of `forms` in `text` (see the module's note). */
function coverageOf(
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

/** White space a value may be broken by in a text. */
const WHITE_SPACE = /\s+/g;

/**
 * `text` without its white space, each character mapped to its place; undefined: it has none.
 * The places are found only once a value is (rarely): the text alone is one native replace.
 */
function squeezedView(text: string, budget: RedactionBudget): TextView | undefined {
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
function lineBreaks(text: string, budget: RedactionBudget): Int32Array {
  const found: number[] = [];
  for (let at = text.indexOf("\n"); at !== -1; at = text.indexOf("\n", at + 1)) found.push(at);
  found.push(NO_BREAK);
  budget.step(1 + (text.length >> 6) + found.length);
  return Int32Array.from(found);
}

/** Past every line break. */
const NO_BREAK = 0x7fffffff;

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
function coverSpan(
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

/**
 * Samples of the values ({@link SAMPLE} characters every {@link SAMPLE_STEP}) by their hash, at
 * most {@link SAMPLE_PLACES} places each: a table of open addressing in two typed arrays, two to
 * four times as many slots as samples (8 bytes a slot: 4 MiB for 1 MiB of values, kept with the
 * compiled forms).
 */
class SampleIndex {
  readonly values: readonly string[];
  readonly size: number;
  readonly #hashes: Int32Array;
  /** Each slot's place: 1 + its offset in the values one after the other; 0 when empty. */
  readonly #places: Int32Array;
  /** Where each value starts in the values one after the other. */
  readonly #starts: Int32Array;
  readonly #shift: number;
  constructor(values: readonly string[], budget: RedactionBudget) {
    this.values = values;
    const samples = values.reduce((n, v) => n + Math.ceil((v.length - SAMPLE + 1) / SAMPLE_STEP), 0);
    let bits = 4;
    while (1 << bits < 2 * samples) bits++;
    this.#shift = 32 - bits;
    this.#hashes = new Int32Array(1 << bits);
    this.#places = new Int32Array(1 << bits);
    this.#starts = new Int32Array(values.length);
    let size = 0;
    let start = 0;
    values.forEach((value, index) => {
      budget.step(1 + (value.length >> 2));
      this.#starts[index] = start;
      for (let offset = 0; offset + SAMPLE <= value.length; offset += SAMPLE_STEP) {
        const h = sampleHash(value, offset);
        let slot = this.slotOf(h);
        let same = 0;
        for (; this.#places[slot] !== 0; slot = this.next(slot)) if (this.#hashes[slot] === h) same++;
        if (same >= SAMPLE_PLACES) continue;
        this.#hashes[slot] = h;
        this.#places[slot] = 1 + start + offset;
        size++;
      }
      start += value.length;
    });
    this.size = size;
  }
  /** The first slot a sample of hash `h` is looked for in; the next ones by {@link next}. */
  slotOf(h: number): number {
    return Math.imul(h ^ (h >>> 15), 0x2c1b3c6d) >>> this.#shift;
  }
  next(slot: number): number {
    return (slot + 1) & (this.#places.length - 1);
  }
  /** Whether slot `slot` is empty: the end of a search. */
  empty(slot: number): boolean {
    return this.#places[slot] === 0;
  }
  hashAt(slot: number): number {
    return this.#hashes[slot] ?? 0;
  }
  /** The value the sample in slot `slot` was taken from, and its offset there. */
  placeAt(slot: number): { value: string; offset: number } {
    const at = (this.#places[slot] ?? 1) - 1;
    let low = 0;
    let high = this.#starts.length - 1;
    while (low < high) {
      const middle = (low + high + 1) >> 1;
      if ((this.#starts[middle] ?? 0) <= at) low = middle;
      else high = middle - 1;
    }
    return { value: this.values[low] ?? "", offset: at - (this.#starts[low] ?? 0) };
  }
}

/**
 * One bit per prefix of a hash, set for the hashes added: most lookups of a text's hashes end
 * here, before a map. About 16 bits per hash (512 at least, 2^20 at most): compiled forms are
 * kept as long as their value list, so a short list keeps a small filter.
 */
class HashFilter {
  readonly #bits: Uint8Array;
  readonly #shift: number;
  constructor(hashes: number) {
    let width = 9;
    while (width < 20 && 1 << width < hashes * 16) width++;
    this.#shift = 32 - width;
    this.#bits = new Uint8Array(1 << (width - 3));
  }
  add(h: number): void {
    const bit = h >>> this.#shift;
    this.#bits[bit >> 3] = (this.#bits[bit >> 3] ?? 0) | (1 << (bit & 7));
  }
  has(h: number): boolean {
    const bit = h >>> this.#shift;
    return ((this.#bits[bit >> 3] ?? 0) & (1 << (bit & 7))) !== 0;
  }
}

const HASH_BASE = 0x01000193;
/** {@link HASH_BASE} to the power {@link SAMPLE} - 1, for rolling the hash on. */
const HASH_OUT = Array.from({ length: SAMPLE - 1 }).reduce<number>((h) => Math.imul(h, HASH_BASE), 1);

/** A hash of the {@link SAMPLE} characters of `text` from `at` (as many as {@link GRAM}). */
function sampleHash(text: string, at: number): number {
  let h = 0;
  for (let k = 0; k < SAMPLE; k++) h = (Math.imul(h, HASH_BASE) + text.charCodeAt(at + k)) | 0;
  return h;
}

/** The {@link sampleHash} one character on: `out` leaves it, `into` joins it. */
const rollHash = (h: number, out: number, into: number): number =>
  (Math.imul(h - Math.imul(out, HASH_OUT), HASH_BASE) + into) | 0;

/** The sample index of the values as given (`text`) or as UTF-8 bytes, built once per value list. */
function samplesOf(forms: SecretForms, kind: "text" | "bytes", budget: RedactionBudget): SampleIndex {
  const known = forms.samples[kind];
  if (known) return known;
  const built = new SampleIndex(sharedValues(forms, kind).values, budget);
  forms.samples[kind] = built;
  return built;
}

/** The values of `kind` long enough to share a piece, and their characters in all. */
function sharedValues(forms: SecretForms, kind: "text" | "bytes"): { values: string[]; chars: number } {
  const values = (kind === "text" ? forms.whole : forms.wholeBytes).filter(
    (v) => v.length >= MIN_SHARED_BYTES,
  );
  return { values, chars: values.reduce((n, v) => n + v.length, 0) };
}

/**
 * Marks in `covered` every run of at least {@link MIN_SHARED_BYTES} characters of `view` that
 * some value of `kind` holds too. A view shorter than the values (a condition message, values of
 * up to 1 MiB) has its own samples taken and the values read past them
 * ({@link coverSharedByView}): nothing is built or kept for the values. A longer one is read past
 * the values' samples, built once per value list ({@link coverSharedByValues}).
 */
function coverShared(
  view: TextView,
  forms: SecretForms,
  kind: "text" | "bytes",
  covered: Uint8Array,
  budget: RedactionBudget,
  breaks: Int32Array | undefined,
): void {
  if (view.text.length < MIN_SHARED_BYTES) return;
  const known = forms.samples[kind];
  if (known !== undefined) {
    coverSharedByValues(view, known, covered, budget, breaks);
    return;
  }
  const { values, chars } = sharedValues(forms, kind);
  if (chars > view.text.length) coverSharedByView(view, values, covered, budget, breaks);
  else if (chars > 0) coverSharedByValues(view, samplesOf(forms, kind, budget), covered, budget, breaks);
}

/**
 * {@link coverShared} by the view's samples ({@link SAMPLE} characters every {@link SAMPLE_STEP}
 * from its start: a table of open addressing by hash, each hash once with the list of its places,
 * so that a view repeating itself costs no longer probes) and one rolling hash over each value: a
 * shared run of {@link MIN_SHARED_BYTES} holds one of the view's samples. A place whose run is
 * covered already (with the few characters before it a run may start with) is not grown again:
 * each run is read about once.
 */
function coverSharedByView(
  view: TextView,
  values: readonly string[],
  covered: Uint8Array,
  budget: RedactionBudget,
  breaks: Int32Array | undefined,
): void {
  const text = view.text;
  const samples = Math.floor((text.length - SAMPLE) / SAMPLE_STEP) + 1;
  let bits = 4;
  while (1 << bits < 2 * samples) bits++;
  const mask = (1 << bits) - 1;
  const slotOf = (h: number) => Math.imul(h ^ (h >>> 15), 0x2c1b3c6d) >>> (32 - bits);
  const hashes = new Int32Array(1 << bits);
  /** 1 + the first sample of the slot's hash (samples counted from the view's start); 0: empty. */
  const first = new Int32Array(1 << bits);
  const last = new Int32Array(1 << bits);
  /** For each sample, the next one of the same hash (-1: none). */
  const next = new Int32Array(samples).fill(-1);
  for (let k = 0; k < samples; k++) {
    const h = sampleHash(text, k * SAMPLE_STEP);
    let slot = slotOf(h);
    while (first[slot] !== 0 && hashes[slot] !== h) slot = (slot + 1) & mask;
    if (first[slot] === 0) {
      hashes[slot] = h;
      first[slot] = 1 + k;
    } else next[(last[slot] ?? 1) - 1] = k;
    last[slot] = 1 + k;
  }
  budget.step(1 + (text.length >> 2));
  // The view's characters covered here, to grow each run once.
  const done = new Uint8Array(text.length);
  for (const value of values) {
    budget.step(1 + (value.length >> 4));
    let h = sampleHash(value, 0);
    for (let offset = 0; ; offset++) {
      if ((offset & 63) === 0) budget.step(64);
      let slot = slotOf(h);
      while (first[slot] !== 0 && hashes[slot] !== h) slot = (slot + 1) & mask;
      for (let k = (first[slot] ?? 0) - 1; k !== -1; k = next[k] ?? -1) {
        budget.step();
        const at = k * SAMPLE_STEP;
        if (allDone(done, at - SAMPLE_STEP, at + MIN_SHARED_BYTES)) continue;
        const run = sharedRun(text, at, value, offset, budget);
        if (run === undefined) continue;
        done.fill(1, run.from, run.to);
        coverSpan(view, run.from, run.to - run.from, covered, breaks);
      }
      if (offset + SAMPLE >= value.length) break;
      h = rollHash(h, value.charCodeAt(offset), value.charCodeAt(offset + SAMPLE));
    }
  }
}

/** Whether `done` marks every character from `from` to `to` (within its bounds). */
function allDone(done: Uint8Array, from: number, to: number): boolean {
  for (let k = Math.max(0, from); k < Math.min(done.length, to); k++) if (done[k] === 0) return false;
  return true;
}

/**
 * The run `text` and `value` share around `text[at]` = `value[offset]` (a sample's place in each),
 * when it is {@link MIN_SHARED_BYTES} characters or more: from at most {@link SAMPLE_STEP}
 * characters before (a run starts that close to its first sample) to as far as both go on.
 */
function sharedRun(
  text: string,
  at: number,
  value: string,
  offset: number,
  budget: RedactionBudget,
): { from: number; to: number } | undefined {
  let after = 0;
  while (
    at + after < text.length &&
    offset + after < value.length &&
    text.charCodeAt(at + after) === value.charCodeAt(offset + after)
  )
    after++;
  if (after < SAMPLE) return undefined;
  let before = 0;
  while (
    before < SAMPLE_STEP &&
    before < at &&
    before < offset &&
    text.charCodeAt(at - before - 1) === value.charCodeAt(offset - before - 1)
  )
    before++;
  budget.step(1 + (after >> 4));
  return before + after < MIN_SHARED_BYTES ? undefined : { from: at - before, to: at + after };
}

/**
 * {@link coverShared} by the values' samples: one rolling hash over the view, looked up in them,
 * and each sample found grown to the run both share. Past a run found, the search goes on a few
 * characters before its end (another run may start inside it): linear in the view.
 */
function coverSharedByValues(
  view: TextView,
  index: SampleIndex,
  covered: Uint8Array,
  budget: RedactionBudget,
  breaks: Int32Array | undefined,
): void {
  const text = view.text;
  if (index.size === 0 || text.length < MIN_SHARED_BYTES) return;
  // In the text itself, a run already covered (a value found whole, repeated) is skipped to a few
  // characters before the next character not covered: a shared run that reaches past it has a
  // sample there (see SAMPLE_STEP), and one that does not adds nothing.
  const direct = view.start === undefined;
  let resume = 0;
  let h = sampleHash(text, 0);
  for (let at = 0; ; at++) {
    if ((at & 63) === 0) budget.step(64);
    if (direct && covered[at] === 1) {
      const uncovered = covered.indexOf(0, at);
      if (uncovered === -1) return;
      const next = uncovered - (MIN_SHARED_BYTES - 1);
      if (next > at + 1 && next + SAMPLE <= text.length) {
        budget.step((next - at) >> 6);
        at = next;
        h = sampleHash(text, at);
      }
    }
    for (let slot = index.slotOf(h); at >= resume && !index.empty(slot); slot = index.next(slot)) {
      if (index.hashAt(slot) !== h) continue;
      const { value, offset } = index.placeAt(slot);
      const run = sharedRun(text, at, value, offset, budget);
      if (run === undefined) continue;
      coverSpan(view, run.from, run.to - run.from, covered, breaks);
      resume = Math.max(resume, run.to - (MIN_SHARED_BYTES - 1));
    }
    if (at + SAMPLE >= text.length) return;
    h = rollHash(h, text.charCodeAt(at), text.charCodeAt(at + SAMPLE));
  }
}

/** Marks in `covered` every occurrence in `view` of each of `patterns` at least `minLength` long. */
function searchView(
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
  const { short, byGram, filter } = indexOf(forms, patterns);
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
function unescapeJson(view: TextView, budget: RedactionBudget): TextView {
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

/** A decoded reading of a text, and the shortest pattern worth searching in it. */
interface DecodedView {
  view: TextView;
  minLength: number;
}

/** Values of base64 characters, standard and URL-safe alike; -1 for any other. */
const BASE64 = new Int8Array(128).fill(-1);
for (const [i, c] of [..."ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"].entries())
  BASE64[c.charCodeAt(0)] = i;
BASE64["+".charCodeAt(0)] = 62;
BASE64["-".charCodeAt(0)] = 62;
BASE64["/".charCodeAt(0)] = 63;
BASE64["_".charCodeAt(0)] = 63;

const base64Value = (code: number): number => (code < 128 ? (BASE64[code] ?? -1) : -1);
const hexValue = (code: number): number =>
  code >= 48 && code <= 57
    ? code - 48
    : code >= 97 && code <= 102
      ? code - 87
      : code >= 65 && code <= 70
        ? code - 55
        : -1;

/**
 * Room kept between searches for the readings of ordinary texts (a condition message, a log
 * tail): typed arrays allocated for every message cost more than decoding it. Larger readings
 * get room of their own, freed after. One reading is alive at a time (each is searched before the
 * next is made), and a search is synchronous, so one room serves all.
 */
const KEPT_ROOM = 1 << 16;
let room = { bytes: new Uint8Array(256), start: new Int32Array(256), end: new Int32Array(256) };
let positionsRoom = new Int32Array(256);

/** An Int32Array of at least `n` entries, for the positions of a text's base64 characters. */
function positionsFor(n: number): Int32Array {
  if (n <= positionsRoom.length) return positionsRoom;
  const made = new Int32Array(n);
  if (n <= KEPT_ROOM) positionsRoom = made;
  return made;
}

/** Bytes decoded and, for each, the span of the original it was read from (at most `size`). */
class ByteReading {
  readonly bytes: Uint8Array;
  readonly start: Int32Array;
  readonly end: Int32Array;
  n = 0;
  constructor(size: number) {
    if (size > room.bytes.length) {
      const made = { bytes: new Uint8Array(size), start: new Int32Array(size), end: new Int32Array(size) };
      if (size <= KEPT_ROOM) room = made;
      this.bytes = made.bytes;
      this.start = made.start;
      this.end = made.end;
      return;
    }
    this.bytes = room.bytes;
    this.start = room.start;
    this.end = room.end;
  }
  push(byte: number, from: number, to: number): void {
    this.bytes[this.n] = byte;
    this.start[this.n] = from;
    this.end[this.n] = to;
    this.n++;
  }
  view(): TextView {
    return {
      text: Buffer.from(this.bytes.buffer, 0, this.n).toString("latin1"),
      start: this.start.subarray(0, this.n),
      end: this.end.subarray(0, this.n),
    };
  }
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

const isBase64 = (code: number): boolean => base64Value(code) >= 0;
/** A space, a tab or a carriage return: what may end a line after its text. */
const isLineSpace = (code: number): boolean => code === 32 || code === 9 || code === 13;

/**
 * The base64 reading of `text` (see {@link decodedViews}): each line's runs of at least
 * `minChars` on their own, and each chain of lines joined: a line's last run (what follows its
 * prefix, in base64 wrapped over prefixed lines) followed by the next line's last run, as long as
 * the line does not end in padding. A chain of one line is the line's run already read.
 */
function* base64Views(text: string, minChars: number, budget: RedactionBudget): Generator<DecodedView> {
  // The positions of the characters of each run to read, one run after the other, and where each
  // run starts among them.
  const positions = positionsFor(2 * text.length);
  const runs: number[] = [];
  let count = 0;
  let start = -1;
  for (let i = 0; i <= text.length; i++) {
    if (i < text.length && isBase64(text.charCodeAt(i))) {
      if (start < 0) start = count;
      positions[count++] = i;
    } else if (start >= 0) {
      if (count - start >= minChars) runs.push(start);
      else count = start;
      start = -1;
    }
  }
  budget.step(text.length);
  let chain = -1;
  let lines = 0;
  const endChain = () => {
    if (chain >= 0 && lines >= 2 && count - chain >= minChars) runs.push(chain);
    else if (chain >= 0) count = chain;
    chain = -1;
    lines = 0;
  };
  for (let lineStart = 0; lineStart <= text.length; ) {
    const found = text.indexOf("\n", lineStart);
    const lineEnd = found === -1 ? text.length : found;
    let end = lineEnd;
    while (end > lineStart && isLineSpace(text.charCodeAt(end - 1))) end--;
    const padded = end > lineStart && text.charCodeAt(end - 1) === 61;
    while (end > lineStart && text.charCodeAt(end - 1) === 61) end--;
    let first = end;
    while (first > lineStart && isBase64(text.charCodeAt(first - 1))) first--;
    budget.step(1 + ((lineEnd - first) >> 4));
    if (first === end) endChain();
    else {
      if (chain < 0) chain = count;
      for (let i = first; i < end; i++) positions[count++] = i;
      lines++;
      if (padded) endChain();
    }
    lineStart = lineEnd + 1;
  }
  endChain();
  if (runs.length === 0) return;
  runs.push(count);
  // The four passes in one reading, one after the other: one text to search, not four.
  const reading = new ByteReading(4 * (Math.ceil((count * 3) / 4) + runs.length));
  for (let offset = 0; offset < 4; offset++) {
    for (let r = 0; r + 1 < runs.length; r++) {
      const first = (runs[r] ?? 0) + offset;
      const last = runs[r + 1] ?? 0;
      for (let c = first; c + 1 < last; c += 4) {
        budget.step();
        const chars = Math.min(4, last - c);
        let bits = 0;
        for (let k = 0; k < 4; k++)
          bits = (bits << 6) | (k < chars ? base64Value(text.charCodeAt(positions[c + k] ?? 0)) : 0);
        for (let k = 0; k < chars - 1; k++)
          reading.push((bits >> (16 - 8 * k)) & 0xff, positions[c + k] ?? 0, (positions[c + k + 1] ?? 0) + 1);
      }
    }
  }
  if (reading.n >= MIN_DECODED_BYTES) yield { view: reading.view(), minLength: MIN_DECODED_BYTES };
}

/** The hex readings of `text`'s runs of at least `minHex` characters (see {@link decodedViews}). */
function* hexViews(text: string, minHex: number, budget: RedactionBudget): Generator<DecodedView> {
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
 * The reading of `text`'s hex bytes written apart (see {@link decodedViews}): runs of at least
 * `minBytes` bytes in groups of two hex digits after `\x` or `0x` (`\x73\x33`, `0x73, 0x33`), or
 * of two to eight digits (`73 33`, `73:33`, `7333 6372` as `xxd` prints), one or two separators
 * between groups (none needed before a `\x` or `0x`). Each byte stands for its digits, the first
 * of a group for its mark too; a run's separators lie between two covered bytes.
 */
function* hexApartViews(text: string, minBytes: number, budget: RedactionBudget): Generator<DecodedView> {
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

/** `text` with its `%XX` escapes decoded, `+` as itself and as a space (see {@link decodedViews}). */
function* percentViews(text: string, budget: RedactionBudget): Generator<DecodedView> {
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
