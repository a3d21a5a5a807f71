/**
 * The compiled operator as its own process, and the views of it that the scale benchmark's cases
 * share (one namespace in `scale.bench.ts`, many tenants in `tenancy.ts`): how it is built and started
 * (with the runtime variables of `manifests/manager/manager.yaml`), the simulator's request hook
 * that timestamps what it sends, a watch of which resources are Ready, and one drift resync pass
 * measured in isolation.
 */
import { spawnSync } from "node:child_process";
import { copyFileSync, readFileSync, rmSync } from "node:fs";
import type { IncomingMessage } from "node:http";
import type { RequestOptions } from "node:https";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { parseAllDocuments } from "yaml";
import { OperatorProcess, operatorEnv } from "../../scripts/demo/operator-process.ts";
import { runConfigFrom } from "../../src/commands/run-config.ts";
import { parseDuration } from "../../src/duration.ts";
import { KubeClient } from "../../src/kube/client.ts";
import { loadKubeConfig } from "../../src/kube/config.ts";
import { DEPLOYMENTS } from "../../src/kube/custom-resources.ts";
import { type DeploymentObject, decodeDeployment } from "../../src/kube/object.ts";
import { Reflector } from "../../src/kube/reflector.ts";
import type { RunningSimulator } from "../../src/simulator/server.ts";
import type { ControlPlane } from "../controlplane/harness.ts";
import { freePort } from "../controlplane/net.ts";
import { callCount } from "./harness.ts";
import { inspectFlag } from "./inspector.ts";
import {
  apiRequestDelta,
  cpuSeconds,
  etcdWriteDelta,
  httpsText,
  httpText,
  memoryMiB,
  parseSamples,
  type Sample,
  sumOf,
} from "./probes.ts";
import type { ScaleFigures } from "./scale-report.ts";

const ROOT = join(import.meta.dirname, "..", "..");
/** Build output and logs of the operator under test, inside the repository (see compileOperator). */
export const CACHE = join(ROOT, "node_modules", ".cache", "dms-scale-bench");
/** Where the operators' logs are kept after a run (overwritten by the next). */
export const LOGS = join(CACHE, "logs");
/**
 * Reconciles at once: the operator's default `--concurrency` (as `run` computes it from no flag),
 * passed explicitly; the baseline status patches use the same.
 */
export const CONCURRENCY = defaultConcurrency();
/** The operator's `--qps` in every phase (its default burst, 40, stays); a connection's own too. */
export const QPS = 50;
/** Requests in flight while the benchmark applies resources. */
export const APPLY_CONCURRENCY = 16;

/** Default resync period for N: long enough that one pass ends well before the next begins. */
export function defaultResync(n: number): string {
  return n <= 1_000 ? "30s" : "60s";
}

function defaultConcurrency(): number {
  const parsed = runConfigFrom({ baseUrl: "http://127.0.0.1" }, {});
  if (!parsed.ok) throw new Error(`the operator's default settings: ${parsed.problems.join("; ")}`);
  return parsed.config.concurrency;
}

/** One line of progress on stderr. */
export const progress = (line: string) => process.stderr.write(`scale: ${line}\n`);

/**
 * Compiles the operator as `npm run build` does, into `out` (inside the repository, so the
 * compiled code resolves the installed dependencies); returns its `cli.js`.
 */
export function compileOperator(out: string): string {
  rmSync(out, { recursive: true, force: true });
  const tsc = join(ROOT, "node_modules", ".bin", "tsc");
  const built = spawnSync(tsc, ["-p", join(ROOT, "tsconfig.build.json"), "--outDir", out], {
    cwd: ROOT,
    encoding: "utf8",
  });
  if (built.status !== 0) throw new Error(`compiling the operator failed:\n${built.stdout}${built.stderr}`);
  // The compiled CLI reads its version from ../package.json, as from dist/ in the package.
  copyFileSync(join(ROOT, "package.json"), join(out, "..", "package.json"));
  return join(out, "cli.js");
}

/**
 * The runtime settings of the manager's container in `manifests/manager/manager.yaml`: every
 * variable with a literal value (`NODE_OPTIONS`, `MALLOC_ARENA_MAX`, ...) except the operator's
 * own `DMS_*`, which the benchmark sets as flags.
 */
