/**
 * The scale benchmark's slow-connection case (`npm run bench -- scale --n 10000 --slow-beside
 * 200`): does one slow connection change a healthy connection's resync pass? The compiled operator
 * runs over every namespace (as the cluster-wide install does), with two tenants, each a namespace
 * with its own ServiceConnection and simulator (`tenancy.ts`):
 *
 * - `beside-healthy`: N resources, adopted (applied before the operator starts, their deployments
 *   seeded on its service, which answers at once);
 * - `beside-slow`: none at first, then the fairness benchmark's slow tenant (`slow-tenant.ts`):
 *   `--slow-beside` resources whose builds never finish, then its service slowed (single reads
 *   after 9.9 s, batched lookups by id failing at once).
 *
 * Measured twice, as the single-namespace case measures its pass (`resyncPass`): one resync pass
 * of the healthy connection alone, then one with the slow connection beside it (20 s after it was
 * slowed): the pass's seconds (its listing's first call to its last reconcile), its calls to its
 * own service (goal ⌈N/100⌉+1), and the ratio of the two durations. Only the healthy connection's
 * reconciles are counted: its steady reconciles end `success`, the slow tenant's never do (a
 * rollout in progress is requeued, a failed read retried), and `reconciles` says how many were
 * counted. The operator's CPU seconds over the pass include the slow tenant's work beside it.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { arch, cpus, loadavg, platform, tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { DEPLOYMENTS } from "../../src/kube/custom-resources.ts";
import { collectionPath } from "../../src/kube/object.ts";
import { startSimulator } from "../../src/simulator/server.ts";
import { ControlPlane } from "../controlplane/harness.ts";
import { type BenchTable, benchSeedDeployment } from "./harness.ts";
import {
  APPLY_CONCURRENCY,
  planeClient,
  pool,
  progress,
  ReadyWatch,
  type RunningOperator,
  resyncPass,
  round,
  type Setup,
  startOperator,
  Tap,
} from "./operator-run.ts";
import { benchTenant, DAY_MS, SETTLE_MS, slowDown, waitingGauge } from "./slow-tenant.ts";
import { createTenant, resourceBody, untilConnectionsReady } from "./tenancy.ts";

const HEALTHY = "beside-healthy";
const SLOW = "beside-slow";
const JSON_PATH = join(import.meta.dirname, "..", "..", "docs", "bench", "slow-beside.json");

/** `--slow-beside`: the slow connection's resources, a whole number from 1 to 10,000. */
export function parseSlowBeside(text: string): number {
  const count = Number(text.trim());
  if (!Number.isInteger(count) || count < 1 || count > 10_000)
    throw new Error(
      `--slow-beside: '${text}' is not a number of the slow connection's resources from 1 to 10000 (e.g. --slow-beside 200)`,
    );
  return count;
}

/** One pass of the healthy connection. */
interface PassFigures {
  seconds: number;
  reconciles: number;
  serviceCalls: number;
  serviceCallsGoal: number;
  cpuSeconds: number;
  overlapped: boolean;
}

/** What one `--slow-beside` run measured. */
export interface SlowBesideFigures {
  n: number;
  slowResources: number;
  date: string;
  commit: string;
  loadAverage: { start: number; end: number };
  operatorFlags: string[];
  adoptionSeconds: number;
  alone: PassFigures;
  beside: PassFigures;
  /** The pass beside the slow connection ÷ the pass alone. */
  ratio: number;
  /** At the end: `dms_connection_waiting_reconciles`, and the slow service's calls during the pass. */
  waitingReconciles: Record<string, number>;
  slowCalls: Record<string, Record<string, number>>;
}

const healthyName = (i: number) => `h-${String(i).padStart(5, "0")}`;

