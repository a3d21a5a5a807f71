/**
 * The report of the scale benchmark's many-tenants case (`scale --tenants`):
 * `docs/bench/tenancy.json` (figures per series and tenants × resources, merged so that separate
 * runs accumulate) and the table of the latest run of each case between the tenancy markers of
 * `docs/benchmarks.md`. Every series as one table: `node scripts/bench-tables.ts tenancy`.
 */
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { arch, cpus, platform } from "node:os";
import { join } from "node:path";
import { ROUTES } from "../../src/api/wire.ts";
import type { BenchTable } from "./harness.ts";
import type { ScaleFigures } from "./scale-report.ts";

const DOCS = join(import.meta.dirname, "..", "..", "docs");
const JSON_PATH = join(DOCS, "bench", "tenancy.json");
const MARKDOWN_PATH = join(DOCS, "benchmarks.md");
const BEGIN = "<!-- tenancy:begin (written by npm run bench -- scale --tenants) -->";
const END = "<!-- tenancy:end -->";
/** The route of a connection's credentials probe, as the simulator's counters name it. */
const PROBE_ROUTE = `GET ${ROUTES.PROVIDERS}`;

/** Latencies of one contention phase, measured on the tenants other than the black hole's. */
export interface ContentionFigures {
  /** Edit of a resource → the simulator receiving its PATCH. */
  edit: { edits: number; patched: number; p50Ms: number; p99Ms: number; maxMs: number };
  /** Drift made on a simulator → the operator's corrective PATCH. */
  drift: { drifts: number; corrected: number; p50Ms: number; p99Ms: number; maxMs: number };
  /** Resync passes that started during the phase, and the median time between their starts. */
  passStarts: number;
  passIntervalMedianSeconds: number;
  /** From the first pass start to the last edit's PATCH and drift's correction (or the wait's end). */
  seconds: number;
  /** With the black hole: its connection's Ready (`status/reason`) and its resources' Synced, counted. */
  blackHole?: { connectionReady: string; synced: Record<string, number> };
}

/** Everything measured at one tenants × N. */
export interface TenancyFigures {
  tenants: number;
  /** Resources in all. */
  n: number;
  /** Resources per tenant (N spread evenly). */
  perTenant: { min: number; max: number };
  date: string;
  /** The commit measured (`+changes` when src/ or manifests/ differed from it). */
  commit: string;
  node: string;
  loadAverage: { start: number; end: number };
  runtimeEnv: Record<string, string>;
  operatorFlags: string[];
  /** The `--listing-deadline` given, or `operator default`. */
  listingDeadline: string;
  startupSeconds: number;
  /** Operator start → every ServiceConnection Ready. */
  connectionsReadySeconds: number;
  rssMiB: {
    /** T connections Ready, no resource. */
    idle: number;
    steady: number;
    steadySplit: { anon: number; file: number };
    /** VmHWM through the creates and the resync passes. */
    peakBeforeBlackHole: number;
    /** VmHWM over the operator's whole life, the black hole included. */
    peak: number;
    end: number;
  };
  resync: ScaleFigures["resync"] & {
    /** Calls on the default connection's simulator (no resource uses it) in the same pass. */
    defaultConnectionCalls: number;
    /** Connections whose calls in the pass differ from their own ⌈n/100⌉+1. */
    connectionsOffGoal: number;
    /** CPU of the benchmark process (the T simulators among it) over the pass and the wait around it. */
    benchmarkCpuSeconds: number;
  };
  cold: {
    applySeconds: number;
    secondsToAllReady: number;
    creates: number;
    createsPerSecond: number;
    serviceCallsPerCreate: number;
    serviceCallsByKind: Record<string, number>;
    benchmarkCpuSeconds: number;
  };
  contention: { windowSeconds: number; without: ContentionFigures; withBlackHole: ContentionFigures };
  /** What the benchmark's own process (the T simulators, the watch, the load) costs. */
  benchmarkProcess: {
    rssBeforeSimulatorsMiB: number;
    rssWithSimulatorsMiB: number;
    rssEndMiB: number;
    peakMiB: number;
    cpuSeconds: number;
  };
}

/** The file: series → `<tenants>x<N>` → figures. */
interface TenancyReport {
  benchmark: "scale --tenants";
  machine: { platform: string; cpu: string; cpus: number };
  series: Record<string, Record<string, TenancyFigures>>;
}

