/**
 * What the dashboard's and the alerts' PromQL read, and what a scrape of the operator exports:
 * the two sides of the check that no panel or alert names a series the operator does not export.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { Registry } from "prom-client";
import { parse } from "yaml";
import type { KubeConnections } from "../../src/kube/connections.ts";
import type { KubeDeployments } from "../../src/kube/custom-resources.ts";
import { RuntimeMetrics } from "../../src/runtime/metrics.ts";
import { shardMetrics } from "../../src/sharding/metrics.ts";
import { externalChangeCounter, registerCacheMetrics } from "../../src/wiring/operator-metrics.ts";

const CHART_FILES = join(import.meta.dirname, "..", "..", "charts", "dms-operator", "files");

/** The dashboard's file: one source, shipped by the chart (metrics.dashboard.enabled). */
export const DASHBOARD_FILE = join(CHART_FILES, "grafana-dashboard.json");

/** The alerts' rule file: one source, rendered by the chart and copied by manifests/components/alerts. */
export const ALERT_RULES_FILE = join(CHART_FILES, "alerts", "prometheus-rules.yaml");

/** Series Prometheus makes itself for every target, which no scrape of the operator contains. */
export const PROMETHEUS_OWN_SERIES = new Set(["up"]);

const PROMQL_WORDS = new Set(
  "sum max min avg count vector rate irate increase histogram_quantile by without on ignoring group_left group_right and or unless label_values topk bottomk absent bool".split(
    " ",
  ),
);

/** The metric names a PromQL expression (or Grafana query) reads. */
export function metricNames(expr: string): string[] {
  const stripped = expr
    .replace(/"[^"]*"/g, "") // label values
    .replace(/\{[^}]*\}/g, "") // label matchers
    .replace(/\[[^\]]*\]/g, "") // range durations
    .replace(/\b(by|without|on|ignoring)\s*\([^)]*\)/g, "") // grouping labels
    .replace(/label_values\(([^,)]+),[^)]*\)/g, "$1") // Grafana's label_values(metric, label)
    .replace(/\b\d+(\.\d+)?(e[+-]?\d+)?\b/g, ""); // numbers (0.95, 1e3)
  return (stripped.match(/[a-zA-Z_:][a-zA-Z0-9_:]*/g) ?? []).filter((t) => !PROMQL_WORDS.has(t));
}

/** A query of the dashboard or an alert's expression, and where it is. */
export interface NamedQuery {
  where: string;
  expr: string;
  /** Labels of the query's result read outside it: a panel's legend, an alert's annotations. */
  shown?: string[];
}

interface Dashboard {
  panels: { title: string; targets?: { expr: string; legendFormat?: string }[] }[];
  templating: { list: { query?: unknown }[] };
}

/** The dashboard, parsed. */
export function dashboard(): Dashboard {
  return JSON.parse(readFileSync(DASHBOARD_FILE, "utf8")) as Dashboard;
}

/** Every query of the dashboard: its panels' targets and its query variables. */
export function dashboardQueries(): NamedQuery[] {
  const d = dashboard();
  return [
    ...d.panels.flatMap((p) =>
      (p.targets ?? []).map((t) => ({
        where: `panel "${p.title}"`,
        expr: t.expr,
        shown: [...(t.legendFormat ?? "").matchAll(/\{\{\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\}\}/g)].map(
          (m) => m[1] ?? "",
        ),
      })),
    ),
    ...d.templating.list
      .filter((v) => typeof v.query === "string" && v.query !== "prometheus")
      .map((v) => ({ where: "templating", expr: v.query as string })),
  ];
}

/** A rule of the alerts' file. */
export interface AlertRule {
  alert: string;
  expr: string;
  for?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}

/** The alerts' groups as the rule file has them. */
export function alertGroups(): { name: string; rules: AlertRule[] }[] {
  return (parse(readFileSync(ALERT_RULES_FILE, "utf8")) as { groups: { name: string; rules: AlertRule[] }[] })
    .groups;
}

/** Every alert's expression. */
export function alertQueries(): NamedQuery[] {
  return alertGroups().flatMap((g) =>
    g.rules.map((r) => ({
      where: `alert ${r.alert}`,
      expr: r.expr,
      shown: Object.values(r.annotations ?? {}).flatMap((text) =>
        [...text.matchAll(/\$labels\.([a-zA-Z_][a-zA-Z0-9_]*)/g)].map((m) => m[1] ?? ""),
      ),
    })),
  );
}

/**
 * The labels of each series name of a scrape in Prometheus's text format (a histogram's `_bucket`
 * with `le`). Label values are read as the format escapes them (`\\`, `\"`, `\n`).
 */
