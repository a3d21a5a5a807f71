/**
 * Rendering listings for people (a plain aligned table) and for programs (JSON, YAML).
 */
import Table from "cli-table3";
import { stringify } from "yaml";
import type { OutputFormat } from "./context.ts";

/** One table column: its header and how to show a row's value. */
export interface Column<T> {
  header: string;
  value: (row: T) => string | number | boolean | null | undefined;
}

/**
 * `rows` rendered in `format`, ending with a newline.
 *
 * Contract: json is a pretty-printed array of the rows as given; yaml is the same data as a YAML
 * sequence; table shows only `columns`, one line per row, and `empty` when there are no rows.
 */
export function renderRows<T>(
  format: OutputFormat,
  rows: readonly T[],
  columns: readonly Column<T>[],
  empty: string,
): string {
  if (format === "json") return `${JSON.stringify(rows, null, 2)}\n`;
  if (format === "yaml") return rows.length === 0 ? "[]\n" : stringify(rows);
  if (rows.length === 0) return `${empty}\n`;
  const table = new Table({
    head: columns.map((c) => c.header),
    chars: PLAIN,
    style: { head: [], border: [], "padding-left": 0, "padding-right": 2 },
  });
  for (const row of rows) table.push(columns.map((c) => show(c.value(row))));
  return `${table
    .toString()
    .split("\n")
    .map((line) => line.trimEnd())
    .join("\n")}\n`;
}

function show(value: string | number | boolean | null | undefined): string {
  return value === null || value === undefined || value === "" ? "-" : String(value);
}

// kubectl-style: no borders, columns separated by padding only.
const PLAIN = {
  top: "",
  "top-mid": "",
  "top-left": "",
  "top-right": "",
  bottom: "",
  "bottom-mid": "",
  "bottom-left": "",
  "bottom-right": "",
  left: "",
  "left-mid": "",
  mid: "",
  "mid-mid": "",
  right: "",
  "right-mid": "",
  middle: "",
};
