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
 * With `--tenants T`, each N is the many-tenants case instead (N resources over T connections and
 * simulators, one of them then a black hole): see `tenancy.ts`, reported in `docs/bench/tenancy.json`.
 * With `--slow-beside S`, each N is a healthy connection's resync pass alone and beside a slow
 * connection of S resources instead: see `slow-beside.ts`, reported in `docs/bench/slow-beside.json`.
 */
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { mkdir, readFile, writeFile } from "node:fs/promises";
import { loadavg, tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { type KubeClient, PatchType } from "../../src/kube/client.ts";
import { DEPLOYMENTS } from "../../src/kube/custom-resources.ts";
import { collectionPath, type DeploymentObject } from "../../src/kube/object.ts";
import type { SeedDeployment } from "../../src/simulator/seed.ts";
import { type RunningSimulator, startSimulator } from "../../src/simulator/server.ts";
import { ControlPlane } from "../controlplane/harness.ts";
import {
  type Benchmark,
  benchDeploymentBody,
  benchImageEdit,
  benchSeedDeployment,
  callCount,
  quantile,
} from "./harness.ts";
import { breakdownTable, type HeapSnapshotFile, heapBreakdown } from "./heap-breakdown.ts";
import { Inspector } from "./inspector.ts";
import {
  APPLY_CONCURRENCY,
  CACHE,
  CONCURRENCY,
  commitOf,
  compileOperator,
  defaultResync,
  LOGS,
  manifestRuntimeEnv,
  planeClient,
  pool,
  progress,
  QPS,
  ReadyWatch,
  resyncPass,
  round,
  type Setup,
  startOperator,
  Tap,
} from "./operator-run.ts";
import { cpuMsPer, cpuReading, cpuSeconds, cpuSpent, memoryMiB } from "./probes.ts";
import {
  measureReplicas,
  ofReplicaRepeats,
  parseReplicas,
  type ReplicaFigures,
  replicasTable,
  saveReplicas,
} from "./replicas.ts";
import { ofRepeats, type ScaleFigures, saveScale, scaleTable } from "./scale-report.ts";
import {
  measureSlowBeside,
  parseSlowBeside,
  type SlowBesideFigures,
  saveSlowBeside,
  slowBesideTable,
} from "./slow-beside.ts";
import { measureTenants, parseTenants } from "./tenancy.ts";
import { saveTenancy, type TenancyFigures, tenancyTable } from "./tenancy-report.ts";

/** Edits sampled for the edit → PATCH latency, and their pace. */
const EDITS = 100;
const EDITS_PER_SECOND = 5;
const ADOPT_NS = "scale-adopt";
const COLD_NS = "scale-cold";
/** With --heap-breakdown: the empty namespace of the operator whose idle heap is compared. */
const IDLE_NS = "scale-idle";

/** See the module comment. */
export const benchmark: Benchmark = {
  name: "scale",
  description:
    "N resources, the compiled operator as its own process: RSS, cost of one drift resync, adoption, cold creates, edit → PATCH (own control plane, simulator); with --tenants, N spread over that many connections, one of them then a black hole",
  options: {
    n: { description: "numbers of resources, comma-separated, run in turn", default: "100" },
    "resync-period": {
      description: "the operator's --resync-period",
      default: "30s up to 1,000 resources, 60s above; 30s with --tenants",
    },
    label: {
      description:
        "series the figures are filed under in docs/bench/scale.json (tenancy.json with --tenants; e.g. before, after)",
      default: "current",
    },
    tenants: {
      description:
        "the many-tenants case: the N resources spread over this many ServiceConnections, each in its own namespace with its own Secret and simulator (e.g. --tenants 50 --n 10000)",
    },
    profile: {
      description:
        "a directory: sampling heap profiles of what reached the old generation (kept whether a full collection freed it or not) over the cold creates, the first resync pass and the measured one (n<N>-creates/-first/-pass.heapprofile), a CPU profile of the cold creates (n<N>-creates.cpuprofile); after the measured pass, a CPU profile of the next pass (n<N>-pass.cpuprofile) and, after the edits, a heap snapshot holding N (n<N>-steady.heapsnapshot); with --replicas, a CPU profile of each replica from its start until every resource is owned (r<R>n<N>-creates-<replica>.cpuprofile), after the steady figures heap snapshots of the leader and of one other replica (r<R>n<N>-leader/-member.heapsnapshot), and a CPU profile of the replica that joins, from its start until every resource is owned as the ring says (r<R>n<N>-join-newcomer.cpuprofile); through the operators' inspectors on loopback; open them in Chrome DevTools",
    },
    "api-server-profile": {
      description:
        "with --replicas: a directory; the API server runs with --profiling=true and is profiled (30 s at a time) from the replicas' start to every resource owned and through the join (r<R>n<N>-creates-apiserver-<k>.pb.gz, r<R>n<N>-join-apiserver-<k>.pb.gz; open them with `go tool pprof`), its CPU seconds by kind of work in replicas.json (api-server-profile.ts)",
    },
    "heap-breakdown": {
      description:
        "a directory: after the steady figures and the edits, a heap snapshot holding N (n<N>-steady.heapsnapshot) and the live heap by structure, bytes per resource (n<N>-breakdown.md, and in scale.json; see heap-breakdown.ts), next to the heap of an idle operator started afterwards (n<N>-idle.heapsnapshot), through the operator's inspector on loopback",
    },
    repeat: {
      description:
        "runs each N this many times, each from cold (a control plane, resources, simulators and operators of its own): every RSS figure is then the median of the runs with their min–max, the other figures the run's of median peak (e.g. --repeat 3); with --replicas, the leader's and the members' peak and steady RSS (by role: which replica leads differs between runs), the other figures the run's whose largest peak is the median",
      default: "1",
    },
    replicas: {
      description:
        "the sharded case: the N resources in one namespace, this many `--sharded` replicas (2 to 8); per-replica RSS, calls per resync summed, a kill -9's re-ownership, the share moved by one more replica (e.g. --replicas 3 --n 6000)",
    },
    start: {
      description:
        "with --replicas: `created` (the simulator empty: N creates) or `seeded` (the simulator seeded with the N deployments: the start is an adoption, for the kill and join phases at 3 × 10,000 without the creates' half hour; filed as the series `<label>, seeded`)",
      default: "created",
    },
    "slow-beside": {
      description:
        "the slow-connection case: a healthy connection's N resources, its resync pass measured alone and then beside a slow connection with this many resources (the fairness benchmark's slow service: reads after ~10 s, batched reads failing, every rollout in progress), and the ratio of the two (e.g. --n 10000 --slow-beside 200; docs/bench/slow-beside.json)",
    },
    "listing-deadline": {
      description: "with --tenants: the operator's --listing-deadline",
      default: "not passed: the operator's own default",
    },
  },
  writesOwnReport: true,
  async run({ args }) {
    const sizes = (args.n ?? "100").split(",").map((text) => {
      const n = Number(text.trim());
      if (!Number.isInteger(n) || n < 1) throw new Error(`--n: '${text}' is not a positive integer`);
      return n;
    });
    const tenants = args.tenants === undefined ? undefined : parseTenants(args.tenants, sizes);
    if (tenants === undefined && args["listing-deadline"] !== undefined)
      throw new Error("--listing-deadline applies to the many-tenants case only: add --tenants <count>");
    const label = args.label ?? "current";
    const replicas = args.replicas === undefined ? undefined : parseReplicas(args.replicas);
    if (replicas !== undefined && tenants !== undefined)
      throw new Error("--replicas and --tenants are separate cases: give one");
    const repeat = Number(args.repeat ?? "1");
    if (!Number.isInteger(repeat) || repeat < 1 || repeat > 9)
      throw new Error(`--repeat: '${args.repeat}' is not a number of runs from 1 to 9 (e.g. --repeat 3)`);
    if (repeat > 1 && tenants !== undefined)
      throw new Error("--repeat applies to one namespace or to --replicas: leave out --tenants");
    if (args.start !== undefined && !["created", "seeded"].includes(args.start))
      throw new Error(`--start: '${args.start}' is neither 'created' nor 'seeded'`);
    const seeded = args.start === "seeded";
    if (args.start !== undefined && replicas === undefined)
      throw new Error("--start applies to the sharded case only: add --replicas <count>");
    const apiServerProfile =
      args["api-server-profile"] === undefined ? undefined : resolve(args["api-server-profile"]);
    if (apiServerProfile !== undefined && replicas === undefined)
      throw new Error("--api-server-profile applies to the sharded case only: add --replicas <count>");
    if (apiServerProfile !== undefined) mkdirSync(apiServerProfile, { recursive: true });
    const slowBeside = args["slow-beside"] === undefined ? undefined : parseSlowBeside(args["slow-beside"]);
    if (slowBeside !== undefined && (replicas !== undefined || tenants !== undefined || repeat > 1))
      throw new Error("--slow-beside is a case of its own: leave out --replicas, --tenants and --repeat");
    const besides: SlowBesideFigures[] = [];
    const sharded: ReplicaFigures[] = [];
    // A build of this run's own: another run may rebuild meanwhile.
    const dist = join(CACHE, `dist-${process.pid}`);
    // The code measured is the code compiled now, whatever is committed while the run goes on.
    const commit = commitOf();
    const entry = compileOperator(dist);
    const runtimeEnv = manifestRuntimeEnv();
    const nodeOptions = runtimeEnv.NODE_OPTIONS;
    const results: ScaleFigures[] = [];
    const tenancy: TenancyFigures[] = [];
    try {
      for (const n of sizes) {
        const resync = args["resync-period"] ?? (tenants === undefined ? defaultResync(n) : "30s");
        progress(`N=${n}: resync period ${resync}, runtime env ${JSON.stringify(runtimeEnv)}`);
        const setup: Setup = {
          entry,
          nodeOptions,
          runtimeEnv,
          commit,
          resync,
          ...(args.profile === undefined ? {} : { profile: resolve(args.profile) }),
          ...(args["heap-breakdown"] === undefined ? {} : { heapBreakdown: resolve(args["heap-breakdown"]) }),
          ...(apiServerProfile === undefined ? {} : { apiServerProfile }),
          logs: join(LOGS, tenants === undefined ? `n${n}` : `tenants${tenants}-n${n}`),
        };
        // Saved per N, so a long run that fails later keeps what it measured.
        if (slowBeside !== undefined) {
          const figures = await measureSlowBeside(n, slowBeside, {
            ...setup,
            logs: join(LOGS, `slow-beside-n${n}`),
          });
          besides.push(figures);
          progress(`written ${saveSlowBeside(figures)}`);
        } else if (replicas !== undefined) {
          const runs: ReplicaFigures[] = [];
          for (let run = 1; run <= repeat; run++) {
            if (repeat > 1) progress(`R=${replicas} N=${n}: run ${run} of ${repeat}`);
            const logs = join(LOGS, `replicas${replicas}-n${n}${repeat > 1 ? `-run${run}` : ""}`);
            runs.push(await measureReplicas(replicas, n, { ...setup, logs }, seeded));
          }
          const figures = ofReplicaRepeats(runs);
          sharded.push(figures);
          for (const path of saveReplicas(seeded ? `${label}, seeded` : label, figures))
            progress(`written ${path}`);
        } else if (tenants === undefined) {
          const runs: ScaleFigures[] = [];
          for (let run = 1; run <= repeat; run++) {
            if (repeat > 1) progress(`N=${n}: run ${run} of ${repeat}`);
            runs.push(await measure(n, setup));
          }
          const figures = ofRepeats(runs);
          results.push(figures);
          for (const path of saveScale(label, figures)) progress(`written ${path}`);
        } else {
          const figures = await measureTenants(tenants, n, setup, args["listing-deadline"]);
          tenancy.push(figures);
          for (const path of saveTenancy(label, figures)) progress(`written ${path}`);
        }
      }
    } finally {
      rmSync(dist, { recursive: true, force: true });
    }
    return {
      rows: [],
      table:
        slowBeside !== undefined
          ? slowBesideTable(besides)
          : replicas !== undefined
            ? replicasTable(sharded)
            : tenants === undefined
              ? scaleTable(label, results)
              : tenancyTable(label, tenancy),
    };
  },
};

const name = (i: number) => `scale-${String(i).padStart(5, "0")}`;

async function measure(n: number, setup: Setup): Promise<ScaleFigures> {
  const loadAtStart = loadavg()[0] ?? 0;
  const plane = await ControlPlane.start();
  const work = mkdtempSync(join(tmpdir(), "dms-scale-"));
  try {
    await plane.installCrds();
    const { client, apiMetrics } = await planeClient(plane, "dms-scale-bench");
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
      const idleHeap = await running.v8Heap();
      progress(`N=${n}: idle RSS ${idleRss.toFixed(1)} MiB; applying ${n} resources`);
      const sampling = setup.profile === undefined ? undefined : await Inspector.connect(running.inspectPort);
      if (sampling && setup.profile) {
        await mkdir(setup.profile, { recursive: true });
        await sampling.startHeapSampling();
      }
      const coldWatch = new ReadyWatch(client, COLD_NS);
      await coldWatch.start();
      sim.resetCounters();
      coldTap.reset();
      if (sampling && setup.profile) await sampling.startCpuProfile();
      // Where the machine's CPU goes while the creates run: the operator, the API server, etcd,
      // this process (its watch, the simulator that answers the creates).
      const cpuNow = () =>
        cpuReading({
          operator: [pid],
          ...plane.cpuGroups,
          benchmark: [process.pid],
        });
      const coldCpuBefore = cpuNow();
      const coldStarted = performance.now();
      const coldApply = await applyResources(client, COLD_NS, n);
      await coldWatch.untilReady(n, running.process, Math.max(600_000, n * 200));
      const coldSeconds = (performance.now() - coldStarted) / 1000;
      const coldCpu = cpuSpent(coldCpuBefore, cpuNow());
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
        cpuMsPerCreate: cpuMsPer(coldCpu, posts.length),
      };
      progress(`N=${n}: cold creates ${cold.createsPerSecond}/s; waiting for a resync pass`);
      if (sampling && setup.profile) {
        await sampling.stopCpuProfile(join(setup.profile, `n${n}-creates.cpuprofile`));
        await sampling.stopHeapSampling(join(setup.profile, `n${n}-creates.heapprofile`));
        await sampling.startHeapSampling();
      }

      // 4. One resync pass, isolated.
      await coldWatch.stop(); // this process sends nothing to the API server from here on
      // The first pass after the creates may still finish their bookkeeping; the second is the
      // steady state every later period repeats. Both are reported; the second is "the" resync.
      const first = await resyncPass(n, running, sim, coldTap, apiMetrics, setup.resync);
      if (sampling && setup.profile) {
        await sampling.stopHeapSampling(join(setup.profile, `n${n}-first.heapprofile`));
        await sampling.startHeapSampling();
      }
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
      if (sampling && setup.profile) {
        await sampling.stopHeapSampling(join(setup.profile, `n${n}-pass.heapprofile`));
        sampling.close();
      }

      const inspector =
        setup.profile === undefined && setup.heapBreakdown === undefined
          ? undefined
          : await Inspector.connect(running.inspectPort);
      if (inspector && setup.profile) {
        await mkdir(setup.profile, { recursive: true });
        await inspector.startCpuProfile();
        const profiled = await resyncPass(n, running, sim, coldTap, apiMetrics, setup.resync);
        await inspector.stopCpuProfile(join(setup.profile, `n${n}-pass.cpuprofile`));
        progress(
          `N=${n}: profiled pass ${profiled.seconds} s, ${profiled.cpuSeconds} CPU-s (with the profiler)`,
        );
      }

      // 5. Edits.
      const edit = await editLatency(client, n, sim, coldTap);
      const memory = memoryMiB(pid);
      let breakdown: ScaleFigures["heapBreakdown"];
      const snapshotDir = setup.profile ?? setup.heapBreakdown;
      if (inspector && snapshotDir) {
        // After the peak was read: a snapshot takes memory of its own.
        await mkdir(snapshotDir, { recursive: true });
        const snapshot = join(snapshotDir, `n${n}-steady.heapsnapshot`);
        await inspector.heapSnapshot(snapshot);
        inspector.close();
        progress(`N=${n}: heap snapshot in ${snapshot}`);
        if (setup.heapBreakdown) {
          // The idle heap to compare with: an operator of its own on an empty namespace, so the
          // one measured never took a snapshot before its figures were read.
          await client.request({
            method: "POST",
            path: "/api/v1/namespaces",
            body: { metadata: { name: IDLE_NS } },
          });
          const idleOperator = await startOperator(setup, plane.kubeconfigPath, IDLE_NS, sim.url, work);
          const idleSnapshot = join(setup.heapBreakdown, `n${n}-idle.heapsnapshot`);
          try {
            await idleOperator.ready();
            await sleep(5_000);
            const idleInspector = await Inspector.connect(idleOperator.inspectPort);
            await idleInspector.heapSnapshot(idleSnapshot);
            idleInspector.close();
          } finally {
            await idleOperator.process.stop(30_000);
          }
          breakdown = await breakDown(snapshot, idleSnapshot, n, setup.heapBreakdown);
        }
      }
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
          settled: resync.settledRssMiB,
          idleSplit: { anon: round(idle.anon, 1), file: round(idle.file, 1) },
          steadySplit: resync.steadySplit,
          peak: round(Math.max(memory.peak, adoption.peakRssMiB), 1),
          peakCold: round(memory.peak, 1),
          peakAdoption: adoption.peakRssMiB,
        },
        v8HeapMiB: { idle: idleHeap, steady: resync.steadyHeap, settled: resync.settledHeap },
        resync: resync.figures,
        adoption,
        cold,
        edit,
        perResource: {
          resyncCpuMs: round((resync.figures.cpuSeconds / n) * 1000, 4),
          steadyKiB: round(((resync.steadyRssMiB - idleRss) / n) * 1024, 2),
        },
        ...(breakdown ? { heapBreakdown: breakdown } : {}),
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

/**
 * The live heap of the snapshot at `path` by structure, per resource of `n`: written as Markdown
 * to `dir` (n<N>-breakdown.md) and returned for scale.json (categories, and the largest rows).
 */
async function breakDown(
  path: string,
  idlePath: string,
  n: number,
  dir: string,
): Promise<ScaleFigures["heapBreakdown"]> {
  const read = async (file: string) => JSON.parse(await readFile(file, "utf8")) as HeapSnapshotFile;
  const idleBytes = heapBreakdown(await read(idlePath)).totalBytes;
  const found = heapBreakdown(await read(path), { resources: n, idleBytes });
  const table = breakdownTable(found, 40);
  await writeFile(join(dir, `n${n}-breakdown.md`), `${table}\n`);
  progress(`N=${n}: the live heap by structure:\n${table}`);
  const per = (bytes: number) => round(bytes / n, 0);
  return {
    liveMiB: round(found.totalBytes / 1048576, 1),
    idleLiveMiB: round(idleBytes / 1048576, 1),
    categories: found.categories.map((c) => ({ category: c.category, bytesPerResource: per(c.bytes) })),
    rows: found.rows.slice(0, 15).map((r) => ({
      path: r.path,
      kind: r.kind,
      bytesPerResource: per(r.bytes),
      category: r.category,
      ...(r.fields
        ? { fields: r.fields.slice(0, 16).map((f) => ({ field: f.field, bytesPerResource: per(f.bytes) })) }
        : {}),
    })),
  };
}

/** The simulator's seed for adoption: the deployments the resources describe, already Ready. */
function seedOf(n: number): SeedDeployment[] {
  return Array.from({ length: n }, (_, i) => benchSeedDeployment(name(i)));
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
      client.request(benchImageEdit(COLD_NS, resource, 2)).then(() => writeMs.push(performance.now() - at)),
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
