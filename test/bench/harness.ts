/**
 * What a benchmark is and the tools benchmarks share: an HTTP load generator with keep-alive
 * and bounded concurrency, percentiles, and a child process that serves on loopback.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { Agent, request } from "node:http";
import { createInterface } from "node:readline";
import { desiredFromSpec } from "../../src/crd/mapping.ts";
import type { DeploymentSpec } from "../../src/crd/schema.ts";
import { type KubeRequest, PatchType } from "../../src/kube/client.ts";
import { DEPLOYMENTS } from "../../src/kube/custom-resources.ts";
import { collectionPath } from "../../src/kube/object.ts";
import type { SeedDeployment } from "../../src/simulator/seed.ts";

/** One line of a benchmark's result table. */
export interface BenchRow {
  variant: string;
  requests: number;
  seconds: number;
  requestsPerSecond: number;
  p50Ms: number;
  p99Ms: number;
  errors: number;
}

/** Options every benchmark receives from the runner. */
export interface BenchOptions {
  /** Measured seconds per variant (after a short warm-up). */
  durationSeconds: number;
  /** Values of the benchmark's own options (see {@link Benchmark.options}); absent when not given. */
  args: Record<string, string | undefined>;
}

/** An option of one benchmark, e.g. `--n 100,1000` of `scale`; its value is a string. */
export interface BenchOption {
  description: string;
  /** Shown by `--list`; the benchmark applies it itself when the option is absent. */
  default?: string;
}

/** A table of a benchmark's own shape, printed instead of the request-rate table. */
export interface BenchTable {
  head: string[];
  rows: Array<Array<string | number>>;
}

/**
 * A named benchmark. `run` returns its rows and any details worth keeping in the JSON report;
 * a benchmark that measures something other than request rates returns its own `table`.
 */
export interface Benchmark {
  name: string;
  description: string;
  /** Options of its own (`--<name> <value>` on the runner's command line), keyed by name. */
  options?: Record<string, BenchOption>;
  /**
   * True when the benchmark writes its report files itself (e.g. merging runs at several sizes
   * into one file); the runner then writes none.
   */
  writesOwnReport?: boolean;
  run(
    options: BenchOptions,
  ): Promise<{ rows: BenchRow[]; table?: BenchTable; details?: Record<string, unknown> }>;
}

/** A load to drive: URLs to cycle through, how many requests in flight, and the bounds. */
export interface LoadSpec {
  variant: string;
  urls: readonly string[];
  concurrency: number;
  durationMs: number;
  maxRequests: number;
  headers?: Record<string, string>;
}

/** The value at quantile `q` (0..1) of ascending `sorted`, or 0 when empty. */
export function quantile(sorted: Float64Array, q: number): number {
  if (sorted.length === 0) return 0;
  const index = Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1));
  return sorted[index] ?? 0;
}

/**
 * Sends GET requests over keep-alive connections, `concurrency` at a time, until `durationMs`
 * passed or `maxRequests` were sent. A non-2xx answer or a transport error counts as an error.
 */
export async function driveGet(spec: LoadSpec): Promise<BenchRow> {
  const agent = new Agent({ keepAlive: true, maxSockets: spec.concurrency });
  const latencies = new Float64Array(spec.maxRequests);
  let sent = 0;
  let done = 0;
  let errors = 0;
  const started = performance.now();
  const deadline = started + spec.durationMs;
  const one = (url: string) =>
    new Promise<void>((resolve) => {
      const t0 = performance.now();
      const req = request(url, { agent, headers: spec.headers }, (res) => {
        res.on("data", () => {});
        res.on("end", () => {
          if ((res.statusCode ?? 0) >= 300) errors++;
          latencies[done++] = performance.now() - t0;
          resolve();
        });
      });
      req.on("error", () => {
        errors++;
        latencies[done++] = performance.now() - t0;
        resolve();
      });
      req.end();
    });
  const worker = async () => {
    while (sent < spec.maxRequests && performance.now() < deadline) {
      const url = spec.urls[sent % spec.urls.length] ?? "";
      sent++;
      await one(url);
    }
  };
  await Promise.all(Array.from({ length: spec.concurrency }, worker));
  const seconds = (performance.now() - started) / 1000;
  agent.destroy();
  const sorted = latencies.subarray(0, done).sort();
  return {
    variant: spec.variant,
    requests: done,
    seconds: round(seconds, 2),
    requestsPerSecond: Math.round(done / seconds),
    p50Ms: round(quantile(sorted, 0.5), 3),
    p99Ms: round(quantile(sorted, 0.99), 3),
    errors,
  };
}