/** Merges `figures` into the series `label`, rewrites the JSON and the docs table; returns the paths. */
export function saveTenancy(label: string, figures: TenancyFigures): string[] {
  const previous = existsSync(JSON_PATH)
    ? (JSON.parse(readFileSync(JSON_PATH, "utf8")) as TenancyReport)
    : undefined;
  const series = previous?.series ?? {};
  series[label] = { ...series[label], [`${figures.tenants}x${figures.n}`]: figures };
  const report: TenancyReport = {
    benchmark: "scale --tenants",
    machine: { platform: `${platform()}-${arch()}`, cpu: cpus()[0]?.model ?? "unknown", cpus: cpus().length },
    series,
  };
  mkdirSync(join(DOCS, "bench"), { recursive: true });
  writeFileSync(JSON_PATH, `${JSON.stringify(report, null, 2)}\n`);
  // As the project's formatter writes JSON (a short list on one line), so that a checkout holding a
  // fresh run still passes `npm run lint`.
  spawnSync(
    process.execPath,
    [
      join(import.meta.dirname, "..", "..", "node_modules", "@biomejs", "biome", "bin", "biome"),
      "format",
      "--write",
      JSON_PATH,
    ],
    { stdio: "ignore" },
  );
  const written = [JSON_PATH];
  const markdown = existsSync(MARKDOWN_PATH) ? readFileSync(MARKDOWN_PATH, "utf8") : undefined;
  const begin = markdown?.indexOf(BEGIN) ?? -1;
  const end = markdown?.indexOf(END) ?? -1;
  if (markdown !== undefined && begin >= 0 && end > begin) {
    writeFileSync(
      MARKDOWN_PATH,
      `${markdown.slice(0, begin + BEGIN.length)}\n${markdownTable(latestColumns(series))}\n${markdown.slice(end)}`,
    );
    written.push(MARKDOWN_PATH);
  }
  return written;
}

const ms = (p: { p50Ms: number; p99Ms: number }) => `${fmt(p.p50Ms)} / ${fmt(p.p99Ms)}`;
const done = (done: number, of: number) => (done < of ? ` (${done}/${of})` : "");

/** One line per measure: label, goal, and the value of figures. */
const MEASURES: Array<{ label: string; goal: string; value: (f: TenancyFigures) => string }> = [
  {
    label: "connections × resources each",
    goal: "",
    value: (f) =>
      `${f.tenants} × ${f.perTenant.min === f.perTenant.max ? f.perTenant.max : `${f.perTenant.min}–${f.perTenant.max}`}`,
  },
  { label: "RSS idle (connections Ready, no resource), MiB", goal: "", value: (f) => fmt(f.rssMiB.idle) },
  { label: "RSS steady holding N, MiB", goal: "", value: (f) => fmt(f.rssMiB.steady) },
  {
    label: "… of which anonymous / mapped files, MiB",
    goal: "",
    value: (f) => `${fmt(f.rssMiB.steadySplit.anon)} / ${fmt(f.rssMiB.steadySplit.file)}`,
  },
  {
    label: "RSS peak (VmHWM), MiB: before the black hole / whole run",
    goal: "≤ 150 at 10k",
    value: (f) => `${fmt(f.rssMiB.peakBeforeBlackHole)} / ${fmt(f.rssMiB.peak)}`,
  },
  {
    label: "service calls per resync (goal Σ ⌈n/100⌉+1)",
    goal: "Σ ⌈n/100⌉+1",
    value: (f) => {
      // A connection's credentials are probed every 5 minutes: a probe may fall into the pass.
      const probes = Object.values(f.resync.serviceCallsByRoute[PROBE_ROUTE] ?? {}).reduce(
        (a, b) => a + b,
        0,
      );
      return `${f.resync.serviceCalls} (${f.resync.serviceCallsGoal})${probes > 0 ? `, of which ${probes} probes` : ""}`;
    },
  },
  {
    label: "… connections off their own goal; default connection's calls",
    goal: "0; 1",
    value: (f) => `${f.resync.connectionsOffGoal}; ${f.resync.defaultConnectionCalls}`,
  },
  {
    label: "Kubernetes requests per resource per resync",
    goal: "≤ 0.01",
    value: (f) => fmt(f.resync.kubeRequestsPerResource),
  },
  {
    label: "CPU-seconds per resync; resync pass, s",
    goal: "",
    value: (f) =>
      `${fmt(f.resync.cpuSeconds)}; ${fmt(f.resync.seconds)}${f.resync.overlapped ? " (overlapped)" : ""}`,
  },
  {
    label: "cold creates/s; service calls per create",
    goal: "",
    value: (f) => `${fmt(f.cold.createsPerSecond)}; ${fmt(f.cold.serviceCallsPerCreate)}`,
  },
  {
    label: "edit → PATCH p50 / p99, ms, without a black hole",
    goal: "< 50 / < 250",
    value: (f) =>
      `${ms(f.contention.without.edit)}${done(f.contention.without.edit.patched, f.contention.without.edit.edits)}`,
  },
  {
    label: "… with one tenant a black hole (the others')",
    goal: "< 50 / < 250",
    value: (f) =>
      `${ms(f.contention.withBlackHole.edit)}${done(f.contention.withBlackHole.edit.patched, f.contention.withBlackHole.edit.edits)}`,
  },
  {
    label: "drift → corrected p50 / p99, s, without a black hole",
    goal: "",
    value: (f) =>
      `${seconds(f.contention.without.drift)}${done(f.contention.without.drift.corrected, f.contention.without.drift.drifts)}`,
  },
  {
    label: "… with one tenant a black hole (the others')",
    goal: "as without",
    value: (f) =>
      `${seconds(f.contention.withBlackHole.drift)}${done(f.contention.withBlackHole.drift.corrected, f.contention.withBlackHole.drift.drifts)}`,
  },
  {
    label: "resync passes started, median interval s: without / with",
    goal: "",
    value: (f) =>
      `${f.contention.without.passStarts}, ${fmt(f.contention.without.passIntervalMedianSeconds)} / ${f.contention.withBlackHole.passStarts}, ${fmt(f.contention.withBlackHole.passIntervalMedianSeconds)}`,
  },
  {
    label: "black-holed tenant at the end: connection Ready; resources Synced",
    goal: "",
    value: (f) => {
      const b = f.contention.withBlackHole.blackHole;
      if (!b) return "–";
      const synced = Object.entries(b.synced)
        .map(([k, v]) => `${k} ${v}`)
        .join(", ");
      return `${b.connectionReady}; ${synced}`;
    },
  },
  { label: "--listing-deadline", goal: "", value: (f) => f.listingDeadline },
  {
    label: "benchmark process (simulators): RSS before / with them / end, MiB",
    goal: "",
    value: (f) =>
      `${fmt(f.benchmarkProcess.rssBeforeSimulatorsMiB)} / ${fmt(f.benchmarkProcess.rssWithSimulatorsMiB)} / ${fmt(f.benchmarkProcess.rssEndMiB)}`,
  },
  {
    label: "benchmark process CPU-s: creates / steady resync",
    goal: "",
    value: (f) => `${fmt(f.cold.benchmarkCpuSeconds)} / ${fmt(f.resync.benchmarkCpuSeconds)}`,
  },
  { label: "commit", goal: "", value: (f) => `\`${f.commit}\`` },
  {
    label: "machine load (1-min average, start → end)",
    goal: "",
    value: (f) => `${fmt(f.loadAverage.start)} → ${fmt(f.loadAverage.end)}`,
  },
];

