// The Grafana dashboard (charts/dms-operator/files/grafana-dashboard.json) queries only series
// the operator's registry defines: a renamed metric, or a panel written for a metric that never
// existed, would show "No data" to the user and nothing here (test/integration/metrics-queries.test.ts
// checks the same against a scrape of a running operator). It also covers what an on-call
// engineer looks for first.
import { describe, expect, it } from "vitest";
import { registerConnectionMetrics, registerResourceMetrics } from "../../src/gauges/resource-metrics.ts";
import { RuntimeMetrics } from "../../src/runtime/metrics.ts";
import { STALLED_REASONS } from "../../src/wiring/operator-metrics.ts";
import {
  dashboard,
  dashboardQueries,
  metricNames,
  shardedReplicaSeries,
  unknownSeries,
} from "../support/promql.ts";

/**
 * Series names a scrape of the operator can contain (histograms as _bucket, _sum, _count), a
 * sharded replica's included.
 */
async function exportedSeries(): Promise<Set<string>> {
  const metrics = new RuntimeMetrics();
  registerResourceMetrics(metrics.registry, () => [], { stalledReasons: STALLED_REASONS });
  registerConnectionMetrics(metrics.registry, () => []);
  const names = await shardedReplicaSeries();
  for (const m of await metrics.registry.getMetricsAsJSON()) {
    names.add(m.name);
    if (String(m.type) === "histogram") for (const s of ["_bucket", "_sum", "_count"]) names.add(m.name + s);
  }
  return names;
}

describe("charts/dms-operator/files/grafana-dashboard.json", () => {
  const queries = dashboardQueries();

  it("queries only metrics the operator exports", async () => {
    const unknown = unknownSeries(queries, await exportedSeries());
    expect(queries.length).toBeGreaterThan(8);
    expect(unknown).toEqual([]);
  });

  it("the name extraction finds the metrics of an expression, and only them", () => {
    expect(
      metricNames(
        'histogram_quantile(0.95, sum by (le, route) (rate(dms_service_request_duration_seconds_bucket{job=~"$job"}[$__rate_interval])))',
      ),
    ).toEqual(["dms_service_request_duration_seconds_bucket"]);
    expect(metricNames("max by (state) (dms_rollouts)")).toEqual(["dms_rollouts"]);
    expect(metricNames('absent(up{job="dms-operator-metrics"} == 1)')).toEqual(["up"]);
    expect(
      metricNames(
        'sum by (controller) (rate(controller_runtime_reconcile_errors_total{job="x"}[5m])) / sum by (controller) (rate(controller_runtime_reconcile_total[5m])) > 0.1',
      ),
    ).toEqual(["controller_runtime_reconcile_errors_total", "controller_runtime_reconcile_total"]);
    expect(unknownSeries([{ where: "panel", expr: "rate(dms_no_such_series[5m])" }], new Set())).toEqual([
      "panel: dms_no_such_series",
    ]);
  });

  it("has the panels an operator of the operator needs", () => {
    const titles = dashboard().panels.map((p) => p.title.toLowerCase());
    for (const topic of [
      "reconcile rate",
      "reconcile errors",
      "queue depth",
      "queue latency",
      "service calls by route and status",
      "resources by ready/synced",
      "rollouts in progress, failed and held",
      "resources stalled by reason",
      "longest-held change",
    ])
      expect(
        titles.some((t) => t.includes(topic)),
        topic,
      ).toBe(true);
  });

  it("shows each replica's queue, not the largest one's", () => {
    const exprs = queries.filter((q) => q.where === 'panel "Queue depth"').map((q) => q.expr);
    expect(exprs).toEqual([expect.stringMatching(/^sum by \(pod, name\) \(workqueue_depth\{/)]);
  });
});
