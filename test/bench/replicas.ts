/**
 * The scale benchmark's sharded case (`npm run bench -- scale --replicas 3 --n 6000`): N
 * resources in one namespace on one connection, R compiled operators run as separate processes
 * with `--sharded` (each its own `POD_NAME`, one Lease each, the leader also the sharder).
 * Measured:
 *
 * 1. Start: the N resources applied before any operator runs, the simulator empty (answering
 *    Ready at once); start → every resource created, Ready and labelled for the replica the ring
 *    names (the creates paced by the connection's `--qps`, split between the replicas).
 * 2. Steady: after a quiet moment, each replica's RSS; then over two resync periods the
 *    simulator's calls by replica (its `User-Agent`) and the calls one resync costs summed over
 *    the replicas ({@link callsPerResync}), against the goal ⌈N/100⌉ + a few per replica (each
 *    reads its share by id, a hundred per call); and the API server's requests for
 *    `deployments.dms.dev` per resource and period, WATCH excluded.
 * 3. Kill -9 of a replica that is only a member, then (the ring back to R) of the elected leader,
 *    which also runs the sharder: each time, the time until every resource it owned is labelled
 *    for a live replica again, and until the new owners reconciled them (their reconcile counts
 *    grew by the dead replica's share).
 * 4. 2 → 3 (the killed one replaced by a new replica) and then R → R+1: the share of the
 *    resources whose owner changed on the join, against 1/(R+1).
 *
 * Figures are reported, never asserted; `docs/bench/replicas.json` keeps them per series.
 */

