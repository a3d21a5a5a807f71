/**
 * Reads what `scale --profile` wrote and says where the time and the memory go, or, given two
 * files of one kind (before, after), what moved between them:
 *
 *   node test/bench/profile-report.ts <a.cpuprofile> [<b.cpuprofile>]   CPU: self and total time per function
 *   node test/bench/profile-report.ts <a.heapsnapshot> [<b.heapsnapshot>] memory: bytes and count per kind of object
 *   node test/bench/profile-report.ts <a.heapprofile> [<b.heapprofile>]   allocations: bytes per allocating function
 *                                                                          and per nearest function of the operator
 *
 * A heap snapshot of 10,000 resources is ~50 MB of JSON: it is parsed whole (run with
 * `--max-old-space-size=4096`). The same files open in Chrome DevTools for the detail.
 */
import { readFileSync } from "node:fs";

/** Seconds or bytes and a count, per key. */
type Tally = Map<string, { amount: number; count: number }>;

/** Adds `amount` to `k`'s entry of `tally`, and one to its count. */
function add(tally: Tally, k: string, amount: number): void {
  const entry = tally.get(k) ?? { amount: 0, count: 0 };
  entry.amount += amount;
  entry.count += 1;
  tally.set(k, entry);
}

/** A profile's name of a function: `name dir/file:line`. */
const frameKey = ({
  functionName,
  url,
  lineNumber,
}: {
  functionName: string;
  url: string;
  lineNumber: number;
}) => `${functionName || "(anonymous)"} ${url.split("/").slice(-2).join("/")}:${lineNumber + 1}`;

interface CpuProfile {
  nodes: Array<{
    id: number;
    callFrame: { functionName: string; url: string; lineNumber: number };
    children?: number[];
  }>;
  samples: number[];
  timeDeltas: number[];
}

/** Self and total (inclusive) seconds per function (`name file:line`), idle left out. */
export function cpuTallies(profile: CpuProfile): { self: Tally; total: Tally } {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of profile.nodes) for (const child of n.children ?? []) parent.set(child, n.id);
  const key = (id: number) => frameKey((byId.get(id) as CpuProfile["nodes"][number]).callFrame);
  const self: Tally = new Map();
  const total: Tally = new Map();
  // A sample's time is the delta to the next one (the last sample has none).
  profile.samples.forEach((id, i) => {
    const seconds = (profile.timeDeltas[i + 1] ?? 0) / 1e6;
    if (key(id).startsWith("(idle)")) return;
    add(self, key(id), seconds);
    const seen = new Set<string>();
    for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) {
      const k = key(at);
      if (!seen.has(k)) add(total, k, seconds);
      seen.add(k);
    }
  });
  return { self, total };
}

interface HeapSnapshot {
  snapshot: { meta: { node_fields: string[]; node_types: [string[], ...unknown[]] } };
  nodes: number[];
  strings: string[];
}

/** Self size and count per kind of heap object: strings and code as one each, objects by constructor. */
export function heapTally(snapshot: HeapSnapshot): Tally {
  const fields = snapshot.snapshot.meta.node_fields;
  const types = snapshot.snapshot.meta.node_types[0];
  const [type, name, size] = ["type", "name", "self_size"].map((f) => fields.indexOf(f)) as [
    number,
    number,
    number,
  ];
  const tally: Tally = new Map();
  for (let i = 0; i < snapshot.nodes.length; i += fields.length) {
    const kind = types[snapshot.nodes[i + type] as number] ?? "?";
    const label = kind.includes("string")
      ? "string"
      : kind === "code" || kind === "number"
        ? kind
        : `${kind} ${(snapshot.strings[snapshot.nodes[i + name] as number] ?? "").slice(0, 60)}`;
    add(tally, label, snapshot.nodes[i + size] as number);
  }
  return tally;
}

interface SampledNode {
  callFrame: { functionName: string; url: string; lineNumber: number };
  selfSize: number;
  children: SampledNode[];
}

/** Whether a frame is the operator's own code: its sources, or the benchmark's compiled copy. */
const operatorCode = (url: string) =>
  url.includes("/dms-scale-bench/") || (url.includes("/src/") && !url.includes("/node_modules/"));

