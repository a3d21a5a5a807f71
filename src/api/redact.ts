/**
 * Redaction of secret values from text the operator shows or logs: the service's error bodies
 * (the transport redacts the API key), conditions and events. Pure. The values are found as
 * they are and as JSON escaped them, since a service's error body quotes what it was sent.
 */
import { truncate } from "./errors.ts";

/** What replaces a secret value in redacted text. */
export const REDACTED = "***";

/**
 * How many times a value may have been JSON-escaped and still be found: once for a value inside
 * a JSON body, twice for JSON carried as a string inside JSON (a detail quoting a request body).
 */
const ESCAPE_DEPTH = 2;
/** The most characters one character of a value becomes, escaped {@link ESCAPE_DEPTH} times (`é` → `\\u00e9`). */
const ESCAPED_WIDTH = 8;
/** Characters no JSON encoder escapes: a value made of them only reads the same escaped or not. */
const NEVER_ESCAPED = /^[\x20-\x7e]*$/;
const SOMETIMES_ESCAPED = /["\\/<>&']/;

/**
 * `text` with every occurrence of each non-empty value in `values` replaced by `marker`.
 *
 * Contract: a value is found as it is and as any JSON encoder may have escaped it, up to twice
 * (`"` as `\"`, `\` as `\\`, a newline as `\n`, `é` as `\u00e9` or `\u00E9`, `/` as `\/`, any
 * character as `\uXXXX`): a service's error body quotes what it was sent in JSON. Occurrences
 * are found in the original text (overlapping ones merge into one marker), so the marker itself
 * is never searched again. Redact the whole text before cutting it to a length: a value cut in
 * two is no longer found, and its first half would show ({@link redactAndTruncate} does both).
 */
export function redactSecrets(text: string, values: Iterable<string>, marker = REDACTED): string {
  return redactPrefix(text, [...values], marker, text.length);
}

/**
 * `text` redacted of `values` (see {@link redactSecrets}), then cut to at most `max` characters:
 * the one order in which no part of a value can show. Every message the operator cuts to a
 * length goes through here. Only the start of a long text is searched, as far as a value shown
 * within `max` characters could reach, so a huge text costs no more than a short one.
 */
export function redactAndTruncate(
  text: string,
  values: Iterable<string>,
  max: number,
  marker = REDACTED,
): string {
  const wanted = [...values];
  const longest = wanted.reduce((n, v) => Math.max(n, v.length), 0);
  // Every occurrence that starts within `keep` characters ends within `keep + reach`: all found.
  const keep = 2 * max;
  const reach = ESCAPED_WIDTH * longest;
  if (text.length <= keep + reach) return truncate(redactPrefix(text, wanted, marker, text.length), max);
  const shown = redactPrefix(text.slice(0, keep + reach), wanted, marker, keep);
  return truncate(`${shown}…`, max);
}

/** `text[0, keep)` redacted of `values`, searching the whole of `text` (see {@link redactSecrets}). */
function redactPrefix(text: string, values: readonly string[], marker: string, keep: number): string {
  const wanted = [...new Set(values)].filter((value) => value.length > 0);
  if (wanted.length === 0 || text.length === 0) return text.slice(0, keep);
  // Which characters of the original text some occurrence covers: one byte each, however many
  // occurrences overlap (a key of one repeated character in a body of that character included).
  const covered = new Uint8Array(text.length);
  const find = (view: TextView, value: string) => {
    // Occurrences come in order: only the part past the last one's end is marked again.
    let marked = 0;
    for (let at = view.text.indexOf(value); at !== -1; at = view.text.indexOf(value, at + 1)) {
      const from = Math.max(startOf(view, at), marked);
      const to = endOf(view, at + value.length - 1);
      if (to > from) covered.fill(1, from, to);
      marked = Math.max(marked, to);
    }
  };
  const plain: TextView = { text, start: undefined, end: undefined };
  for (const value of wanted) find(plain, value);
  // Only a value with a character some encoder escapes can look different in JSON text.
  const escapable = wanted.filter((v) => !NEVER_ESCAPED.test(v) || SOMETIMES_ESCAPED.test(v));
  let view = plain;
  for (let depth = 0; depth < ESCAPE_DEPTH && escapable.length > 0 && view.text.includes("\\"); depth++) {
    view = unescapeJson(view);
    for (const value of escapable) find(view, value);
  }
  // Each run of covered characters (overlapping or touching occurrences) becomes one marker.
  let out = "";
  let at = 0;
  while (at < keep) {
    const from = covered.indexOf(1, at);
    if (from === -1 || from >= keep) return out + text.slice(at, keep);
    const to = covered.indexOf(0, from);
    out += text.slice(at, from) + marker;
    if (to === -1) return out;
    at = to;
  }
  return out;
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
function unescapeJson(view: TextView): TextView {
  const source = view.text;
  const parts: string[] = [];
  const start = new Int32Array(source.length);
  const end = new Int32Array(source.length);
  let n = 0;
  for (let i = 0; i < source.length; ) {
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