import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { mkdir } from "node:fs/promises";
import type { IncomingMessage } from "node:http";
import { arch, cpus, loadavg, platform, tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { parseDuration } from "../../src/duration.ts";
import type { KubeClient } from "../../src/kube/client.ts";
import { DEPLOYMENTS } from "../../src/kube/custom-resources.ts";
import { readInstallKey } from "../../src/kube/install-key.ts";
import { collectionPath, type DeploymentObject } from "../../src/kube/object.ts";
import { claimOf } from "../../src/reconcile/inputs.ts";
import { OWNER_LABEL, SHARDER_HOLDER_PREFIX } from "../../src/sharding/labels.ts";
import { SHARDER_REPLICA_SHARE } from "../../src/sharding/ring.ts";
import { type RingChoice, RingChoices } from "../../src/sharding/ring-choices.ts";
import { type RunningSimulator, startSimulator } from "../../src/simulator/server.ts";
import { pollIndexer } from "../../src/wiring/indexes.ts";
import { ControlPlane } from "../controlplane/harness.ts";
import { ApiServerProfiles } from "./api-server-profile.ts";
import { benchDeploymentBody, benchSeedDeployment, callCount } from "./harness.ts";
import { Inspector } from "./inspector.ts";
import {
  APPLY_CONCURRENCY,
  callKind,
  planeClient,
  pool,
  progress,
  ReadyWatch,
  type RunningOperator,
  round,
  type Setup,
  startOperator,
  Tap,
} from "./operator-run.ts";
import { apiRequestDelta, type CpuReading, cpuReading, cpuSpent, memoryMiB, sumOf } from "./probes.ts";
import { type Spread, spreadOf } from "./scale-report.ts";

const NS = "scale-sharded";
const DOCS = join(import.meta.dirname, "..", "..", "docs", "bench");
const JSON_PATH = join(DOCS, "replicas.json");

/** What one run at R replicas and N resources measured. */
export interface ReplicaFigures {
  replicas: number;
  n: number;
  date: string;
  commit: string;
  loadAverage: { start: number; end: number };
  adoptionSeconds: number;
  /** The start was an adoption of N seeded deployments (`--start seeded`), not N creates; absent: creates. */
  seeded?: boolean;
  /**
   * Start → adopted, per replica: its calls on /v2/deployments by kind and the second (from the
   * start) of its last create; absent in older series. Where the creates' time goes: two calls per
   * create (the lookup by name, then the POST) at the replica's share of `--qps`, and a replica
   * that ends its creates first leaves its share of the budget unused.
   */
  creates?: Record<string, { calls: Record<string, number>; lastCreateSeconds: number }>;
  /**
   * Start → adopted: the API server's requests on Deployment resources by verb (the sharder's
   * label patches, and the create intents' and outcomes' status writes); absent in older series.
   */
  createsKubeRequestsByVerb?: Record<string, number>;
  /**
   * Start → adopted: the service's calls on /v2/deployments per second, on average and at the
   * busiest 1 s and 10 s (`serviceRate`), against the connection's `--qps`; absent in older series.
   */
  createsServiceRate?: { average: number; peak1s: number; peak10s: number };
  /**
   * Start → adopted: the API server's other requests by verb and resource (the operators' Events,
   * their Leases, the benchmark's reads); absent in older series.
   */
  createsOtherKubeRequests?: Record<string, number>;
  /**
   * With `--api-server-profile`: the API server's CPU seconds from the replicas' start to every
   * resource owned, by kind of work (`api-server-profile.ts`; profiles of 30 s, the last one's
   * tail past the phase included).
   */
  createsApiServerCpu?: Record<string, number>;
  /**
   * CPU seconds from the replicas' start to every resource owned, by process: the API server,
   * etcd, the operators in all, the benchmark (its simulator and its watch), then each operator
   * (see {@link byProcess}); absent in older series.
   */
  createsCpuSeconds?: Record<string, number>;
  /** Adopted → no resource polled any more (absent in older series: their steady window began at adoption). */
  settledSeconds?: number;
  /** Per replica, in start order (with `--repeat`: each figure the median of the runs). */
  rssMiB: Array<{ replica: string; share: number; peak: number; steady: number }>;
  /**
   * With `--repeat R`: how many cold runs; the peak and steady RSS of the leader's replica and of
   * the members' (each member of each run) as medians with their spread, and the largest peak of
   * each run; each run's replicas as measured. The other figures are the run's whose largest peak
   * is the median ({@link ofReplicaRepeats}). Absent for one run.
   */
  repeats?: {
    runs: number;
    peakMiB: { leader: Spread; members: Spread; largest: Spread };
    steadyMiB: { leader: Spread; members: Spread };
    each: Array<{
      leader: string;
      rssMiB: ReplicaFigures["rssMiB"];
      loadAverage: { start: number; end: number };
    }>;
  };
  resync: {
    periodSeconds: number;
    /** How long the calls were counted (absent in older series: one period). */
    windowSeconds?: number;
    /** The simulator's calls in the window, summed over the replicas. */
    serviceCalls: number;
    /** What one resync costs, summed over the replicas (see {@link callsPerResync}). */
    serviceCallsPerResync?: number;
    /** The goal for {@link serviceCallsPerResync}: see {@link callsGoal}. */
    serviceCallsGoal?: number;
    serviceCallsPerResyncByReplica?: Record<string, number>;
    serviceCallsByRoute: Record<string, Record<string, number>>;
    /** Calls on /v2/deployments in the window by kind (`ids (batch)`, `id`, `name`, `listing page`, `create`). */
    serviceCallsByKind?: Record<string, number>;
    kubeRequests: number;
    /** {@link kubeRequests} by verb (and subresource); absent in older series. */
    kubeRequestsByVerb?: Record<string, number>;
    /** Per resource and per period. */
    kubeRequestsPerResource: number;
  };
  /** A member's kill; `leader`: the leader's (absent in series measured before it was). */
  kill: KillFigures & { leader?: KillFigures };
  join: {
    from: number;
    to: number;
    moved: number;
    share: number;
    ideal: number;
    /** Start of the new replica → every resource owned as the ring says (absent in older series). */
    seconds?: number;
    /** The same for the replica that replaced the killed member (R − 1 → R). */
    replaceSeconds?: number;
    /** Start of the new replica → the first resource labelled for it (absent in older series). */
    firstSeconds?: number;
    /**
     * Start of the new replica → its cache holds every resource the ring gives it (its
     * `dms_shard_resources`: its own, labelled for it, and those an owner released to it whole
     * before their labels follow); absent in older series.
     */
    heldSeconds?: number;
    /**
     * Start of the new replica → held ({@link heldSeconds}) and its deployment queue empty with no
     * reconcile running: its share reconciled by it, whether or not the labels followed yet; the
     * goal's figure (absent in older series).
     */
    reconciledSeconds?: number;
    /**
     * Start of the new replica → the service's PATCH for each of {@link EDITS_PER_KILL} edits made
     * then to the share moving to it: the slowest, the median, how many (absent in older series).
     */
    editPatchedSeconds?: { max: number; median: number; edits: number };
    /** The same three for the replica that replaced the killed member (absent in older series). */
    replaceHeldSeconds?: number;
    replaceReconciledSeconds?: number;
    replaceEditPatchedSeconds?: { max: number; median: number; edits: number };
    /**
     * The API server's requests on Deployment resources from the start of the new replica until
     * every resource was owned as the ring says, by verb (absent in older series).
     */
    kubeRequestsByVerb?: Record<string, number>;
    /** Label writes (PATCH) over the resources moved (absent in older series). */
    writesPerMove?: number;
    /** CPU seconds of the join by process, as {@link ReplicaFigures.createsCpuSeconds}; absent in older series. */
    cpuSeconds?: Record<string, number>;
    /** With `--api-server-profile`: the API server's CPU seconds through the join by kind of work. */
    apiServerCpu?: Record<string, number>;
  };
}

/**
 * CPU seconds by process, rounded to 0.1: the API server, etcd, the benchmark, the operators in
 * all, then each operator by its replica (the leader's named so).
 */
export function byProcess(spent: Record<string, number>, leader: string | undefined): Record<string, number> {
  const { apiServer = 0, etcd = 0, benchmark = 0, ...replicas } = spent;
  const each = Object.entries(replicas).sort(([a], [b]) => a.localeCompare(b));
  return Object.fromEntries(
    [
      ["apiServer", apiServer],
      ["etcd", etcd],
      ["operators", each.reduce((sum, [, v]) => sum + v, 0)],
      ["benchmark", benchmark],
      ...each.map(([replica, v]) => [replica === leader ? `${replica} (leader)` : replica, v] as const),
    ].map(([k, v]) => [k, round(v as number, 1)]),
  );
}

/** How long a membership change may take to settle before the bench gives up on it. */
const SETTLE_LIMIT_MS = 900_000;

/** Parses `--replicas`: a whole number from 2 to 8. */
export function parseReplicas(text: string): number {
  const r = Number(text);
  if (!Number.isInteger(r) || r < 2 || r > 8)
    throw new Error(`--replicas: '${text}' is not a whole number from 2 to 8`);
  return r;
}

const name = (i: number) => `shard-${String(i).padStart(5, "0")}`;

/**
 * Calls a replica may make per connection and resync besides its share of ⌈N/100⌉: the last,
 * partly filled batch of ids, and the connection's probe when one falls in the period.
 */
export const CALLS_PER_REPLICA = 2;

/** Resync periods the steady calls are counted over. */
const STEADY_PERIODS = 2;

/** The goal of the calls per resync over all replicas: ⌈N/100⌉ + {@link CALLS_PER_REPLICA} each. */
export function callsGoal(n: number, replicas: number): number {
  return Math.ceil(n / 100) + CALLS_PER_REPLICA * replicas;
}

/** One request the simulator answered: the replica that sent it, when, and whether a pass's read. */
export interface TappedCall {
  replica: string;
  at: number;
  /** A batch of ids or a page of a whole listing: what a resync pass reads a connection with. */
  read: boolean;
  /** What the call is (see {@link callKind}); absent on calls outside /v2/deployments. */
  kind?: string;
}

/**
 * A replica's reads closer than this part of the period to the one before belong to the same
 * pass: passes come a period apart (less its 10 % spread), while one pass's calls follow each
 * other as fast as the service answers, which at 30,000 deployments may be a second or more.
 */
const SAME_PASS_PART = 1 / 4;

/**
 * The calls one resync costs, each replica's and summed, from the calls of the window
 * [`start`, `end`] (ms; at least one period long). A replica's passes do not come exactly once
 * per period (each waits the period after its last one ended, ±10 %), so a window of one period
 * may hold none of a replica's: each replica's reads are grouped into passes (reads within
 * a quarter period of each other, {@link SAME_PASS_PART}) and those whole in the window averaged; its other calls
 * (lookups by name or id, creates, probes) are scaled to one period.
 */
export function callsPerResync(
  calls: readonly TappedCall[],
  start: number,
  end: number,
  periodMs: number,
): { total: number; byReplica: Record<string, number> } {
  const byReplica: Record<string, number> = {};
  const replicas = new Set(calls.map((c) => c.replica));
  for (const replica of replicas) {
    const own = calls.filter((c) => c.replica === replica);
    const reads = own.filter((c) => c.read).map((c) => c.at);
    reads.sort((a, b) => a - b);
    const samePassMs = periodMs * SAME_PASS_PART;
    const passes: number[][] = [];
    for (const at of reads) {
      const last = passes.at(-1);
      if (last && at - (last.at(-1) ?? at) <= samePassMs) last.push(at);
      else passes.push([at]);
    }
    const whole = passes.filter(
      (p) => (p[0] ?? start) - start > samePassMs && end - (p.at(-1) ?? end) > samePassMs,
    );
    const counted = whole.length > 0 ? whole : passes;
    const perPass = counted.length > 0 ? counted.reduce((sum, p) => sum + p.length, 0) / counted.length : 0;
    const others = ((own.length - reads.length) * periodMs) / (end - start);
    byReplica[replica] = round(perPass + others, 1);
  }
  return {
    total: round(
      Object.values(byReplica).reduce((a, b) => a + b, 0),
      1,
    ),
    byReplica,
  };
}

/** Records each request with the replica its `User-Agent` names (`dms-operator/<version> (<pod>)`). */
class ReplicaTap extends Tap {
  calls: TappedCall[] = [];
  readonly byAgent = (req: IncomingMessage) => {
    this.hook(req);
    const replica = /\(([^)]*)\)\s*$/.exec(req.headers["user-agent"] ?? "")?.[1] ?? "unknown";
    const url = new URL(req.url ?? "/", "http://simulator");
    const ids = url.searchParams.get("deployment_ids");
    const whole = [...url.searchParams.keys()].every((key) => key === "limit" || key === "offset");
    const read =
      req.method === "GET" && url.pathname === "/v2/deployments" && (ids ? ids.includes(",") : whole);
    const kind = url.pathname === "/v2/deployments" ? callKind(req.method, url.searchParams) : undefined;
    this.calls.push({ replica, at: performance.now(), read, ...(kind ? { kind } : {}) });
  };

  override reset(): void {
    super.reset();
    this.calls = [];
  }
}

