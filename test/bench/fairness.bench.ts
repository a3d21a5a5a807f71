/**
 * `npm run bench -- fairness`: what one tenant's slow service costs another tenant. The compiled
 * operator runs over every namespace of a real API server (as the cluster-wide install does), with
 * two tenants, each a namespace with its own ServiceConnection and simulator:
 *
 * - `fair-healthy`: 20 resources (`--edits`) on a service that answers at once;
 * - `fair-slow`: none at first, then 200 (`--slow`) whose builds never finish (every rollout stays
 *   in progress, so each resource is polled every `--poll-interval`), spread over
 *   `--slow-connections` ServiceConnections of its namespace (default 1; with 4, a namespace that
 *   multiplies its connections to take more of the workers: they share its one cap).
 *
 * Measured, three times, is the healthy tenant's edit → PATCH: its resources edited one by one (the
 * next edit once the previous edit's PATCH reached its service), from the edit's answer to the
 * PATCH's arrival:
 *
 * 1. `idle`: the slow tenant has no resource;
 * 2. `slow service`: its 200 resources in progress, its service failing batched lookups by id
 *    (`deployment_ids` with several ids: 500 at once) and answering a single lookup or a revision
 *    read after 9.9 s (the simulator's `latency`/`errors` faults narrowed by `ids`);
 * 3. `qps lower bound`: its service answering at once again, but its connections' `spec.qps` at
 *    their lower bound (0.001, `burst: 1`).
 *
 * The goal of each loaded phase: p50 and max at most 1.5 × the idle phase's + 100 ms. Figures are
 * reported, never asserted. The operator's `dms_connection_waiting_reconciles` and the slow
 * tenant's `Synced` reasons are read at the end of each phase.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { type KubeClient, PatchType } from "../../src/kube/client.ts";
import { DEPLOYMENTS } from "../../src/kube/custom-resources.ts";
import { collectionPath } from "../../src/kube/object.ts";
import { startSimulator } from "../../src/simulator/server.ts";
import { ControlPlane } from "../controlplane/harness.ts";
import { type Benchmark, benchDeploymentSpec, quantile } from "./harness.ts";
import {
  APPLY_CONCURRENCY,
  CACHE,
  commitOf,
  compileOperator,
  LOGS,
  manifestRuntimeEnv,
  planeClient,
  pool,
  progress,
  ReadyWatch,
  type RunningOperator,
  round,
  startOperator,
  Tap,
} from "./operator-run.ts";
import { benchTenant, DAY_MS, SETTLE_MS, slowDown, waitingGauge } from "./slow-tenant.ts";
import {
  connectionNames,
  createTenant,
  resourceBody,
  type Tenant,
  untilConnectionsReady,
} from "./tenancy.ts";

/** Longest an edit may wait for its PATCH before it counts as never patched. */
const EDIT_TIMEOUT_MS = 180_000;
/** Longest the benchmark waits, after a loaded phase's edits, for the slow tenant to be reported. */
const REPORT_WAIT_MS = 120_000;
/** Longest one phase may take: the edits left then count as never patched. */
const PHASE_BUDGET_MS = 300_000;
const HEALTHY = "fair-healthy";
const SLOW = "fair-slow";

/** One phase's edit → PATCH figures, in ms. */
interface PhaseFigures {
  phase: string;
  edits: number;
  patched: number;
  p50Ms: number;
  maxMs: number;
  /** 1.5 × the idle phase's + 100 ms (the idle phase: none). */
  goalMs?: { p50: number; max: number };
  met?: boolean;
  /** `dms_connection_waiting_reconciles` at the phase's end, per connection label. */
  waitingReconciles: Record<string, number>;
  /** The slow tenant's resources by `Synced` status/reason at the phase's end. */
  slowSynced: Record<string, number>;
  /** Calls the slow tenant's service answered during the phase, by route and status. */
  slowCalls: Record<string, Record<string, number>>;
  /**
   * Seconds from the slow tenant's start (faults set, qps lowered) until one of its resources
   * said `WaitingForConnectionShare`, and until 90 % did at once (the others are in a reconcile,
   * which writes their own status); null: not within {@link REPORT_WAIT_MS}.
   */
  reported?: { firstSeconds: number | null; mostSeconds: number | null };
}

