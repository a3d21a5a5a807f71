/**
 * Outside views of a running process and of servers, for benchmarks that must not rely on what
 * the measured program says about itself: memory and CPU time from /proc, and Prometheus text
 * scraped over HTTP(S).
 */
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { type RequestOptions, request } from "node:https";

/**
 * Resident memory of `pid` now and its peak (VmHWM), in MiB, from /proc/<pid>/status; `anon` and
 * `file` split the resident memory now into the process's own (heap, stacks) and mapped files
 * (for node, mostly the pages of its binary that ran).
 */
export function memoryMiB(pid: number): { rss: number; peak: number; anon: number; file: number } {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  const kib = (field: string) => {
    const match = new RegExp(`^${field}:\\s+(\\d+) kB$`, "m").exec(status);
    if (match === null) throw new Error(`/proc/${pid}/status has no ${field}`);
    return Number(match[1]);
  };
  return {
    rss: kib("VmRSS") / 1024,
    peak: kib("VmHWM") / 1024,
    anon: kib("RssAnon") / 1024,
    file: (kib("RssFile") + kib("RssShmem")) / 1024,
  };
}

// Clock ticks per second of /proc/<pid>/stat (USER_HZ; 100 on every Linux we know, but ask).
let ticksPerSecond: number | undefined;

/** CPU seconds `pid` has used so far, user plus system (utime + stime of /proc/<pid>/stat). */
export function cpuSeconds(pid: number): number {
  ticksPerSecond ??= Number(spawnSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).stdout.trim()) || 100;
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  // Fields after the command name, which is in parentheses and may itself contain spaces.
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  // utime and stime are fields 14 and 15 of the line; the slice starts at field 3 (state).
  return (Number(fields[11]) + Number(fields[12])) / ticksPerSecond;
}

/** CPU seconds so far of each process of each group (see {@link cpuSpent}). */
export type CpuReading = Map<number, { group: string; seconds: number }>;

/**
 * Reads {@link cpuSeconds} of every process in `groups` (a group's name to its pids): a process
 * that exited already is left out.
 */
export function cpuReading(groups: Record<string, readonly number[]>): CpuReading {
  const reading: CpuReading = new Map();
  for (const [group, pids] of Object.entries(groups))
    for (const pid of pids) {
      try {
        reading.set(pid, { group, seconds: cpuSeconds(pid) });
      } catch {
        // Gone: what it used is not known here.
      }
    }
  return reading;
}

/**
 * CPU seconds each group used between two readings, summed over its processes: one started
 * between them counts from zero, one that exited between them is left out (read it before it
 * goes for its share).
 */
export function cpuSpent(before: CpuReading, after: CpuReading): Record<string, number> {
  const spent: Record<string, number> = {};
  for (const [pid, { group, seconds }] of after)
    spent[group] = (spent[group] ?? 0) + seconds - (before.get(pid)?.seconds ?? 0);
  for (const [, { group }] of before) spent[group] ??= 0;
  return spent;
}

/**
 * Each group's CPU of {@link cpuSpent} in milliseconds per item (a create, a write), to 0.1 ms;
 * `{}` when there were no items.
 */
export function cpuMsPer(spent: Record<string, number>, items: number): Record<string, number> {
  if (items <= 0) return {};
  return Object.fromEntries(
    Object.entries(spent).map(([group, seconds]) => [group, Math.round((seconds * 10_000) / items) / 10]),
  );
}

/** One sample of a Prometheus text exposition. */
export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

const SAMPLE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)/;
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;

/** The samples of a Prometheus text exposition named `name` (every sample when not given). */
export function parseSamples(text: string, name?: string): Sample[] {
  const samples: Sample[] = [];
  for (const line of text.split("\n")) {
    if (line.startsWith("#") || (name !== undefined && !line.startsWith(name))) continue;
    const match = SAMPLE.exec(line);
    if (match === null || (name !== undefined && match[1] !== name)) continue;
    const labels: Record<string, string> = {};
    for (const [, key, value] of (match[2] ?? "").matchAll(LABEL)) labels[key ?? ""] = value ?? "";
    samples.push({ name: match[1] ?? "", labels, value: Number(match[3]) });
  }
  return samples;
}

/** Sum of the samples' values that `where` accepts. */
export function sumOf(
  samples: readonly Sample[],
  where: (labels: Record<string, string>) => boolean = () => true,
) {
  return samples.reduce((sum, s) => (where(s.labels) ? sum + s.value : sum), 0);
}

