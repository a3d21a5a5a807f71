/**
 * The `scale` benchmark's report: `docs/bench/scale.json` (figures per series and N, merged so
 * separate runs accumulate), `docs/bench/scale.svg` (RSS and the cost of a resync against N, log
 * scale), and the table of the current figures (the latest run at each N) between the markers
 * of `docs/benchmarks.md`. Every series and N as one table: `node scripts/bench-tables.ts scale`.
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { arch, cpus, platform } from "node:os";
import { join } from "node:path";
import type { BenchTable } from "./harness.ts";
import type { V8Heap } from "./operator-run.ts";

const DOCS = join(import.meta.dirname, "..", "..", "docs");
const JSON_PATH = join(DOCS, "bench", "scale.json");
const SVG_PATH = join(DOCS, "bench", "scale.svg");
const MARKDOWN_PATH = join(DOCS, "benchmarks.md");
const BEGIN = "<!-- scale:begin (written by npm run bench -- scale) -->";
const END = "<!-- scale:end -->";

type Counters = Record<string, Record<string, number>>;

/** Everything measured at one N. */
export interface ScaleFigures {
  n: number;
  date: string;
  /** The commit measured (`+changes` when src/ or manifests/ differed from it). */
  commit: string;
  node: string;
  loadAverage: { start: number; end: number };
  nodeOptions: string | null;
  /** The manifest's runtime variables the operator ran with (absent in older figures). */
  runtimeEnv?: Record<string, string>;
  operatorFlags: string[];
  /** Seconds this benchmark took to create the N resources of each namespace. */
  applySeconds: { adopt: number; cold: number };
  /** Spawn → /readyz of an operator with no resources (part of the adoption time). */
  startupSeconds: number;
  rssMiB: {
    idle: number;
    steady: number;
    peak: number;
    peakCold: number;
    peakAdoption: number;
    /** Steady, read again 20 s after the last reconcile or call (absent in older figures). */
    settled?: number;
    /** RSS split into anonymous memory and mapped files (absent in older figures). */
    idleSplit?: { anon: number; file: number };
    steadySplit?: { anon: number; file: number };
  };
  /** V8's heap when idle and when steady, read with the RSS figures (absent in older figures). */
  v8HeapMiB?: { idle: V8Heap; steady: V8Heap; settled?: V8Heap };
  resync: {
    resyncPeriod: string;
    seconds: number;
    reconciles: number;
    serviceCalls: number;
    serviceCallsGoal: number;
    serviceCallsByRoute: Counters;
    kubeRequests: number;
    kubeRequestsPerResource: number;
    kubeRequestsByVerb: Record<string, number>;
    /** Of those, the ones that changed the object (etcd create/update/delete). */
    etcdWrites: number;
    otherKubeRequests: Record<string, number>;
    cpuSeconds: number;
    overlapped: boolean;
    /** The pass before, the first after the creates (the figures above are the next one's). */
    firstPass?: {
      seconds: number;
      serviceCalls: number;
      kubeRequests: number;
      etcdWrites: number;
      cpuSeconds: number;
    };
  };
  adoption: {
    seconds: number;
    serviceCalls: number;
    serviceCallsByRoute: Counters;
    cpuSeconds: number;
    peakRssMiB: number;
    barePatchSeconds: number;
    barePatchWrites: number;
    ratio: number;
    concurrency: number;
  };
  cold: {
    qps: number;
    applySeconds: number;
    secondsToAllReady: number;
    creates: number;
    createsPerSecond: number;
    ofQps: number;
    serviceCallsPerCreate: number;
    serviceCallsByRoute: Counters;
    /** The calls on /v2/deployments by kind: create, listing page, ids (batch), id, name (absent in older figures). */
    serviceCallsByKind?: Record<string, number>;
    /** CPU ms a create while they ran: the operator, the API server, etcd, the benchmark with its simulator (absent in older figures). */
    cpuMsPerCreate?: Record<string, number>;
  };
  edit: {
    edits: number;
    patched: number;
    perSecond: number;
    p50Ms: number;
    p99Ms: number;
    maxMs: number;
    writeP50Ms: number;
    writeP99Ms: number;
    /** The simulator's calls during the edits and until the last PATCH (or the wait's end). */
    serviceCallsByRoute?: Counters;
  };
  perResource: { resyncCpuMs: number; steadyKiB: number };
  /**
   * With `--repeat R` (R > 1): the N was measured R times, each from cold (a control plane,
   * resources, simulators and operators of its own). `rssMiB` then holds the median of each RSS
   * figure over the runs, this its spread; every other figure is the run's of median peak.
   */
  repeats?: {
    runs: number;
    /** Per figure: median, min, max, and each run's value by its number (`{"1": 84.3, "2": 85.3}`). */
    rssMiB: Partial<Record<RepeatedRss, Spread>>;
    loadAverage: Array<{ start: number; end: number }>;
  };
  /** With `--heap-breakdown`: the live heap holding N by structure (see heap-breakdown.ts). */
  heapBreakdown?: {
    liveMiB: number;
    /** The live heap of an operator holding nothing, started after the measured one. */
    idleLiveMiB: number;
    categories: Array<{ category: string; bytesPerResource: number }>;
    rows: Array<{
      path: string;
      kind: string;
      bytesPerResource: number;
      category: string;
      /** A large Map's bytes per resource by field of its entries (see heap-breakdown.ts). */
      fields?: Array<{ field: string; bytesPerResource: number }>;
    }>;
  };
}

