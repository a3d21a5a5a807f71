/**
 * Renders the benchmarks' history, kept as data in `docs/bench/`, as Markdown tables on stdout:
 *
 *   node scripts/bench-tables.ts scale             every series and N of scale.json
 *   node scripts/bench-tables.ts tenancy           every series of tenancy.json (scale --tenants)
 *   node scripts/bench-tables.ts replicas          every run of replicas.json (scale --replicas)
 *   node scripts/bench-tables.ts reconcile-path    every run of reconcile-path.json
 *   node scripts/bench-tables.ts <name>            every run of another benchmark's <name>.json
 *                                                  (simulator, operator, annotations, cli-start)
 *   node scripts/bench-tables.ts log [section]     the dated notes and tables of past runs (log.json)
 *
 * `log.json` holds what the benchmark page recorded before it showed only the current figures:
 * per section (simulator, operator, scale, tenancy, annotations, replicas, cli-start,
 * control-plane, memory, redaction, fairness, reconcile-path), its text and its tables as rows, in
 * the order written.
 */
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import type { PathReport } from "../test/bench/reconcile-path-report.ts";
import { type ReplicaFigures, replicasTable } from "../test/bench/replicas.ts";
import { scaleMarkdown } from "../test/bench/scale-report.ts";
import { tenancyMarkdown } from "../test/bench/tenancy-report.ts";

const BENCH = join(import.meta.dirname, "..", "docs", "bench");

/** A table of the log: its header, its rows, and the indent it had (a table inside a list item). */
export interface LogTable {
  head: string[];
  rows: string[][];
  indent?: string;
}

/** A block of a log section: lines of Markdown, a table, or a table rendered from a benchmark's JSON. */
export type LogBlock = string[] | LogTable | { rendered: "scale" | "tenancy" };

/** One section of the log: its heading (none for the page's introduction) and its blocks. */
export interface LogSection {
  section: string;
  title: string | null;
  blocks: LogBlock[];
}

/** A Markdown table of `head` and `rows`, each line after `indent`. */
export function markdownTable(
  head: readonly string[],
  rows: ReadonlyArray<ReadonlyArray<string | number>>,
  indent = "",
) {
  const line = (cells: ReadonlyArray<string | number>) => `${indent}| ${cells.join(" | ")} |`;
  return [line(head), `${indent}|${"---|".repeat(head.length)}`, ...rows.map(line)].join("\n");
}

/**
 * The sections of `log` named `section` (all without one) as Markdown; a block rendered from a
 * benchmark's JSON is asked of `rendered`.
 */
export function renderLog(
  log: readonly LogSection[],
  section: string | undefined,
  rendered: (name: "scale" | "tenancy") => string,
): string {
  const chosen = section === undefined ? log : log.filter((s) => s.section === section);
  if (chosen.length === 0)
    throw new Error(
      `log: no section '${section}'; the sections are ${[...new Set(log.map((s) => s.section))].join(", ")}`,
    );
  return chosen
    .map((s) => {
      const body = s.blocks
        .map((b) => {
          if (Array.isArray(b)) return b.join("\n");
          if ("rendered" in b) return rendered(b.rendered);
          return markdownTable(b.head, b.rows, b.indent);
        })
        .join("\n");
      return s.title === null ? body : `## ${s.title}\n${body}`;
    })
    .join("\n");
}

/** A report `test/bench/run.ts` writes: the runs of one benchmark, oldest first. */
export interface RunnerReport {
  benchmark: string;
  runs: Array<Record<string, unknown>>;
}

/** The list of results a run holds: its request-rate rows, or the figures of its own shape. */
const RESULTS = ["rows", "results", "variants", "figures"];

/**
 * Every run as lines of one table: when and what was measured, then each result's plain fields
 * (a result is a row of the request-rate table or an item of the benchmark's own list).
 */
