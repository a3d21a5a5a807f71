/**
 * What `reconcile-path` makes of a V8 coverage: the `src/` files with a function executed in the
 * window (its own call count above zero; a module's top level, run at import, is not counted
 * again), grouped by folder, each with its line count, those over {@link LONG_FILE_LINES} flagged;
 * and the file the figures accumulate in, `docs/bench/reconcile-path.json` (one run per commit).
 */
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, relative, sep } from "node:path";
import { fileURLToPath } from "node:url";
import type { ScriptCoverage } from "./inspector.ts";

/** A file in the path longer than this is flagged: the count must not fall by merging files. */
export const LONG_FILE_LINES = 400;

/** The goal: the path one resource takes crosses at most this many files and folders. */
export const GOAL = { files: 25, folders: 7 } as const;

/**
 * The files under `srcDir` (paths relative to it, `/`-separated, sorted) of which some function ran
 * in the window: the first range of a function is the function itself, its count the calls.
 */
export function executedFiles(coverage: readonly ScriptCoverage[], srcDir: string): string[] {
  return Object.keys(ranFunctions(coverage, srcDir)).sort();
}

/** A function that ran in the window: its name, its span in its file (V8's offsets) and its calls. */
interface RanFunction {
  name: string;
  start: number;
  end: number;
  calls: number;
}

/** The functions that ran in the window, by file under `srcDir` (`/`-separated); files with none left out. */
function ranFunctions(coverage: readonly ScriptCoverage[], srcDir: string): Record<string, RanFunction[]> {
  const byFile: Record<string, RanFunction[]> = {};
  for (const script of coverage) {
    if (!script.url.startsWith("file:")) continue;
    const path = relative(srcDir, fileURLToPath(script.url));
    if (path.startsWith("..") || path === "") continue;
    const ran = script.functions.flatMap((f) => {
      const own = f.ranges[0];
      return own && own.count > 0
        ? [
            {
              name: f.functionName || "(anonymous)",
              start: own.startOffset,
              end: own.endOffset,
              calls: own.count,
            },
          ]
        : [];
    });
    if (ran.length > 0) byFile[path.split(sep).join("/")] = ran;
  }
  return byFile;
}

/**
 * The functions of each file of {@link executedFiles} that ran in the window, as
 * `name@offset ×calls` (`(anonymous)` for a function without a name), in the order V8 lists them.
 */
export function executedFunctions(
  coverage: readonly ScriptCoverage[],
  srcDir: string,
): Record<string, string[]> {
  return Object.fromEntries(
    Object.entries(ranFunctions(coverage, srcDir)).map(([file, ran]) => [
      file,
      ran.map((f) => `${f.name}@${f.start} ×${f.calls}`),
    ]),
  );
}

/** The spans (start and end offsets) of the functions of each file that ran in the window. */
export function executedSpans(
  coverage: readonly ScriptCoverage[],
  srcDir: string,
): Record<string, Array<readonly [number, number]>> {
  return Object.fromEntries(
    Object.entries(ranFunctions(coverage, srcDir)).map(([file, ran]) => [
      file,
      ran.map((f) => [f.start, f.end] as const),
    ]),
  );
}

/**
 * The lines of `text` that some span of `spans` (offsets into it) reaches, each once: a function
 * within a function that ran, or the same function in two windows, counts its lines once. A
 * function's comment above it is not in its span, the comments and blank lines within it are.
 */
export function linesWithin(text: string, spans: ReadonlyArray<readonly [number, number]>): number {
  const starts = [0];
  for (let i = text.indexOf("\n"); i !== -1; i = text.indexOf("\n", i + 1)) starts.push(i + 1);
  /** The index of the line that holds `offset`. */
  const lineAt = (offset: number) => {
    let low = 0;
    let high = starts.length - 1;
    while (low < high) {
      const mid = (low + high + 1) >> 1;
      if ((starts[mid] ?? 0) <= offset) low = mid;
      else high = mid - 1;
    }
    return low;
  };
  const lines = new Set<number>();
  for (const [start, end] of spans) {
    if (end <= start) continue;
    for (let line = lineAt(start), last = lineAt(end - 1); line <= last; line++) lines.add(line);
  }
  return lines.size;
}

/**
 * The path of several edits' windows (each the files {@link executedFiles} gives): the files that
 * ran in more than half of them, and apart, the files that ran in some only, with in how many. A
 * timer of the operator that fires once a second (the quiet collection's check) falls in some
 * windows and not others: it runs beside the edit, it is not on its path.
 */
export function pathOfEdits(windows: readonly (readonly string[])[]): {
  files: string[];
  beside: Array<{ file: string; edits: number }>;
} {
  const seen = new Map<string, number>();
  for (const files of windows) for (const file of new Set(files)) seen.set(file, (seen.get(file) ?? 0) + 1);
  const sorted = [...seen].sort(([a], [b]) => a.localeCompare(b));
  return {
    files: sorted.filter(([, n]) => n * 2 > windows.length).map(([file]) => file),
    beside: sorted.filter(([, n]) => n * 2 <= windows.length).map(([file, edits]) => ({ file, edits })),
  };
}

/** One file of the path. */
export interface PathFile {
  file: string;
  lines: number;
  /** Its lines in the functions that ran ({@link linesWithin}), where the run measured them. */
  ran?: number;
}

/** One folder of the path (`.` for the top of `src/`) and its files. */
export interface PathFolder {
  folder: string;
  files: PathFile[];
}