/** The RSS figures a `--repeat` run reports as a median with its spread. */
export type RepeatedRss = "idle" | "steady" | "settled" | "peak" | "peakCold" | "peakAdoption";
const REPEATED_RSS: readonly RepeatedRss[] = [
  "idle",
  "steady",
  "settled",
  "peak",
  "peakCold",
  "peakAdoption",
];

/** The median of `values` (the mean of the middle two for an even count). */
export function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1
    ? (sorted[mid] as number)
    : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
}

/**
 * A figure over repeated runs: its median, its min and max, and each value keyed by its run's
 * number (and the replica's name, where a run gives several): an object, since a short array of
 * numbers would be reflowed by the formatter in the data a run writes.
 */
export interface Spread {
  median: number;
  min: number;
  max: number;
  runs: Record<string, number>;
}

/** `values` as a {@link Spread}, each keyed as given. */
export function spreadOf(values: ReadonlyArray<readonly [string, number]>): Spread {
  const numbers = values.map(([, v]) => v);
  return {
    // The mean of the middle two, for an even count: rounded as the figures are (0.01 MiB).
    median: Math.round(median(numbers) * 100) / 100,
    min: Math.min(...numbers),
    max: Math.max(...numbers),
    runs: Object.fromEntries(values),
  };
}

/**
 * The runs of one N as one set of figures: each RSS figure the median over the runs (with its
 * spread in `repeats`), the steady KiB per resource from the medians, every other figure the
 * run's whose peak is the median one (the lower middle for an even count).
 */
export function ofRepeats(runs: readonly ScaleFigures[]): ScaleFigures {
  const first = runs[0];
  if (first === undefined) throw new Error("no runs to combine");
  if (runs.length === 1) return first;
  const byPeak = [...runs].sort((a, b) => a.rssMiB.peak - b.rssMiB.peak);
  const middle = byPeak[Math.floor((byPeak.length - 1) / 2)] as ScaleFigures;
  const spread = Object.fromEntries(
    REPEATED_RSS.flatMap((k) => {
      const all = runs.flatMap((r) => r.rssMiB[k] ?? []);
      return all.length === 0 ? [] : [[k, spreadOf(all.map((v, i) => [String(i + 1), v] as const))]];
    }),
  ) as NonNullable<ScaleFigures["repeats"]>["rssMiB"];
  const rssMiB = { ...middle.rssMiB };
  for (const k of REPEATED_RSS) {
    const median = spread[k]?.median;
    if (median !== undefined) rssMiB[k] = median;
  }
  return {
    ...middle,
    rssMiB,
    perResource: {
      ...middle.perResource,
      steadyKiB: Math.round(((rssMiB.steady - rssMiB.idle) / middle.n) * 1024 * 100) / 100,
    },
    repeats: { runs: runs.length, rssMiB: spread, loadAverage: runs.map((r) => r.loadAverage) },
  };
}

/** The file: series (e.g. before, after) → N → figures. */
interface ScaleReport {
  benchmark: "scale";
  machine: { platform: string; cpu: string; cpus: number };
  series: Record<string, Record<string, ScaleFigures>>;
  /**
   * Per series with both N = 1,000 and N = 10,000: per-resource cost at 10k ÷ at 1k (goal ≤ 1.2).
   * Per series with two N or more: the steady memory split into what one more resource costs and
   * what is there whatever N ({@link steadyMemorySplit}).
   */
  flatness: Record<string, { resyncCpu?: number; steadyMemory?: number } & Partial<SteadyMemorySplit>>;
}