/**
 * Sampled bytes of a sampling heap profile (`.heapprofile`) per allocating function (`self`), and
 * per the nearest function of the operator's own code on the allocation's stack (`ours`: which
 * of our calls the allocation, in a library or in Node, was made for).
 */
export function sampledTallies(profile: { head: SampledNode }): { self: Tally; ours: Tally } {
  const self: Tally = new Map();
  const ours: Tally = new Map();
  const walk = (node: SampledNode, nearest: string) => {
    const here = operatorCode(node.callFrame.url) ? frameKey(node.callFrame) : nearest;
    if (node.selfSize > 0) {
      add(self, frameKey(node.callFrame), node.selfSize);
      add(ours, here, node.selfSize);
    }
    for (const child of node.children) walk(child, here);
  };
  walk(profile.head, "(none of the operator's)");
  return { self, ours };
}

/** Lines of the `top` largest keys of `b`, or of the largest growths from `a` to `b`. */
export function report(b: Tally, a: Tally | undefined, unit: (amount: number) => string, top = 30): string[] {
  const sum = (t: Tally) => [...t.values()].reduce((s, e) => s + e.amount, 0);
  if (a === undefined) {
    const rows = [...b].sort((x, y) => y[1].amount - x[1].amount).slice(0, top);
    return [
      `total ${unit(sum(b))}`,
      ...rows.map(([k, e]) => `${unit(e.amount).padStart(12)} ${String(e.count).padStart(8)}  ${k}`),
    ];
  }
  const keys = new Set([...a.keys(), ...b.keys()]);
  const delta = (k: string) => (b.get(k)?.amount ?? 0) - (a.get(k)?.amount ?? 0);
  const rows = [...keys].sort((x, y) => Math.abs(delta(y)) - Math.abs(delta(x))).slice(0, top);
  return [
    `total ${unit(sum(a))} -> ${unit(sum(b))}`,
    ...rows.map((k) => {
      const d = delta(k);
      const counts = `${a.get(k)?.count ?? 0} -> ${b.get(k)?.count ?? 0}`;
      return `${(d >= 0 ? "+" : "-") + unit(Math.abs(d))}`.padStart(12) + `  ${counts.padEnd(20)} ${k}`;
    }),
  ];
}

if (import.meta.main) {
  const [first, second] = process.argv.slice(2);
  if (first === undefined) {
    process.stderr.write(
      "usage: node test/bench/profile-report.ts <a.cpuprofile|a.heapsnapshot|a.heapprofile> [<b>]\n",
    );
    process.exit(2);
  }
  const read = (path: string) => JSON.parse(readFileSync(path, "utf8")) as unknown;
  const lines: string[] = [];
  if (first.endsWith(".cpuprofile")) {
    const a = cpuTallies(read(first) as CpuProfile);
    const b = second === undefined ? undefined : cpuTallies(read(second) as CpuProfile);
    const seconds = (s: number) => `${s.toFixed(3)} s`;
    lines.push("self:", ...report(b?.self ?? a.self, b ? a.self : undefined, seconds));
    lines.push("", "total:", ...report(b?.total ?? a.total, b ? a.total : undefined, seconds));
  } else if (first.endsWith(".heapprofile")) {
    const a = sampledTallies(read(first) as { head: SampledNode });
    const b = second === undefined ? undefined : sampledTallies(read(second) as { head: SampledNode });
    const mib = (bytes: number) => `${(bytes / 1048576).toFixed(2)} MiB`;
    lines.push("allocating function:", ...report(b?.self ?? a.self, b ? a.self : undefined, mib));
    lines.push(
      "",
      "nearest function of the operator:",
      ...report(b?.ours ?? a.ours, b ? a.ours : undefined, mib),
    );
  } else {
    const a = heapTally(read(first) as HeapSnapshot);
    const b = second === undefined ? undefined : heapTally(read(second) as HeapSnapshot);
    lines.push(...report(b ?? a, b ? a : undefined, (bytes) => `${(bytes / 1024).toFixed(0)} KiB`));
  }
  process.stdout.write(`${lines.join("\n")}\n`);
}
