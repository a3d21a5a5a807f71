/**
 * One output convention for every command that lists, shaped like kubectl's: `-o table|wide|name|
 * json|yaml` and `--no-headers`, defined once here. Tables are for people: short ids (the first 8
 * characters of a uuid), ages (kubectl's `HumanDuration`), colour on a terminal; `wide` adds
 * columns and keeps ids and times whole; `json` and `yaml` are the data as read; `name` is one
 * `kind/name` (or id) per line, for scripts.
 */
import { escapeForTerminal, escapeJsonText, yamlText } from "../api/terminal-text.ts";
import type { Env } from "../config.ts";
import { type OutputFlags, type OutputFormat, outputFormat } from "./output-options.ts";

// Node's module by `process.getBuiltinModule`, not `import` (docs/internals/architecture.md, "Node's
// own modules"): a command's start does without what its ES namespace would load.
const { stripVTControlCharacters, styleText } = process.getBuiltinModule("node:util");

export { yamlText } from "../api/terminal-text.ts";
export type { OutputFlags, OutputFormat } from "./output-options.ts";
export { outputFormat } from "./output-options.ts";

/**
 * `rows` as `flags` ask, coloured when stdout is a terminal (see {@link colorEnabled}); a table's
 * {@link Listing.empty} on `ctx.err`.
 */
export function renderFor<T>(
  ctx: { env: Env; stdoutIsTTY: boolean; err: (text: string) => void },
  flags: OutputFlags,
  rows: readonly T[],
  listing: Listing<T>,
): string {
  return renderRows(rows, listing, {
    format: outputFormat(flags),
    headers: flags.headers !== false,
    paint: paint(colorEnabled(ctx.env, ctx.stdoutIsTTY)),
    err: ctx.err,
  });
}

/** Colours of the terminal, or none. */
export interface Paint {
  readonly enabled: boolean;
  green(text: string): string;
  yellow(text: string): string;
  red(text: string): string;
  dim(text: string): string;
}

/**
 * Whether to colour standard output, as Node and most tools decide: `FORCE_COLOR` (unless `0`
 * or `false`) colours even when piped; else `NO_COLOR` or `NODE_DISABLE_COLORS` (any value but
 * empty) or `TERM=dumb` turn colour off; else colour when stdout is a terminal.
 */
export function colorEnabled(env: Env, stdoutIsTTY: boolean): boolean {
  const force = env.FORCE_COLOR;
  if (force !== undefined) return force !== "0" && force.toLowerCase() !== "false";
  if (env.NO_COLOR || env.NODE_DISABLE_COLORS || env.TERM === "dumb") return false;
  return stdoutIsTTY;
}

/** ANSI colours when `enabled`, else text as it is. */
export function paint(enabled: boolean): Paint {
  // validateStream off: the decision is colorEnabled's, made from the injected context.
  const style = (format: Parameters<typeof styleText>[0]) => (text: string) =>
    enabled && text !== "" ? styleText(format, text, { validateStream: false }) : text;
  return { enabled, green: style("green"), yellow: style("yellow"), red: style("red"), dim: style("dim") };
}

/** A cell of a table. */
export type Cell = string | number | boolean | null | undefined;

/** One table column: its header and how to show a row's value. */
export interface Column<T> {
  header: string;
  value: (row: T) => Cell;
  /**
   * `id`: a uuid, its first 8 characters in `table`; `time`: an ISO 8601 time, its age in
   * `table` (kubectl's AGE), whole in `wide`; `status`: coloured (green ready, yellow in
   * progress, red failed).
   */
  show?: "id" | "time" | "status";
  /** Header under `wide` (a time column is `AGE` in table, e.g. `UPDATED` in wide). */
  wideHeader?: string;
  /** Shown only under `wide`. */
  wide?: boolean;
}

/** What {@link renderRows} needs besides the rows. */
export interface Listing<T> {
  columns: readonly Column<T>[];
  /** `kind/name` or the id of a row, for `-o name`. */
  name: (row: T) => string;
  /**
   * Printed on stderr when there are no rows in a table, as kubectl's `No resources found`: a
   * script reading the table (`--no-headers | awk`) reads no row.
   */
  empty: string;
  /** The data json and yaml show for a row (default the row). */
  data?: (row: T) => unknown;
}