/** See the module comment. */
export async function measureReplicas(
  replicas: number,
  n: number,
  setup: Setup,
  /** The simulator seeded with the N deployments: the start is an adoption, not N creates. */
  seeded = false,
): Promise<ReplicaFigures> {
  const loadAtStart = loadavg()[0] ?? 0;
  const periodMs = parseDuration(setup.resync);
  if (periodMs === undefined) throw new Error(`--resync-period: '${setup.resync}' is not a duration`);
  const plane = await ControlPlane.start(
    setup.apiServerProfile === undefined ? {} : { apiServerFlags: ["--profiling=true"] },
  );
  const work = mkdtempSync(join(tmpdir(), "dms-replicas-"));
  const running = new Map<string, RunningOperator>();
  let sim: RunningSimulator | undefined;
  try {
    await plane.installCrds();
    const { client, apiMetrics, tls } = await planeClient(plane, "dms-replicas-bench");
    await client.request({ method: "POST", path: "/api/v1/namespaces", body: { metadata: { name: NS } } });
    const profiles =
      setup.apiServerProfile === undefined
        ? undefined
        : new ApiServerProfiles(plane.server, tls, setup.apiServerProfile);
    await pool(n, APPLY_CONCURRENCY, (i) =>
      client.request({
        method: "POST",
        path: collectionPath(DEPLOYMENTS, NS),
        body: benchDeploymentBody(name(i)),
      }),
    );
    progress(`R=${replicas} N=${n}: applied; starting the replicas`);
    const tap = new ReplicaTap();
    const simulator = await startSimulator({
      timing: { readyAfterMs: 0, revisionActiveAfterMs: 0 },
      onRequest: tap.byAgent,
      ...(seeded
        ? { seed: { deployments: Array.from({ length: n }, (_, i) => benchSeedDeployment(name(i))) } }
        : {}),
    });
    sim = simulator;
    let serial = 0;
    const start = async () => {
      const replica = `replica-${serial++}`;
      const op = await startOperator(
        setup,
        plane.kubeconfigPath,
        NS,
        simulator.url,
        work,
        [
          "--leader-elect",
          "--sharded",
          "--shard-label-policy=unenforced",
          `--leader-election-namespace=${NS}`,
        ],
        replica,
      );
      running.set(replica, op);
      return replica;
    };
    const watch = new ReadyWatch(client, NS);
    await watch.start();
    // Where the machine's CPU goes in a phase: the API server, etcd, each operator, this process.
    const cpuNow = () =>
      cpuReading({
        ...plane.cpuGroups,
        benchmark: [process.pid],
        ...Object.fromEntries([...running].map(([replica, op]) => [replica, [op.process.pid]])),
      });
    const cpuSince = async (before: CpuReading) =>
      byProcess(cpuSpent(before, cpuNow()), await leaderOf(client));
    const cpuAtStart = cpuNow();
    const requestsAtStart = await apiMetrics();
    const started = performance.now();
    profiles?.start(`r${replicas}n${n}-creates-apiserver`);
    // With --profile: each replica's CPU profile from its start to every resource owned.
    const profileDir = setup.profile;
    const createProfiles: [string, Inspector][] = [];
    for (let i = 0; i < replicas; i++) {
      const replica = await start();
      const port = running.get(replica)?.inspectPort ?? 0;
      if (profileDir === undefined || port === 0) continue;
      const inspector = await Inspector.connectWhenUp(port);
      createProfiles.push([replica, inspector]);
      await inspector.startCpuProfile();
    }
    const first = [...running.values()][0];
    if (!first) throw new Error("no replica");
    await watch.untilReady(n, first.process, Math.max(600_000, n * 200));
    await untilOwned(client, watch, running, 600_000);
    const adoptionSeconds = (performance.now() - started) / 1000;
    const creates = createsByReplica(tap.calls, started);
    const createsServiceRate = serviceRate(tap.calls, started, performance.now());
    const createsCpu = await cpuSince(cpuAtStart);
    const createsRequests = apiRequestDelta(requestsAtStart, await apiMetrics(), "dms.dev", "deployments");
    const createsKube = createsRequests.byVerb;
    const createsApiServer = await profiles?.stop();
    if (profileDir !== undefined) {
      await mkdir(profileDir, { recursive: true });
      for (const [replica, inspector] of createProfiles) {
        const to = join(profileDir, `r${replicas}n${n}-creates-${replica}.cpuprofile`);
        try {
          await inspector.stopCpuProfile(to);
        } finally {
          inspector.close();
        }
        progress(`R=${replicas} N=${n}: a CPU profile of ${replica} through the creates in ${to}`);
      }
    }
    progress(
      `R=${replicas} N=${n}: adopted in ${adoptionSeconds.toFixed(1)} s; by replica ${JSON.stringify(creates)}; service calls a second ${JSON.stringify(createsServiceRate)}; Kubernetes requests on deployments.dms.dev by verb ${JSON.stringify(createsKube)}, others ${JSON.stringify(createsRequests.other)}; CPU seconds by process ${JSON.stringify(createsCpu)}${createsApiServer ? `; the API server's by kind ${JSON.stringify(createsApiServer.cpuSeconds)}` : ""}`,
    );
    // Settled: no resource polled any more (a rollout in progress; a create whose answer was lost
    // keeps its intent, polled until a read lists it), or the steady window would count the
    // creates' last writes.
    const settledSeconds = await untilSettled(watch, running, SETTLE_LIMIT_MS);
    progress(`R=${replicas} N=${n}: every create read back ${settledSeconds} s after that`);

    // 2. Steady: one resync period, every replica's pass in it.
    await sleep(10_000);
    const steady = new Map([...running].map(([r, op]) => [r, memoryMiB(op.process.pid).rss]));
    const before = await apiMetrics();
    simulator.resetCounters();
    tap.reset();
    // Two periods: each replica's pass comes once per period plus its own length (see callsPerResync).
    const windowStart = performance.now();
    await sleep(STEADY_PERIODS * periodMs);
    const after = await apiMetrics();
    const calls = simulator.counters();
    const byKind = { ...tap.kinds };
    const perResync = callsPerResync(tap.calls, windowStart, performance.now(), periodMs);
    const goal = callsGoal(n, replicas);
    const kube = apiRequestDelta(before, after, "dms.dev", "deployments");
    const shares = shareOf(watch.list());
    // Resources the replicas still poll (a create not yet seen by a read, a rollout in progress).
    const polled = watch.list().filter((o) => pollIndexer(o).length > 0);
    const createsUnseen = polled.filter((o) => o.status?.createRequestedAt !== undefined).length;
    const rssMiB = [...running].map(([replica, op]) => ({
      replica,
      share: shares.get(replica) ?? 0,
      peak: round(memoryMiB(op.process.pid).peak, 1),
      steady: round(steady.get(replica) ?? 0, 1),
    }));
    progress(
      `R=${replicas} N=${n}: steady ${JSON.stringify(rssMiB)}; ${perResync.total} calls per resync over all replicas (goal ${goal}; by replica ${JSON.stringify(perResync.byReplica)}), ${callCount(calls)} in ${STEADY_PERIODS} periods by kind ${JSON.stringify(byKind)}; Kubernetes requests on deployments.dms.dev by verb ${JSON.stringify(kube.byVerb)}; ${polled.length} resources still polled (${createsUnseen} with a create not yet read back)`,
    );
    // With --profile: a heap snapshot of the leader and of one other replica, after the figures.
    if (setup.profile !== undefined) await snapshotHeaps(client, running, setup.profile, `r${replicas}n${n}`);

    // 3. Kill -9 of a replica that is only a member, then (back to R) of the leader, the sharder.
    const label = `R=${replicas} N=${n}`;
    const member = await killOne(client, tap, running, false, watch, label, apiMetrics);
    const replaceSeconds = await joinOne(
      client,
      tap,
      start,
      watch,
      running,
      `${label}: the killed member replaced`,
    );
    const kill = { ...member, leader: await killOne(client, tap, running, true, watch, label, apiMetrics) };

    // 4. Back to R, then R → R+1.
    await start();
    await untilOwned(client, watch, running, SETTLE_LIMIT_MS);
    const ownersBefore = ownersOf(watch.list());
    const joinRequestsBefore = await apiMetrics();
    const joinCpuBefore = cpuNow();
    profiles?.start(`r${replicas}n${n}-join-apiserver`);
    const joined = await joinOne(
      client,
      tap,
      start,
      watch,
      running,
      `${label}: ${replicas} → ${replicas + 1}`,
      setup.profile === undefined
        ? undefined
        : join(setup.profile, `r${replicas}n${n}-join-newcomer.cpuprofile`),
    );
    const joinCpu = await cpuSince(joinCpuBefore);
    const joinApiServer = await profiles?.stop();
    const joinRequests = apiRequestDelta(
      joinRequestsBefore,
      await apiMetrics(),
      "dms.dev",
      "deployments",
    ).byVerb;
    const ownersAfter = ownersOf(watch.list());
    let moved = 0;
    for (const [resource, owner] of ownersAfter) if (ownersBefore.get(resource) !== owner) moved += 1;
    const writesPerMove = round((joinRequests.PATCH ?? 0) / Math.max(1, moved), 2);
    progress(
      `${label}: the join moved ${moved} resources; first labelled for the newcomer after ${joined.firstSeconds} s; Kubernetes requests on deployments.dms.dev by verb ${JSON.stringify(joinRequests)} (${writesPerMove} label writes per move); CPU seconds by process ${JSON.stringify(joinCpu)}${joinApiServer ? `, the API server's by kind ${JSON.stringify(joinApiServer.cpuSeconds)}` : ""} (the API server's ${round(((joinCpu.apiServer ?? 0) * 1000) / Math.max(1, moved), 1)} ms a move); load ${loadavg()
        .map((l) => l.toFixed(1))
        .join(" ")}`,
    );
    await watch.stop();
    const figures: ReplicaFigures = {
      replicas,
      n,
      date: new Date().toISOString(),
      commit: setup.commit,
      loadAverage: { start: round(loadAtStart, 1), end: round(loadavg()[0] ?? 0, 1) },
      adoptionSeconds: round(adoptionSeconds, 1),
      ...(seeded ? { seeded } : {}),
      creates,
      createsKubeRequestsByVerb: createsKube,
      createsServiceRate,
      createsOtherKubeRequests: createsRequests.other,
      ...(createsApiServer ? { createsApiServerCpu: createsApiServer.cpuSeconds } : {}),
      createsCpuSeconds: createsCpu,
      settledSeconds,
      rssMiB,
      resync: {
        periodSeconds: periodMs / 1000,
        windowSeconds: (STEADY_PERIODS * periodMs) / 1000,
        serviceCalls: callCount(calls),
        serviceCallsPerResync: perResync.total,
        serviceCallsGoal: goal,
        serviceCallsPerResyncByReplica: perResync.byReplica,
        serviceCallsByRoute: calls,
        serviceCallsByKind: byKind,
        kubeRequests: kube.target,
        kubeRequestsByVerb: kube.byVerb,
        kubeRequestsPerResource: round(kube.target / n / STEADY_PERIODS, 4),
      },
      kill,
      join: {
        from: replicas,
        to: replicas + 1,
        moved,
        share: round(moved / n, 3),
        // The newcomer's share: 1 against the others' 1 and the leader's smaller one.
        ideal: round(1 / (replicas + SHARDER_REPLICA_SHARE), 3),
        seconds: joined.seconds,
        replaceSeconds: replaceSeconds.seconds,
        ...(joined.firstSeconds !== undefined ? { firstSeconds: joined.firstSeconds } : {}),
        ...(joined.heldSeconds !== undefined ? { heldSeconds: joined.heldSeconds } : {}),
        ...(joined.reconciledSeconds !== undefined ? { reconciledSeconds: joined.reconciledSeconds } : {}),
        ...(replaceSeconds.heldSeconds !== undefined
          ? { replaceHeldSeconds: replaceSeconds.heldSeconds }
          : {}),
        ...(replaceSeconds.reconciledSeconds !== undefined
          ? { replaceReconciledSeconds: replaceSeconds.reconciledSeconds }
          : {}),
        editPatchedSeconds: joined.editPatchedSeconds,
        replaceEditPatchedSeconds: replaceSeconds.editPatchedSeconds,
        kubeRequestsByVerb: joinRequests,
        cpuSeconds: joinCpu,
        ...(joinApiServer ? { apiServerCpu: joinApiServer.cpuSeconds } : {}),
        writesPerMove,
      },
    };
    return figures;
  } finally {
    await Promise.all([...running.values()].map((op) => op.process.stop(30_000)));
    await sim?.close();
    await plane.stop();
    rmSync(work, { recursive: true, force: true });
  }
}

/** One kill -9, as measured. */
export interface KillFigures {
  replica: string;
  share: number;
  /**
   * Kill → the victim's ring Lease taken by the sharder (its holder `sharder/…`), or gone: the
   * detection, a Lease duration and a pass; absent in older series. The rest of
   * {@link reownedSeconds} is the relabelling of its share.
   */
  takenSeconds?: number;
  /**
   * The API server's requests on Deployment resources from the kill until its share was
   * reconciled, by verb (the sharder's label patches, and what the new owners wrote beside
   * them); absent in older series.
   */
  kubeRequestsByVerb?: Record<string, number>;
  reownedSeconds: number;
  reconciledSeconds: number;
  /**
   * Kill → every resource in a live replica's cache again (the survivors' `dms_shard_resources`
   * summed reach N: the heirs' second watch of the victim's share, or their own after the
   * labels), each queued for its reconcile on arrival; absent in older series.
   */
  heldSeconds?: number;
  /**
   * Kill → held ({@link heldSeconds}) and every survivor's deployment queue empty with no
   * reconcile running: the victim's share reconciled by its heirs, whether or not its labels
   * followed yet; the goal's figure (absent in older series).
   */
  heirsReconciledSeconds?: number;
  /**
   * Kill → the service's PATCH for each of {@link EDITS_PER_KILL} edits made to the victim's
   * resources at the kill (spread over its share): the slowest, the median, and how many were
   * measured; absent in older series. The goal's figure: its share reconciled again for a change.
   */
  editPatchedSeconds?: { max: number; median: number; edits: number };
}

/** Edits made to the killed replica's resources at each kill, spread over its share. */
const EDITS_PER_KILL = 10;

/** The replica holding the leader election Lease (its holder identity is `<pod name>_<suffix>`). */
async function leaderOf(client: KubeClient): Promise<string | undefined> {
  const lease = (await client.request({
    method: "GET",
    path: `/apis/coordination.k8s.io/v1/namespaces/${NS}/leases/dms-operator-leader`,
  })) as { spec?: { holderIdentity?: string } };
  const holder = lease.spec?.holderIdentity ?? "";
  return holder.includes("_") ? holder.slice(0, holder.lastIndexOf("_")) : undefined;
}

/**
 * Kills -9 the leader (`leader`) or a replica that is not, and measures until its share is
 * labelled for the survivors as the ring says and reconciled by them.
 */
/** Writes `<prefix>-leader.heapsnapshot` and `<prefix>-member.heapsnapshot` into `dir`. */
async function snapshotHeaps(
  client: KubeClient,
  running: Map<string, RunningOperator>,
  dir: string,
  prefix: string,
): Promise<void> {
  await mkdir(dir, { recursive: true });
  const lead = await leaderOf(client);
  const other = [...running.keys()].find((r) => r !== lead);
  for (const [role, replica] of [
    ["leader", lead],
    ["member", other],
  ] as const) {
    const op = running.get(replica ?? "");
    if (!op) continue;
    const inspector = await Inspector.connect(op.inspectPort);
    try {
      await inspector.heapSnapshot(join(dir, `${prefix}-${role}.heapsnapshot`));
    } finally {
      inspector.close();
    }
    progress(`heap snapshot of the ${role} (${replica}) in ${dir}`);
  }
}

/**
 * Starts one more replica; resolves the seconds until every resource is owned as the ring says,
 * until the first was labelled for the new replica (undefined: none moved to it), and until the
 * new replica held its share and reconciled it ({@link untilNewcomerDone}).
 */
async function joinOne(
  client: KubeClient,
  tap: Tap,
  start: () => Promise<string>,
  watch: ReadyWatch,
  running: Map<string, RunningOperator>,
  label: string,
  /** With `--profile`: where a CPU profile of the new replica through the join is written. */
  profileTo?: string,
): Promise<{
  seconds: number;
  firstSeconds: number | undefined;
  heldSeconds: number | undefined;
  reconciledSeconds: number | undefined;
  editPatchedSeconds: { max: number; median: number; edits: number };
}> {
  const startedAt = performance.now();
  const replica = await start();
  const given = await shareGiven(client, watch, running, replica);
  const expected = given.length;
  const newcomer = running.get(replica);
  const done = newcomer ? untilNewcomerDone(newcomer, expected, startedAt) : Promise.resolve(undefined);
  // Edits to the share moving to the newcomer, made as it starts (spread over that share).
  const step = Math.max(1, Math.floor(given.length / EDITS_PER_KILL));
  const edits = given.filter((_, i) => i % step === 0).slice(0, EDITS_PER_KILL);
  const ids = edits.flatMap((o) => (o.status?.deploymentId ? [o.status.deploymentId.toLowerCase()] : []));
  for (const id of ids) tap.patches.delete(id);
  await pool(edits.length, 4, (i) => editImage(client, edits[i]?.metadata.name ?? "", startedAt + 1));
  const patched = untilPatched(tap, ids, startedAt);
  const port = running.get(replica)?.inspectPort ?? 0;
  const inspector = profileTo !== undefined && port > 0 ? await Inspector.connectWhenUp(port) : undefined;
  await inspector?.startCpuProfile();
  let firstSeconds: number | undefined;
  let owning = true;
  const first = (async () => {
    while (owning && firstSeconds === undefined) {
      if (watch.list().some((o) => o.metadata.labels?.[OWNER_LABEL] === replica))
        firstSeconds = round((performance.now() - startedAt) / 1000, 1);
      else await sleep(100);
    }
  })();
  try {
    await untilOwned(client, watch, running, SETTLE_LIMIT_MS);
    if (inspector && profileTo !== undefined) {
      await inspector.stopCpuProfile(profileTo);
      progress(`${label}: a CPU profile of ${replica} through the join in ${profileTo}`);
    }
  } finally {
    owning = false;
    await first;
    inspector?.close();
  }
  const seconds = round((performance.now() - startedAt) / 1000, 1);
  const held = await done;
  const editPatchedSeconds = await patched;
  progress(
    `${label}: every resource owned as the ring says after ${seconds} s (the first labelled for it after ${firstSeconds} s); the newcomer held its share of ${expected} after ${held?.heldSeconds} s and had reconciled it after ${held?.reconciledSeconds} s; edits to that share made at its start PATCHed ${JSON.stringify(editPatchedSeconds)} s`,
  );
  return {
    seconds,
    firstSeconds,
    heldSeconds: held?.heldSeconds,
    reconciledSeconds: held?.reconciledSeconds,
    editPatchedSeconds,
  };
}

/** The resources the ring over the running replicas gives `replica` (the leader's share smaller). */
async function shareGiven(
  client: KubeClient,
  watch: ReadyWatch,
  running: Map<string, RunningOperator>,
  replica: string,
): Promise<DeploymentObject[]> {
  const seed = await readInstallKey(client, NS, AbortSignal.timeout(10_000));
  const choices = new RingChoices(seed);
  choices.use([...running.keys()].sort(), await leaderOf(client));
  return watch.list().filter((o) => choices.desired({ claim: claimOf(o) }) === replica);
}

/**
 * Seconds from `since` until the newcomer's cache holds the `expected` resources the ring gives it
 * (`held`), and then until its deployment queue is empty with no reconcile running
 * (`reconciled`). Read every 250 ms from its own metrics; undefined when not within
 * {@link SETTLE_LIMIT_MS}.
 */
async function untilNewcomerDone(
  op: RunningOperator,
  expected: number,
  since: number,
): Promise<{ heldSeconds: number; reconciledSeconds: number } | undefined> {
  let heldSeconds: number | undefined;
  while (performance.now() - since < SETTLE_LIMIT_MS) {
    const samples = await op.samples(HEIR_FAMILIES).catch(() => []);
    const seconds = round((performance.now() - since) / 1000, 1);
    const held = sumOf(samples.filter((s) => s.name === "dms_shard_resources"));
    if (heldSeconds === undefined && expected > 0 && held >= expected) heldSeconds = seconds;
    const busy = sumOf(
      samples.filter((s) => s.name !== "dms_shard_resources"),
      (labels) => labels.name === "deployment" || labels.controller === "deployment",
    );
    if (heldSeconds !== undefined && busy === 0) return { heldSeconds, reconciledSeconds: seconds };
    await sleep(250);
  }
  return undefined;
}

async function killOne(
  client: KubeClient,
  tap: Tap,
  running: Map<string, RunningOperator>,
  leader: boolean,
  watch: ReadyWatch,
  label: string,
  apiMetrics: () => Promise<Parameters<typeof apiRequestDelta>[0]>,
): Promise<KillFigures> {
  const lead = await leaderOf(client);
  const victim = leader ? lead : [...running.keys()].find((r) => r !== lead);
  const victimOp = running.get(victim ?? "");
  if (!victim || !victimOp) throw new Error(`no replica to kill (the leader is ${lead ?? "unknown"})`);
  const owned = shareOf(watch.list()).get(victim) ?? 0;
  const reconcilesBefore = await sumReconciles(running, victim);
  const requestsBefore = await apiMetrics();
  const edited = watch.list().filter((o) => o.metadata.labels?.[OWNER_LABEL] === victim);
  const step = Math.max(1, Math.floor(edited.length / EDITS_PER_KILL));
  const edits = edited.filter((_, i) => i % step === 0).slice(0, EDITS_PER_KILL);
  const ids = edits.flatMap((o) => (o.status?.deploymentId ? [o.status.deploymentId.toLowerCase()] : []));
  for (const id of ids) tap.patches.delete(id);
  const killedAt = performance.now();
  process.kill(-victimOp.process.pid, "SIGKILL");
  running.delete(victim);
  await pool(edits.length, 4, (i) => editImage(client, edits[i]?.metadata.name ?? "", killedAt));
  const patched = untilPatched(tap, ids, killedAt);
  const taken = untilTaken(client, victim, killedAt);
  const heirs = untilHeirsDone(running, watch.list().length, killedAt);
  await untilOwned(client, watch, running, SETTLE_LIMIT_MS);
  const reownedSeconds = (performance.now() - killedAt) / 1000;
  const takenSeconds = await taken;
  for (;;) {
    if ((await sumReconciles(running)) >= reconcilesBefore + owned) break;
    if (performance.now() - killedAt > SETTLE_LIMIT_MS)
      throw new Error(`the killed replica's resources were not reconciled in ${SETTLE_LIMIT_MS / 1000} s`);
    await sleep(250);
  }
  const reconciledSeconds = (performance.now() - killedAt) / 1000;
  const editPatchedSeconds = await patched;
  const { heldSeconds, heirsReconciledSeconds } = await heirs;
  const requests = apiRequestDelta(requestsBefore, await apiMetrics(), "dms.dev", "deployments").byVerb;
  await victimOp.process.stop(1_000);
  progress(
    `${label}: Lease taken ${takenSeconds} s, held by live replicas ${heldSeconds} s, reconciled by its heirs ${heirsReconciledSeconds} s, re-owned ${reownedSeconds.toFixed(1)} s (${round(owned / Math.max(0.1, reownedSeconds - takenSeconds), 1)} relabelled/s), reconciled ${reconciledSeconds.toFixed(1)} s, edits PATCHed ${JSON.stringify(editPatchedSeconds)} s after a kill -9 of ${leader ? "the leader" : "a member"} (${victim}, ${owned} resources); Kubernetes requests on deployments.dms.dev by verb ${JSON.stringify(requests)}`,
  );
  return {
    replica: victim,
    share: owned,
    takenSeconds,
    kubeRequestsByVerb: requests,
    reownedSeconds: round(reownedSeconds, 1),
    reconciledSeconds: round(reconciledSeconds, 1),
    heldSeconds,
    heirsReconciledSeconds,
    editPatchedSeconds,
  };
}

