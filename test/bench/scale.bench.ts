/**
 * The operator at scale, measured from outside: the compiled operator (`dist/cli.js run`, with
 * the runtime variables of `manifests/manager/manager.yaml`, e.g. `NODE_OPTIONS`) runs as its own
 * process against a control plane of the benchmark's own and the simulator. For each N:
 *
 * 1. Adoption: N resources are applied while no operator runs, the simulator is seeded with the N
 *    deployments they describe, then the operator starts; measured: start → every resource Ready
 *    (Ready=True at the current generation), next to the time the same API server takes for N
 *    bare server-side-apply status patches sent by this process at the operator's concurrency.
 * 2. Idle: a second operator, started on an empty namespace (RSS once ready and settled).
 * 3. Cold creates: N resources applied to that namespace, the simulator empty (and answering
 *    Ready at once, so every call it counts belongs to a create); creates per second over the
 *    middle 80 % of the POSTs against the configured `--qps`, and service calls per create.
 * 4. Steady: one drift resync pass isolated between two quiet moments: the simulator's calls, the
 *    API server's own `apiserver_request_total` for `deployments.dms.dev` (WATCH excluded; this
 *    process sends nothing meanwhile), and the operator's CPU seconds; RSS just before it.
 * 5. Edits: the spec of a paced sample of resources changes; time from sending each edit to the
 *    simulator receiving that deployment's PATCH (the edit's own write time included, and also
 *    reported on its own).
 *
 * The simulator runs in this process: its request hook timestamps what the operator sends, with
 * no clock shared across processes, and this process is idle while the operator is measured.
 * Figures are reported, never asserted; `docs/bench/scale.json` accumulates them per series and N.
 */