function seconds(p: { p50Ms: number; p99Ms: number }): string {
  return `${fmt(p.p50Ms / 1000)} / ${fmt(p.p99Ms / 1000)}`;
}

function columns(series: TenancyReport["series"]): Array<{ label: string; f: TenancyFigures }> {
  return Object.entries(series).flatMap(([label, byCase]) =>
    Object.values(byCase)
      .sort((a, b) => a.n - b.n || a.tenants - b.tenants)
      .map((f) => ({ label, f })),
  );
}

const heading = (label: string, f: TenancyFigures) => `${label} ${f.tenants} × ${f.n.toLocaleString("en")}`;

/** Per case (tenants × N), the figures of the latest run (by date) of any series. */
function latestColumns(series: TenancyReport["series"]): Array<{ label: string; f: TenancyFigures }> {
  const latest = new Map<string, { label: string; f: TenancyFigures }>();
  for (const c of columns(series)) {
    const key = `${c.f.tenants}x${c.f.n}`;
    const seen = latest.get(key);
    if (seen === undefined || c.f.date > seen.f.date) latest.set(key, c);
  }
  return [...latest.values()];
}

/**
 * The figures of `docs/bench/tenancy.json` as a Markdown table: every series and case (`all`), or
 * the latest run of each case (`current`, the page's table).
 */
export function tenancyMarkdown(which: "all" | "current", path = JSON_PATH): string {
  const { series } = JSON.parse(readFileSync(path, "utf8")) as TenancyReport;
  return markdownTable(which === "all" ? columns(series) : latestColumns(series));
}

function markdownTable(cols: Array<{ label: string; f: TenancyFigures }>): string {
  const head = `| measured | ${cols.map((c) => heading(c.label, c.f)).join(" | ")} | goal |`;
  const rule = `|---|${cols.map(() => "---|").join("")}---|`;
  const rows = MEASURES.map(
    (m) => `| ${m.label} | ${cols.map((c) => m.value(c.f)).join(" | ")} | ${m.goal} |`,
  );
  return [head, rule, ...rows].join("\n");
}

/** The table `npm run bench -- scale --tenants` prints for this run. */
export function tenancyTable(label: string, results: TenancyFigures[]): BenchTable {
  return {
    head: ["measured", ...results.map((f) => heading(label, f)), "goal"],
    rows: MEASURES.map((m) => [m.label, ...results.map((f) => m.value(f).replaceAll("`", "")), m.goal]),
  };
}

function fmt(value: number): string {
  if (!Number.isFinite(value)) return "–";
  const digits = Math.abs(value) >= 100 ? 0 : Math.abs(value) >= 10 ? 1 : Math.abs(value) >= 1 ? 2 : 3;
  return value.toLocaleString("en", { maximumFractionDigits: digits });
}