/** How rows are rendered: the format, headers, colour and the time ages are measured from. */
export interface RenderOptions {
  format: OutputFormat;
  headers?: boolean;
  paint?: Paint;
  /** Now, in ms since the epoch (ages are measured from it). */
  now?: number;
  /** Where {@link Listing.empty} goes (stderr); without it, it is not printed. */
  err?: (text: string) => void;
}

/**
 * `rows` rendered as asked, ending with a newline.
 *
 * Contract: json is a pretty-printed array of the rows' data; yaml the same data as a YAML
 * sequence; name one {@link Listing.name} per line (nothing when there are no rows); table and
 * wide one line per row under a header line (none with `headers: false`), nothing when there are
 * no rows (`empty` to `options.err`), ids shortened and times shown as ages in table only.
 */
export function renderRows<T>(rows: readonly T[], listing: Listing<T>, options: RenderOptions): string {
  const { format } = options;
  const data = listing.data ?? ((row: T) => row);
  // The service's text must not drive the terminal: JSON with the characters it leaves raw
  // escaped too, YAML with them as double-quoted escapes, every other cell with its controls written out.
  if (format === "json") return `${escapeJsonText(JSON.stringify(rows.map(data), null, 2))}\n`;
  if (format === "yaml") return rows.length === 0 ? "[]\n" : yamlText(rows.map(data));
  if (format === "name") return rows.map((row) => `${escapeForTerminal(listing.name(row))}\n`).join("");
  if (rows.length === 0) {
    options.err?.(`${listing.empty}\n`);
    return "";
  }
  const wide = format === "wide";
  const columns = listing.columns.filter((c) => wide || !c.wide);
  const colours = options.paint ?? paint(false);
  const now = options.now ?? Date.now();
  const lines = rows.map((row) =>
    columns.map((c) => {
      const text = cellText(c, c.value(row), wide, now);
      return c.show === "status" ? statusColour(text, colours) : text;
    }),
  );
  const head = columns.map((c) => (wide && c.wideHeader ? c.wideHeader : c.header));
  return table(options.headers === false ? undefined : head, lines);
}

/**
 * One document (not a listing: `status`'s overview, `version`'s versions) as json or yaml, escaped
 * as {@link renderRows} escapes rows.
 */
export function renderDocument(format: "json" | "yaml", document: unknown): string {
  return format === "json" ? `${escapeJsonText(JSON.stringify(document, null, 2))}\n` : yamlText(document);
}

/**
 * An aligned table without borders, kubectl-style (`head` undefined: no header line): each column
 * as wide as its widest cell and two spaces, the end of each line trimmed. Cells may hold colour
 * escapes: widths are measured without them ({@link displayWidth}).
 */
export function table(head: readonly string[] | undefined, rows: readonly (readonly string[])[]): string {
  const lines = head ? [head, ...rows] : rows;
  const widths: number[] = [];
  for (const line of lines)
    line.forEach((cell, i) => {
      widths[i] = Math.max(widths[i] ?? 0, displayWidth(cell));
    });
  const text = lines.map((line) =>
    line
      .map((cell, i) => cell + " ".repeat((widths[i] ?? 0) - displayWidth(cell) + 2))
      .join("")
      .trimEnd(),
  );
  return `${text.join("\n")}\n`;
}

/**
 * An emoji (and what joins or modifies it), which a terminal shows two columns wide: a flag (two
 * regional indicators), a keycap, or one shown as emoji by default or asked to be (U+FE0F), with
 * its skin tones and the emoji joined to it. By Unicode properties: the set of every emoji
 * sequence (`\p{RGI_Emoji}`) takes ~20 ms to build.
 */