import { spawnSync } from "node:child_process";
import { copyFileSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import type { IncomingMessage } from "node:http";
import type { RequestOptions } from "node:https";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { parseAllDocuments } from "yaml";
import { OperatorProcess, operatorEnv } from "../../scripts/demo/operator-process.ts";
import { runConfigFrom } from "../../src/commands/run-config.ts";
import { parseDuration } from "../../src/config.ts";
import { desiredFromSpec } from "../../src/crd/mapping.ts";
import { KubeClient, PatchType } from "../../src/kube/client.ts";
import { loadKubeConfig } from "../../src/kube/config.ts";
import { DEPLOYMENTS, type DeploymentObject, decodeDeployment } from "../../src/kube/deployments.ts";
import { collectionPath, Reflector } from "../../src/kube/reflector.ts";
import type { SeedDeployment } from "../../src/simulator/seed.ts";
import { type RunningSimulator, startSimulator } from "../../src/simulator/server.ts";
import { ControlPlane } from "../controlplane/harness.ts";
import { freePort } from "../controlplane/net.ts";
import { type Benchmark, benchDeploymentBody, benchDeploymentSpec, callCount, quantile } from "./harness.ts";
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
import { type ScaleFigures, saveScale, scaleTable } from "./scale-report.ts";

const ROOT = join(import.meta.dirname, "..", "..");
/** Build output and logs of the operator under test, inside the repository (see compileOperator). */
const CACHE = join(ROOT, "node_modules", ".cache", "dms-scale-bench");
const LOGS = join(CACHE, "logs");
/**
 * Reconciles at once: the operator's default `--concurrency` (as `run` computes it from no flag),
 * passed explicitly; the baseline status patches use the same.
 */
const CONCURRENCY = defaultConcurrency();
/** The operator's `--qps` in every phase (its default burst, 40, stays). */
const QPS = 50;
/** Requests in flight while this process applies resources. */
const APPLY_CONCURRENCY = 16;
/** Edits sampled for the edit → PATCH latency, and their pace. */
const EDITS = 100;
const EDITS_PER_SECOND = 5;
const ADOPT_NS = "scale-adopt";
const COLD_NS = "scale-cold";

/** Default resync period for N: long enough that one pass ends well before the next begins. */
function defaultResync(n: number): string {
  return n <= 1_000 ? "30s" : "60s";
}

/** See the module comment. */
export const benchmark: Benchmark = {
  name: "scale",
  description:
    "N resources, the compiled operator as its own process: RSS, cost of one drift resync, adoption, cold creates, edit → PATCH (own control plane, simulator)",
  options: {
    n: { description: "numbers of resources, comma-separated, run in turn", default: "100" },
    "resync-period": {
      description: "the operator's --resync-period",
      default: "30s up to 1,000 resources, 60s above",
    },
    label: {
      description: "series the figures are filed under in docs/bench/scale.json (e.g. before, after)",
      default: "current",
    },
  },
  writesOwnReport: true,
  async run({ args }) {
    const sizes = (args.n ?? "100").split(",").map((text) => {
      const n = Number(text.trim());
      if (!Number.isInteger(n) || n < 1) throw new Error(`--n: '${text}' is not a positive integer`);
      return n;
    });
    const label = args.label ?? "current";
    // A build of this run's own: another run may rebuild meanwhile.
    const dist = join(CACHE, `dist-${process.pid}`);
    // The code measured is the code compiled now, whatever is committed while the run goes on.
    const commit = commitOf();
    const entry = compileOperator(dist);
    const runtimeEnv = manifestRuntimeEnv();
    const nodeOptions = runtimeEnv.NODE_OPTIONS;
    const results: ScaleFigures[] = [];
    try {
      for (const n of sizes) {
        const resync = args["resync-period"] ?? defaultResync(n);
        progress(`N=${n}: resync period ${resync}, runtime env ${JSON.stringify(runtimeEnv)}`);
        const figures = await measure(n, {
          entry,
          nodeOptions,
          runtimeEnv,
          commit,
          resync,
          logs: join(LOGS, `n${n}`),
        });
        results.push(figures);
        // Saved per N, so a long run that fails later keeps what it measured.
        for (const path of saveScale(label, figures)) progress(`written ${path}`);
      }
    } finally {
      rmSync(dist, { recursive: true, force: true });
    }
    return { rows: [], table: scaleTable(label, results) };
  },
};

function defaultConcurrency(): number {
  const parsed = runConfigFrom({ baseUrl: "http://127.0.0.1" }, {});
  if (!parsed.ok) throw new Error(`the operator's default settings: ${parsed.problems.join("; ")}`);
  return parsed.config.concurrency;
}

const progress = (line: string) => process.stderr.write(`scale: ${line}\n`);

/**
 * Compiles the operator as `npm run build` does, into `out` (inside the repository, so the
 * compiled code resolves the installed dependencies); returns its `cli.js`.
 */
function compileOperator(out: string): string {
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
function manifestRuntimeEnv(): Record<string, string> {
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

interface Setup {
  entry: string;
  /** Directory of the operators' logs, kept after the run. */
  logs: string;
  nodeOptions: string | undefined;
  /** The manifest's runtime variables, NODE_OPTIONS among them. */
  runtimeEnv: Record<string, string>;
  resync: string;
  /** The commit the operator was compiled from (`+changes`: with uncommitted changes). */
  commit: string;
}

const name = (i: number) => `scale-${String(i).padStart(5, "0")}`;

async function measure(n: number, setup: Setup): Promise<ScaleFigures> {
  const loadAtStart = loadavg()[0] ?? 0;
  const plane = await ControlPlane.start();
  const work = mkdtempSync(join(tmpdir(), "dms-scale-"));
  try {
    await plane.installCrds();
    const kube = loadKubeConfig({ kubeconfig: plane.kubeconfigPath }).config;
    const client = new KubeClient(kube, { userAgent: "dms-scale-bench", timeoutMs: 120_000 });
    const tls: RequestOptions = {};
    await kube.applyToHTTPSOptions(tls);
    const apiMetrics = async () => {
      const text = await httpsText(`${plane.server}/metrics`, tls);
      return [...parseSamples(text, "apiserver_request_total"), ...parseSamples(text, "etcd_requests_total")];
    };
    for (const ns of [ADOPT_NS, COLD_NS]) {
      await client.request({ method: "POST", path: "/api/v1/namespaces", body: { metadata: { name: ns } } });
    }
    const operator = (namespace: string, sim: RunningSimulator) =>
      startOperator(setup, plane.kubeconfigPath, namespace, sim.url, work);

    // 1. Adoption.
    const adoptApply = await applyResources(client, ADOPT_NS, n);
    progress(`N=${n}: applied ${n} resources (no operator) in ${adoptApply.toFixed(1)} s`);
    const adoptTap = new Tap();
    const seeded = await startSimulator({ seed: { deployments: seedOf(n) }, onRequest: adoptTap.hook });
    const adoptWatch = new ReadyWatch(client, ADOPT_NS);
    await adoptWatch.start();
    const adoptStarted = performance.now();
    const adopter = await operator(ADOPT_NS, seeded);
    let adoption: ScaleFigures["adoption"];
    try {
      await adoptWatch.untilReady(n, adopter.process, Math.max(600_000, n * 200));
      const seconds = (performance.now() - adoptStarted) / 1000;
      const calls = seeded.counters();
      adoption = {
        seconds: round(seconds, 1),
        serviceCalls: callCount(calls),
        serviceCallsByRoute: calls,
        cpuSeconds: round(cpuSeconds(adopter.process.pid), 2),
        peakRssMiB: round(memoryMiB(adopter.process.pid).peak, 1),
        barePatchSeconds: 0,
        barePatchWrites: 0,
        ratio: 0,
        concurrency: CONCURRENCY,
      };
    } finally {
      await adopter.process.stop(30_000);
      await seeded.close();
    }
    progress(`N=${n}: adoption ${adoption.seconds} s; now ${n} bare status patches`);
    const bare = await barePatches(client, adoptWatch.list());
    await adoptWatch.stop();
    adoption.barePatchSeconds = round(bare.seconds, 1);
    adoption.barePatchWrites = bare.writes;
    adoption.ratio = round(adoption.seconds / bare.seconds, 2);

    // 2. Idle, 3. cold creates.
    const coldTap = new Tap();
    const sim = await startSimulator({
      timing: { readyAfterMs: 0, revisionActiveAfterMs: 0 },
      onRequest: coldTap.hook,
    });
    const running = await operator(COLD_NS, sim);
    const pid = running.process.pid;
    try {
      const startupSeconds = await running.ready();
      await sleep(5_000);
      const idle = memoryMiB(pid);
      const idleRss = idle.rss;
      progress(`N=${n}: idle RSS ${idleRss.toFixed(1)} MiB; applying ${n} resources`);
      const coldWatch = new ReadyWatch(client, COLD_NS);
      await coldWatch.start();
      sim.resetCounters();
      coldTap.reset();
      const coldStarted = performance.now();
      const coldApply = await applyResources(client, COLD_NS, n);
      await coldWatch.untilReady(n, running.process, Math.max(600_000, n * 200));
      const coldSeconds = (performance.now() - coldStarted) / 1000;
      const coldCalls = sim.counters();
      const posts = [...coldTap.posts].sort((a, b) => a - b);
      const lo = posts[Math.floor(posts.length * 0.1)] ?? 0;
      const hi = posts[Math.max(0, Math.ceil(posts.length * 0.9) - 1)] ?? 0;
      const middle = posts.filter((t) => t >= lo && t <= hi).length;
      const createsPerSecond = hi > lo ? (middle - 1) / ((hi - lo) / 1000) : 0;
      const cold: ScaleFigures["cold"] = {
        qps: QPS,
        applySeconds: round(coldApply, 1),
        secondsToAllReady: round(coldSeconds, 1),
        creates: posts.length,
        createsPerSecond: round(createsPerSecond, 1),
        ofQps: round(createsPerSecond / QPS, 2),
        serviceCallsPerCreate: round(callCount(coldCalls) / Math.max(1, posts.length), 2),
        serviceCallsByRoute: coldCalls,
        serviceCallsByKind: { ...coldTap.kinds },
      };
      progress(`N=${n}: cold creates ${cold.createsPerSecond}/s; waiting for a resync pass`);

      // 4. One resync pass, isolated.
      await coldWatch.stop(); // this process sends nothing to the API server from here on
      // The first pass after the creates may still finish their bookkeeping; the second is the
      // steady state every later period repeats. Both are reported; the second is "the" resync.
      const first = await resyncPass(n, running, sim, coldTap, apiMetrics, setup.resync);
      progress(`N=${n}: first resync ${first.seconds} s, ${first.cpuSeconds} CPU-s; waiting for the next`);
      const resync = await resyncPass(n, running, sim, coldTap, apiMetrics, setup.resync);
      resync.figures.firstPass = {
        seconds: first.figures.seconds,
        serviceCalls: first.figures.serviceCalls,
        kubeRequests: first.figures.kubeRequests,
        etcdWrites: first.figures.etcdWrites,
        cpuSeconds: first.figures.cpuSeconds,
      };
      progress(`N=${n}: resync ${resync.seconds} s, ${resync.cpuSeconds} CPU-s; edits`);

      // 5. Edits.
      const edit = await editLatency(client, n, sim, coldTap);
      const memory = memoryMiB(pid);
      return {
        n,
        date: new Date().toISOString(),
        commit: setup.commit,
        node: process.version,
        // The machine may be shared: its 1-minute load average when this N began and ended.
        loadAverage: { start: round(loadAtStart, 1), end: round(loadavg()[0] ?? 0, 1) },
        nodeOptions: setup.nodeOptions ?? null,
        runtimeEnv: setup.runtimeEnv,
        operatorFlags: running.flags,
        applySeconds: { adopt: round(adoptApply, 1), cold: round(coldApply, 1) },
        startupSeconds: round(startupSeconds, 1),
        rssMiB: {
          idle: round(idleRss, 1),
          steady: resync.steadyRssMiB,
          idleSplit: { anon: round(idle.anon, 1), file: round(idle.file, 1) },
          steadySplit: resync.steadySplit,
          peak: round(Math.max(memory.peak, adoption.peakRssMiB), 1),
          peakCold: round(memory.peak, 1),
          peakAdoption: adoption.peakRssMiB,
        },
        resync: resync.figures,
        adoption,
        cold,
        edit,
        perResource: {
          resyncCpuMs: round((resync.figures.cpuSeconds / n) * 1000, 4),
          steadyKiB: round(((resync.steadyRssMiB - idleRss) / n) * 1024, 2),
        },
      };
    } finally {
      await running.process.stop(30_000);
      await sim.close();
    }
  } finally {
    await plane.stop();
    rmSync(work, { recursive: true, force: true });
  }
}

/** The simulator's seed for adoption: the deployments the resources describe, already Ready. */
function seedOf(n: number): SeedDeployment[] {
  return Array.from({ length: n }, (_, i) => {
    const desired = desiredFromSpec(benchDeploymentSpec(name(i)), name(i));
    return {
      name: desired.name,
      source: desired.source,
      ...(desired.source_config ? { source_config: desired.source_config } : {}),
      ...(desired.source_revision_config ? { source_revision_config: desired.source_revision_config } : {}),
    } as SeedDeployment;
  });
}

/** Creates resources 0..n-1 in `namespace`, APPLY_CONCURRENCY at a time; returns the seconds taken. */
async function applyResources(client: KubeClient, namespace: string, n: number): Promise<number> {
  const started = performance.now();
  const path = collectionPath(DEPLOYMENTS, namespace);
  await pool(n, APPLY_CONCURRENCY, (i) =>
    client.request({
      method: "POST",
      path,
      body: benchDeploymentBody(name(i)),
    }),
  );
  return (performance.now() - started) / 1000;
}

/** Runs `task(0..count-1)`, `concurrency` at a time. */
async function pool(count: number, concurrency: number, task: (i: number) => Promise<unknown>) {
  let next = 0;
  const worker = async () => {
    while (next < count) await task(next++);
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, count) }, worker));
}

