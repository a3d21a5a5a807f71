/**
 * Text for people inside Kubernetes objects: what the service or a tenant's build wrote reaches
 * Events, condition messages and status fields, and must neither drive a terminal that shows them
 * nor disguise itself. Pure.
 *
 * One rule says which characters (`runtime/unprintable.ts`, where the console log reads it too):
 * the C0 controls (U+0000–U+001F), DEL (U+007F), the C1 controls (U+0080–U+009F, some terminals
 * read U+009B as CSI), the escape sequences they start (CSI, OSC — which can write the clipboard
 * or retitle a window —, DCS, SOS, PM, APC and two-character ones), the line and paragraph
 * separators U+2028/U+2029, every format character (Unicode category Cf): the bidirectional ones
 * (U+061C, U+200E, U+200F, U+202A–U+202E, U+2066–U+2069), which reorder the text a reader sees,
 * and the invisible ones (zero-width space U+200B, the joiners, the soft hyphen, U+FEFF, tags);
 * and the invisible characters outside Cf (the Hangul fillers U+115F, U+1160, U+3164, U+FFA0,
 * U+034F, the variation selectors U+FE00–U+FE0F and U+E0100–U+E01EF), which, like the invisible
 * format characters, make two texts that read the same differ. Text here takes them out
 * ({@link printableLine} and {@link printableNote}: status and Events); a value tools compare is
 * never rewritten ({@link unprintableIn}). A terminal's text writes them as escapes instead
 * (`terminal-text.ts`). Every function is one pass of linear regular expressions.
 *
 * Text for people is also bounded, cut to a budget the one way ({@link cutToBytes}, {@link
 * cutToLength}): whole characters only (a multi-byte UTF-8 character or a surrogate pair is never
 * split), and `…` at the end when anything was cut, counted in the budget. In UTF-8 bytes where a
 * limit is in bytes (an Event's note), in UTF-16 code units where it is in JavaScript string length
 * (a service error's detail, a condition's message).
 */
import { ownCopy } from "../runtime/json.ts";
import { INVISIBLE, UNPRINTABLE } from "../runtime/unprintable.ts";

/**
 * An escape sequence, or the start of one cut short: CSI (`ESC [` or U+009B, parameters,
 * intermediates, a final byte), a string command (OSC, DCS, SOS, PM, APC: `ESC ]`, `ESC P`,
 * `ESC X`, `ESC ^`, `ESC _` or U+009D, U+0090, U+0098, U+009E, U+009F, up to BEL, ST or the end
 * of the line), or `ESC` with intermediates and a final byte. Each alternative is a run of one
 * class followed by one of a disjoint class: linear.
 */
const ESCAPE_SEQUENCE = new RegExp(
  [
    "(?:\\x1b\\[|\\x9b)[0-?]*[ -/]*[@-~]?",
    "(?:\\x1b[\\]PX^_]|[\\x90\\x98\\x9d\\x9e\\x9f])[^\\x07\\x1b\\x9c\\n\\r]*(?:\\x07|\\x1b\\\\|\\x9c)?",
    "\\x1b[ -/]*[0-~]?",
  ].join("|"),
  "g",
);

/** Line breaks: CR LF, LF, CR, VT, FF, NEL, LS, PS. */
const LINE_BREAK = /\r\n|[\n\r\v\f\x85\u2028\u2029]/g;
/** What is left to take out once escape sequences and line breaks are dealt with. */
const CONTROL = new RegExp(`[\\x00-\\x08\\x0e-\\x1f\\x7f-\\x9f${INVISIBLE}]`, "gu");
/** A run of the characters {@link printableLine} and {@link printableNote} replace. */
const UNPRINTABLE_RUN = new RegExp(
  `(?:${ESCAPE_SEQUENCE.source}|[\\x00-\\x08\\x0e-\\x1f\\x7f-\\x84\\x86-\\x9f${INVISIBLE}])+`,
  "gu",
);
/** Stands for a run of characters taken out of a message: visible, and never part of a value. */
export const REPLACEMENT = "\ufffd";

/**
 * `text` without escape sequences, controls and bidirectional formatting characters, its line
 * breaks and tabs as spaces: the text of a build log line (or any text) before it is searched
 * for secret values once more and shown. What is taken out leaves nothing behind, so the caller
 * must redact after this (a value written with a color change inside is whole again here).
 */
