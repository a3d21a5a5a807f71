/**
 * How long the CLI takes to start: `dms-operator --version` and `kubectl-dms --help` (the
 * kubectl plugin's own help) against `node -e 0` in the same run, each started as a user starts
 * it — a new process through the bin — from the compiled CLI (what `npm install` gives: the bin
 * runs dist/ when it exists) and from the sources (a checkout: Node strips the types). Rounds are
 * interleaved so that the machine's load weighs on every variant alike; the figure is the median
 * and its ratio to `node -e 0`'s. Reported, never asserted.
 */
import { spawnSync } from "node:child_process";
import { cpSync, mkdirSync, rmSync, symlinkSync } from "node:fs";
import { join } from "node:path";
import type { Benchmark, BenchTable } from "./harness.ts";
import { compileOperator } from "./operator-run.ts";

const ROOT = join(import.meta.dirname, "..", "..");

interface Variant {
  name: string;
  args: string[];
}

/** Starts `args` once with Node; its wall-clock milliseconds. Throws when it fails. */
function timeRun(args: readonly string[], env: NodeJS.ProcessEnv): number {
  const start = process.hrtime.bigint();
  const run = spawnSync(process.execPath, args, { env, encoding: "utf8" });
  const ms = Number(process.hrtime.bigint() - start) / 1e6;
  if (run.status !== 0) throw new Error(`node ${args.join(" ")} exited ${run.status}: ${run.stderr}`);
  return ms;
}

const median = (values: readonly number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? (sorted[mid] ?? 0) : ((sorted[mid - 1] ?? 0) + (sorted[mid] ?? 0)) / 2;
};

/** See the module comment. */
export const benchmark: Benchmark = {
  name: "cli-start",
  description: "start of `dms-operator --version` and `kubectl-dms --help` against `node -e 0`",
  async run({ durationSeconds }) {
    // The installed layout: bin/ next to dist/ and package.json, dependencies resolved above it.
    const pkg = join(ROOT, ".tools", "bench-cli");
    rmSync(pkg, { recursive: true, force: true });
    mkdirSync(pkg, { recursive: true });
    compileOperator(join(pkg, "dist"));
    cpSync(join(ROOT, "bin"), join(pkg, "bin"), { recursive: true });
    symlinkSync(join(pkg, "bin", "kubectl-dms.mjs"), join(pkg, "bin", "kubectl-dms"));
    const variants: Variant[] = [
      { name: "node -e 0", args: ["-e", "0"] },
      {
        name: "dms-operator --version (compiled)",
        args: [join(pkg, "bin", "dms-operator.mjs"), "--version"],
      },
      { name: "kubectl-dms --help (compiled)", args: [join(pkg, "bin", "kubectl-dms"), "--help"] },
      {
        name: "dms-operator --version (sources)",
        args: [join(ROOT, "bin", "dms-operator.mjs"), "--version"],
      },
      { name: "kubectl-dms --help (sources)", args: [join(ROOT, "bin", "kubectl-dms.mjs"), "--help"] },
    ];
    // A user's shell: no compile cache of the test runner's.
    const env = { ...process.env };
    delete env.NODE_COMPILE_CACHE;
    const rounds = Math.max(5, Math.min(40, Math.round(durationSeconds * 2)));
    const times = new Map<string, number[]>(variants.map((v) => [v.name, []]));
    for (const v of variants) timeRun(v.args, env); // warm the file system cache
    for (let round = 0; round < rounds; round++)
      for (const v of variants) times.get(v.name)?.push(timeRun(v.args, env));
    rmSync(pkg, { recursive: true, force: true });
    const base = median(times.get("node -e 0") ?? []);
    const figures = variants.map((v) => {
      const all = times.get(v.name) ?? [];
      const ms = median(all);
      return {
        variant: v.name,
        runs: all.length,
        medianMs: Math.round(ms),
        minMs: Math.round(Math.min(...all)),
        maxMs: Math.round(Math.max(...all)),
        ratio: Math.round((ms / base) * 10) / 10,
      };
    });
    const table: BenchTable = {
      head: ["variant", "runs", "median ms", "min ms", "max ms", "× node -e 0"],
      rows: figures.map((f) => [f.variant, f.runs, f.medianMs, f.minMs, f.maxMs, f.ratio]),
    };
    return { rows: [], table, details: { figures } };
  },
};