/**
 * What the API server alone needs for the operator's adoption writes: one server-side-apply
 * status patch per resource (the status the operator wrote, under a field manager of our own, so
 * each is a real write: managedFields change), CONCURRENCY at a time, over the same client code.
 */
async function barePatches(client: KubeClient, objects: DeploymentObject[]) {
  const started = performance.now();
  let writes = 0;
  await pool(objects.length, CONCURRENCY, async (i) => {
    const o = objects[i] as DeploymentObject;
    const written = (await client.request({
      method: "PATCH",
      path: `${collectionPath(DEPLOYMENTS, o.metadata.namespace)}/${o.metadata.name}/status`,
      query: { fieldManager: "dms-scale-bench", force: true },
      contentType: PatchType.Apply,
      body: { apiVersion: o.apiVersion, kind: o.kind, metadata: { name: o.metadata.name }, status: o.status },
    })) as DeploymentObject;
    if (written.metadata.resourceVersion !== o.metadata.resourceVersion) writes++;
  });
  return { seconds: (performance.now() - started) / 1000, writes };
}

interface RunningOperator {
  process: OperatorProcess;
  flags: string[];
  metricsUrl: string;
  /** Resolves once /readyz answers 200, with the seconds since the process was spawned. */
  ready(): Promise<number>;
  /** controller_runtime_reconcile_total, summed. */
  reconciles(): Promise<number>;
}