/** Measures a healthy connection's pass at N alone and beside `slowCount` slow resources. */
export async function measureSlowBeside(
  n: number,
  slowCount: number,
  setup: Setup,
): Promise<SlowBesideFigures> {
  const loadAtStart = loadavg()[0] ?? 0;
  const tap = new Tap();
  const plane = await ControlPlane.start();
  const work = mkdtempSync(join(tmpdir(), "dms-slow-beside-"));
  const defaultSim = await startSimulator({});
  const seed = Array.from({ length: n }, (_, i) => benchSeedDeployment(healthyName(i)));
  const healthy = await benchTenant(0, HEALTHY, 0, tap.hook, seed);
  const slow = await benchTenant(1, SLOW, DAY_MS);
  let running: RunningOperator | undefined;
  try {
    await plane.installCrds();
    const { client, apiMetrics } = await planeClient(plane, "dms-slow-beside-bench");
    for (const t of [healthy, slow]) await createTenant(client, t);
    await pool(n, APPLY_CONCURRENCY, (i) =>
      client.request({
        method: "POST",
        path: collectionPath(DEPLOYMENTS, HEALTHY),
        body: resourceBody(healthyName(i)),
      }),
    );
    progress(`N=${n}: ${n} healthy resources applied; starting the operator`);
    const watch = new ReadyWatch(client, HEALTHY);
    await watch.start();
    const started = performance.now();
    running = await startOperator(setup, plane.kubeconfigPath, undefined, defaultSim.url, work);
    const operator = running;
    await operator.ready();
    await untilConnectionsReady(client, 2, operator);
    await watch.untilReady(n, operator.process, Math.max(600_000, n * 200));
    await watch.stop();
    const adoptionSeconds = (performance.now() - started) / 1000;
    progress(`N=${n}: adopted in ${round(adoptionSeconds, 1)} s; a pass alone`);

    const counted = {
      counters: () => healthy.sim.counters(),
      resetCounters: () => healthy.sim.resetCounters(),
    };
    const pass = async () => {
      const measured = await resyncPass(n, operator, counted, tap, apiMetrics, setup.resync, undefined, () =>
        operator.reconciles("success"),
      );
      const f = measured.figures;
      return {
        seconds: f.seconds,
        reconciles: f.reconciles,
        serviceCalls: f.serviceCalls,
        serviceCallsGoal: f.serviceCallsGoal,
        cpuSeconds: f.cpuSeconds,
        overlapped: f.overlapped,
      };
    };
    const alone = await pass();
    progress(
      `N=${n}: alone: pass ${alone.seconds} s, ${alone.serviceCalls} calls; now ${slowCount} slow resources`,
    );

    await slowDown(client, slow, slowCount, operator);
    await sleep(SETTLE_MS);
    slow.sim.resetCounters();
    const beside = await pass();
    progress(`N=${n}: beside the slow connection: pass ${beside.seconds} s, ${beside.serviceCalls} calls`);
    return {
      n,
      slowResources: slowCount,
      date: new Date().toISOString(),
      commit: setup.commit,
      loadAverage: { start: round(loadAtStart, 1), end: round(loadavg()[0] ?? 0, 1) },
      operatorFlags: operator.flags,
      adoptionSeconds: round(adoptionSeconds, 1),
      alone,
      beside,
      ratio: round(beside.seconds / Math.max(alone.seconds, 0.001), 2),
      waitingReconciles: await waitingGauge(operator),
      slowCalls: slow.sim.counters(),
    };
  } finally {
    await running?.process.stop(30_000);
    for (const s of [defaultSim, healthy.sim, slow.sim]) await s.close();
    await plane.stop();
    rmSync(work, { recursive: true, force: true });
  }
}

/** Adds the run to `docs/bench/slow-beside.json` (its runs, oldest first); returns the path. */
export function saveSlowBeside(figures: SlowBesideFigures): string {
  const previous = existsSync(JSON_PATH)
    ? (JSON.parse(readFileSync(JSON_PATH, "utf8")) as { runs: SlowBesideFigures[] })
    : undefined;
  const report = {
    benchmark: "scale --slow-beside",
    machine: { platform: `${platform()}-${arch()}`, cpu: cpus()[0]?.model ?? "unknown", cpus: cpus().length },
    runs: [...(previous?.runs ?? []), figures],
  };
  writeFileSync(JSON_PATH, `${JSON.stringify(report, null, 2)}\n`);
  return JSON_PATH;
}

/** The runs' table: each N's pass alone and beside the slow connection. */
export function slowBesideTable(runs: readonly SlowBesideFigures[]): BenchTable {
  const pass = (p: PassFigures) =>
    `${p.seconds} s, ${p.serviceCalls} calls (goal ${p.serviceCallsGoal})${p.overlapped ? ", overlapped" : ""}`;
  return {
    head: ["N", "slow resources", "pass alone", "pass beside the slow connection", "ratio", "load"],
    rows: runs.map((r) => [
      r.n,
      r.slowResources,
      pass(r.alone),
      pass(r.beside),
      r.ratio,
      `${r.loadAverage.start} → ${r.loadAverage.end}`,
    ]),
  };
}