export function manifestRuntimeEnv(): Record<string, string> {
  const text = readFileSync(join(ROOT, "manifests", "manager", "manager.yaml"), "utf8");
  for (const doc of parseAllDocuments(text)) {
    const manifest = doc.toJS() as {
      spec?: {
        template?: { spec?: { containers?: Array<{ env?: Array<{ name?: string; value?: string }> }> } };
      };
    };
    for (const container of manifest.spec?.template?.spec?.containers ?? []) {
      const literal = (container.env ?? []).flatMap((e) =>
        e.name && e.value !== undefined && !e.name.startsWith("DMS_") ? [[e.name, String(e.value)]] : [],
      );
      if (literal.length > 0) return Object.fromEntries(literal);
    }
  }
  return {};
}

/** What every operator of one run is started with. */
export interface Setup {
  entry: string;
  /** Directory of the operators' logs, kept after the run. */
  logs: string;
  nodeOptions: string | undefined;
  /** The manifest's runtime variables, NODE_OPTIONS among them. */
  runtimeEnv: Record<string, string>;
  resync: string;
  /** The commit the operator was compiled from (`+changes`: with uncommitted changes). */
  commit: string;
  /** Where `--profile` writes the CPU profile and heap snapshot; the operator then runs with its inspector on. */
  profile?: string;
  /** Where `--heap-breakdown` writes its heap snapshot and table; the operator then runs with its inspector on. */
  heapBreakdown?: string;
  /** With `--replicas`: where `--api-server-profile` writes the API server's CPU profiles (it then runs with `--profiling=true`). */
  apiServerProfile?: string;
}

/** Runs `task(0..count-1)`, `concurrency` at a time. */
export async function pool(count: number, concurrency: number, task: (i: number) => Promise<unknown>) {
  let next = 0;
  const worker = async () => {
    while (next < count) await task(next++);
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, count) }, worker));
}

/** An operator started by {@link startOperator}, and what the benchmarks read from it. */
export interface RunningOperator {
  process: OperatorProcess;
  flags: string[];
  metricsUrl: string;
  /** The loopback port of the operator's inspector (with `Setup.profile`; 0 without). */
  inspectPort: number;
  /** Resolves once /readyz answers 200, with the seconds since the process was spawned. */
  ready(): Promise<number>;
  /** Reconciles ended so far (`controller_runtime_reconcile_total`), those of one `result` only if given. */
  reconciles(result?: string): Promise<number>;
  /** V8's heap now, as the operator's `nodejs_heap_*` series say (see {@link V8Heap}). */
  v8Heap(): Promise<V8Heap>;
  /** The samples of the metric families `names` now (a scrape of those families only). */
  samples(names: readonly string[]): Promise<Sample[]>;
}

/**
 * V8's heap in MiB, from the operator's own `nodejs_heap_*` series (`v8.getHeapStatistics`):
 * `committed` is what the heap holds of the process's memory, `used` the objects in it, live or
 * not yet collected; `oldCommitted` / `oldUsed` the old generation's part.
 */
export interface V8Heap {
  committed: number;
  used: number;
  oldCommitted: number;
  oldUsed: number;
}

/**
 * Spawns the compiled operator watching `namespace` (every namespace when `undefined`, as the
 * cluster-wide install does), its default connection at `baseUrl`, with the benchmarks' flags
 * and `extraFlags`, and the manifest's runtime variables only.
 */
