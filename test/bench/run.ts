/**
 * `npm run bench`: runs the named benchmarks of test/bench (every `*.bench.ts` exporting
 * `benchmark`), prints a table per benchmark, and adds the run to `docs/bench/<name>.json` (its
 * `runs`, oldest first; a benchmark that keeps its own report writes it itself).
 *
 *   node test/bench/run.ts [name ...] [--duration <seconds>] [--list] [--<option> <value> ...]
 *
 * A benchmark may declare options of its own (e.g. `scale --n 100,1000`); `--list` (or `--help`)
 * shows them, and an option no benchmark declares is refused in one line that says so.
 * Figures are reported, never asserted: a benchmark fails only when it cannot run.
 */
import { mkdir, readdir, readFile, writeFile } from "node:fs/promises";
import { arch, cpus, platform } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { parseArgs } from "node:util";
import Table from "cli-table3";
import type { Benchmark } from "./harness.ts";
import { commitOf } from "./operator-run.ts";

const USAGE =
  "usage: npm run bench -- [name ...] [--duration <seconds>] [--list] [--<option> <value> ...]\n" +
  "every benchmark when none is named; the benchmarks and their options:";
const LISTED = "`npm run bench -- --list` shows the benchmarks and their options";

/** Bad input on the command line: one line on stderr, exit 2, no stack. */
function refuse(message: string): never {
  process.stderr.write(`npm run bench: ${message}\n`);
  process.exit(2);
}

const here = dirname(fileURLToPath(import.meta.url));
const root = resolve(here, "../..");

const benchmarks: Benchmark[] = [];
for (const file of (await readdir(here)).filter((f) => f.endsWith(".bench.ts")).sort()) {
  const module = (await import(pathToFileURL(join(here, file)).href)) as { benchmark?: Benchmark };
  if (module.benchmark === undefined) throw new Error(`${file} does not export 'benchmark'`);
  benchmarks.push(module.benchmark);
}

// The runner's options plus every benchmark's own; a name two of them declare would be ambiguous.
const own = new Map<string, Benchmark>();
for (const b of benchmarks) {
  for (const option of Object.keys(b.options ?? {})) {
    const other = own.get(option);
    if (other !== undefined || option === "duration" || option === "list" || option === "help")
      throw new Error(`option --${option} of ${b.name} is also declared by ${other?.name ?? "the runner"}`);
    own.set(option, b);
  }
}
const { values: parsed, positionals } = (() => {
  try {
    return parseArgs({
      allowPositionals: true,
      options: {
        duration: { type: "string", default: "10" },
        list: { type: "boolean", default: false },
        help: { type: "boolean", short: "h", default: false },
        ...Object.fromEntries([...own.keys()].map((option) => [option, { type: "string" as const }])),
      },
    });
  } catch (error) {
    // A mistyped option: one line that names it, and where the options are listed.
    refuse(`${error instanceof Error ? error.message.split(". ")[0] : String(error)}; ${LISTED}`);
  }
})();
const values = parsed as typeof parsed & Record<string, string | undefined>;
const durationSeconds = Number(values.duration);
if (!(durationSeconds > 0))
  refuse(`--duration must be a positive number of seconds, got '${values.duration}'`);

if (values.help) process.stdout.write(`${USAGE}\n\n`);
if (values.list || values.help) {
  for (const b of benchmarks) {
    process.stdout.write(`${b.name}\t${b.description}\n`);
    for (const [option, about] of Object.entries(b.options ?? {})) {
      const fallback = about.default === undefined ? "" : ` (default ${about.default})`;
      process.stdout.write(`\t--${option} <value>\t${about.description}${fallback}\n`);
    }
  }
  process.exit(0);
}
const unknown = positionals.filter((name) => !benchmarks.some((b) => b.name === name));
if (unknown.length > 0) refuse(`unknown benchmark(s): ${unknown.join(", ")}; ${LISTED}`);
const selected =
  positionals.length === 0 ? benchmarks : benchmarks.filter((b) => positionals.includes(b.name));
const misplaced = [...own].filter(([option, b]) => values[option] !== undefined && !selected.includes(b));
if (misplaced.length > 0)
  refuse(
    misplaced.map(([option, b]) => `--${option} belongs to ${b.name}, which is not selected`).join("; "),
  );

for (const bench of selected) {
  process.stdout.write(`\n${bench.name}: ${bench.description}\n`);
  const args = Object.fromEntries(Object.keys(bench.options ?? {}).map((option) => [option, values[option]]));
  const { rows, table: shaped, details } = await bench.run({ durationSeconds, args });
  const table = new Table({
    head: shaped?.head ?? ["variant", "requests", "seconds", "req/s", "p50 ms", "p99 ms", "errors"],
    // Colours only on a terminal: the output is also read from CI logs and files.
    style: process.stdout.isTTY ? {} : { head: [], border: [] },
  });
  if (shaped) table.push(...shaped.rows);
  for (const r of rows) {
    table.push([r.variant, r.requests, r.seconds, r.requestsPerSecond, r.p50Ms, r.p99Ms, r.errors]);
  }
  process.stdout.write(`${table.toString()}\n`);
  if (bench.writesOwnReport) continue;
  const report = {
    date: new Date().toISOString(),
    commit: commitOf(),
    node: process.version,
    platform: `${platform()}-${arch()}`,
    cpu: cpus()[0]?.model ?? "unknown",
    durationSeconds,
    rows,
    ...details,
  };
  const out = join(root, "docs", "bench", `${bench.name}.json`);
  await mkdir(dirname(out), { recursive: true });
  await writeFile(out, `${JSON.stringify(withRun(bench, await readReport(out), report), null, 2)}\n`);
  process.stdout.write(`written ${out}\n`);
}

/** What a benchmark's report file holds: its runs, oldest first. */
interface Report {
  benchmark: string;
  description: string;
  runs: Array<Record<string, unknown>>;
}

/** The report at `path`, if any; a report of one run (the older shape) becomes its first run. */
async function readReport(path: string): Promise<Report | undefined> {
  const text = await readFile(path, "utf8").catch(() => undefined);
  if (text === undefined) return undefined;
  const old = JSON.parse(text) as Partial<Report> & Record<string, unknown>;
  if (Array.isArray(old.runs)) return old as Report;
  const { benchmark, description, ...run } = old;
  return { benchmark: String(benchmark), description: String(description), runs: [run] };
}

function withRun(bench: Benchmark, old: Report | undefined, run: Record<string, unknown>): Report {
  return { benchmark: bench.name, description: bench.description, runs: [...(old?.runs ?? []), run] };
}
