/**
 * Text that is safe to show: what the service or a tenant's build wrote reaches Events, condition
 * messages, status fields and an admin's terminal, and must neither drive the terminal nor
 * disguise itself. Pure, a leaf.
 *
 * Characters dealt with: the C0 controls (U+0000–U+001F), DEL (U+007F), the C1 controls
 * (U+0080–U+009F, some terminals read U+009B as CSI), the escape sequences they start (CSI,
 * OSC — which can write the clipboard or retitle a window —, DCS, SOS, PM, APC and two-character
 * ones), the line and paragraph separators U+2028/U+2029, and the bidirectional formatting
 * characters (U+061C, U+200E, U+200F, U+202A–U+202E, U+2066–U+2069), which reorder the text a
 * reader sees. Every function is one pass of linear regular expressions.
 */

/** Bidirectional formatting characters: marks, embeddings, overrides, isolates. */
const BIDI = "\\u061c\\u200e\\u200f\\u202a-\\u202e\\u2066-\\u2069";

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
const CONTROL = new RegExp(`[\\x00-\\x08\\x0e-\\x1f\\x7f-\\x9f${BIDI}]`, "g");
/** A run of the characters {@link printableLine} and {@link printableNote} replace. */
const UNPRINTABLE_RUN = new RegExp(
  `(?:${ESCAPE_SEQUENCE.source}|[\\x00-\\x08\\x0e-\\x1f\\x7f-\\x84\\x86-\\x9f${BIDI}])+`,
  "g",
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

/** Every character {@link escapeForTerminal} writes as an escape (tab excepted). */
const TERMINAL_UNSAFE = new RegExp(`[\\x00-\\x08\\x0a-\\x1f\\x7f-\\x9f\\u2028\\u2029${BIDI}]`, "g");
const NAMED_ESCAPES: Record<string, string> = { "\n": "\\n", "\r": "\\r", "\x1b": "\\x1b" };

/**
 * `text` for a terminal, every control and bidirectional formatting character written visibly
 * as an escape (`\x1b`, `\n`, `\r`, `\x9b`, `\u202e`), so an entry stays on its line and cannot
 * clear the screen, move the cursor, write the clipboard (OSC 52) or reorder what is read. A tab
 * stays (it only moves to the next tab stop). A backslash already in the text is left as it is.
 */
export function escapeForTerminal(text: string): string {
  return text.replace(TERMINAL_UNSAFE, (c) => {
    const named = NAMED_ESCAPES[c];
    if (named !== undefined) return named;
    const code = c.charCodeAt(0);
    return code < 0x100 ? `\\x${hex(code, 2)}` : `\\u${hex(code, 4)}`;
  });
}

/** JSON.stringify leaves these raw: C1 controls, DEL, the separators, bidirectional formatting. */
const JSON_UNSAFE = new RegExp(`[\\x7f-\\x9f\\u2028\\u2029${BIDI}]`, "g");

/**
 * JSON text (as `JSON.stringify` writes it) with the characters it leaves raw written as `\uXXXX`
 * escapes too: the same JSON value, safe on a terminal. Such characters can only stand inside
 * strings, where the escape means the same character.
 */
export function escapeJsonText(json: string): string {
  return json.replace(JSON_UNSAFE, (c) => `\\u${hex(c.charCodeAt(0), 4)}`);
}

function hex(code: number, width: number): string {
  return code.toString(16).padStart(width, "0");
}