const EMOJI =
  /\p{Regional_Indicator}{2}|[#*0-9]\uFE0F\u20E3|(?:\p{Emoji_Presentation}|\p{Extended_Pictographic}\uFE0F)(?:\p{Emoji_Modifier}|\u200D(?:\p{Emoji_Presentation}|\p{Extended_Pictographic}\uFE0F?)\p{Emoji_Modifier}?)*/gu;

/**
 * The columns `text` takes on a terminal: colour escapes and control characters none, combining
 * diacritics none, an emoji and an East Asian wide or fullwidth character two, any other one.
 */
export function displayWidth(text: string): number {
  const plain = stripVTControlCharacters(text);
  if (/^[\x20-\x7e]*$/.test(plain)) return plain.length;
  let width = 0;
  for (const char of plain.replace(EMOJI, "  ")) {
    const code = char.codePointAt(0) ?? 0;
    if (code <= 0x1f || (code >= 0x7f && code <= 0x9f) || (code >= 0x300 && code <= 0x36f)) continue;
    width += isWide(code) ? 2 : 1;
  }
  return width;
}

/** East Asian wide and fullwidth ranges (Hangul Jamo, CJK, Hangul syllables, fullwidth forms, …). */
const WIDE: readonly (readonly [number, number])[] = [
  [0x1100, 0x115f],
  [0x2329, 0x232a],
  [0x2e80, 0x303e],
  [0x3040, 0x3247],
  [0x3250, 0x4dbf],
  [0x4e00, 0xa4c6],
  [0xa960, 0xa97c],
  [0xac00, 0xd7a3],
  [0xf900, 0xfaff],
  [0xfe10, 0xfe19],
  [0xfe30, 0xfe6b],
  [0xff01, 0xff60],
  [0xffe0, 0xffe6],
  [0x1b000, 0x1b001],
  [0x1f200, 0x1f251],
  [0x20000, 0x3fffd],
];

function isWide(code: number): boolean {
  return code >= 0x1100 && WIDE.some(([from, to]) => code >= from && code <= to);
}

function cellText<T>(column: Column<T>, value: Cell, wide: boolean, now: number): string {
  if (value === null || value === undefined || value === "") return "-";
  const text = escapeForTerminal(String(value));
  if (wide) return text;
  if (column.show === "id") return shortId(text);
  if (column.show === "time") return age(text, now);
  return text;
}

/** The first 8 characters of a uuid (as `kubectl get` shows short ids); other text as it is. */
export function shortId(id: string): string {
  return /^[0-9a-f]{8}-[0-9a-f]{4}-/i.test(id) ? id.slice(0, 8) : id;
}

/** The age of an ISO 8601 time at `now` in kubectl's format, or the text as it is if it is not a time. */
export function age(time: string, now: number): string {
  const at = Date.parse(time);
  return Number.isNaN(at) ? time : humanDuration(now - at);
}

/**
 * A duration in kubectl's format (k8s.io/apimachinery `duration.HumanDuration`): 2-3 significant
 * figures, e.g. 45s, 5m30s, 42m, 5h10m, 20h, 3d4h, 90d, 2y40d, 9y. Under -2 s: `<invalid>`.
 */
export function humanDuration(ms: number): string {
  const seconds = Math.trunc(ms / 1000);
  if (seconds < -1) return "<invalid>";
  if (seconds < 0) return "0s";
  if (seconds < 120) return `${seconds}s`;
  const minutes = Math.trunc(seconds / 60);
  if (minutes < 10) {
    const s = seconds % 60;
    return s === 0 ? `${minutes}m` : `${minutes}m${s}s`;
  }
  if (minutes < 180) return `${minutes}m`;
  const hours = Math.trunc(seconds / 3600);
  if (hours < 8) {
    const m = minutes % 60;
    return m === 0 ? `${hours}h` : `${hours}h${m}m`;
  }
  if (hours < 48) return `${hours}h`;
  if (hours < 24 * 8) {
    const h = hours % 24;
    const days = Math.trunc(hours / 24);
    return h === 0 ? `${days}d` : `${days}d${h}h`;
  }
  if (hours < 24 * 365 * 2) return `${Math.trunc(hours / 24)}d`;
  const years = Math.trunc(hours / 24 / 365);
  if (hours < 24 * 365 * 8) {
    const d = Math.trunc(hours / 24) % 365;
    return d === 0 ? `${years}y` : `${years}y${d}d`;
  }
  return `${years}y`;
}

/** Ready-like statuses green, failures red, work in progress yellow; others as they are. */
function statusColour(text: string, colours: Paint): string {
  if (/^(ready|live|deployed|true|active|healthy)$/i.test(text)) return colours.green(text);
  if (/fail|error|stalled|unhealthy|interrupted|false|\(unreadable\)/i.test(text)) return colours.red(text);
  if (/progress|pending|queued|building|deploying|creat|awaiting|unknown/i.test(text))
    return colours.yellow(text);
  return text;
}