async function startOperator(
  setup: Setup,
  kubeconfig: string,
  namespace: string,
  baseUrl: string,
  work: string,
): Promise<RunningOperator> {
  const metrics = `127.0.0.1:${await freePort()}`;
  const probes = `127.0.0.1:${await freePort()}`;
  const flags = [
    `--namespaces=${namespace}`,
    "--no-leader-elect",
    `--concurrency=${CONCURRENCY}`,
    `--qps=${QPS}`,
    `--resync-period=${setup.resync}`,
  ];
  const spawnedAt = performance.now();
  const process = OperatorProcess.start({
    entry: setup.entry,
    args: [
      ...flags,
      `--kubeconfig=${kubeconfig}`,
      `--base-url=${baseUrl}`,
      `--metrics-bind-address=${metrics}`,
      `--health-probe-bind-address=${probes}`,
    ],
    // Kept after the run (overwritten by the next), for a look at what the operator did.
    logPath: join(setup.logs, `operator-${namespace}.log`),
    workDir: join(work, `operator-${namespace}`),
    // Exactly the manifest's runtime settings: none of this process's own NODE_OPTIONS.
    env: operatorEnv({ NODE_OPTIONS: "", ...setup.runtimeEnv }),
  });
  return {
    process,
    flags,
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
    async reconciles() {
      return sumOf(
        parseSamples(await httpText(`http://${metrics}/metrics`), "controller_runtime_reconcile_total"),
      );
    },
  };
}