/** The families {@link untilHeirsDone} reads of each survivor. */
const HEIR_FAMILIES = ["dms_shard_resources", "workqueue_depth", "controller_runtime_active_workers"];

/**
 * Seconds from `since` until the survivors' caches hold all `n` resources (`held`), and then until
 * each survivor's deployment queue is empty with no reconcile running (`heirsReconciled`): the
 * inherited share reconciled, its labels followed or not. Read every 250 ms from the survivors'
 * own metrics (a scrape of those families only).
 */
async function untilHeirsDone(
  running: Map<string, RunningOperator>,
  n: number,
  since: number,
): Promise<{ heldSeconds: number; heirsReconciledSeconds: number }> {
  let heldSeconds: number | undefined;
  for (;;) {
    const samples = (await Promise.all([...running.values()].map((op) => op.samples(HEIR_FAMILIES)))).flat();
    const seconds = round((performance.now() - since) / 1000, 1);
    const held = sumOf(samples.filter((s) => s.name === "dms_shard_resources"));
    if (heldSeconds === undefined && held >= n) heldSeconds = seconds;
    const busy = sumOf(
      samples.filter((s) => s.name !== "dms_shard_resources"),
      (labels) => labels.name === "deployment" || labels.controller === "deployment",
    );
    if (heldSeconds !== undefined && busy === 0) return { heldSeconds, heirsReconciledSeconds: seconds };
    if (performance.now() - since > SETTLE_LIMIT_MS)
      throw new Error(`the survivors held ${held} of ${n} resources after ${SETTLE_LIMIT_MS / 1000} s`);
    await sleep(250);
  }
}

