/**
 * The scale benchmark's sharded case (`npm run bench -- scale --replicas 3 --n 6000`): N
 * resources in one namespace on one connection, R compiled operators run as separate processes
 * with `--sharded` (each its own `POD_NAME`, one Lease each, the leader also the sharder).
 * Measured:
 *
 * 1. Start: the N resources applied before any operator runs, the simulator empty (answering
 *    Ready at once); start → every resource created, Ready and labelled for the replica the ring
 *    names (the creates paced by the connection's `--qps`, split between the replicas).
 * 2. Steady: after a quiet moment, each replica's RSS; then over one resync period (every
 *    replica makes its pass within it) the simulator's calls summed over the replicas and the API
 *    server's requests for `deployments.dms.dev` per resource, WATCH excluded.
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
import { arch, cpus, loadavg, platform, tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { parseDuration } from "../../src/duration.ts";
import type { KubeClient } from "../../src/kube/client.ts";
import { DEPLOYMENTS, type DeploymentObject } from "../../src/kube/deployments.ts";
import { collectionPath } from "../../src/kube/reflector.ts";
import { OWNER_LABEL } from "../../src/sharding/labels.ts";
import { ownerOf } from "../../src/sharding/ring.ts";
import { type RunningSimulator, startSimulator } from "../../src/simulator/server.ts";
import { ControlPlane } from "../controlplane/harness.ts";
import { benchDeploymentBody, callCount } from "./harness.ts";
import {
  APPLY_CONCURRENCY,
  planeClient,
  pool,
  progress,
  ReadyWatch,
  type RunningOperator,
  round,
  type Setup,
  startOperator,
} from "./operator-run.ts";
import { apiRequestDelta, memoryMiB } from "./probes.ts";

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
  /** Per replica, in start order. */
  rssMiB: Array<{ replica: string; share: number; peak: number; steady: number }>;
  resync: {
    periodSeconds: number;
    serviceCalls: number;
    serviceCallsByRoute: Record<string, Record<string, number>>;
    kubeRequests: number;
    kubeRequestsPerResource: number;
  };
  /** A member's kill; `leader`: the leader's (absent in series measured before it was). */
  kill: KillFigures & { leader?: KillFigures };
  join: { from: number; to: number; moved: number; share: number; ideal: number };
}

/** Parses `--replicas`: a whole number from 2 to 8. */
export function parseReplicas(text: string): number {
  const r = Number(text);
  if (!Number.isInteger(r) || r < 2 || r > 8)
    throw new Error(`--replicas: '${text}' is not a whole number from 2 to 8`);
  return r;
}

const name = (i: number) => `shard-${String(i).padStart(5, "0")}`;

