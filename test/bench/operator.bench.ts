/**
 * The operator at scale: N = 200 Deployment resources applied at once to a control plane of the
 * benchmark's own, against the simulator (default timing: ready after 3 s), with the operator
 * in-process and wired exactly as `dms-operator run` wires it. Measured per variant:
 *
 * - time from the first apply to every resource Ready, and reconciles per second meanwhile;
 * - service calls per resource during that initial sync (by route in the JSON report);
 * - one full drift resync in steady state: its listing calls (ceil(N/100) pages of data plus
 *   the empty page that proves the end), and the PATCH/POST calls and status writes it caused
 *   (expected: none);
 * - a restart of the operator: the service calls of re-reconciling every resource (expected:
 *   the same single listing).
 *
 * Figures are reported, never asserted.
 */
import { setTimeout as sleep } from "node:timers/promises";
import pino from "pino";
import { runConfigFrom } from "../../src/commands/run-config.ts";
import type { DeploymentResource } from "../../src/crd/schema.ts";
import { KubeClient } from "../../src/kube/client.ts";
import { loadKubeConfig } from "../../src/kube/config.ts";
import { listItems } from "../../src/kube/listing.ts";
import { buildOperator, type Operator } from "../../src/main.ts";
import { startSimulator } from "../../src/simulator/server.ts";
import { ControlPlane } from "../controlplane/harness.ts";
import { type Benchmark, type BenchTable, benchDeploymentBody, callCount } from "./harness.ts";

const N = 200;
const RESYNC = "10s";

/** A configuration to measure: `dms-operator run` flags on top of the defaults. */
interface Variant {
  name: string;
  flags: Record<string, string>;
}

const VARIANTS: Variant[] = [
  { name: "run defaults (concurrency 16, qps 20, poll 5s)", flags: {} },
  {
    name: "concurrency 16, qps 100, poll 1s",
    flags: { concurrency: "16", qps: "100", burst: "200", pollInterval: "1s" },
  },
];

interface Figures {
  variant: string;
  secondsToAllReady: number;
  reconciles: number;
  reconcilesPerSecond: number;
  serviceCallsPerResource: number;
  initialCallsByRoute: Record<string, Record<string, number>>;
  resync: {
    listCalls: number;
    patchCalls: number;
    postCalls: number;
    statusWrites: number;
    reconciles: number;
  };
  restart: { serviceCalls: number; seconds: number };
}

type Resource = DeploymentResource & {
  metadata: { name: string; resourceVersion: string; generation?: number };
};

const total = callCount;

async function until(check: () => Promise<boolean> | boolean, what: string, timeoutMs: number) {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(100);
  }
}

async function reconcileCount(operator: Operator): Promise<number> {
  const metric = await operator.metrics.registry.getSingleMetric("controller_runtime_reconcile_total")?.get();
  return (metric?.values ?? []).reduce((sum, v) => sum + v.value, 0);
}