/** A new image for the resource `name` (its deployment then needs a PATCH); `tag` makes it new. */
async function editImage(client: KubeClient, name: string, tag: number): Promise<void> {
  await client.request({
    method: "PATCH",
    path: `${collectionPath(DEPLOYMENTS, NS)}/${encodeURIComponent(name)}`,
    contentType: "application/merge-patch+json",
    body: { spec: { sourceRevisionConfig: { imageUri: `registry.example.com/${name}:${Math.round(tag)}` } } },
  });
}

/** Seconds from `since` until the simulator saw a PATCH of every deployment of `ids`. */
async function untilPatched(
  tap: Tap,
  ids: readonly string[],
  since: number,
): Promise<{ max: number; median: number; edits: number }> {
  for (;;) {
    const at = ids.map((id) => tap.patches.get(id));
    if (at.every((t) => t !== undefined)) {
      const seconds = at.map((t) => round(((t ?? since) - since) / 1000, 1)).sort((a, b) => a - b);
      return {
        max: seconds.at(-1) ?? 0,
        median: seconds[Math.floor(seconds.length / 2)] ?? 0,
        edits: ids.length,
      };
    }
    if (performance.now() - since > SETTLE_LIMIT_MS)
      return { max: Number.NaN, median: Number.NaN, edits: ids.length };
    await sleep(100);
  }
}

