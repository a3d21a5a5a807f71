/**
 * The operator's /metrics with a series in every family, tenant text in the one label that takes
 * it as is, and a reader of Prometheus's text format (0.0.4) as strict as the scraper, for the
 * tests of the exposition (test/unit/metrics-exposition.test.ts, and promtool's reading of it in
 * test/tools/metrics-exposition.test.ts).
 */
import type { KubeConnections } from "../../src/kube/connections.ts";
import type { KubeDeployments } from "../../src/kube/custom-resources.ts";
import { RuntimeMetrics } from "../../src/runtime/metrics.ts";
import { HealthServer } from "../../src/serving/health.ts";
import { shardMetrics } from "../../src/sharding/metrics.ts";
import { externalChangeCounter, registerCacheMetrics } from "../../src/wiring/operator-metrics.ts";

/**
 * A value a tenant's service answers for `deployment.status` (a ServiceConnection names any
 * service): a quote, a newline, a backslash, a carriage return, a lone surrogate at the cut.
 */
export const TENANT_VALUE = `x"\n\\y\r${"z".repeat(57)}\ud83d\ude00`;

/** The operator's metrics, each family with series: reconciles, calls, connections, resources, shards. */
export function populatedMetrics(): RuntimeMetrics {
  const metrics = new RuntimeMetrics();
  const hooks = metrics.controllerHooks("deployment");
  for (const seconds of [0.004, 0.02, 0.3, 7, 90]) hooks.reconciled?.("success", seconds);
  hooks.errored?.(false);
  hooks.activeWorkers?.(2);
  hooks.maxConcurrent?.(16);
  const queue = hooks.queue;
  queue?.depth?.(3);
  queue?.added?.();
  queue?.queueLatency?.(0.5);
  queue?.workDuration?.(2);
  hooks.observeInFlight?.(() => ({ unfinishedSeconds: 1, longestSeconds: 1 }));
  hooks.observeWaiting?.(() => new Map([["ServiceConnection/team-a/prod", 2]]));
  for (const status of [200, 429, 599, "error"] as const)
    metrics.recordServiceCall({ method: "get", route: "/v2/deployments/{id}", status, seconds: 0.2 });
  metrics.unknownValues
    .counter("ServiceConnection/team-a/prod")
    .record({ field: "deployment.status", value: TENANT_VALUE });
  metrics.recordUnreadable();
  metrics.setLeader("dms-operator-leader", true);
  const connection = {
    metadata: { name: "prod", namespace: "team-a" },
    status: { conditions: [{ type: "Ready", status: "True", reason: "Connected" }] },
  };
  const resource = {
    metadata: { name: "agent", namespace: "team-a" },
    spec: {},
    status: { conditions: [{ type: "Stalled", status: "True", reason: "RevisionFailed" }] },
  };
  const kubeConnections = { all: [{ list: () => [connection] }] } as unknown as KubeConnections;
  const served = { refusals: () => new Map([["default", 1]]), bound: { overLimit: () => undefined } };
  registerCacheMetrics(
    metrics,
    { list: () => [resource] } as unknown as KubeDeployments,
    kubeConnections,
    served,
  );
  externalChangeCounter(metrics, kubeConnections, served)("ServiceConnection/team-a/prod", "revision");
  shardMetrics(
    metrics.registry,
    "replica-0",
    { owned: () => 1, ringMembers: () => 1, mayWrite: () => true },
    true,
  );
  return metrics;
}

/** `/metrics` of `metrics` as Prometheus scrapes it (and `?name=` of `names` when given). */
export async function scrape(metrics: RuntimeMetrics, names: readonly string[] = []): Promise<Buffer> {
  const server = new HealthServer({
    metricsBindAddress: "127.0.0.1:0",
    probeBindAddress: "127.0.0.1:0",
    registry: metrics.registry,
  });
  try {
    const { metrics: url } = await server.listen();
    const query = names.map((n) => `name=${encodeURIComponent(n)}`).join("&");
    const res = await fetch(`${url}/metrics${query ? `?${query}` : ""}`);
    if (res.status !== 200) throw new Error(`/metrics answered ${res.status}`);
    return Buffer.from(await res.arrayBuffer());
  } finally {
    await server.close();
  }
}

/** A family of a scrape: its type, help and samples (label values unescaped). */
export interface Family {
  type: string;
  help: string;
  samples: { name: string; labels: Record<string, string>; value: number }[];
}

const NAME = "[a-zA-Z_:][a-zA-Z0-9_:]*";
const LABEL = "[a-zA-Z_][a-zA-Z0-9_]*";
const SAMPLE = new RegExp(`^(${NAME})(?:\\{((?:${LABEL}="(?:[^"\\\\\\n]|\\\\[\\\\"n])*",?)*)\\})? (\\S+)$`);

/**
 * Reads `text` as the scraper does, throwing at the first line it would reject: valid UTF-8, a
 * HELP and a TYPE at most once per family and before its samples, a family's samples together,
 * label values escaped (`\\`, `\"`, `\n` only), a float value (as Go reads one).
 */
export function readExposition(body: Buffer): Map<string, Family> {
  const text = new TextDecoder("utf-8", { fatal: true }).decode(body);
  const families = new Map<string, Family>();
  const told = new Set<string>();
  let current: string | undefined;
  const lines = text.split("\n");
  if (lines.pop() !== "") throw new Error("the text does not end in a newline");
  for (const [i, line] of lines.entries()) {
    const fail = (why: string) => new Error(`line ${i + 1}: ${why}: ${JSON.stringify(line)}`);
    const meta = /^# (HELP|TYPE) (\S+) ?(.*)$/.exec(line);
    let name: string;
    if (meta) [, , name = ""] = meta;
    else if (line === "" || line.startsWith("#")) continue;
    else {
      const sample = /^[a-zA-Z_:][a-zA-Z0-9_:]*/.exec(line)?.[0] ?? "";
      const base = sample.replace(/_(bucket|sum|count)$/, "");
      name = families.has(sample) || !families.has(base) ? sample : base;
    }
    if (current !== name && families.has(name)) throw fail("a family's lines apart");
    current = name;
    const f = families.get(name) ?? { type: "untyped", help: "", samples: [] };
    families.set(name, f);
    if (meta) {
      const [, kind = "", , rest = ""] = meta;
      if (told.has(`${kind} ${name}`)) throw fail(`a second ${kind}`);
      if (f.samples.length > 0) throw fail(`a ${kind} after the family's samples`);
      told.add(`${kind} ${name}`);
      if (kind === "TYPE") f.type = rest;
      else f.help = rest;
      continue;
    }
    const m = SAMPLE.exec(line);
    if (!m) throw fail("not a sample");
    const [, sampleName = "", labelText = "", valueText = ""] = m;
    const labels: Record<string, string> = {};
    for (const l of labelText.matchAll(new RegExp(`(${LABEL})="((?:[^"\\\\]|\\\\.)*)"`, "g"))) {
      const [, key = "", raw = ""] = l;
      if (key in labels) throw fail(`label ${key} twice`);
      labels[key] = raw.replace(/\\(.)/g, (_, c: string) => (c === "n" ? "\n" : c));
    }
    // Go's strconv.ParseFloat, as the scraper: NaN and Inf in any case (prom-client writes `Nan`).
    const value = Number(valueText.replace(/^([+-]?)inf(inity)?$/i, "$1Infinity"));
    if (Number.isNaN(value) && !/^nan$/i.test(valueText)) throw fail("not a number");
    f.samples.push({ name: sampleName, labels, value });
  }
  return families;
}
