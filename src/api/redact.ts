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
 * - each of those (as UTF-8) inside base64 text, standard or URL-safe, padded or not, at any of
 *   the three alignments a value has inside a longer encoded text (`user:password` in a `Basic`
 *   header), also when the base64 is wrapped over lines; inside hex text, either case; and inside
 *   percent-encoded text (`%XX`, `+` for a space or not). The encoded text is decoded instead of
 *   each value encoded: one pass per way of reading finds every value, at every alignment, and the
 *   characters that carry any bit of the value are covered. A decoded run of at least
 *   {@link MIN_CONTAINED_BYTES} bytes that is a piece of a value is covered too (base64 wrapped
 *   over lines that each start with other text). Decoded readings need a value of at least
 *   {@link MIN_DECODED_BYTES} bytes (a shorter one would match the noise of decoding ordinary
 *   words) and look at the first {@link DECODE_WINDOW_CHARS} characters of a text.
 *
 * Bounds: a text and the values are bounded by the callers (a message, a log tail, at most
 * `--max-secret-bytes` of values); each reading is one linear pass over the text; the search of
 * many line patterns goes through an index of their first characters, not one scan each. And the
 * whole search has a wall-clock budget ({@link REDACT_BUDGET_MS}, and {@link REDACT_MS_PER_MIB}
 * per MiB of text searched): past it the text is not shown
 * ({@link RedactionBudgetError}, or the fallbacks of {@link redactSecrets} and
 * {@link redactAndTruncate}), never shown unsearched.
 */
import { truncate } from "./errors.ts";

/** What replaces a secret value in redacted text. */
export const REDACTED = "***";
/** Shortest line of a multi-line value searched on its own: `-----`, `}` or `END` are everywhere. */
export const MIN_LINE_CHARS = 8;
/** Fewest bytes of a value searched in decoded (base64, hex) text: shorter ones match decoding noise. */
export const MIN_DECODED_BYTES = 4;
/** Fewest bytes of a decoded run looked for inside the values (a line of wrapped base64 is 57). */
export const MIN_CONTAINED_BYTES = 12;

/**
 * Most characters between the end of a long base64 run and a short one read as its continuation
 * (a log line's prefix: a time, a step number).
 */
const CONTINUATION_GAP_CHARS = 48;
/** Characters of a text read as base64, hex and percent-encoded text (its start). */
export const DECODE_WINDOW_CHARS = 1 << 18;
/** Wall-clock time one redaction may take before the text is withheld, besides {@link REDACT_MS_PER_MIB}. */
export const REDACT_BUDGET_MS = 250;
/**
 * Wall-clock time allowed per MiB of text searched, on top of {@link REDACT_BUDGET_MS}: the search
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
 * The most characters one UTF-16 unit of a value becomes in any form searched: percent-encoded
 * UTF-8 (three bytes, `%E2%82%AC`), JSON-escaped twice (`\\u00e9`), base64 and hex below that;
 * one more for the characters around a decoded byte.
 */