/** Seconds from `since` until the ring Lease of `replica` is held by a sharder or deleted. */
async function untilTaken(client: KubeClient, replica: string, since: number): Promise<number> {
  for (;;) {
    const lease = (await client
      .request({ method: "GET", path: `/apis/coordination.k8s.io/v1/namespaces/${NS}/leases/${replica}` })
      .catch(() => undefined)) as { spec?: { holderIdentity?: string } } | undefined;
    const holder = lease?.spec?.holderIdentity ?? "";
    if (lease === undefined || holder.startsWith(SHARDER_HOLDER_PREFIX))
      return round((performance.now() - since) / 1000, 1);
    if (performance.now() - since > SETTLE_LIMIT_MS) return Number.NaN;
    await sleep(100);
  }
}

/**
 * Per replica, its calls on /v2/deployments by kind and the second (after `started`) of its last
 * create, from the calls tapped since the start.
 */
export function createsByReplica(
  calls: readonly TappedCall[],
  started: number,
): Record<string, { calls: Record<string, number>; lastCreateSeconds: number }> {
  const out: Record<string, { calls: Record<string, number>; lastCreateSeconds: number }> = {};
  for (const call of calls) {
    if (call.kind === undefined) continue;
    const own = out[call.replica] ?? { calls: {}, lastCreateSeconds: 0 };
    out[call.replica] = own;
    own.calls[call.kind] = (own.calls[call.kind] ?? 0) + 1;
    if (call.kind === "create")
      own.lastCreateSeconds = Math.max(own.lastCreateSeconds, round((call.at - started) / 1000, 1));
  }
  return out;
}