const round = (n: number, digits: number) => Math.round(n * 10 ** digits) / 10 ** digits;

/** A child process serving on loopback, and the first JSON line it printed (e.g. `{"url": ...}`). */
export interface ServingChild {
  child: ChildProcess;
  ready: Record<string, unknown>;
  stop(): Promise<void>;
}

/**
 * Runs `node <script> ...args` and waits for its first stdout line, which must be JSON. The
 * child is expected to exit when its stdin closes, so it never outlives the benchmark.
 */
export async function spawnServing(script: string, args: readonly string[]): Promise<ServingChild> {
  const child = spawn(process.execPath, [script, ...args], { stdio: ["pipe", "pipe", "inherit"] });
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const stdout = child.stdout;
  if (stdout === null) throw new Error("child has no stdout");
  const lines = createInterface({ input: stdout });
  const first = await new Promise<string>((resolve, reject) => {
    lines.once("line", resolve);
    child.once("exit", (code) => reject(new Error(`${script} exited (${code}) before it was ready`)));
  });
  lines.close();
  const stop = async () => {
    child.stdin?.end();
    const timer = setTimeout(() => child.kill("SIGKILL"), 5000);
    await exited;
    clearTimeout(timer);
  };
  return { child, ready: JSON.parse(first) as Record<string, unknown>, stop };
}

/** The spec of the benchmarks' Deployment resources: a small internal_docker deployment of image `image`. */
export function benchDeploymentSpec(name: string, image = 1): DeploymentSpec {
  return {
    source: "internal_docker",
    sourceConfig: { resourceSpec: { minScale: 1, maxScale: 2 } },
    sourceRevisionConfig: { imageUri: `registry.example.com/${name}:${image}` },
  } as DeploymentSpec;
}

/** The simulator's seed entry for the deployment that the resource `name` describes (to be adopted). */
export function benchSeedDeployment(name: string): SeedDeployment {
  const desired = desiredFromSpec(benchDeploymentSpec(name), name);
  return {
    name: desired.name,
    source: desired.source,
    ...(desired.source_config ? { source_config: desired.source_config } : {}),
    ...(desired.source_revision_config ? { source_revision_config: desired.source_revision_config } : {}),
  } as SeedDeployment;
}

/** The request that changes the image of the resource `name` in `namespace` to image `image`. */
export function benchImageEdit(namespace: string, name: string, image: number): KubeRequest {
  return {
    method: "PATCH",
    path: `${collectionPath(DEPLOYMENTS, namespace)}/${name}`,
    contentType: PatchType.Merge,
    body: {
      spec: {
        sourceRevisionConfig: { imageUri: benchDeploymentSpec(name, image).sourceRevisionConfig?.imageUri },
      },
    },
  };
}

/** The body that creates the resource `name` with {@link benchDeploymentSpec}. */
export function benchDeploymentBody(name: string): Record<string, unknown> {
  return {
    apiVersion: "dms.dev/v1alpha1",
    kind: "Deployment",
    metadata: { name },
    spec: benchDeploymentSpec(name),
  };
}

/** The simulator's answers counted on the routes starting with `prefix` (all routes by default). */
export function callCount(counters: Record<string, Record<string, number>>, prefix = ""): number {
  return Object.entries(counters)
    .filter(([route]) => route.startsWith(prefix))
    .reduce((sum, [, byStatus]) => sum + Object.values(byStatus).reduce((a, b) => a + b, 0), 0);
}