export function scrapedLabels(text: string): Map<string, Set<string>> {
  const labels = new Map<string, Set<string>>();
  for (const line of text.split("\n")) {
    if (line === "" || line.startsWith("#")) continue;
    const name = /^[a-zA-Z_:][a-zA-Z0-9_:]*/.exec(line)?.[0];
    if (!name) continue;
    const own = labels.get(name) ?? new Set<string>();
    labels.set(name, own);
    for (const m of line.slice(name.length).matchAll(/[{,]\s*([a-zA-Z_][a-zA-Z0-9_]*)="(?:[^"\\]|\\.)*"/g))
      own.add(m[1] ?? "");
  }
  return labels;
}

/**
 * Labels Prometheus puts on every series of a target it scrapes through a ServiceMonitor (the
 * target's own and the Kubernetes discovery's), which no scrape of the operator contains.
 */
export const TARGET_LABELS = new Set([
  "job",
  "instance",
  "namespace",
  "pod",
  "service",
  "container",
  "endpoint",
]);

/**
 * The label names a PromQL expression reads: grouping (`by`, `without`), matching (`on`,
 * `ignoring`, `group_left`, `group_right`), matchers (`{name="…"}`) and Grafana's
 * `label_values(metric, label)`.
 */
export function labelNamesOf(expr: string): string[] {
  const names: string[] = [];
  const noValues = expr.replace(/"(?:[^"\\]|\\.)*"/g, '""');
  for (const m of noValues.matchAll(/\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)/g))
    names.push(...(m[1] ?? "").split(",").map((l) => l.trim()));
  for (const m of noValues.matchAll(/\{([^}]*)\}/g))
    for (const matcher of (m[1] ?? "").split(","))
      names.push(/^\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)/.exec(matcher)?.[1] ?? "");
  for (const m of noValues.matchAll(/label_values\([^,)]+,\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\)/g))
    names.push(m[1] ?? "");
  return [...new Set(names.filter((n) => n !== ""))];
}

/**
 * `where: label` for each label a query reads (in its expression, or shown by its legend or
 * annotations) that none of the metrics it reads has in `exported` (nor Prometheus's target
 * labels): a grouping by a label the series lack makes one group of them all, a matcher on one
 * matches nothing.
 */
export function unknownLabels(queries: NamedQuery[], exported: Map<string, Set<string>>): string[] {
  return queries.flatMap((q) => {
    const known = new Set(TARGET_LABELS);
    for (const name of metricNames(q.expr)) for (const label of exported.get(name) ?? []) known.add(label);
    return [...new Set([...labelNamesOf(q.expr), ...(q.shown ?? [])])]
      .filter((label) => !known.has(label))
      .map((label) => `${q.where}: ${label}`);
  });
}

/** `where: name` for each metric a query names that `exported` lacks (Prometheus's own aside). */
export function unknownSeries(queries: NamedQuery[], exported: Set<string>): string[] {
  return queries.flatMap((q) =>
    metricNames(q.expr)
      .filter((name) => !exported.has(name) && !PROMETHEUS_OWN_SERIES.has(name))
      .map((name) => `${q.where}: ${name}`),
  );
}

/**
 * The labels of each series name `registry` can export, whether or not it holds a series yet: its
 * metrics' label names (a histogram's as `_bucket` with `le`, `_sum` and `_count`).
 */
export function registryLabels(registry: Registry): Map<string, Set<string>> {
  const labels = new Map<string, Set<string>>();
  for (const metric of registry.getMetricsAsArray()) {
    // prom-client's metric objects: each has its label names (not in its types).
    const { name, type, labelNames } = metric as unknown as {
      name: string;
      type: string;
      labelNames: string[];
    };
    const own = new Set(labelNames);
    if (type !== "histogram") labels.set(name, own);
    else {
      labels.set(`${name}_bucket`, new Set([...own, "le"]));
      labels.set(`${name}_sum`, own);
      labels.set(`${name}_count`, own);
    }
  }
  return labels;
}

/**
 * The series only a sharded replica (`run --sharded`) exports, besides every replica's, with
 * their labels: the dashboard and the alerts read one to tell a sharded install's replicas (each
 * counting its own share) from an unsharded one's.
 */
export function shardedReplicaLabels(): Map<string, Set<string>> {
  const registry = new Registry();
  shardMetrics(registry, "replica-0", { owned: () => 0, ringMembers: () => 1, mayWrite: () => true }, true);
  return registryLabels(registry);
}

/**
 * The labels of each series name a scrape of the operator can contain, a sharded replica's
 * included, from the registries the operator builds (with nothing cached: the label names do not
 * depend on the values).
 */
export function operatorLabels(): Map<string, Set<string>> {
  const metrics = new RuntimeMetrics();
  const deployments = { list: () => [] } as unknown as KubeDeployments;
  const kubeConnections = { all: [] } as unknown as KubeConnections;
  const connections = { refusals: () => new Map<string, number>(), bound: { overLimit: () => undefined } };
  registerCacheMetrics(metrics, deployments, kubeConnections, connections);
  externalChangeCounter(metrics, kubeConnections, connections);
  const labels = registryLabels(metrics.registry);
  for (const [name, own] of shardedReplicaLabels()) labels.set(name, own);
  return labels;
}