/** (steady − idle) RSS as a line in N: KiB a resource more (its slope), and MiB at any N (its intercept). */
export interface SteadyMemorySplit {
  /** From the smallest N to the largest: KiB each resource more adds to steady RSS. */
  marginalKiB: number;
  /** What (steady − idle) would be at N = 0 on that line: code compiled, allocator's memory, buffers. */
  fixedMiB: number;
  /**
   * The two N the line goes through. An object, not a pair: JSON.stringify writes a pair a number
   * a line, which the formatter reflows (the page's check then fails on the data a run wrote).
   */
  between: { from: number; to: number };
}

/**
 * The steady RSS of a series' smallest and largest N as a line: a per-resource figure,
 * (steady − idle) ÷ N, mixes the two, and its fixed part weighs more the smaller N is.
 * Undefined with fewer than two N.
 */
export function steadyMemorySplit(byN: Record<string, ScaleFigures>): SteadyMemorySplit | undefined {
  const figures = Object.values(byN).sort((a, b) => a.n - b.n);
  const small = figures[0];
  const large = figures.at(-1);
  if (small === undefined || large === undefined || large.n <= small.n) return undefined;
  const grown = (f: ScaleFigures) => f.rssMiB.steady - f.rssMiB.idle;
  const slopeMiB = (grown(large) - grown(small)) / (large.n - small.n);
  return {
    marginalKiB: Math.round(slopeMiB * 1024 * 100) / 100,
    fixedMiB: Math.round((grown(small) - slopeMiB * small.n) * 10) / 10,
    between: { from: small.n, to: large.n },
  };
}

/** Merges `figures` into the series `label` and rewrites the JSON, the SVG and the docs table; returns the paths. */
export function saveScale(label: string, figures: ScaleFigures): string[] {
  // Synchronous from read to write: two runs at once (e.g. N=10,000 beside smaller ones) merge
  // into the same file, and must not interleave a read and a write.
  const previous = existsSync(JSON_PATH)
    ? (JSON.parse(readFileSync(JSON_PATH, "utf8")) as ScaleReport)
    : undefined;
  const series = previous?.series ?? {};
  series[label] = { ...series[label], [String(figures.n)]: figures };
  const report: ScaleReport = {
    benchmark: "scale",
    machine: { platform: `${platform()}-${arch()}`, cpu: cpus()[0]?.model ?? "unknown", cpus: cpus().length },
    series,
    flatness: flatness(series),
  };
  mkdirSync(join(DOCS, "bench"), { recursive: true });
  writeFileSync(JSON_PATH, `${JSON.stringify(report, null, 2)}\n`);
  writeFileSync(SVG_PATH, svg(series));
  const written = [JSON_PATH, SVG_PATH];
  const markdown = existsSync(MARKDOWN_PATH) ? readFileSync(MARKDOWN_PATH, "utf8") : undefined;
  const begin = markdown?.indexOf(BEGIN) ?? -1;
  const end = markdown?.indexOf(END) ?? -1;
  if (markdown !== undefined && begin >= 0 && end > begin) {
    const table = markdownTable(latestColumns(series), {});
    writeFileSync(
      MARKDOWN_PATH,
      `${markdown.slice(0, begin + BEGIN.length)}\n${table}\n${markdown.slice(end)}`,
    );
    written.push(MARKDOWN_PATH);
  }
  return written;
}

function flatness(series: ScaleReport["series"]): ScaleReport["flatness"] {
  const out: ScaleReport["flatness"] = {};
  for (const [label, byN] of Object.entries(series)) {
    const small = byN["1000"];
    const large = byN["10000"];
    const split = steadyMemorySplit(byN);
    if ((small === undefined || large === undefined) && split === undefined) continue;
    out[label] = {
      ...(small !== undefined && large !== undefined
        ? {
            resyncCpu: ratio(large.perResource.resyncCpuMs, small.perResource.resyncCpuMs),
            steadyMemory: ratio(large.perResource.steadyKiB, small.perResource.steadyKiB),
          }
        : {}),
      ...split,
    };
  }
  return out;
}

