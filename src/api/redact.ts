/**
 * Redaction of secret values from text the operator shows or logs: the service's error bodies
 * (the transport redacts the API key), conditions, events and the build logs of the failure
 * evidence. Pure.
 *
 * A value travels in more forms than the one it was given in, and each is found:
 * - as given, trimmed (a value read from a file ends with a newline its build prints without),
 *   and, for a value of several lines (a private key), each of its lines of at least
 *   `MIN_LINE_CHARS` characters, trimmed (a build prints a file one line per entry);
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
 *   `MIN_DECODED_BYTES` bytes (a shorter one would match the noise of decoding ordinary
 *   words) and look at the first `DECODE_WINDOW_CHARS` characters of a text;
 * - each of those of at least `MIN_LINE_CHARS` characters broken by white space (wrapped
 *   over lines, cut into words, spaced out), as the text reads with its white space left out:
 *   pieces shorter than `MIN_SHARED_BYTES` each are found together;
 * - any piece of the text, or of a decoded reading, that shares at least `MIN_SHARED_BYTES`
 *   consecutive characters with a value (min(12, the value's length): a shorter value is searched
 *   whole): the half of a value a line shows when the value straddles two lines, or two entries;
 * - (in `partsCoverage`) a value split over two entries with other entries between them:
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
 * (`REDACT_BUDGET_MS`, and `REDACT_MS_PER_MIB` per MiB of text searched): past it
 * the text is not shown (`RedactionBudgetError`, or the fallbacks of {@link redactSecrets} and
 * {@link redactAndTruncate}), never shown unsearched.
 *
 * This file holds the entry points; the search is in `redact/`, a file a part, lowest first:
 * `budget.ts` (the time budget), `samples.ts` (the samples and their hashes), `forms.ts` (the
 * forms of a list of values, compiled once per list), `views.ts` (the readings of a text and how
 * a span found in one is marked in the original), `byte-views.ts`, `base64.ts` and `hex.ts` (the
 * decoded readings; percent-encoding with hex), `search.ts` (the whole forms), `shared.ts` (the
 * pieces shared with a value), `coverage.ts` (every reading of a text searched), `parts.ts` (a
 * text searched as parts joined, and a value split over parts: `partsCoverage`).
 */
import { cutToLength } from "./printable.ts";
import { budgetFor, type RedactionBudget, RedactionBudgetError, UNSEARCHED } from "./redact/budget.ts";
import { coverageOf } from "./redact/coverage.ts";
import { FORM_WIDTH, formsOf, type SecretForms } from "./redact/forms.ts";

/** What replaces a secret value in redacted text. */
export const REDACTED = "***";

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
