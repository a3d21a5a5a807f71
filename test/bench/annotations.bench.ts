/**
 * What a tenant's annotations cost the operator's memory: the compiled operator (as in `scale`,
 * with the runtime variables of `manifests/manager/manager.yaml`) holding N resources that carry
 * nothing but their spec, next to one holding N resources that each carry a large annotation and
 * many labels, against a control plane of the benchmark's own and the simulator. Per variant, in
 * a namespace of its own:
 *
 * 1. an operator starts on the empty namespace (RSS once ready and settled: idle);
 * 2. N resources are created while it runs and reach Ready (they arrive through its watch); RSS
 *    after a settling pause (holding N, watched);
 * 3. that operator stops and a new one starts on the N resources (they arrive in its first list);
 *    RSS after a settling pause (holding N, listed) and that process's peak (VmHWM).
 *
 * Figures are reported, never asserted; the runner writes them to `docs/bench/annotations.json`.
 */
import { rmSync } from "node:fs";
import { loadavg } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import type { KubeClient } from "../../src/kube/client.ts";
import { DEPLOYMENTS } from "../../src/kube/custom-resources.ts";
import { collectionPath } from "../../src/kube/object.ts";
import { startSimulator } from "../../src/simulator/server.ts";
import type { ControlPlane } from "../controlplane/harness.ts";
import { startBenchPlane } from "../support/bench-plane.ts";
import { type Benchmark, benchDeploymentBody } from "./harness.ts";
import {
  APPLY_CONCURRENCY,
  CACHE,
  commitOf,
  compileOperator,
  LOGS,
  manifestRuntimeEnv,
  pool,
  progress,
  ReadyWatch,
  type RunningOperator,
  round,
  type Setup,
  startOperator,
} from "./operator-run.ts";
import { memoryMiB } from "./probes.ts";

/** Pause before each RSS reading, so the collector has run after the last burst of work. */
const SETTLE_MS = 15_000;
/** Labels on each heavy resource (short, as label values must be). */
const LABELS = 200;

/** One variant's figures, MiB. */
interface Figures {
  variant: string;
  annotationKiB: number;
  idle: number;
  watched: number;
  listed: number;
  listedPeak: number;
  watchedPeak: number;
}

/** See the module comment. */
export const benchmark: Benchmark = {
  name: "annotations",
  description:
    "RSS of the compiled operator holding N plain resources next to N resources with a large annotation and many labels each, created while it runs and listed at its start (own control plane, simulator)",
  options: {
    resources: { description: "resources per variant", default: "300" },
    "annotation-kib": { description: "size of the heavy variant's annotation, KiB", default: "200" },
  },
  async run({ args }) {
    const n = positive("resources", args.resources ?? "300");
    const kib = positive("annotation-kib", args["annotation-kib"] ?? "200");
    const dist = join(CACHE, `dist-annotations-${process.pid}`);
    const commit = commitOf();
    const entry = compileOperator(dist);
    const runtimeEnv = manifestRuntimeEnv();
    const loadAtStart = loadavg()[0] ?? 0;
    const { plane, client, work, stop } = await startBenchPlane("annotations");
    const results: Figures[] = [];
    try {
      for (const [variant, annotationKiB] of [
        ["plain", 0],
        ["annotated", kib],
      ] as const) {
        const setup: Setup = {
          entry,
          nodeOptions: runtimeEnv.NODE_OPTIONS,
          runtimeEnv,
          commit,
          resync: "60s",
          logs: join(LOGS, `annotations-${variant}`),
        };
        results.push(await measure(client, plane, setup, work, variant, n, annotationKiB));
      }
    } finally {
      await stop();
      rmSync(dist, { recursive: true, force: true });
    }
    return {
      rows: [],
      table: {
        head: [
          "variant",
          "idle RSS",
          `holding ${n}, watched in`,
          "peak (watched)",
          `holding ${n}, listed at start`,
          "peak (listed)",
        ],
        rows: results.map((r) => [
          r.annotationKiB === 0 ? r.variant : `${r.variant} (${r.annotationKiB} KiB + ${LABELS} labels each)`,
          r.idle,
          r.watched,
          r.watchedPeak,
          r.listed,
          r.listedPeak,
        ]),
      },
      details: {
        commit,
        resources: n,
        labelsPerResource: LABELS,
        runtimeEnv,
        loadAverage: { start: round(loadAtStart, 1), end: round(loadavg()[0] ?? 0, 1) },
        variants: results,
      },
    };
  },
};

function positive(option: string, text: string): number {
  const value = Number(text);
  if (!Number.isInteger(value) || value < 1)
    throw new Error(`--${option}: '${text}' is not a positive integer`);
  return value;
}

async function measure(
  client: KubeClient,
  plane: ControlPlane,
  setup: Setup,
  work: string,
  variant: string,
  n: number,
  annotationKiB: number,
): Promise<Figures> {
  const namespace = `annotations-${variant}`;
  await client.request({
    method: "POST",
    path: "/api/v1/namespaces",
    body: { metadata: { name: namespace } },
  });
  const sim = await startSimulator({ timing: { readyAfterMs: 0, revisionActiveAfterMs: 0 } });
  const watch = new ReadyWatch(client, namespace);
  await watch.start();
  const rss = async (operator: RunningOperator) => {
    await sleep(SETTLE_MS);
    operator.process.assertRunning();
    return memoryMiB(operator.process.pid);
  };
  try {
    const first = await startOperator(setup, plane.kubeconfigPath, namespace, sim.url, work);
    let idle: number;
    let watched: ReturnType<typeof memoryMiB>;
    try {
      await first.ready();
      idle = (await rss(first)).rss;
      progress(`annotations ${variant}: idle ${idle.toFixed(1)} MiB; creating ${n} resources`);
      const blob = "a".repeat(annotationKiB * 1024);
      await pool(n, APPLY_CONCURRENCY, async (i) => {
        const body = benchDeploymentBody(`resource-${String(i).padStart(4, "0")}`);
        if (annotationKiB > 0) {
          const metadata = body.metadata as Record<string, unknown>;
          metadata.annotations = { "example.com/notes": blob };
          metadata.labels = Object.fromEntries(
            Array.from({ length: LABELS }, (_, l) => [`example.com/label-${l}`, `value-${l}`]),
          );
        }
        await client.request({ method: "POST", path: collectionPath(DEPLOYMENTS, namespace), body });
      });
      await watch.untilReady(n, first.process, 600_000);
      watched = await rss(first);
      progress(`annotations ${variant}: holding ${n} (watched in) ${watched.rss.toFixed(1)} MiB`);
    } finally {
      await first.process.stop(30_000);
    }
    const second = await startOperator(setup, plane.kubeconfigPath, namespace, sim.url, work);
    try {
      await second.ready();
      const listed = await rss(second);
      progress(`annotations ${variant}: holding ${n} (listed) ${listed.rss.toFixed(1)} MiB`);
      return {
        variant,
        annotationKiB,
        idle: round(idle, 1),
        watched: round(watched.rss, 1),
        watchedPeak: round(watched.peak, 1),
        listed: round(listed.rss, 1),
        listedPeak: round(listed.peak, 1),
      };
    } finally {
      await second.process.stop(30_000);
    }
  } finally {
    await watch.stop();
    await sim.close();
  }
}