export function runsTable(report: RunnerReport): string {
  const lines = report.runs.flatMap((run) => {
    const key = RESULTS.find((k) => Array.isArray(run[k]) && (run[k] as unknown[]).length > 0);
    const results = (key === undefined ? [{}] : run[key]) as Array<Record<string, unknown>>;
    const when = {
      date: String(run.date ?? "").slice(0, 10),
      commit: run.commit === undefined ? "" : `\`${run.commit}\``,
    };
    return results.map((r) => ({
      ...when,
      ...Object.fromEntries(Object.entries(r).filter(([, v]) => v === null || typeof v !== "object")),
    }));
  });
  const head = [...new Set(lines.flatMap((l) => Object.keys(l)))];
  return markdownTable(
    head,
    lines.map((l) => head.map((h) => String((l as Record<string, unknown>)[h] ?? ""))),
  );
}

const readJson = <T>(name: string): T => JSON.parse(readFileSync(join(BENCH, name), "utf8")) as T;

/** The Markdown for one command line's arguments. */
export function render(args: readonly string[]): string {
  const [what, section, ...rest] = args;
  if (rest.length > 0 || (section !== undefined && what !== "log"))
    throw new Error(`too many arguments: ${args.join(" ")} (only 'log' takes a section)`);
  switch (what) {
    case "scale":
      return scaleMarkdown("all");
    case "tenancy":
      return tenancyMarkdown("all");
    case "replicas": {
      const { series } = readJson<{ series: Record<string, Record<string, ReplicaFigures>> }>(
        "replicas.json",
      );
      const labelled = Object.entries(series).flatMap(([label, runs]) =>
        Object.values(runs).map((f) => ({ label, f })),
      );
      const table = replicasTable(labelled.map((r) => r.f));
      return markdownTable(
        ["series", ...table.head, "commit"],
        table.rows.map((row, i) => [labelled[i]?.label ?? "", ...row, `\`${labelled[i]?.f.commit}\``]),
      );
    }
    case "reconcile-path": {
      const { runs, goal } = readJson<PathReport>("reconcile-path.json");
      return markdownTable(
        [
          "commit",
          "date",
          "files",
          "folders (top of src/)",
          `files over ${goal.longFileLines} lines`,
          `lines (fewest files of ≤ ${goal.longFileLines})`,
          "lines that ran",
          "lines without unentered functions (fewest files)",
        ],
        [
          ...runs.map((r) => [
            `\`${r.commit}\``,
            r.date.slice(0, 10),
            r.files,
            `${r.folders} (${r.topFolders})`,
            r.longFiles.length,
            // Measured since 3d1f4a7; the runs before do not say.
            r.lines === undefined ? "" : `${r.lines} (${r.fewestFiles})`,
            r.ranLines ?? "",
            // Measured since the bound joined the benchmark; older runs do not say.
            r.unenteredOut === undefined ? "" : `${r.unenteredOut.lines} (${r.unenteredOut.fewestFiles})`,
          ]),
          ["goal", "", `≤ ${goal.files}`, `≤ ${goal.folders}`, 0, "", "", ""],
        ],
      );
    }
    case "log":
      return renderLog(readJson<{ sections: LogSection[] }>("log.json").sections, section, (name) =>
        name === "scale" ? scaleMarkdown("all") : tenancyMarkdown("all"),
      );
    default: {
      if (what !== undefined && /^[a-z-]+$/.test(what) && existsSync(join(BENCH, `${what}.json`)))
        return runsTable(readJson<RunnerReport>(`${what}.json`));
      throw new Error(
        `'${what ?? ""}' is not one of: scale, tenancy, replicas, reconcile-path, log [section], or a benchmark with a docs/bench/<name>.json (see the comment at the top of scripts/bench-tables.ts)`,
      );
    }
  }
}

if (import.meta.main) {
  try {
    process.stdout.write(`${render(process.argv.slice(2))}\n`);
  } catch (error) {
    process.stderr.write(`bench-tables: ${(error as Error).message}\n`);
    process.exitCode = 2;
  }
}