export async function startOperator(
  setup: Setup,
  kubeconfig: string,
  namespace: string | undefined,
  baseUrl: string,
  work: string,
  extraFlags: readonly string[] = [],
  /** A replica's own name (its log, its work dir, `POD_NAME`) when several watch one scope. */
  replica?: string,
): Promise<RunningOperator> {
  const metrics = `127.0.0.1:${await freePort()}`;
  const probes = `127.0.0.1:${await freePort()}`;
  const inspect = setup.profile !== undefined || setup.heapBreakdown !== undefined;
  const inspectPort = inspect ? await freePort() : 0;
  const runtimeEnv = !inspect
    ? setup.runtimeEnv
    : {
        ...setup.runtimeEnv,
        NODE_OPTIONS: `${setup.runtimeEnv.NODE_OPTIONS ?? ""} ${inspectFlag(inspectPort)}`.trim(),
      };
  const flags = [
    ...(namespace === undefined ? [] : [`--namespaces=${namespace}`]),
    "--no-leader-elect",
    `--concurrency=${CONCURRENCY}`,
    `--qps=${QPS}`,
    `--resync-period=${setup.resync}`,
    ...extraFlags,
  ];
  const scope = `${namespace ?? "all-namespaces"}${replica === undefined ? "" : `-${replica}`}`;
  const spawnedAt = performance.now();
  const process = OperatorProcess.start({
    entry: setup.entry,
    args: [
      ...flags,
      `--kubeconfig=${kubeconfig}`,
      `--base-url=${baseUrl}`,
      `--metrics-bind-address=${metrics}`,
      // The benchmark scrapes its own loopback listener without a token.
      "--metrics-secure=false",
      `--health-probe-bind-address=${probes}`,
    ],
    // Kept after the run (overwritten by the next), for a look at what the operator did.
    logPath: join(setup.logs, `operator-${scope}.log`),
    workDir: join(work, `operator-${scope}`),
    // Exactly the manifest's runtime settings: none of this process's own NODE_OPTIONS.
    env: operatorEnv({
      NODE_OPTIONS: "",
      ...runtimeEnv,
      ...(replica === undefined ? {} : { POD_NAME: replica }),
    }),
  });
  // Only the families asked for: the whole scrape also runs the gauges that go over every cached
  // resource, work the operator would not do between a real Prometheus's scrapes.
  const samples = async (names: readonly string[]) =>
    parseSamples(await httpText(`http://${metrics}/metrics?${names.map((n) => `name=${n}`).join("&")}`));
  return {
    process,
    flags,
    inspectPort,
    metricsUrl: `http://${metrics}/metrics`,
    async ready() {
      const deadline = Date.now() + 60_000;
      for (;;) {
        process.assertRunning();
        const ok = await fetch(`http://${probes}/readyz`).then(
          (r) => r.ok,
          () => false,
        );
        if (ok) return (performance.now() - spawnedAt) / 1000;
        if (Date.now() > deadline)
          throw new Error(`the operator was not ready in 60 s:\n${process.logTail(15)}`);
        await sleep(200);
      }
    },
    samples,
    async v8Heap() {
      const read = await samples([
        "nodejs_heap_size_total_bytes",
        "nodejs_heap_size_used_bytes",
        "nodejs_heap_space_size_total_bytes",
        "nodejs_heap_space_size_used_bytes",
      ]);
      const mib = (name: string, space?: string) =>
        round(
          sumOf(
            read.filter((s) => s.name === name),
            (labels) => space === undefined || labels.space === space,
          ) / 1048576,
          1,
        );
      return {
        committed: mib("nodejs_heap_size_total_bytes"),
        used: mib("nodejs_heap_size_used_bytes"),
        oldCommitted: mib("nodejs_heap_space_size_total_bytes", "old"),
        oldUsed: mib("nodejs_heap_space_size_used_bytes", "old"),
      };
    },
    async reconciles(result?: string) {
      return sumOf(
        await samples(["controller_runtime_reconcile_total"]),
        (labels) => result === undefined || labels.result === result,
      );
    },
  };
}

/**
 * The simulator's request hook: when the last request came, the times of the POSTs and of the
 * full listings' first pages (a resync pass starts with one; a lookup or a rollout poll filters),
 * and the first PATCH of each deployment id.
 */
export class Tap {
  lastRequestAt = 0;
  posts: number[] = [];
  fullListings: number[] = [];
  /** Calls on /v2/deployments by what they are (see {@link callKind}). */
  kinds: Record<string, number> = {};
  patches = new Map<string, number>();
  /** Called (once, then cleared) when a full listing starts. */
  onFullListing: (() => void) | undefined;

  readonly hook = (req: IncomingMessage) => {
    const now = performance.now();
    this.lastRequestAt = now;
    const url = new URL(req.url ?? "/", "http://simulator");
    const path = url.pathname;
    if (path === "/v2/deployments") {
      const kind = callKind(req.method, url.searchParams);
      this.kinds[kind] = (this.kinds[kind] ?? 0) + 1;
      const query = [...url.searchParams.keys()];
      if (req.method === "POST") this.posts.push(now);
      else if (
        req.method === "GET" &&
        query.every((key) => key === "limit" || key === "offset") &&
        Number(url.searchParams.get("offset") ?? 0) === 0
      ) {
        this.fullListings.push(now);
        const first = this.onFullListing;
        this.onFullListing = undefined;
        first?.();
      }
    } else if (req.method === "PATCH" && path.startsWith("/v2/deployments/")) {
      const id = path.slice("/v2/deployments/".length).toLowerCase();
      if (!this.patches.has(id)) this.patches.set(id, now);
    }
  };

  reset(): void {
    this.posts = [];
    this.fullListings = [];
    this.kinds = {};
    this.patches.clear();
  }
}

/** How long after its last reconcile or call the steady operator's memory is read again, settled. */
const SETTLE_MS = 20_000;

/** Full listings of different connections closer than this belong to the same pass. */
const SAME_PASS_MS = 3_000;