async function measure(plane: ControlPlane, client: KubeClient, variant: Variant, index: number) {
  const namespace = `bench-operator-${index}`;
  const created = await plane.kubectl(["create", "namespace", namespace]);
  if (created.code !== 0) throw new Error(created.stderr);
  const sim = await startSimulator({});
  const parsed = runConfigFrom(
    {
      baseUrl: sim.url,
      kubeconfig: plane.kubeconfigPath,
      namespaces: namespace,
      resyncPeriod: RESYNC,
      leaderElect: false,
      metricsBindAddress: "0",
      healthProbeBindAddress: "0",
      ...variant.flags,
    },
    {},
  );
  if (!parsed.ok) throw new Error(parsed.problems.join("; "));
  const { logLevel: _, ...config } = parsed.config;
  let operator = buildOperator(config, { logger: pino({ level: "error" }) });
  let stop = new AbortController();
  let running = operator.manager.start(stop.signal);
  const path = `/apis/dms.dev/v1alpha1/namespaces/${namespace}/deployments`;
  const list = async () => listItems(await client.request({ method: "GET", path })) as Resource[];
  try {
    await until(() => operator.controller.running, "the controller", 30_000);
    const started = performance.now();
    const names = Array.from({ length: N }, (_, i) => `agent-${String(i).padStart(3, "0")}`);
    for (let i = 0; i < names.length; i += 20) {
      await Promise.all(
        names
          .slice(i, i + 20)
          .map((name) => client.request({ method: "POST", path, body: benchDeploymentBody(name) })),
      );
    }
    const ready = (o: Resource) =>
      o.status?.observedGeneration === o.metadata.generation &&
      (o.status?.conditions ?? []).some((c) => c.type === "Ready" && c.status === "True");
    await until(async () => (await list()).filter(ready).length === N, "every resource Ready", 300_000);
    const seconds = (performance.now() - started) / 1000;
    const reconciles = await reconcileCount(operator);
    const initial = sim.counters();

    // Steady state: between two resync periods (no reconcile for a while), then one whole period.
    let last = -1;
    let quietSince = Date.now();
    await until(
      async () => {
        const now = await reconcileCount(operator);
        if (now !== last) [last, quietSince] = [now, Date.now()];
        return Date.now() - quietSince >= 1_500;
      },
      "a quiet moment between resyncs",
      60_000,
    );
    const versions = new Map((await list()).map((o) => [o.metadata.name, o.metadata.resourceVersion]));
    sim.resetCounters();
    const before = await reconcileCount(operator);
    await until(async () => (await reconcileCount(operator)) >= before + N, "one resync period", 60_000);
    const during = sim.counters();
    const statusWrites = (await list()).filter(
      (o) => versions.get(o.metadata.name) !== o.metadata.resourceVersion,
    );
    const resyncReconciles = (await reconcileCount(operator)) - before;

    // A restart: a new instance reconciles every resource once.
    stop.abort();
    await running;
    sim.resetCounters();
    const restarted = performance.now();
    operator = buildOperator(config, { logger: pino({ level: "error" }) });
    stop = new AbortController();
    running = operator.manager.start(stop.signal);
    await until(async () => (await reconcileCount(operator)) >= N, "every resource reconciled again", 60_000);
    const restartSeconds = (performance.now() - restarted) / 1000;
    const figures: Figures = {
      variant: variant.name,
      secondsToAllReady: Math.round(seconds * 10) / 10,
      reconciles,
      reconcilesPerSecond: Math.round((reconciles / seconds) * 10) / 10,
      serviceCallsPerResource: Math.round((total(initial) / N) * 100) / 100,
      initialCallsByRoute: initial,
      resync: {
        listCalls: total(during, "GET /v2/deployments"),
        patchCalls: total(during, "PATCH "),
        postCalls: total(during, "POST "),
        statusWrites: statusWrites.length,
        reconciles: resyncReconciles,
      },
      restart: { serviceCalls: total(sim.counters()), seconds: Math.round(restartSeconds * 10) / 10 },
    };
    return figures;
  } finally {
    stop.abort();
    await running.catch(() => {});
    await sim.close();
  }
}

/** See the module comment. */
export const benchmark: Benchmark = {
  name: "operator",
  description: `${N} Deployment resources applied at once: time to Ready, service calls, and the cost of a resync (own control plane, in-process simulator and operator)`,
  async run() {
    const plane = await ControlPlane.start();
    const results: Figures[] = [];
    try {
      await plane.installCrds();
      const client = new KubeClient(loadKubeConfig({ kubeconfig: plane.kubeconfigPath }).config);
      for (const [i, variant] of VARIANTS.entries()) results.push(await measure(plane, client, variant, i));
    } finally {
      await plane.stop();
    }
    const table: BenchTable = {
      head: [
        "variant",
        "s to all Ready",
        "reconciles/s",
        "calls/resource",
        "resync list calls",
        "resync PATCH+POST",
        "resync status writes",
        "restart calls",
      ],
      rows: results.map((r) => [
        r.variant,
        r.secondsToAllReady,
        r.reconcilesPerSecond,
        r.serviceCallsPerResource,
        r.resync.listCalls,
        r.resync.patchCalls + r.resync.postCalls,
        r.resync.statusWrites,
        r.restart.serviceCalls,
      ]),
    };
    return {
      rows: [],
      table,
      details: {
        resources: N,
        resyncPeriod: RESYNC,
        expectedListCallsPerResync: Math.ceil(N / 100) + 1,
        results,
      },
    };
  },
};