export const benchmark: Benchmark = {
  name: "fairness",
  description:
    "one tenant's slow service (or its connection at the lowest qps) beside a healthy tenant: the healthy tenant's edit → PATCH, idle vs loaded (goal: ≤ 1.5 × idle + 100 ms)",
  options: {
    edits: { description: "resources of the healthy tenant, each edited once per phase", default: "20" },
    slow: { description: "resources of the slow tenant, every rollout in progress", default: "200" },
    "slow-connections": {
      description: "ServiceConnections of the slow tenant's namespace, its resources spread over them",
      default: "1",
    },
    "operator-flags": {
      description: "extra flags for the operator, comma-separated (e.g. --max-reconciles-per-connection=16)",
    },
  },
  async run({ args }) {
    const edits = positive(args.edits ?? "20", "--edits");
    const slowCount = positive(args.slow ?? "200", "--slow");
    const slowConnections = positive(args["slow-connections"] ?? "1", "--slow-connections");
    const extraFlags = (args["operator-flags"] ?? "").split(",").filter((f) => f.length > 0);
    const dist = join(CACHE, `dist-${process.pid}`);
    const commit = commitOf();
    const entry = compileOperator(dist);
    try {
      const phases = await measure(
        entry,
        commit,
        edits,
        { count: slowCount, connections: slowConnections },
        extraFlags,
      );
      return {
        rows: [],
        table: {
          head: [
            "phase",
            "edits",
            "patched",
            "p50 ms",
            "max ms",
            "goal p50/max ms",
            "met",
            "waiting",
            "reported s",
          ],
          rows: phases.map((p) => [
            p.phase,
            p.edits,
            p.patched,
            p.p50Ms,
            p.maxMs,
            p.goalMs ? `${p.goalMs.p50}/${p.goalMs.max}` : "",
            p.met === undefined ? "" : p.met ? "yes" : "no",
            JSON.stringify(p.waitingReconciles),
            p.reported ? `${p.reported.firstSeconds ?? "-"}/${p.reported.mostSeconds ?? "-"}` : "",
          ]),
        },
        details: {
          commit,
          edits,
          slowResources: slowCount,
          slowConnections,
          operatorFlags: extraFlags,
          phases,
        },
      };
    } finally {
      rmSync(dist, { recursive: true, force: true });
    }
  },
};

function positive(text: string, flag: string): number {
  const n = Number(text.trim());
  if (!Number.isInteger(n) || n < 1) throw new Error(`${flag}: '${text}' is not a positive integer`);
  return n;
}

async function measure(
  entry: string,
  commit: string,
  edits: number,
  slowTenant: { count: number; connections: number },
  extraFlags: readonly string[],
): Promise<PhaseFigures[]> {
  const { count: slowCount, connections: slowConnections } = slowTenant;
  const runtimeEnv = manifestRuntimeEnv();
  const tap = new Tap();
  const plane = await ControlPlane.start();
  const work = mkdtempSync(join(tmpdir(), "dms-fairness-"));
  const defaultSim = await startSimulator({ onRequest: tap.hook });
  const healthy = await benchTenant(0, HEALTHY, 0, tap.hook);
  const slow = await benchTenant(1, SLOW, DAY_MS, tap.hook);
  let running: RunningOperator | undefined;
  try {
    await plane.installCrds();
    const { client } = await planeClient(plane, "dms-fairness-bench");
    await createTenant(client, healthy);
    await createTenant(client, slow, slowConnections);
    running = await startOperator(
      {
        entry,
        logs: join(LOGS, "fairness"),
        nodeOptions: runtimeEnv.NODE_OPTIONS,
        runtimeEnv,
        resync: "10m",
        commit,
      },
      plane.kubeconfigPath,
      undefined,
      defaultSim.url,
      work,
      extraFlags,
    );
    const operator = running;
    await operator.ready();
    await untilConnectionsReady(client, 1 + slowConnections, operator);
    const names = Array.from({ length: edits }, (_, i) => `healthy-${String(i).padStart(3, "0")}`);
    await pool(edits, APPLY_CONCURRENCY, (i) =>
      client.request({
        method: "POST",
        path: collectionPath(DEPLOYMENTS, HEALTHY),
        body: resourceBody(names[i] as string),
      }),
    );
    const watch = new ReadyWatch(client, HEALTHY);
    await watch.start();
    await watch.untilReady(edits, operator.process, 120_000);
    await watch.stop();
    progress(`fairness: ${edits} healthy resources Ready`);

    const phases: PhaseFigures[] = [];
    const phase = async (label: string, image: number, loadedAt?: number) => {
      slow.sim.resetCounters();
      const figures = await editOneByOne(client, healthy, names, tap, operator, image);
      const reported =
        loadedAt === undefined ? undefined : await untilReported(client, slowCount, loadedAt, operator);
      const idle = phases[0];
      const goalMs = idle
        ? { p50: round(1.5 * idle.p50Ms + 100, 1), max: round(1.5 * idle.maxMs + 100, 1) }
        : undefined;
      const done: PhaseFigures = {
        phase: label,
        ...figures,
        ...(goalMs
          ? {
              goalMs,
              met: figures.patched === edits && figures.p50Ms <= goalMs.p50 && figures.maxMs <= goalMs.max,
            }
          : {}),
        waitingReconciles: await waitingGauge(operator),
        slowSynced: await syncedReasons(client, SLOW),
        slowCalls: slow.sim.counters(),
        ...(reported ? { reported } : {}),
      };
      phases.push(done);
      progress(
        `fairness: ${label}: p50 ${done.p50Ms} ms, max ${done.maxMs} ms, ${done.patched}/${edits} patched; slow tenant ${JSON.stringify(done.slowSynced)}`,
      );
    };

    await phase("idle", 2);

    // The slow tenant's resources, created while its service is fast; their builds never finish.
    await slowDown(client, slow, slowCount, operator, slowConnections);
    progress(`fairness: ${slowCount} slow resources created, rollouts in progress; their service slowed`);
    const slowedAt = performance.now();
    await sleep(SETTLE_MS);
    await phase("slow service", 3, slowedAt);

    slow.sim.faults.clear();
    for (const connection of connectionNames(slowConnections))
      await client.request({
        method: "PATCH",
        path: `/apis/dms.dev/v1alpha1/namespaces/${SLOW}/serviceconnections/${connection}`,
        contentType: PatchType.Merge,
        body: { spec: { qps: 0.001, burst: 1 } },
      });
    const loweredAt = performance.now();
    await sleep(SETTLE_MS);
    await phase("qps lower bound", 4, loweredAt);
    return phases;
  } finally {
    await running?.process.stop(30_000);
    for (const s of [defaultSim, healthy.sim, slow.sim]) await s.close();
    await plane.stop();
    rmSync(work, { recursive: true, force: true });
  }
}