const ratio = (a: number, b: number) => (b > 0 ? Math.round((a / b) * 100) / 100 : Number.NaN);

/** One line per measure: label, goal, and the value of figures. */
const MEASURES: Array<{ label: string; goal: string; value: (f: ScaleFigures) => string }> = [
  { label: "RSS idle, MiB", goal: "≤ 90", value: (f) => rss(f, "idle") },
  {
    label: "RSS steady holding N (settled: 20 s after the last reconcile), MiB",
    goal: "",
    value: (f) =>
      `${rss(f, "steady")}${f.rssMiB.settled === undefined ? "" : `; settled ${rss(f, "settled")}`}`,
  },
  {
    label: "… of which anonymous / mapped files (node's binary), MiB",
    goal: "",
    value: (f) =>
      f.rssMiB.steadySplit ? `${fmt(f.rssMiB.steadySplit.anon)} / ${fmt(f.rssMiB.steadySplit.file)}` : "–",
  },
  {
    label: "… V8 heap committed / used, idle → steady (→ settled), MiB",
    goal: "",
    value: (f) => {
      const h = f.v8HeapMiB;
      const settled = h?.settled ? ` → ${fmt(h.settled.committed)} / ${fmt(h.settled.used)} settled` : "";
      return h
        ? `${fmt(h.idle.committed)} / ${fmt(h.idle.used)} → ${fmt(h.steady.committed)} / ${fmt(h.steady.used)}${settled}`
        : "–";
    },
  },
  { label: "RSS peak (VmHWM), MiB", goal: "≤ 150 at 10k", value: (f) => rss(f, "peak") },
  {
    label: "service calls per resync (goal ⌈N/100⌉+1)",
    goal: "⌈N/100⌉+1",
    value: (f) => `${f.resync.serviceCalls} (${f.resync.serviceCallsGoal})`,
  },
  {
    label: "Kubernetes requests per resource per resync",
    goal: "≤ 0.01",
    value: (f) => fmt(f.resync.kubeRequestsPerResource),
  },
  {
    label: "… in the first pass after the creates",
    goal: "",
    value: (f) => (f.resync.firstPass ? fmt(f.resync.firstPass.kubeRequests / f.n) : "–"),
  },
  {
    label: "of which writes (etcd)",
    goal: "",
    value: (f) => (f.resync.etcdWrites === undefined ? "–" : fmt(f.resync.etcdWrites / f.n)),
  },
  { label: "CPU-seconds per resync", goal: "", value: (f) => fmt(f.resync.cpuSeconds) },
  {
    label: "resync pass, s",
    goal: "",
    value: (f) => `${fmt(f.resync.seconds)}${f.resync.overlapped ? " (overlapped)" : ""}`,
  },
  {
    label: "adoption: start → all Ready, s (of which start-up)",
    goal: "",
    value: (f) =>
      `${fmt(f.adoption.seconds)}${f.startupSeconds === undefined ? "" : ` (${fmt(f.startupSeconds)})`}`,
  },
  { label: "N bare status patches, s", goal: "", value: (f) => fmt(f.adoption.barePatchSeconds) },
  { label: "adoption ÷ bare patches", goal: "≤ 1.5", value: (f) => fmt(f.adoption.ratio) },
  {
    label: "adoption service calls per resource",
    goal: "",
    value: (f) => fmt(f.adoption.serviceCalls / f.n),
  },
  {
    label: "cold creates/s at --qps 50",
    goal: "≥ 40",
    value: (f) => `${fmt(f.cold.createsPerSecond)} (${Math.round(f.cold.ofQps * 100)} %)`,
  },
  { label: "service calls per create", goal: "1", value: (f) => fmt(f.cold.serviceCallsPerCreate) },
  {
    label: "… beside the creates: listing pages / id batches / single ids / names",
    goal: "",
    value: (f) => {
      const k = f.cold.serviceCallsByKind;
      if (!k) return "–";
      return [k["listing page"], k["ids (batch)"], k.id, k.name].map((v) => fmt(v ?? 0)).join(" / ");
    },
  },
  {
    label: "… CPU ms a create: operator / API server / etcd / benchmark",
    goal: "",
    value: (f) => {
      const c = f.cold.cpuMsPerCreate;
      if (!c) return "–";
      return [c.operator, c.apiServer, c.etcd, c.benchmark].map((v) => fmt(v ?? 0)).join(" / ");
    },
  },
  {
    label: "edit → PATCH p50 / p99, ms",
    goal: "< 50 / < 250",
    value: (f) =>
      `${fmt(f.edit.p50Ms)} / ${fmt(f.edit.p99Ms)}${f.edit.patched < f.edit.edits ? ` (${f.edit.patched}/${f.edit.edits} patched)` : ""}`,
  },
  {
    label: "per resource: resync CPU ms / steady KiB",
    goal: "flat",
    value: (f) => `${fmt(f.perResource.resyncCpuMs)} / ${fmt(f.perResource.steadyKiB)}`,
  },
  { label: "commit", goal: "", value: (f) => `\`${f.commit}\`` },
  {
    label: "machine load (1-min average, start → end)",
    goal: "",
    value: (f) => (f.loadAverage ? `${fmt(f.loadAverage.start)} → ${fmt(f.loadAverage.end)}` : "–"),
  },
];

