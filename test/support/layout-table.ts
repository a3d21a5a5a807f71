// The README's layout table, read as the rules of the module graph: one row per folder of src/
// (subfolders included) or file at its root, and what each may import. `layoutProblems` says
// where the code and the table disagree; test/unit/module-graph.test.ts asks it.
import type { ImportEdge } from "./module-graph.ts";

/**
 * One row of the table. Names are relative to src/: a folder ends in `/` (`reconcile/service/`), a
 * root file does not (`main.ts`).
 */
export interface LayoutRow {
  /** What the row describes (its first column): one or more folders or root files. */
  readonly parts: readonly string[];
  /** Its third column: the folders and root files its parts may import. */
  readonly mayImport: readonly string[];
}

/** The names in a cell: its code spans. */
const spans = (cell: string): string[] => [...cell.matchAll(/`([^`]+)`/g)].map((m) => m[1] ?? "");

/**
 * The table below the heading `heading` of `markdown`: its rows, header and separator left out.
 * Throws when the heading or the table is missing, or a row has other than three columns.
 */
export function readLayoutTable(markdown: string, heading = "Layout"): LayoutRow[] {
  const lines = markdown.split("\n");
  const start = lines.findIndex(
    (line) => /^#{1,6}\s/.test(line) && line.replace(/^#+\s+/, "").trim() === heading,
  );
  if (start < 0) throw new Error(`no heading "${heading}"`);
  let i = start + 1;
  while (i < lines.length && !(lines[i] ?? "").startsWith("|")) {
    if (/^#{1,6}\s/.test(lines[i] ?? "")) break;
    i++;
  }
  const table: string[] = [];
  while (i < lines.length && (lines[i] ?? "").startsWith("|")) table.push(lines[i++] ?? "");
  if (table.length < 3) throw new Error(`no table under "${heading}"`);
  return table.slice(2).map((row) => {
    const cells = row.trim().replace(/^\|/, "").replace(/\|$/, "").split("|");
    if (cells.length !== 3) throw new Error(`a row of ${cells.length} columns, not 3: ${row}`);
    return { parts: spans(cells[0] ?? ""), mayImport: spans(cells[2] ?? "") };
  });
}

/** Every folder of src/ (`kube/`, `reconcile/service/`) and file at its root (`main.ts`) of `files`. */
export function partsOf(files: readonly string[]): Set<string> {
  const parts = new Set<string>();
  for (const file of files) {
    const path = file.replace(/^src\//, "").split("/");
    if (path.length === 1) parts.add(path[0] ?? "");
    for (let depth = 1; depth < path.length; depth++) parts.add(`${path.slice(0, depth).join("/")}/`);
  }
  return parts;
}

/** The row part a file of src/ belongs to: itself at the root, else its deepest folder in `keys`. */
function partOf(file: string, keys: ReadonlySet<string>): string | undefined {
  const path = file.replace(/^src\//, "");
  if (!path.includes("/")) return keys.has(path) ? path : undefined;
  let best: string | undefined;
  for (const key of keys)
    if (key.endsWith("/") && path.startsWith(key) && key.length > (best?.length ?? 0)) best = key;
  return best;
}

/**
 * Whether part `from` may import part `to` by `allowed` (from's third column): a folder reaches
 * its own subfolders; a folder it names includes that folder's subfolders, except when `from` is
 * one of them (from within `reconcile/`, `reconcile/` means the files at its root).
 */
function allows(from: string, to: string, allowed: readonly string[]): boolean {
  if (from.endsWith("/") && to.startsWith(from)) return true;
  return allowed.some(
    (name) => to === name || (name.endsWith("/") && to.startsWith(name) && !from.startsWith(name)),
  );
}

/**
 * Where the table `rows` and the code (`files` of src/, and the `edges` between them) disagree,
 * one line each: a folder or root file without a row, a row for none, a part in two rows, a name
 * in a third column that is no row, a subfolder allowed what its folder is not, and every import
 * its importer's row does not allow.
 */
export function layoutProblems(
  rows: readonly LayoutRow[],
  files: readonly string[],
  edges: readonly ImportEdge[],
): string[] {
  const problems: string[] = [];
  const allowed = new Map<string, readonly string[]>();
  for (const row of rows)
    for (const part of row.parts) {
      if (allowed.has(part)) problems.push(`${part} has two rows`);
      allowed.set(part, row.mayImport);
    }
  const keys = new Set(allowed.keys());
  const present = partsOf(files);
  for (const part of present) if (!keys.has(part)) problems.push(`src/${part} has no row`);
  for (const key of keys) if (!present.has(key)) problems.push(`the row of ${key} names nothing in src/`);
  for (const [key, names] of allowed) {
    for (const name of names)
      if (!keys.has(name)) problems.push(`${key} may import ${name}, which has no row`);
    // A subfolder is part of its folder: what it may import outside it, its folder's row allows.
    const parent = [...keys]
      .filter((k) => k !== key && k.endsWith("/") && key.startsWith(k))
      .sort((a, b) => b.length - a.length)[0];
    if (parent === undefined) continue;
    for (const name of names)
      if (name !== parent && !name.startsWith(parent) && !allows(parent, name, allowed.get(parent) ?? []))
        problems.push(`${key} may import ${name}, which its folder ${parent} may not`);
  }
  for (const { from, to } of edges) {
    const a = partOf(from, keys);
    const b = partOf(to, keys);
    if (a === undefined || b === undefined || a === b) continue;
    if (!allows(a, b, allowed.get(a) ?? [])) problems.push(`${from} imports ${to}: ${a} may not import ${b}`);
  }
  return problems;
}
