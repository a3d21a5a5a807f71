/**
 * What the dashboard's and the alerts' PromQL read, and what a scrape of the operator exports:
 * the two sides of the check that no panel or alert names a series the operator does not export.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { Registry } from "prom-client";
import { parse } from "yaml";
import { shardMetrics } from "../../src/sharding/metrics.ts";

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
}

interface Dashboard {
  panels: { title: string; targets?: { expr: string }[] }[];
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
    ...d.panels.flatMap((p) => (p.targets ?? []).map((t) => ({ where: `panel "${p.title}"`, expr: t.expr }))),
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
  return alertGroups().flatMap((g) => g.rules.map((r) => ({ where: `alert ${r.alert}`, expr: r.expr })));
}

/** The series names of a scrape in Prometheus's text format (histograms as _bucket, _sum, _count). */
export function scrapedNames(text: string): Set<string> {
  const names = new Set<string>();
  for (const line of text.split("\n")) {
    if (line === "" || line.startsWith("#")) continue;
    const match = /^[a-zA-Z_:][a-zA-Z0-9_:]*/.exec(line);
    if (match) names.add(match[0]);
  }
  return names;
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
 * The series only a sharded replica (`run --sharded`) exports, besides every replica's: the
 * dashboard and the alerts read one to tell a sharded install's replicas (each counting its own
 * share) from an unsharded one's.
 */
export async function shardedReplicaSeries(): Promise<Set<string>> {
  const registry = new Registry();
  shardMetrics(registry, "replica-0", { owned: () => 0, ringMembers: () => 1, mayWrite: () => true }, true);
  return new Set((await registry.getMetricsAsJSON()).map((m) => m.name));
}