export function stripToLine(text: string): string {
  return text.replace(ESCAPE_SEQUENCE, "").replace(LINE_BREAK, " ").replace(/\t/g, " ").replace(CONTROL, "");
}

/**
 * `text` as one printable line, for a condition message or a status field: each run of escape
 * sequences, controls and bidirectional formatting characters becomes one U+FFFD, line breaks and
 * tabs spaces. Nothing is joined that was apart (a value interrupted by a control stays
 * interrupted), so text already redacted stays redacted.
 */
export function printableLine(text: string): string {
  return text.replace(UNPRINTABLE_RUN, REPLACEMENT).replace(LINE_BREAK, " ").replace(/\t/g, " ");
}

/**
 * `text` printable over several lines, for an Event's note: as {@link printableLine}, but each
 * line break is kept as a newline (a newline starts a line below; it cannot overwrite or hide
 * what was written before it). A carriage return alone becomes a newline, not a return to the
 * start of the line.
 */
export function printableNote(text: string): string {
  return text.replace(UNPRINTABLE_RUN, REPLACEMENT).replace(LINE_BREAK, "\n").replace(/\t/g, " ");
}

/** What {@link printableWords} drops besides: private-use, unassigned, lone surrogate code points. */
const UNASSIGNED = /[\p{Co}\p{Cn}\p{Cs}]/gu;

/**
 * `text` as printable words: escape sequences, controls and format characters taken out as
 * {@link stripToLine} does, private-use, unassigned and lone surrogate code points too, each run
 * of whitespace (line breaks included) one space, trimmed. For a short detail in a status (a
 * connection's failed probe).
 */
export function printableWords(text: string): string {
  return stripToLine(text).replace(UNASSIGNED, "").replace(/\s+/g, " ").trim();
}

/** A character of the rule (a tab too), or a lone surrogate: what a value kept as given must not hold. */
const NOT_AS_GIVEN = new RegExp(`[\\t${UNPRINTABLE}\\p{Cs}]`, "u");

/**
 * The first character of `text` that text for people would not show as it is ({@link
 * printableLine} replaces it), written as its code point (`U+202E`), or a lone surrogate (the API
 * server would replace it): undefined when `text` can be kept exactly as given. For a value tools
 * compare (an image reference, a revision id), which is never rewritten: left unset instead.
 */
export function unprintableIn(text: string): string | undefined {
  const found = NOT_AS_GIVEN.exec(text)?.[0];
  return found === undefined
    ? undefined
    : `U+${(found.codePointAt(0) ?? 0).toString(16).toUpperCase().padStart(4, "0")}`;
}

/** The mark of a cut text. */
const ELLIPSIS = "…";

/** Bytes of `codePoint` in UTF-8 (a lone surrogate is written as U+FFFD: 3). */
function utf8Bytes(codePoint: number): number {
  if (codePoint < 0x80) return 1;
  if (codePoint < 0x800) return 2;
  return codePoint < 0x10000 ? 3 : 4;
}

/** UTF-16 code units of `codePoint`: 2 for one a surrogate pair holds. */
const utf16Units = (codePoint: number) => (codePoint > 0xffff ? 2 : 1);

/**
 * The longest start of `text` whose characters measure at most `budget` by `size`, then `…`.
 * A budget smaller than the mark itself gives the mark alone. A string of its own (`ownCopy`):
 * a cut that is kept (an unreadable item's name, a label) must not keep the whole text alive.
 */
function cut(text: string, budget: number, size: (codePoint: number) => number): string {
  let used = 0;
  let end = 0;
  for (const ch of text) {
    const n = size(ch.codePointAt(0) ?? 0);
    if (used + n > budget) break;
    used += n;
    end += ch.length;
  }
  return ownCopy(`${text.slice(0, end)}${ELLIPSIS}`);
}

/** `text` cut to at most `maxBytes` UTF-8 bytes on a character boundary, ending with `…` when cut. */
export function cutToBytes(text: string, maxBytes: number): string {
  if (Buffer.byteLength(text) <= maxBytes) return text;
  return cut(text, maxBytes - Buffer.byteLength(ELLIPSIS), utf8Bytes);
}

/**
 * `text` cut to at most `maxLength` UTF-16 code units (JavaScript's `length`), never inside a
 * surrogate pair, ending with `…` when cut.
 */
export function cutToLength(text: string, maxLength: number): string {
  if (text.length <= maxLength) return text;
  return cut(text, maxLength - ELLIPSIS.length, utf16Units);
}
