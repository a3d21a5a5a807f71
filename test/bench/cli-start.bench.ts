/**
 * How long the CLI takes to start: `dms-operator --version`, `kubectl-dms --help` (the kubectl
 * plugin's own help), every command's `--help` and the operator's `run --help`, `version
 * --client`, `deployments list` against the simulator (a child process on loopback, 20
 * deployments), and kubectl's completion of `kubectl dms` (`kubectl_complete-dms`) for a command,
 * a flag and a flag's value, against `node -e 0` in the same run, each started as a user starts
 * it — a new process through the bin — from the compiled CLI (what `npm install` gives: the bin
 * runs dist/ when it exists), and `--version` and `--help` from the sources too (a checkout: Node
 * strips the types). Rounds are interleaved so that the machine's load weighs on every variant
 * alike; the figure is the median and its ratio to `node -e 0`'s, next to the goal of each
 * (issue: every `--help` and `version --client` ≤ 2.5 ×, `deployments list` ≤ 3 ×, a completion
 * ≤ 2 ×). Reported, never asserted.
 */
import { spawnSync } from "node:child_process";
import { cpSync, mkdirSync, rmSync, symlinkSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { COMMANDS } from "../../src/commands/registry.ts";
import { type Benchmark, type BenchTable, spawnServing } from "./harness.ts";
import { compileOperator } from "./operator-run.ts";

const ROOT = join(import.meta.dirname, "..", "..");

interface Variant {
  name: string;
  args: string[];
  /** The ratio to `node -e 0` it should stay under. */
  goal?: number;
}

/** Deployments the simulator holds for `deployments list` (one page). */
const LISTED = 20;

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
  description:
    "start of `--version`, every `--help`, `version --client`, `deployments list` and a completion against `node -e 0`",
  async run({ durationSeconds }) {
    // The installed layout: bin/ next to dist/ and package.json, dependencies resolved above it.
    const pkg = join(ROOT, ".tools", "bench-cli");
    rmSync(pkg, { recursive: true, force: true });
    mkdirSync(pkg, { recursive: true });
    compileOperator(join(pkg, "dist"));
    cpSync(join(ROOT, "bin"), join(pkg, "bin"), { recursive: true });
    symlinkSync(join(pkg, "bin", "kubectl-dms.mjs"), join(pkg, "bin", "kubectl-dms"));
    symlinkSync(join(pkg, "bin", "kubectl_complete-dms.mjs"), join(pkg, "bin", "kubectl_complete-dms"));
    const plugin = join(pkg, "bin", "kubectl-dms");
    const complete = join(pkg, "bin", "kubectl_complete-dms");
    const helps = [...COMMANDS.filter((c) => !c.operatorOnly).map((c) => [c.name]), ["deployments", "list"]];
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
      ...helps.map((words) => ({
        name: `kubectl-dms ${words.join(" ")} --help`,
        args: [plugin, ...words, "--help"],
        goal: 2.5,
      })),
      {
        name: "dms-operator run --help",
        args: [join(pkg, "bin", "dms-operator.mjs"), "run", "--help"],
        goal: 2.5,
      },
      { name: "kubectl-dms version --client", args: [plugin, "version", "--client"], goal: 2.5 },
      { name: "kubectl-dms deployments list", args: [plugin, "deployments", "list"], goal: 3 },
      { name: "kubectl_complete-dms s (commands)", args: [complete, "s"], goal: 2 },
      { name: "kubectl_complete-dms status --a (flags)", args: [complete, "status", "--a"], goal: 2 },
      { name: "kubectl_complete-dms status -o '' (values)", args: [complete, "status", "-o", ""], goal: 2 },
      {
        name: "kubectl_complete-dms deployments list --status A (values)",
        args: [complete, "deployments", "list", "--status", "A"],
        goal: 2,
      },
    ];
    const server = await spawnServing(fileURLToPath(new URL("./simulator-server.ts", import.meta.url)), [
      "--deployments",
      String(LISTED),
    ]);
    // A user's shell: no compile cache of the test runner's; the simulator as the service.
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      DMS_BASE_URL: String(server.ready.url),
      DMS_API_KEY: "bench",
    };
    delete env.NODE_COMPILE_CACHE;
    const rounds = Math.max(5, Math.min(40, Math.round(durationSeconds * 2)));
    const times = new Map<string, number[]>(variants.map((v) => [v.name, []]));
    try {
      for (const v of variants) timeRun(v.args, env); // warm the file system cache
      for (let round = 0; round < rounds; round++)
        for (const v of variants) times.get(v.name)?.push(timeRun(v.args, env));
    } finally {
      await server.stop();
      rmSync(pkg, { recursive: true, force: true });
    }
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
        ratio: Math.round((ms / base) * 100) / 100,
        ...(v.goal === undefined ? {} : { goal: v.goal }),
      };
    });
    const table: BenchTable = {
      head: ["variant", "runs", "median ms", "min ms", "max ms", "× node -e 0", "goal ×"],
      rows: figures.map((f) => [f.variant, f.runs, f.medianMs, f.minMs, f.maxMs, f.ratio, f.goal ?? "-"]),
    };
    return { rows: [], table, details: { figures } };
  },
};