const FORM_WIDTH = 10;
/** Characters no JSON encoder escapes: a value made of them only reads the same escaped or not. */
const NEVER_ESCAPED = /^[\x20-\x7e]*$/;
const SOMETIMES_ESCAPED = /["\\/<>&']/;
/** Patterns searched through the index of their first {@link GRAM} characters past this many. */
const INDEXED_PAST = 16;
const GRAM = MIN_LINE_CHARS;

/** A budget for searching `chars` characters. */
function budgetFor(chars: number): RedactionBudget {
  return new RedactionBudget(REDACT_BUDGET_MS + (chars / (1 << 20)) * REDACT_MS_PER_MIB);
}

/** The search ran past its wall-clock budget: the text must not be shown. */
export class RedactionBudgetError extends Error {
  override readonly name = "RedactionBudgetError";
}

/** A wall-clock deadline, looked at every few thousand steps of a search. */
export class RedactionBudget {
  readonly #deadline: number;
  #steps = 0;
  constructor(ms = REDACT_BUDGET_MS) {
    this.#deadline = performance.now() + ms;
  }
  /** Counts `n` steps; throws {@link RedactionBudgetError} once the deadline has passed. */
  step(n = 1): void {
    this.#steps += n;
    if (this.#steps < 4096) return;
    this.#steps = 0;
    if (performance.now() > this.#deadline)
      throw new RedactionBudgetError("redaction ran past its time budget");
  }
}

/**
 * `text` with every occurrence of each non-empty value in `values`, in every form the module's
 * note lists, replaced by `marker`. Occurrences are found in the original text (overlapping ones
 * merge into one marker), so the marker itself is never searched again. Redact the whole text
 * before cutting it to a length: a value cut in two is no longer found, and its first half would
 * show ({@link redactAndTruncate} does both). Past its time budget: `marker` alone.
 */
export function redactSecrets(text: string, values: Iterable<string>, marker = REDACTED): string {
  try {
    return redactPrefix(text, formsOf(values), marker, text.length, budgetFor(text.length));
  } catch (error) {
    if (error instanceof RedactionBudgetError) return marker;
    throw error;
  }
}

/**
 * `text` redacted of `values` (see {@link redactSecrets}), then cut to at most `max` characters:
 * the one order in which no part of a value can show. Every message the operator cuts to a
 * length goes through here. Only the start of a long text is searched, as far as a value shown
 * within `max` characters could reach, so a huge text costs no more than a short one. Past its
 * time budget ({@link RedactionBudget}, a fresh one when none is given): {@link UNSEARCHED}.
 */
export function redactAndTruncate(
  text: string,
  values: Iterable<string>,
  max: number,
  marker = REDACTED,
  budget?: RedactionBudget,
): string {
  const forms = formsOf(values);
  // Every occurrence that starts within `keep` characters ends within `keep + reach`: all found.
  const keep = 2 * max;
  const reach = FORM_WIDTH * forms.longest;
  try {
    const clock = budget ?? budgetFor(Math.min(text.length, keep + reach));
    if (text.length <= keep + reach)
      return truncate(redactPrefix(text, forms, marker, text.length, clock), max);
    const shown = redactPrefix(text.slice(0, keep + reach), forms, marker, keep, clock);
    return truncate(`${shown}…`, max);
  } catch (error) {
    if (budget === undefined && error instanceof RedactionBudgetError) return truncate(UNSEARCHED, max);
    throw error;
  }
}

/**
 * Which characters of `text` some form of some value covers (1) or not (0). Throws
 * {@link RedactionBudgetError} past `budget`. With {@link applyCoverage}, for a caller that
 * searches a joined text (a log tail) and shows its parts apart.
 */
export function secretCoverage(text: string, values: Iterable<string>, budget: RedactionBudget): Uint8Array {
  return coverageOf(text, formsOf(values), budget);
}

/**
 * {@link secretCoverage} of `parts.join(separator)`, where a value is also found across the parts
 * joined with nothing between them: a value a log split over two entries (`pw=s3cr3t-Pa`,
 * `ssw0rd!` for `s3cr3t-Passw0rd!`) is marked in both parts. The separators are never marked by
 * that second search.
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
  const flat = coverageOf(parts.join(""), forms, budget);
  let at = 0;
  let flatAt = 0;
  for (const part of parts) {
    for (let k = 0; k < part.length; k++) if (flat[flatAt + k]) covered[at + k] = 1;
    at += part.length + separator.length;
    flatAt += part.length;
  }
  return covered;
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
  /** The values as given, as UTF-8 bytes: what a decoded run is looked for in. */
  wholeBytes: string[];
  longest: number;
  /** Index of {@link text} and {@link bytes} by their first {@link GRAM} characters, when built. */
  index: Map<string[], PatternIndex>;
  /** Smallest periods of the patterns that were found, by pattern. */
  periods: Map<string, number>;
}

/** The smallest period of `p` (its length when it has none shorter), by the prefix function. */
function periodOf(forms: SecretForms, p: string): number {
  const known = forms.periods.get(p);
  if (known !== undefined) return known;
  const border = new Int32Array(p.length);
  for (let i = 1, k = 0; i < p.length; i++) {
    while (k > 0 && p.charCodeAt(i) !== p.charCodeAt(k)) k = border[k - 1] ?? 0;
    if (p.charCodeAt(i) === p.charCodeAt(k)) k++;
    border[i] = k;
  }
  const period = p.length - (border[p.length - 1] ?? 0);
  forms.periods.set(p, period);
  return period;
}

/** Patterns shorter than {@link GRAM} characters, and the longer ones by their first characters. */
interface PatternIndex {
  short: string[];
  byGram: Map<string, string[]>;
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
  wholeBytes: [],
  longest: 0,
  index: new Map(),
  periods: new Map(),
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
  const forms: SecretForms = {
    text: list,
    escapable: list.filter((v) => !NEVER_ESCAPED.test(v) || SOMETIMES_ESCAPED.test(v)),
    bytes: list.map((v) => Buffer.from(v, "utf8").toString("latin1")),
    wholeBytes: [...new Set(given.filter((v) => v.length > 0))].map((v) =>
      Buffer.from(v, "utf8").toString("latin1"),
    ),
    longest,
    index: new Map(),
    periods: new Map(),
  };
  if (typeof values === "object") compiled.set(values, { from: given, forms });
  return forms;
}

function indexOf(forms: SecretForms, patterns: string[]): PatternIndex {
  const known = forms.index.get(patterns);
  if (known) return known;
  const short: string[] = [];
  const byGram = new Map<string, string[]>();
  for (const p of patterns) {
    if (p.length < GRAM) {
      short.push(p);
      continue;
    }
    const gram = p.slice(0, GRAM);
    const group = byGram.get(gram);
    if (group) group.push(p);
    else byGram.set(gram, [p]);
  }
  const built = { short, byGram };
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
function coverageOf(text: string, forms: SecretForms, budget: RedactionBudget): Uint8Array {
  // One byte per character, however many occurrences overlap (a key of one repeated character
  // in a body of that character included).
  const covered = new Uint8Array(text.length);
  if (forms.text.length === 0 || text.length === 0) return covered;
  const plain: TextView = { text, start: undefined, end: undefined };
  searchView(plain, forms, forms.text, 1, covered, budget);
  // Only a value with a character some encoder escapes can look different in JSON text.
  let view = plain;
  for (
    let depth = 0;
    depth < ESCAPE_DEPTH && forms.escapable.length > 0 && view.text.includes("\\");
    depth++
  ) {
    view = unescapeJson(view, budget);
    searchView(view, forms, forms.escapable, 1, covered, budget);
  }
  const window = text.length > DECODE_WINDOW_CHARS ? text.slice(0, DECODE_WINDOW_CHARS) : text;
  const shortest = forms.bytes.reduce(
    (n, b) => (b.length >= MIN_DECODED_BYTES ? Math.min(n, b.length) : n),
    Number.POSITIVE_INFINITY,
  );
  for (const decoded of decodedViews(window, shortest, budget)) {
    searchView(decoded.view, forms, forms.bytes, decoded.minLength, covered, budget);
    coverContainedRuns(decoded, forms, covered, budget);
  }
  return covered;
}

/**
 * Marks in `covered` each decoded run of at least {@link MIN_CONTAINED_BYTES} bytes that is part
 * of a value: base64 or hex wrapped over lines that each begin with other text (a prefix, a
 * time) decodes line by line into pieces of the value, none of which holds it whole.
 */
function coverContainedRuns(
  decoded: DecodedView,
  forms: SecretForms,
  covered: Uint8Array,
  budget: RedactionBudget,
): void {
  const { view, runs } = decoded;
  const cover = (from: number, to: number) => covered.fill(1, startOf(view, from), endOf(view, to - 1));
  // The piece of a value the run before ended (and the value), so that a short run that goes on
  // with it (the last line of wrapped base64, a few bytes) is covered as its continuation.
  let before: { piece: string; value: string } | undefined;
  for (let r = 0; r < runs.length; r++) {
    const from = runs[r] ?? 0;
    const to = runs[r + 1] ?? view.text.length;
    const piece = view.text.slice(from, to);
    if (to - from < MIN_CONTAINED_BYTES) {
      budget.step(1 + ((before?.value.length ?? 0) >> 6));
      const joined = before && before.piece + piece;
      // A short piece that does not go on with it (a prefix's word) leaves the chain as it is.
      if (before && joined && piece !== "" && before.value.includes(joined)) {
        cover(from, to);
        before = { piece: joined, value: before.value };
      }
      continue;
    }
    before = undefined;
    for (const value of forms.wholeBytes) {
      budget.step(1 + (value.length >> 6));
      if (value.length < piece.length || !value.includes(piece)) continue;
      cover(from, to);
      before = { piece, value };
      break;
    }
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
): void {
  const source = view.text;
  // [markedFrom, marked) of the original is marked: an occurrence starting in it only marks the
  // part past its end. A reading whose passes are concatenated may go back in the original.
  let markedFrom = 0;
  let marked = 0;
  const mark = (at: number, length: number) => {
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
  const { short, byGram } = indexOf(forms, patterns);
  for (const p of short) findAll(p);
  // The long ones in one pass: at each position, those that start with the text found there.
  markedFrom = 0;
  marked = 0;
  for (let at = 0; at + GRAM <= source.length; at++) {
    budget.step();
    const group = byGram.get(source.slice(at, at + GRAM));
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
  /** Where each run's bytes start in the view, when runs were decoded apart. */
  runs: readonly number[];
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
  /** Where each run's bytes start: a run decoded apart from the others. */
  readonly runs: number[] = [];
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
 * first characters (one of them is where the encoded text began, whatever preceded it), its hex
 * runs from each of the first two, and the text with its `%XX` escapes decoded (with `+` as
 * itself, and as a space when the text has one). A base64 run goes on over line breaks.
 */
function* decodedViews(text: string, shortest: number, budget: RedactionBudget): Generator<DecodedView> {
  // A run too short to hold the shortest value, or a piece worth looking for, is not decoded
  // (most words of a text): a first pass finds whether any run is long enough.
  const minChars = Math.min(Math.ceil((shortest * 4) / 3), Math.ceil((MIN_CONTAINED_BYTES * 4) / 3));
  const minHex = 2 * Math.min(shortest, MIN_CONTAINED_BYTES);
  let base64Run = 0;
  let hexRun = 0;
  let longestBase64 = 0;
  let longestHex = 0;
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if (base64Value(code) >= 0) base64Run++;
    else if (!(base64Run > 0 && (code === 10 || code === 13))) base64Run = 0;
    hexRun = hexValue(code) >= 0 ? hexRun + 1 : 0;
    longestBase64 = Math.max(longestBase64, base64Run);
    longestHex = Math.max(longestHex, hexRun);
  }
  budget.step(text.length);
  if (longestBase64 >= minChars) yield* base64Views(text, minChars, budget);
  if (longestHex >= minHex) yield* hexViews(text, minHex, budget);
  if (text.includes("%")) yield* percentViews(text, budget);
}

/** The base64 readings of `text`'s runs of at least `minChars` (see {@link decodedViews}). */
function* base64Views(text: string, minChars: number, budget: RedactionBudget): Generator<DecodedView> {
  // The positions of the base64 characters, and where each run of them starts among those.
  const positions = positionsFor(text.length);
  const runs: number[] = [];
  let count = 0;
  let inRun = false;
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if (base64Value(code) >= 0) {
      if (!inRun) runs.push(count);
      inRun = true;
      positions[count++] = i;
    } else if (!(inRun && (code === 10 || code === 13))) inRun = false;
  }
  budget.step(text.length);
  runs.push(count);
  // Which runs are read: those long enough, and a short one (4 characters or more) a few
  // characters after one (past a line's prefix): the last line of base64 wrapped over prefixed
  // lines, a piece that coverContainedRuns covers as the continuation of the line before it.
  const read: boolean[] = [];
  let decoded = 0;
  let longEnd = Number.NEGATIVE_INFINITY;
  for (let r = 0; r + 1 < runs.length; r++) {
    const first = runs[r] ?? 0;
    const length = (runs[r + 1] ?? 0) - first;
    const long = length >= minChars;
    const continues = length >= 4 && (positions[first] ?? 0) - longEnd <= CONTINUATION_GAP_CHARS;
    read.push(long || continues);
    if (long || continues) decoded += length;
    if (long) longEnd = positions[first + length - 1] ?? 0;
  }
  // The four passes in one reading, one after the other: one text to search, not four.
  const reading = new ByteReading(4 * (Math.ceil((decoded * 3) / 4) + 3));
  for (let offset = 0; offset < 4; offset++) {
    for (let r = 0; r + 1 < runs.length; r++) {
      const first = (runs[r] ?? 0) + offset;
      const last = runs[r + 1] ?? 0;
      if (!read[r] || last - first < 2) continue;
      reading.runs.push(reading.n);
      for (let c = first; c + 1 < last; c += 4) {
        budget.step();
        // A line break between two groups starts a piece of its own for coverContainedRuns: a
        // line of wrapped base64 is a piece of the value, the next line's prefix is not.
        if (c > first && (positions[c] ?? 0) - (positions[c - 1] ?? 0) > 1) reading.runs.push(reading.n);
        const chars = Math.min(4, last - c);
        let bits = 0;
        for (let k = 0; k < 4; k++)
          bits = (bits << 6) | (k < chars ? base64Value(text.charCodeAt(positions[c + k] ?? 0)) : 0);
        for (let k = 0; k < chars - 1; k++)
          reading.push((bits >> (16 - 8 * k)) & 0xff, positions[c + k] ?? 0, (positions[c + k + 1] ?? 0) + 1);
      }
    }
  }
  if (reading.n >= MIN_DECODED_BYTES)
    yield { view: reading.view(), minLength: MIN_DECODED_BYTES, runs: reading.runs };
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
        reading.runs.push(reading.n);
        for (let k = i + offset; k + 1 < j; k += 2)
          reading.push((hexValue(text.charCodeAt(k)) << 4) | hexValue(text.charCodeAt(k + 1)), k, k + 2);
      }
      budget.step(j - i);
      i = j;
    }
  }
  if (reading.n >= MIN_DECODED_BYTES)
    yield { view: reading.view(), minLength: MIN_DECODED_BYTES, runs: reading.runs };
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
    yield { view: reading.view(), minLength: 1, runs: [] };
  }
}