function columns(series: ScaleReport["series"]): Array<{ label: string; f: ScaleFigures }> {
  return Object.entries(series).flatMap(([label, byN]) =>
    Object.values(byN)
      .sort((a, b) => a.n - b.n)
      .map((f) => ({ label, f })),
  );
}

/** Per N, the figures of the latest run (by date) of any series. */
function latestColumns(series: ScaleReport["series"]): Array<{ label: string; f: ScaleFigures }> {
  const latest = new Map<number, { label: string; f: ScaleFigures }>();
  for (const c of columns(series)) {
    const seen = latest.get(c.f.n);
    if (seen === undefined || c.f.date > seen.f.date) latest.set(c.f.n, c);
  }
  return [...latest.values()].sort((a, b) => a.f.n - b.f.n);
}

/**
 * The figures of `docs/bench/scale.json` as a Markdown table: every series and N (`all`), or the
 * latest run at each N (`current`, the page's table).
 */
export function scaleMarkdown(which: "all" | "current", path = JSON_PATH): string {
  const report = JSON.parse(readFileSync(path, "utf8")) as ScaleReport;
  return which === "all"
    ? markdownTable(columns(report.series), report.flatness)
    : markdownTable(latestColumns(report.series), {});
}

function markdownTable(
  cols: Array<{ label: string; f: ScaleFigures }>,
  flat: ScaleReport["flatness"],
): string {
  const head = `| measured | ${cols.map((c) => `${c.label} N=${c.f.n.toLocaleString("en")}`).join(" | ")} | goal |`;
  const rule = `|---|${cols.map(() => "---|").join("")}---|`;
  // A measure none of these runs has (one added since) is left out rather than shown as dashes.
  const rows = MEASURES.map((m) => ({ m, values: cols.map((c) => m.value(c.f)) }))
    .filter(({ values }) => values.some((v) => v !== "–"))
    .map(({ m, values }) => `| ${m.label} | ${values.join(" | ")} | ${m.goal} |`);
  const notes = Object.entries(flat).flatMap(([label, r]) => [
    ...(r.resyncCpu !== undefined && r.steadyMemory !== undefined
      ? [
          `- ${label}: per-resource cost at 10,000 ÷ at 1,000: resync CPU ${fmt(r.resyncCpu)}, steady memory ${fmt(r.steadyMemory)} (goal ≤ 1.2)`,
        ]
      : []),
    ...(r.marginalKiB !== undefined && r.fixedMiB !== undefined && r.between !== undefined
      ? [
          `- ${label}: steady − idle RSS from N=${r.between.from.toLocaleString("en")} to ${r.between.to.toLocaleString("en")}: ${fmt(r.marginalKiB)} KiB a resource more, ${fmt(r.fixedMiB)} MiB whatever N`,
        ]
      : []),
  ]);
  return [head, rule, ...rows, ...(notes.length > 0 ? ["", ...notes] : [])].join("\n");
}

/** The table `npm run bench -- scale` prints for this run. */
export function scaleTable(label: string, results: ScaleFigures[]): BenchTable {
  const rows: BenchTable["rows"] = MEASURES.map((m) => [
    m.label,
    ...results.map((f) => m.value(f).replaceAll("`", "")),
    m.goal,
  ]);
  const split = steadyMemorySplit(Object.fromEntries(results.map((f) => [String(f.n), f])));
  if (split !== undefined) {
    const largest = Math.max(...results.map((f) => f.n));
    rows.push([
      `steady − idle RSS from N=${split.between.from} to ${split.between.to}: KiB a resource more / MiB whatever N`,
      ...results.map((f) => (f.n === largest ? `${fmt(split.marginalKiB)} / ${fmt(split.fixedMiB)}` : "–")),
      "",
    ]);
  }
  return { head: ["measured", ...results.map((f) => `${label} N=${f.n}`), "goal"], rows };
}