/** Edits each resource's image in turn, the next once the previous one's PATCH arrived. */
async function editOneByOne(
  client: KubeClient,
  tenant: Tenant,
  names: readonly string[],
  tap: Tap,
  operator: RunningOperator,
  image: number,
): Promise<{ edits: number; patched: number; p50Ms: number; maxMs: number }> {
  tap.reset();
  const latencies: number[] = [];
  const budget = performance.now() + PHASE_BUDGET_MS;
  for (const name of names) {
    if (performance.now() > budget) break;
    const id = tenant.sim.store.getByName(name)?.id.toLowerCase();
    if (id === undefined) throw new Error(`${name} has no deployment on its service`);
    await client.request({
      method: "PATCH",
      path: `${collectionPath(DEPLOYMENTS, tenant.namespace)}/${name}`,
      contentType: PatchType.Merge,
      body: {
        spec: {
          sourceRevisionConfig: { imageUri: benchDeploymentSpec(name, image).sourceRevisionConfig?.imageUri },
        },
      },
    });
    const sent = performance.now();
    const deadline = Math.min(budget, sent + EDIT_TIMEOUT_MS);
    while (!tap.patches.has(id) && performance.now() < deadline) {
      operator.process.assertRunning();
      await sleep(10);
    }
    const at = tap.patches.get(id);
    if (at !== undefined) latencies.push(at - sent);
    await sleep(200);
  }
  const sorted = Float64Array.from(latencies).sort();
  return {
    edits: names.length,
    patched: sorted.length,
    p50Ms: round(quantile(sorted, 0.5), 1),
    maxMs: round(sorted[sorted.length - 1] ?? 0, 1),
  };
}

/**
 * Waits until the slow tenant's resources say `WaitingForConnectionShare` (90 % of `count` at once,
 * or {@link REPORT_WAIT_MS}); the seconds since `since` until the first and until 90 % did.
 */
async function untilReported(
  client: KubeClient,
  count: number,
  since: number,
  operator: RunningOperator,
): Promise<{ firstSeconds: number | null; mostSeconds: number | null }> {
  const deadline = performance.now() + REPORT_WAIT_MS;
  let first: number | null = null;
  for (;;) {
    operator.process.assertRunning();
    const waiting = (await syncedReasons(client, SLOW))["False/WaitingForConnectionShare"] ?? 0;
    const now = performance.now();
    if (waiting > 0 && first === null) first = round((now - since) / 1000, 1);
    if (waiting >= 0.9 * count) return { firstSeconds: first, mostSeconds: round((now - since) / 1000, 1) };
    if (now > deadline) return { firstSeconds: first, mostSeconds: null };
    await sleep(1_000);
  }
}

/** The slow tenant's resources by `Synced` status/reason. */
async function syncedReasons(client: KubeClient, namespace: string): Promise<Record<string, number>> {
  const list = (await client.request({ method: "GET", path: collectionPath(DEPLOYMENTS, namespace) })) as {
    items: Array<{ status?: { conditions?: Array<{ type: string; status: string; reason?: string }> } }>;
  };
  const out: Record<string, number> = {};
  for (const o of list.items) {
    const c = o.status?.conditions?.find((x) => x.type === "Synced");
    const key = c === undefined ? "none" : `${c.status}/${c.reason ?? ""}`;
    out[key] = (out[key] ?? 0) + 1;
  }
  return out;
}