/** What {@link apiRequestDelta} found. */
export interface RequestDelta {
  /** Requests on the resource (any subresource), WATCH excluded. */
  target: number;
  /** The same by verb, with the subresource: `{"GET": 3, "APPLY/status": 2}`. */
  byVerb: Record<string, number>;
  /** Every other request by verb and resource (`(non-resource)` for paths like /metrics), WATCH excluded. */
  other: Record<string, number>;
}

/**
 * The requests the API server counted between two scrapes of its `apiserver_request_total`, on
 * `group`/`resource` and on everything else. WATCH (and WATCHLIST) requests are left out: a
 * watch is counted when it ends, so the count says nothing about the window.
 */
export function apiRequestDelta(
  before: Sample[],
  after: Sample[],
  group: string,
  resource: string,
): RequestDelta {
  const delta: RequestDelta = { target: 0, byVerb: {}, other: {} };
  for (const [s, count] of increases(before, after, "apiserver_request_total")) {
    const verb = s.labels.verb ?? "";
    if (verb.startsWith("WATCH")) continue;
    const sub = s.labels.subresource ? `/${s.labels.subresource}` : "";
    if (s.labels.group === group && s.labels.resource === resource) {
      delta.target += count;
      delta.byVerb[`${verb}${sub}`] = (delta.byVerb[`${verb}${sub}`] ?? 0) + count;
    } else {
      const what = `${verb} ${s.labels.resource || "(non-resource)"}${sub}`;
      delta.other[what] = (delta.other[what] ?? 0) + count;
    }
  }
  return delta;
}

/**
 * Writes the API server made to etcd for `group`/`resource` between two scrapes of its
 * `etcd_requests_total` (operations create, update, delete). A server-side apply that changes
 * nothing is a request but no write.
 */
export function etcdWriteDelta(before: Sample[], after: Sample[], group: string, resource: string): number {
  let writes = 0;
  for (const [s, count] of increases(before, after, "etcd_requests_total")) {
    const { operation = "" } = s.labels;
    if (
      s.labels.group === group &&
      s.labels.resource === resource &&
      /^(create|update|delete)$/.test(operation)
    )
      writes += count;
  }
  return writes;
}

/** The samples of counter `name` in `after` that grew since `before` (a new series from 0), with the growth. */
function increases(before: Sample[], after: Sample[], name: string): Array<[Sample, number]> {
  const key = (s: Sample) =>
    JSON.stringify([s.name, ...Object.entries(s.labels).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))]);
  const was = new Map(before.filter((s) => s.name === name).map((s) => [key(s), s.value]));
  return after.flatMap((s): Array<[Sample, number]> => {
    const grew = s.name === name ? s.value - (was.get(key(s)) ?? 0) : 0;
    return grew > 0 ? [[s, grew]] : [];
  });
}

/**
 * An HTTPS GET with `options` (CA, bearer token, `rejectUnauthorized`) applied: its status and
 * body as bytes (a binary answer: a profile). `timeoutMs` bounds the socket's idle time.
 */
export function httpsBytes(
  url: string,
  options: RequestOptions,
  timeoutMs = 30_000,
): Promise<{ status: number; body: Buffer }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { ...options, method: "GET", timeout: timeoutMs }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (chunk: Buffer) => chunks.push(chunk));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks) }));
      res.on("error", reject);
    });
    req.on("timeout", () => req.destroy(new Error(`GET ${url} timed out`)));
    req.on("error", reject);
    req.end();
  });
}

/** {@link httpsBytes} with the body as UTF-8 text. */
export async function httpsAnswer(
  url: string,
  options: RequestOptions,
  timeoutMs = 30_000,
): Promise<{ status: number; body: string }> {
  const { status, body } = await httpsBytes(url, options, timeoutMs);
  return { status, body: body.toString("utf8") };
}

/** The body of an HTTPS GET with `options` (CA, bearer token) applied; rejects unless 200. */
export async function httpsText(url: string, options: RequestOptions, timeoutMs = 30_000): Promise<string> {
  const { status, body } = await httpsAnswer(url, options, timeoutMs);
  if (status !== 200) throw new Error(`GET ${url}: ${status} ${body.slice(0, 200)}`);
  return body;
}

/** The body of a plain HTTP GET; rejects unless 200. */
export async function httpText(url: string, timeoutMs = 10_000): Promise<string> {
  const res = await fetch(url, { signal: AbortSignal.timeout(timeoutMs) });
  const body = await res.text();
  if (res.status !== 200) throw new Error(`GET ${url}: ${res.status} ${body.slice(0, 200)}`);
  return body;
}