/**
 * The simulator's request hook: when the last request came, the times of the POSTs and of the
 * full listings' first pages (a resync pass starts with one; a lookup or a rollout poll filters),
 * and the first PATCH of each deployment id.
 */
class Tap {
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

/**
 * What a call on /v2/deployments is: a create, a page of a full listing (a resync's), a lookup of
 * ids (the rollout poller's batches, or one reconcile's own lookup of its id) or of a name.
 */
function callKind(method: string | undefined, query: URLSearchParams): string {
  if (method === "POST") return "create";
  if (method !== "GET") return method ?? "other";
  if (query.has("deployment_ids")) {
    return (query.get("deployment_ids") ?? "").split(",").length > 1 ? "ids (batch)" : "id";
  }
  return query.has("name_contains") ? "name" : "listing page";
}

/** A watch of one namespace's resources, tracking which are Ready at their current generation. */
class ReadyWatch {
  readonly #reflector: Reflector<DeploymentObject>;
  readonly #ready = new Set<string>();
  #stop = new AbortController();
  #running: Promise<void> = Promise.resolve();

  constructor(client: KubeClient, namespace: string) {
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
 * scrapes of its /metrics, which are not deployment requests.
 */
async function resyncPass(
  n: number,
  operator: RunningOperator,
  sim: RunningSimulator,
  tap: Tap,
  apiMetrics: () => Promise<Sample[]>,
  resyncPeriod: string,
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
      const count = await operator.reconciles();
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
  await quiet("a quiet moment", 10 * 60_000, () => true);
  const steady = memoryMiB(pid);
  const steadyRssMiB = round(steady.rss, 1);
  const steadySplit = { anon: round(steady.anon, 1), file: round(steady.file, 1) };
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
  const startCount = await operator.reconciles();
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
    serviceCallsGoal: Math.ceil(n / 100) + 1,
    serviceCallsByRoute: calls,
    kubeRequests: kube.target,
    kubeRequestsPerResource: round(kube.target / n, 4),
    kubeRequestsByVerb: kube.byVerb,
    etcdWrites: etcdWriteDelta(before, after, "dms.dev", "deployments"),
    otherKubeRequests: kube.other,
    cpuSeconds: round(end.cpuAtLastChange - cpuAtStart, 2),
    // A second pass began before this one was quiet (the periods of older code could overlap).
    overlapped: tap.fullListings.length > 1,
  };
  return { figures, steadyRssMiB, steadySplit, seconds: figures.seconds, cpuSeconds: figures.cpuSeconds };
}

/**
 * Changes the image of EDITS resources spread over 0..n-1, EDITS_PER_SECOND of them a second,
 * and times each from sending the edit to the simulator receiving that deployment's PATCH.
 */
async function editLatency(client: KubeClient, n: number, sim: RunningSimulator, tap: Tap) {
  const count = Math.min(EDITS, n);
  const step = n / count;
  tap.reset();
  sim.resetCounters();
  const sent = new Map<string, number>();
  const writeMs: number[] = [];
  const started = performance.now();
  const edits: Promise<unknown>[] = [];
  for (let k = 0; k < count; k++) {
    const wait = started + (k * 1000) / EDITS_PER_SECOND - performance.now();
    if (wait > 0) await sleep(wait);
    const resource = name(Math.floor(k * step));
    const at = performance.now();
    sent.set(resource, at);
    edits.push(
      client
        .request({
          method: "PATCH",
          path: `${collectionPath(DEPLOYMENTS, COLD_NS)}/${resource}`,
          contentType: PatchType.Merge,
          body: {
            spec: {
              sourceRevisionConfig: {
                imageUri: benchDeploymentSpec(resource, 2).sourceRevisionConfig?.imageUri,
              },
            },
          },
        })
        .then(() => writeMs.push(performance.now() - at)),
    );
  }
  await Promise.all(edits);
  const deadline = Date.now() + 120_000;
  const latencies = () => {
    const out: number[] = [];
    for (const [id, at] of tap.patches) {
      const edited = sim.store.get(id)?.name;
      const from = edited === undefined ? undefined : sent.get(edited);
      if (from !== undefined) out.push(at - from);
    }
    return out;
  };
  while (latencies().length < count && Date.now() < deadline) await sleep(200);
  const sorted = Float64Array.from(latencies()).sort();
  const writes = Float64Array.from(writeMs).sort();
  return {
    edits: count,
    patched: sorted.length,
    perSecond: EDITS_PER_SECOND,
    p50Ms: round(quantile(sorted, 0.5), 1),
    p99Ms: round(quantile(sorted, 0.99), 1),
    maxMs: round(sorted[sorted.length - 1] ?? 0, 1),
    // The edit's own write (send → the API server's answer), included in the figures above.
    writeP50Ms: round(quantile(writes, 0.5), 1),
    writeP99Ms: round(quantile(writes, 0.99), 1),
    serviceCallsByRoute: sim.counters(),
  };
}

function commitOf(): string {
  const git = (args: string[]) => spawnSync("git", args, { cwd: ROOT, encoding: "utf8" }).stdout.trim();
  const dirty = git(["status", "--porcelain", "--", "src", "manifests"]) === "" ? "" : "+changes";
  return `${git(["rev-parse", "--short", "HEAD"])}${dirty}`;
}

const round = (value: number, digits: number) => Math.round(value * 10 ** digits) / 10 ** digits;