/**
 * The starts of resync passes among the times of full listings' first pages, ascending: a pass
 * lists every connection at once, so a listing within SAME_PASS_MS of the one before is the same pass's.
 */
export function passStarts(fullListings: readonly number[]): number[] {
  return [...fullListings]
    .sort((a, b) => a - b)
    .filter((t, i, all) => i === 0 || t - (all[i - 1] as number) > SAME_PASS_MS);
}

/**
 * What a call on /v2/deployments is: a create, a page of a full listing (a resync's), a lookup of
 * ids (the rollout poller's batches, or one reconcile's own lookup of its id) or of a name.
 */
export function callKind(method: string | undefined, query: URLSearchParams): string {
  if (method === "POST") return "create";
  if (method !== "GET") return method ?? "other";
  if (query.has("deployment_ids")) {
    return (query.get("deployment_ids") ?? "").split(",").length > 1 ? "ids (batch)" : "id";
  }
  return query.has("name_contains") ? "name" : "listing page";
}

/** A watch of one namespace's resources, tracking which are Ready at their current generation. */
export class ReadyWatch {
  readonly #reflector: Reflector<DeploymentObject>;
  readonly #ready = new Set<string>();
  #stop = new AbortController();
  #running: Promise<void> = Promise.resolve();

  constructor(client: KubeClient, namespace: string | undefined) {
    this.#reflector = new Reflector({ client, resource: DEPLOYMENTS, namespace, decode: decodeDeployment });
    const track = (o: DeploymentObject) => {
      if (isReady(o)) this.#ready.add(o.metadata.name);
      else this.#ready.delete(o.metadata.name);
    };
    this.#reflector.subscribe({
      onAdd: track,
      onUpdate: (_, o) => track(o),
      onDelete: (o) => void this.#ready.delete(o.metadata.name),
    });
  }

  async start(): Promise<void> {
    this.#stop = new AbortController();
    this.#running = this.#reflector.run(this.#stop.signal);
    await this.#reflector.synced;
  }

  async stop(): Promise<void> {
    this.#stop.abort();
    await this.#running;
  }

  list(): DeploymentObject[] {
    return this.#reflector.list();
  }

  async untilReady(count: number, operator: OperatorProcess, timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (this.#ready.size < count) {
      operator.assertRunning();
      if (Date.now() > deadline)
        throw new Error(
          `${this.#ready.size} of ${count} Ready after ${timeoutMs / 1000} s:\n${operator.logTail(10)}`,
        );
      await sleep(100);
    }
  }
}

function isReady(o: DeploymentObject): boolean {
  const status = o.status as {
    observedGeneration?: number;
    conditions?: Array<{ type: string; status: string }>;
  };
  return (
    status?.observedGeneration === o.metadata.generation &&
    (status?.conditions ?? []).some((c) => c.type === "Ready" && c.status === "True")
  );
}

/**
 * Waits for a quiet moment (no reconcile and no service call for QUIET_MS), then for the next
 * resync pass (its first listing call), and measures until every resource was reconciled once
 * and the operator is quiet again. Nothing is sent to the API server meanwhile but the two
 * scrapes of its /metrics, which are not deployment requests. `sim` is one simulator or several
 * counted as one (the many-tenants case); `serviceCallsGoal` is what the pass should cost it.
 */