/** The figures of one run. */
export interface PathFigures {
  files: number;
  /** Distinct directories (`reconcile` and `reconcile/plan` are two). */
  folders: number;
  /** Distinct folders directly under `src/` (`.` for files at its top). */
  topFolders: number;
  /** Files over LONG_FILE_LINES lines. */
  longFiles: string[];
  byFolder: PathFolder[];
  /** The lines of the path's files together. */
  lines: number;
  /**
   * The fewest files of at most LONG_FILE_LINES lines that could hold those lines: what merging
   * alone could bring the count down to, with every line kept.
   */
  fewestFiles: number;
  /** Of those lines, the ones in the functions that ran, where the run measured them. */
  ranLines?: number;
}

/** Lines of a text as `wc -l` counts them, plus an unterminated last line. */
export function lineCount(text: string): number {
  if (text === "") return 0;
  const newlines = text.split("\n").length - 1;
  return text.endsWith("\n") ? newlines : newlines + 1;
}

/**
 * Groups `files` by folder (sorted), each with the lines `linesOf` reads and, given `ranOf`, its
 * lines in the functions that ran.
 */
export function pathFigures(
  files: readonly string[],
  linesOf: (file: string) => number,
  ranOf?: (file: string) => number,
): PathFigures {
  const folders = new Map<string, PathFile[]>();
  for (const file of [...files].sort()) {
    const folder = dirname(file);
    const list = folders.get(folder) ?? [];
    list.push(ranOf ? { file, lines: linesOf(file), ran: ranOf(file) } : { file, lines: linesOf(file) });
    folders.set(folder, list);
  }
  const byFolder = [...folders]
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([folder, f]) => ({ folder, files: f }));
  const all = byFolder.flatMap((f) => f.files);
  const lines = all.reduce((sum, f) => sum + f.lines, 0);
  return {
    files: files.length,
    folders: byFolder.length,
    topFolders: new Set(byFolder.map((f) => f.folder.split("/")[0])).size,
    longFiles: all.filter((x) => x.lines > LONG_FILE_LINES).map((x) => x.file),
    byFolder,
    lines,
    fewestFiles: Math.ceil(lines / LONG_FILE_LINES),
    ...(ranOf ? { ranLines: all.reduce((sum, f) => sum + (f.ran ?? 0), 0) } : {}),
  };
}

/**
 * The listing printed after the table: the count against the goal, the lines and the fewest files
 * that could hold them, then folder by folder each file's lines (and lines that ran), the long ones
 * flagged.
 */
export function pathListing(figures: PathFigures): string[] {
  const lines = [
    `${figures.files} files in ${figures.folders} folders, ${figures.topFolders} of them at the top of src/ (goal ≤ ${GOAL.files} files in ≤ ${GOAL.folders} folders)`,
    `${figures.lines} lines in these files: ${figures.fewestFiles} files of ≤ ${LONG_FILE_LINES} lines at the fewest${
      figures.ranLines === undefined ? "" : `; ${figures.ranLines} lines in the functions that ran`
    }`,
  ];
  for (const { folder, files } of figures.byFolder) {
    lines.push(`src/${folder === "." ? "" : `${folder}/`} (${files.length})`);
    for (const { file, lines: n, ran } of files)
      lines.push(
        `  ${file.slice(folder === "." ? 0 : folder.length + 1).padEnd(40)} ${String(n).padStart(5)}${
          ran === undefined ? "" : `  ran ${String(ran).padStart(4)}`
        }${n > LONG_FILE_LINES ? `  over ${LONG_FILE_LINES} lines` : ""}`,
      );
  }
  return lines;
}

/**
 * What would stay of the path were every function an edit never enters taken out of its file
 * (see `unentered-functions.ts` for the method): a bound on what moving code alone could reach.
 */
export interface UnenteredOut {
  /** The lines that would stay, all files together. */
  lines: number;
  /** The fewest files of at most LONG_FILE_LINES lines that could hold them, each folder apart. */
  fewestFiles: number;
  /** By folder (`.` for the top of `src/`): the lines that would stay and the fewest files. */
  byFolder: Record<string, { lines: number; files: number }>;
}

/** One run as the JSON keeps it (its lines measured since the runs after `3d1f4a7`). */
export interface PathRun extends Omit<PathFigures, "lines" | "fewestFiles"> {
  lines?: number;
  fewestFiles?: number;
  commit: string;
  date: string;
  node: string;
  /** The simulator's answers in the window, by route and status. */
  serviceCallsByRoute: Record<string, Record<string, number>>;
  /** Writes of the resource's status seen in the window (the one answering the edit, and any after it). */
  statusWrites: number;
  /** The edits measured, each in its own window (one in the runs that do not say). */
  edits?: number;
  /** Each edit's window's count of files, by the edit's number from 1 (an object: a formatter keeps it as written). */
  filesByEdit?: Record<string, number>;
  /** Files that ran in half of the windows or fewer (see {@link pathOfEdits}): not counted. */
  beside?: Array<{ file: string; edits: number }>;
  /** Were every function an edit never enters taken out (see {@link UnenteredOut}); older runs do not say. */
  unenteredOut?: UnenteredOut;
}

/** The report file: the goal and the runs, one per commit (a run of the same commit replaces it). */
export interface PathReport {
  benchmark: "reconcile-path";
  description: string;
  goal: typeof GOAL & { longFileLines: number };
  runs: PathRun[];
}

/** Adds `run` to the report at `path` (creating it), replacing a run of the same commit. */
export function savePathRun(path: string, description: string, run: PathRun): PathReport {
  const old = existsSync(path) ? (JSON.parse(readFileSync(path, "utf8")) as PathReport) : undefined;
  const report: PathReport = {
    benchmark: "reconcile-path",
    description,
    goal: { ...GOAL, longFileLines: LONG_FILE_LINES },
    runs: [...(old?.runs ?? []).filter((r) => r.commit !== run.commit), run],
  };
  writeFileSync(path, `${JSON.stringify(report, null, 2)}\n`);
  return report;
}