/** An RSS figure: the median of a `--repeat` run with its min–max and the count of runs, else the one run's. */
function rss(f: ScaleFigures, k: RepeatedRss): string {
  const spread = f.repeats?.rssMiB[k];
  return spread === undefined
    ? fmt(f.rssMiB[k] ?? Number.NaN)
    : `${fmt(spread.median)} (${fmt(spread.min)}–${fmt(spread.max)}, ${f.repeats?.runs} runs)`;
}

function fmt(value: number): string {
  if (!Number.isFinite(value)) return "–";
  const digits = Math.abs(value) >= 100 ? 0 : Math.abs(value) >= 10 ? 1 : Math.abs(value) >= 1 ? 2 : 3;
  return value.toLocaleString("en", { maximumFractionDigits: digits });
}

// ---------------------------------------------------------------------------------------------
// The picture: two panels, x = N on a log scale. Left: RSS (idle, steady, peak); right: CPU
// seconds of one resync pass on a log scale, with a dotted line ∝ N through each series' smallest
// N, so linear cost shows as a series running parallel to it.

const COLORS = ["#d62728", "#1f77b4", "#2ca02c", "#9467bd", "#ff7f0e"];
const PANEL = { width: 440, height: 300, left: 58, right: 12, top: 36, bottom: 44 };

interface Line {
  name: string;
  color: string;
  dash?: string;
  points: Array<[number, number]>;
}