export async function resyncPass(
  n: number,
  operator: RunningOperator,
  sim: Pick<RunningSimulator, "counters" | "resetCounters">,
  tap: Tap,
  apiMetrics: () => Promise<Sample[]>,
  resyncPeriod: string,
  serviceCallsGoal = Math.ceil(n / 100) + 1,
  /** The reconciles counted as the pass's (default: every one; `slow-beside.ts`: the healthy ones'). */
  reconciles: () => Promise<number> = () => operator.reconciles(),
) {
  const QUIET_MS = 2_000;
  const pid = operator.process.pid;
  /** Polls the reconcile count until `enough(count)` and QUIET_MS passed without a reconcile or a call. */
  const quiet = async (what: string, timeoutMs: number, enough: (count: number) => boolean) => {
    const deadline = Date.now() + timeoutMs;
    let last = -1;
    let since = performance.now();
    let cpuAtLastChange = cpuSeconds(pid);
    for (;;) {
      operator.process.assertRunning();
      const count = await reconciles();
      const now = performance.now();
      if (count !== last) [last, since, cpuAtLastChange] = [count, now, cpuSeconds(pid)];
      if (now - Math.max(since, tap.lastRequestAt) >= QUIET_MS && enough(count))
        return { count, cpuAtLastChange, lastChangeAt: since };
      if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs / 1000} s waiting for ${what}`);
      await sleep(250);
    }
  };
  const periodMs = parseDuration(resyncPeriod);
  if (periodMs === undefined) throw new Error(`--resync-period: '${resyncPeriod}' is not a duration`);
  const calm = await quiet("a quiet moment", 10 * 60_000, () => true);
  const steady = memoryMiB(pid);
  const steadyRssMiB = round(steady.rss, 1);
  const steadySplit = { anon: round(steady.anon, 1), file: round(steady.file, 1) };
  const steadyHeap = await operator.v8Heap();
  // The same quiet moment SETTLE_MS after the last reconcile or call: by then V8's memory reducer
  // (which starts ~8 s after a collection, once allocation is low) has had its chance to shrink
  // the heap, as it does between passes. The next pass starts a period after this one ended.
  await sleep(Math.max(0, Math.max(calm.lastChangeAt, tap.lastRequestAt) + SETTLE_MS - performance.now()));
  const settledRssMiB = round(memoryMiB(pid).rss, 1);
  const settledHeap = await operator.v8Heap();
  const before = await apiMetrics();
  sim.resetCounters();
  tap.reset();
  // The pass begins with its listing: CPU is read in the simulator's hook, as that call arrives.
  let cpuAtStart = 0;
  let startedAt = 0;
  const listed = new Promise<void>((resolve) => {
    tap.onFullListing = () => {
      cpuAtStart = cpuSeconds(pid);
      startedAt = performance.now();
      resolve();
    };
  });
  const waitMs = periodMs * 1.2 + 30_000;
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([
    listed,
    new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error(`no resync pass within ${waitMs / 1000} s`)), waitMs);
    }),
  ]).finally(() => clearTimeout(timer));
  const startCount = await reconciles();
  const end = await quiet(
    "the resync pass to end",
    Math.max(10 * 60_000, periodMs * 3),
    (c) => c >= startCount + n,
  );
  const after = await apiMetrics();
  const calls = sim.counters();
  const kube = apiRequestDelta(before, after, "dms.dev", "deployments");
  const seconds = (end.lastChangeAt - startedAt) / 1000;
  const figures: ScaleFigures["resync"] = {
    resyncPeriod: resyncPeriod,
    seconds: round(seconds, 1),
    reconciles: end.count - startCount,
    serviceCalls: callCount(calls),
    serviceCallsGoal,
    serviceCallsByRoute: calls,
    kubeRequests: kube.target,
    kubeRequestsPerResource: round(kube.target / n, 4),
    kubeRequestsByVerb: kube.byVerb,
    etcdWrites: etcdWriteDelta(before, after, "dms.dev", "deployments"),
    otherKubeRequests: kube.other,
    cpuSeconds: round(end.cpuAtLastChange - cpuAtStart, 2),
    // A second pass began before this one was quiet (the periods of older code could overlap).
    overlapped: passStarts(tap.fullListings).length > 1,
  };
  return {
    figures,
    steadyRssMiB,
    steadySplit,
    steadyHeap,
    settledRssMiB,
    settledHeap,
    seconds: figures.seconds,
    cpuSeconds: figures.cpuSeconds,
  };
}

/** The commit checked out, with `+changes` when src/ or manifests/ differ from it. */
export function commitOf(): string {
  const git = (args: string[]) => spawnSync("git", args, { cwd: ROOT, encoding: "utf8" }).stdout.trim();
  const dirty = git(["status", "--porcelain", "--", "src", "manifests"]) === "" ? "" : "+changes";
  return `${git(["rev-parse", "--short", "HEAD"])}${dirty}`;
}

/** `value` rounded to `digits` decimals. */
export const round = (value: number, digits: number) => Math.round(value * 10 ** digits) / 10 ** digits;

/**
 * A client of the benchmark's control plane (as `userAgent`, so its own requests can be told
 * apart), and a reading of the API server's request counters (`apiserver_request_total`,
 * `etcd_requests_total`), which the figures of Kubernetes requests per resource come from.
 */
export async function planeClient(plane: ControlPlane, userAgent: string) {
  const kube = loadKubeConfig({ kubeconfig: plane.kubeconfigPath }).config;
  const client = new KubeClient(kube, { userAgent, timeoutMs: 120_000 });
  const tls: RequestOptions = {};
  await kube.applyToHTTPSOptions(tls);
  const apiMetrics = async () => {
    const text = await httpsText(`${plane.server}/metrics`, tls);
    return [...parseSamples(text, "apiserver_request_total"), ...parseSamples(text, "etcd_requests_total")];
  };
  return { client, apiMetrics, tls };
}