/** See the module comment. */
export async function measureReplicas(replicas: number, n: number, setup: Setup): Promise<ReplicaFigures> {
  const loadAtStart = loadavg()[0] ?? 0;
  const periodMs = parseDuration(setup.resync);
  if (periodMs === undefined) throw new Error(`--resync-period: '${setup.resync}' is not a duration`);
  const plane = await ControlPlane.start();
  const work = mkdtempSync(join(tmpdir(), "dms-replicas-"));
  const running = new Map<string, RunningOperator>();
  let sim: RunningSimulator | undefined;
  try {
    await plane.installCrds();
    const { client, apiMetrics } = await planeClient(plane, "dms-replicas-bench");
    await client.request({ method: "POST", path: "/api/v1/namespaces", body: { metadata: { name: NS } } });
    await pool(n, APPLY_CONCURRENCY, (i) =>
      client.request({
        method: "POST",
        path: collectionPath(DEPLOYMENTS, NS),
        body: benchDeploymentBody(name(i)),
      }),
    );
    progress(`R=${replicas} N=${n}: applied; starting the replicas`);
    const simulator = await startSimulator({ timing: { readyAfterMs: 0, revisionActiveAfterMs: 0 } });
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
        ["--leader-elect", "--sharded", `--leader-election-namespace=${NS}`],
        replica,
      );
      running.set(replica, op);
      return replica;
    };
    const watch = new ReadyWatch(client, NS);
    await watch.start();
    const started = performance.now();
    for (let i = 0; i < replicas; i++) await start();
    const first = [...running.values()][0];
    if (!first) throw new Error("no replica");
    await watch.untilReady(n, first.process, Math.max(600_000, n * 200));
    await untilOwned(watch, [...running.keys()], running, 600_000);
    const adoptionSeconds = (performance.now() - started) / 1000;
    progress(`R=${replicas} N=${n}: adopted in ${adoptionSeconds.toFixed(1)} s`);

    // 2. Steady: one resync period, every replica's pass in it.
    await sleep(10_000);
    const steady = new Map([...running].map(([r, op]) => [r, memoryMiB(op.process.pid).rss]));
    const before = await apiMetrics();
    simulator.resetCounters();
    await sleep(periodMs);
    const after = await apiMetrics();
    const calls = simulator.counters();
    const kube = apiRequestDelta(before, after, "dms.dev", "deployments");
    const shares = shareOf(watch.list());
    const rssMiB = [...running].map(([replica, op]) => ({
      replica,
      share: shares.get(replica) ?? 0,
      peak: round(memoryMiB(op.process.pid).peak, 1),
      steady: round(steady.get(replica) ?? 0, 1),
    }));
    progress(`R=${replicas} N=${n}: steady ${JSON.stringify(rssMiB)}; ${callCount(calls)} calls per resync`);

    // 3. Kill -9 of a replica that is only a member, then (back to R) of the leader, the sharder.
    const label = `R=${replicas} N=${n}`;
    const member = await killOne(client, running, false, watch, label);
    await start();
    await untilOwned(watch, [...running.keys()], running, 300_000);
    const kill = { ...member, leader: await killOne(client, running, true, watch, label) };

    // 4. Back to R, then R → R+1.
    await start();
    await untilOwned(watch, [...running.keys()], running, 300_000);
    const ownersBefore = ownersOf(watch.list());
    await start();
    await untilOwned(watch, [...running.keys()], running, 300_000);
    const ownersAfter = ownersOf(watch.list());
    let moved = 0;
    for (const [resource, owner] of ownersAfter) if (ownersBefore.get(resource) !== owner) moved += 1;
    await watch.stop();
    const figures: ReplicaFigures = {
      replicas,
      n,
      date: new Date().toISOString(),
      commit: setup.commit,
      loadAverage: { start: round(loadAtStart, 1), end: round(loadavg()[0] ?? 0, 1) },
      adoptionSeconds: round(adoptionSeconds, 1),
      rssMiB,
      resync: {
        periodSeconds: periodMs / 1000,
        serviceCalls: callCount(calls),
        serviceCallsByRoute: calls,
        kubeRequests: kube.target,
        kubeRequestsPerResource: round(kube.target / n, 4),
      },
      kill,
      join: {
        from: replicas,
        to: replicas + 1,
        moved,
        share: round(moved / n, 3),
        ideal: round(1 / (replicas + 1), 3),
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
  reownedSeconds: number;
  reconciledSeconds: number;
}

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
async function killOne(
  client: KubeClient,
  running: Map<string, RunningOperator>,
  leader: boolean,
  watch: ReadyWatch,
  label: string,
): Promise<KillFigures> {
  const lead = await leaderOf(client);
  const victim = leader ? lead : [...running.keys()].find((r) => r !== lead);
  const victimOp = running.get(victim ?? "");
  if (!victim || !victimOp) throw new Error(`no replica to kill (the leader is ${lead ?? "unknown"})`);
  const owned = shareOf(watch.list()).get(victim) ?? 0;
  const reconcilesBefore = await sumReconciles(running, victim);
  const killedAt = performance.now();
  process.kill(-victimOp.process.pid, "SIGKILL");
  running.delete(victim);
  await untilOwned(watch, [...running.keys()], running, 300_000);
  const reownedSeconds = (performance.now() - killedAt) / 1000;
  for (;;) {
    if ((await sumReconciles(running)) >= reconcilesBefore + owned) break;
    if (performance.now() - killedAt > 300_000)
      throw new Error("the killed replica's resources were not reconciled in 300 s");
    await sleep(250);
  }
  const reconciledSeconds = (performance.now() - killedAt) / 1000;
  await victimOp.process.stop(1_000);
  progress(
    `${label}: re-owned ${reownedSeconds.toFixed(1)} s, reconciled ${reconciledSeconds.toFixed(1)} s after a kill -9 of ${leader ? "the leader" : "a member"} (${victim}, ${owned} resources)`,
  );
  return {
    replica: victim,
    share: owned,
    reownedSeconds: round(reownedSeconds, 1),
    reconciledSeconds: round(reconciledSeconds, 1),
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

/** Waits until every resource is labelled for the replica the ring over `members` names. */
async function untilOwned(
  watch: ReadyWatch,
  members: string[],
  running: Map<string, RunningOperator>,
  timeoutMs: number,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    for (const op of running.values()) op.process.assertRunning();
    const pending = watch
      .list()
      .filter((o) => o.metadata.labels?.[OWNER_LABEL] !== ownerOf(o.metadata.uid ?? "", members)).length;
    if (pending === 0) return;
    if (Date.now() > deadline)
      throw new Error(`${pending} resources not owned as the ring says after ${timeoutMs / 1000} s`);
    await sleep(250);
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

/** The figures as a table, one row per replica run. */
export function replicasTable(results: readonly ReplicaFigures[]) {
  return {
    head: [
      "R × N",
      "adoption s",
      "peak RSS MiB (each)",
      "steady RSS MiB (each)",
      "calls / resync (all)",
      "kube req / resource / resync",
      "kill -9 of a member; of the leader: re-owned s / reconciled s",
      "moved on join (ideal)",
    ],
    rows: results.map((f) => [
      `${f.replicas} × ${f.n}`,
      f.adoptionSeconds,
      f.rssMiB.map((r) => r.peak).join(" / "),
      f.rssMiB.map((r) => r.steady).join(" / "),
      f.resync.serviceCalls,
      f.resync.kubeRequestsPerResource,
      `${f.kill.reownedSeconds} / ${f.kill.reconciledSeconds}${f.kill.leader ? `; leader ${f.kill.leader.reownedSeconds} / ${f.kill.leader.reconciledSeconds}` : ""}`,
      `${f.join.share} (${f.join.ideal})`,
    ]),
  };
}
