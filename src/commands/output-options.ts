/**
 * The output flags of every command that lists (`-o table|wide|name|json|yaml`, `--no-headers`),
 * defined once: the light part of output.ts, which a command's registration imports (its
 * `--help`) without the table and YAML writers that output.ts loads to render.
 */
import { type Command, Option } from "commander";

/** The output formats of a listing. */
export const OUTPUT_FORMATS = ["table", "wide", "name", "json", "yaml"] as const;
export type OutputFormat = (typeof OUTPUT_FORMATS)[number];

/** The flags {@link addOutputOptions} adds, as commander parses them. */
export interface OutputFlags {
  output?: OutputFormat | "text";
  /** False under `--no-headers`. */
  headers?: boolean;
}

/** How a command's listing may be shown. */
export interface OutputChoice {
  /** The formats it offers (default: all of {@link OUTPUT_FORMATS}). */
  formats?: readonly OutputFormat[];
  /** Whether `text`, its former name of `table`, is still accepted (scripts written for it keep working). */
  textAlias?: boolean;
  /** Whether its table has headers to drop (`--no-headers`); default true. */
  headers?: boolean;
  /** The format when `-o` is not given; default table (also when piped, as kubectl prints). */
  default?: OutputFormat;
}

/** Adds `-o, --output <format>` and `--no-headers` to `command`: the same flags on every listing. */
export function addOutputOptions(command: Command, choice: OutputChoice = {}): Command {
  const formats = choice.formats ?? OUTPUT_FORMATS;
  const fallback = `default ${choice.default ?? "table"}`;
  const alias = choice.textAlias ? "; text, its former name, is read as table" : "";
  command.addOption(
    new Option("-o, --output <format>", `output format (${fallback}${alias})`).choices(
      choice.textAlias ? [...formats, "text"] : formats,
    ),
  );
  if (choice.headers !== false) command.option("--no-headers", "print tables without their header line");
  return command;
}

/**
 * The format asked for (`text` read as `table`), else a table: on a terminal and piped alike, as
 * kubectl prints (a script asks for `-o json`, or reads the table with `--no-headers`).
 */
export function outputFormat(flags: OutputFlags): OutputFormat {
  return flags.output === undefined || flags.output === "text" ? "table" : flags.output;
}