function svg(series: ScaleReport["series"]): string {
  const labels = Object.keys(series);
  const rss: Line[] = [];
  const cpu: Line[] = [];
  labels.forEach((label, i) => {
    const color = COLORS[i % COLORS.length] ?? "#000";
    const figures = Object.values(series[label] ?? {}).sort((a, b) => a.n - b.n);
    rss.push({ name: `${label} peak`, color, points: figures.map((f) => [f.n, f.rssMiB.peak]) });
    rss.push({
      name: `${label} steady`,
      color,
      dash: "6 3",
      points: figures.map((f) => [f.n, f.rssMiB.steady]),
    });
    rss.push({ name: `${label} idle`, color, dash: "2 3", points: figures.map((f) => [f.n, f.rssMiB.idle]) });
    const costs = figures.filter((f) => f.resync.cpuSeconds > 0);
    cpu.push({ name: `${label} CPU-s`, color, points: costs.map((f) => [f.n, f.resync.cpuSeconds]) });
    const first = costs[0];
    const last = costs[costs.length - 1];
    if (first && last && last.n > first.n) {
      const perN = first.resync.cpuSeconds / first.n;
      cpu.push({
        name: `∝ N`,
        color: "#999",
        dash: "1 3",
        points: [
          [first.n, first.resync.cpuSeconds],
          [last.n, last.n * perN],
        ],
      });
    }
  });
  const width = PANEL.width * 2;
  const height = PANEL.height + 24 + labels.length * 16;
  const legend = labels
    .map((label, i) => {
      const y = PANEL.height + 16 + i * 16;
      const color = COLORS[i % COLORS.length] ?? "#000";
      return `<g font-size="11"><rect x="${PANEL.left}" y="${y - 8}" width="10" height="10" fill="${color}"/><text x="${PANEL.left + 16}" y="${y + 1}">${xml(label)}: solid peak, dashed steady, dotted idle (left); CPU-seconds of one resync pass (right; grey dots: ∝ N)</text></g>`;
    })
    .join("\n");
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="sans-serif">`,
    "<title>dms-operator at N resources: RSS and the CPU cost of one drift resync, against N</title>",
    `<rect width="100%" height="100%" fill="#fff"/>`,
    panel(0, "operator RSS, MiB", rss, false),
    panel(PANEL.width, "CPU-seconds per drift resync (log)", cpu, true),
    legend,
    "</svg>",
    "",
  ].join("\n");
}

function panel(x0: number, title: string, lines: Line[], logY: boolean): string {
  const points = lines.flatMap((l) => l.points).filter(([n, v]) => n > 0 && (!logY || v > 0));
  const plotW = PANEL.width - PANEL.left - PANEL.right;
  const plotH = PANEL.height - PANEL.top - PANEL.bottom;
  const out: string[] = [`<g transform="translate(${x0},0)">`];
  out.push(`<text x="${PANEL.left}" y="20" font-size="13" font-weight="bold">${xml(title)}</text>`);
  if (points.length === 0) {
    out.push(`<text x="${PANEL.left}" y="${PANEL.top + 20}" font-size="11">no figures yet</text></g>`);
    return out.join("\n");
  }
  const ns = points.map(([n]) => n);
  const xLo = Math.floor(Math.log10(Math.min(...ns)));
  const xHi = Math.max(xLo + 1, Math.ceil(Math.log10(Math.max(...ns))));
  const sx = (n: number) => PANEL.left + ((Math.log10(n) - xLo) / (xHi - xLo)) * plotW;
  const vs = points.map(([, v]) => v);
  let sy: (v: number) => number;
  const yTicks: Array<[number, string]> = [];
  if (logY) {
    const yLo = Math.floor(Math.log10(Math.min(...vs)));
    const yHi = Math.max(yLo + 1, Math.ceil(Math.log10(Math.max(...vs))));
    sy = (v) => PANEL.top + plotH - ((Math.log10(v) - yLo) / (yHi - yLo)) * plotH;
    for (let e = yLo; e <= yHi; e++) yTicks.push([10 ** e, String(Number((10 ** e).toPrecision(1)))]);
  } else {
    const step = niceStep(Math.max(...vs) / 5);
    const yHi = Math.ceil((Math.max(...vs) * 1.05) / step) * step;
    sy = (v) => PANEL.top + plotH - (v / yHi) * plotH;
    for (let v = 0; v <= yHi + 1e-9; v += step) yTicks.push([v, String(Number(v.toPrecision(3)))]);
  }
  out.push(
    `<rect x="${PANEL.left}" y="${PANEL.top}" width="${plotW}" height="${plotH}" fill="none" stroke="#ccc"/>`,
  );
  for (const [v, text] of yTicks) {
    const y = sy(v).toFixed(1);
    out.push(`<line x1="${PANEL.left}" x2="${PANEL.left + plotW}" y1="${y}" y2="${y}" stroke="#eee"/>`);
    out.push(
      `<text x="${PANEL.left - 6}" y="${y}" font-size="10" text-anchor="end" dominant-baseline="middle">${text}</text>`,
    );
  }
  for (let e = xLo; e <= xHi; e++) {
    for (const m of e < xHi ? [1, 3] : [1]) {
      const n = m * 10 ** e;
      const x = sx(n).toFixed(1);
      out.push(`<line x1="${x}" x2="${x}" y1="${PANEL.top}" y2="${PANEL.top + plotH}" stroke="#eee"/>`);
      out.push(
        `<text x="${x}" y="${PANEL.top + plotH + 14}" font-size="10" text-anchor="middle">${n.toLocaleString("en")}</text>`,
      );
    }
  }
  out.push(
    `<text x="${PANEL.left + plotW / 2}" y="${PANEL.top + plotH + 32}" font-size="11" text-anchor="middle">resources (N, log scale)</text>`,
  );
  for (const line of lines) {
    const pts = line.points.filter(([n, v]) => n > 0 && (!logY || v > 0));
    if (pts.length === 0) continue;
    const d = pts
      .map(([n, v], i) => `${i === 0 ? "M" : "L"}${sx(n).toFixed(1)},${sy(v).toFixed(1)}`)
      .join(" ");
    const dash = line.dash ? ` stroke-dasharray="${line.dash}"` : "";
    out.push(
      `<path d="${d}" fill="none" stroke="${line.color}" stroke-width="2"${dash}><title>${xml(line.name)}</title></path>`,
    );
    if (line.name !== "∝ N") {
      for (const [n, v] of pts) {
        out.push(
          `<circle cx="${sx(n).toFixed(1)}" cy="${sy(v).toFixed(1)}" r="3" fill="${line.color}"><title>${xml(line.name)} N=${n}: ${fmt(v)}</title></circle>`,
        );
      }
    }
  }
  out.push("</g>");
  return out.join("\n");
}

function niceStep(raw: number): number {
  const power = 10 ** Math.floor(Math.log10(raw || 1));
  const m = raw / power;
  return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * power;
}

const xml = (text: string) => text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
