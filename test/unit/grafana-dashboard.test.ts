// The Grafana dashboard (charts/dms-operator/files/grafana-dashboard.json) queries only series
// the operator's registry defines: a renamed metric, or a panel written for a metric that never
// existed, would show "No data" to the user and nothing here (test/integration/metrics-queries.test.ts
// checks the same against a scrape of a running operator). It also covers what an on-call
// engineer looks for first.
import { describe, expect, it } from "vitest";
import {
  dashboard,
  dashboardQueries,
  labelNamesOf,
  metricNames,
  operatorLabels,
  unknownLabels,
  unknownSeries,
} from "../support/promql.ts";

describe("charts/dms-operator/files/grafana-dashboard.json", () => {
  const queries = dashboardQueries();

  it("queries only metrics the operator exports", async () => {
    const unknown = unknownSeries(queries, new Set(operatorLabels().keys()));
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

  it("groups, matches and shows only labels the series it queries have", async () => {
    const read = queries.flatMap((q) => [...labelNamesOf(q.expr), ...(q.shown ?? [])]);
    // The extraction finds the labels the panels group and name their lines by.
    for (const label of [
      "result",
      "name",
      "le",
      "route",
      "status",
      "ready",
      "synced",
      "state",
      "connection",
      "reason",
    ])
      expect(read).toContain(label);
    expect(unknownLabels(queries, operatorLabels())).toEqual([]);
  });

  it("the label extraction finds the labels of an expression, its legend's, and only them", async () => {
    expect(
      labelNamesOf(
        'sum by (namespace, job, ready) (dms_resources{job=~"$job", synced!="a,b=c"}) and on (job, instance) dms_shard_lease_held',
      ),
    ).toEqual(["namespace", "job", "ready", "instance", "synced"]);
    expect(labelNamesOf("label_values(controller_runtime_reconcile_total, job)")).toEqual(["job"]);
    const exported = operatorLabels();
    expect(exported.get("dms_service_request_duration_seconds_bucket")).toEqual(
      new Set(["method", "route", "le"]),
    );
    // A panel grouping by a label its series lack, or naming one in its legend, is found.
    expect(
      unknownLabels(
        [
          {
            where: "panel",
            expr: "sum by (connection) (rate(dms_service_requests_total[5m]))",
            shown: ["status"],
          },
          {
            where: "legend",
            expr: "sum by (route) (rate(dms_service_requests_total[5m]))",
            shown: ["controller"],
          },
        ],
        exported,
      ),
    ).toEqual(["panel: connection", "legend: controller"]);
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