/**
 * The service's calls on /v2/deployments from all replicas together, from `started` on: their
 * average rate, and the highest count in any window of 1 s and of 10 s (a window starting at each
 * call), as calls per second. The connection's `--qps` is a token bucket split between the
 * replicas, so a 10-s window may hold `--qps` × 10 and the burst at most.
 */
export function serviceRate(
  calls: readonly TappedCall[],
  started: number,
  ended: number,
): { average: number; peak1s: number; peak10s: number } {
  const at = calls
    .filter((c) => c.kind !== undefined && c.at >= started && c.at <= ended)
    .map((c) => c.at)
    .sort((a, b) => a - b);
  const peak = (windowMs: number) => {
    let most = 0;
    for (let first = 0, last = 0; first < at.length; first++) {
      while (last < at.length && (at[last] ?? 0) < (at[first] ?? 0) + windowMs) last++;
      most = Math.max(most, last - first);
    }
    return round(most / (windowMs / 1000), 1);
  };
  const seconds = (ended - started) / 1000;
  return {
    average: seconds > 0 ? round(at.length / seconds, 1) : 0,
    peak1s: peak(1_000),
    peak10s: peak(10_000),
  };
}

function ownersOf(objects: readonly DeploymentObject[]): Map<string, string | undefined> {
  return new Map(objects.map((o) => [o.metadata.name, o.metadata.labels?.[OWNER_LABEL]]));
}

function shareOf(objects: readonly DeploymentObject[]): Map<string, number> {
  const shares = new Map<string, number>();
  for (const owner of ownersOf(objects).values()) if (owner) shares.set(owner, (shares.get(owner) ?? 0) + 1);
  return shares;
}

/**
 * Waits until every resource is labelled for the replica the ring over the running replicas
 * names, the leader's share made smaller (as the sharder notes it: {@link RingChoices}).
 */
async function untilOwned(
  client: KubeClient,
  watch: ReadyWatch,
  running: Map<string, RunningOperator>,
  timeoutMs: number,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  // The ring is keyed with the install key of the replicas' namespace (read before they join).
  let choices: RingChoices | undefined;
  // The ring's choice for each claim, noted once per membership as the sharder notes it: hashing
  // every claim once per member at each look took the benchmark ~0.5 CPU-s a look at 30,000 on
  // the machine the replicas and the API server share.
  const claims = new Map<string, { readonly claim: string; ringChoice?: RingChoice }>();
  for (;;) {
    for (const op of running.values()) op.process.assertRunning();
    if (choices === undefined) {
      const seed = await readInstallKey(client, NS, AbortSignal.timeout(10_000)).catch(() => undefined);
      if (seed !== undefined) choices = new RingChoices(seed);
    }
    const ring = choices;
    let pending = watch.list().length;
    if (ring !== undefined) {
      ring.use([...running.keys()].sort(), await leaderOf(client));
      pending = 0;
      for (const o of watch.list()) {
        const claim = claimOf(o);
        let record = claims.get(claim);
        if (record === undefined) {
          record = { claim };
          claims.set(claim, record);
        }
        if (o.metadata.labels?.[OWNER_LABEL] !== ring.desired(record)) pending++;
      }
    }
    if (pending === 0) return;
    if (Date.now() > deadline)
      throw new Error(`${pending} resources not owned as the ring says after ${timeoutMs / 1000} s`);
    await sleep(250);
  }
}

/** Waits until no resource is polled (see {@link pollIndexer}); resolves the seconds it took. */
async function untilSettled(
  watch: ReadyWatch,
  running: Map<string, RunningOperator>,
  timeoutMs: number,
): Promise<number> {
  const started = performance.now();
  for (;;) {
    for (const op of running.values()) op.process.assertRunning();
    const polled = watch.list().filter((o) => pollIndexer(o).length > 0).length;
    if (polled === 0) return round((performance.now() - started) / 1000, 1);
    if (performance.now() - started > timeoutMs)
      throw new Error(`${polled} resources still polled ${timeoutMs / 1000} s after adoption`);
    await sleep(500);
  }
}

async function sumReconciles(running: Map<string, RunningOperator>, except?: string): Promise<number> {
  let sum = 0;
  for (const [replica, op] of running) if (replica !== except) sum += await op.reconciles();
  return sum;
}

/** Adds `figures` to docs/bench/replicas.json under `label`; returns the path written. */
export function saveReplicas(label: string, figures: ReplicaFigures): string[] {
  const previous = existsSync(JSON_PATH)
    ? (JSON.parse(readFileSync(JSON_PATH, "utf8")) as {
        series?: Record<string, Record<string, ReplicaFigures>>;
      })
    : undefined;
  const series = previous?.series ?? {};
  series[label] = { ...series[label], [`${figures.replicas}x${figures.n}`]: figures };
  mkdirSync(DOCS, { recursive: true });
  writeFileSync(
    JSON_PATH,
    `${JSON.stringify(
      {
        benchmark: "scale --replicas",
        machine: {
          platform: `${platform()}-${arch()}`,
          cpu: cpus()[0]?.model ?? "unknown",
          cpus: cpus().length,
        },
        series,
      },
      null,
      2,
    )}\n`,
  );
  return [JSON_PATH];
}

/** The largest peak RSS of a run's replicas, MiB: what a memory limit for each must hold. */
const largestPeak = (f: ReplicaFigures) => Math.max(...f.rssMiB.map((r) => r.peak));

/**
 * The leader's replica in the steady phase: the one killed later as the leader (the member's
 * kill before it leaves the leader in place); else the one with the smallest share (the ring
 * gives the leader's replica less).
 */
export function steadyLeader(f: ReplicaFigures): string {
  const killed = f.kill.leader?.replica;
  if (killed !== undefined && f.rssMiB.some((r) => r.replica === killed)) return killed;
  return [...f.rssMiB].sort((a, b) => a.share - b.share)[0]?.replica ?? "";
}

/**
 * `scale --replicas R --repeat K`: K cold runs as one. The leader's replica holds another share
 * and the sharder's store, so the RSS figures are combined by role, not by name (which replica
 * leads differs between runs): the leader's peak and steady RSS over the runs, and the members'
 * over every member of every run, each as its median with min–max, beside the largest peak of each
 * run; a goal on the peak of each replica is then held by a number rather than a lucky run. Every
 * other figure, `rssMiB` included, is one real run's: the run whose largest peak is the median.
 */
export function ofReplicaRepeats(runs: readonly ReplicaFigures[]): ReplicaFigures {
  const first = runs[0];
  if (first === undefined) throw new Error("no runs to combine");
  if (runs.length === 1) return first;
  const byPeak = [...runs].sort((a, b) => largestPeak(a) - largestPeak(b));
  const middle = byPeak[Math.floor((byPeak.length - 1) / 2)] as ReplicaFigures;
  const byRole = (figure: "peak" | "steady", leader: boolean) =>
    spreadOf(
      runs.flatMap((f, i) => {
        const lead = steadyLeader(f);
        return f.rssMiB
          .filter((r) => (r.replica === lead) === leader)
          .map((r) => [leader ? `${i + 1}` : `${i + 1} ${r.replica}`, r[figure]] as const);
      }),
    );
  return {
    ...middle,
    repeats: {
      runs: runs.length,
      peakMiB: {
        leader: byRole("peak", true),
        members: byRole("peak", false),
        largest: spreadOf(runs.map((f, i) => [`${i + 1}`, largestPeak(f)] as const)),
      },
      steadyMiB: { leader: byRole("steady", true), members: byRole("steady", false) },
      each: runs.map((f) => ({ leader: steadyLeader(f), rssMiB: f.rssMiB, loadAverage: f.loadAverage })),
    },
  };
}

/** A run's RSS figure in the table: each replica's; with repeats, by role as median (min–max). */
function rssCell(f: ReplicaFigures, figure: "peak" | "steady"): string {
  const repeats = f.repeats;
  if (repeats === undefined) return f.rssMiB.map((r) => r[figure]).join(" / ");
  const spread = figure === "peak" ? repeats.peakMiB : repeats.steadyMiB;
  const cell = (s: Spread) => `${s.median} (${s.min}–${s.max})`;
  return `leader ${cell(spread.leader)}; members ${cell(spread.members)} (${repeats.runs} runs)`;
}

/** The figures as a table, one row per replica run. */
export function replicasTable(results: readonly ReplicaFigures[]) {
  return {
    head: [
      "R × N",
      "adoption s",
      "peak RSS MiB (each; with --repeat, medians (min–max) by role)",
      "steady RSS MiB (each)",
      "calls / resync, all replicas (goal ⌈N/100⌉ + 2 each)",
      "kube req / resource / resync",
      "kill -9 of a member; of the leader: reconciled by its heirs s / edits PATCHed s (max) / labels followed s",
      "join: moved (ideal), edits to its share PATCHed s (max) / the newcomer's share reconciled by it s / labels followed s; replacing the killed member: the same",
    ],
    rows: results.map((f) => [
      `${f.replicas} × ${f.n}`,
      f.adoptionSeconds,
      rssCell(f, "peak"),
      rssCell(f, "steady"),
      `${f.resync.serviceCallsPerResync ?? f.resync.serviceCalls} (${f.resync.serviceCallsGoal ?? callsGoal(f.n, f.replicas)})`,
      f.resync.kubeRequestsPerResource,
      `${killCell(f.kill)}${f.kill.leader ? `; leader ${killCell(f.kill.leader)}` : ""}`,
      `${f.join.share} (${f.join.ideal})${f.join.seconds !== undefined ? `, ${f.join.editPatchedSeconds?.max ?? "–"} / ${f.join.reconciledSeconds ?? "–"} / ${f.join.seconds} s; ${f.join.replaceEditPatchedSeconds?.max ?? "–"} / ${f.join.replaceReconciledSeconds ?? "–"} / ${f.join.replaceSeconds} s` : ""}`,
    ]),
  };
}

/**
 * A kill's figures in the table: reconciled by its heirs / the slowest edit's PATCH / labels
 * followed (`–` where an older series did not measure one).
 */
function killCell(k: KillFigures): string {
  return `${k.heirsReconciledSeconds ?? "–"} / ${k.editPatchedSeconds?.max ?? "–"} / ${k.reownedSeconds}`;
}
