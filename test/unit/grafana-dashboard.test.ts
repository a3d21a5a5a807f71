// The Grafana dashboard (charts/dms-operator/files/grafana-dashboard.json) queries only series
// the operator's registry defines: a renamed metric, or a panel written for a metric that never
// existed, would show "No data" to the user and nothing here (test/integration/metrics-queries.test.ts
// checks the same against a scrape of a running operator). It also covers what an on-call
// engineer looks for first.
import { describe, expect, it } from "vitest";
import { RuntimeMetrics } from "../../src/runtime/metrics.ts";
import { registerConnectionMetrics, registerResourceMetrics } from "../../src/runtime/resource-metrics.ts";
import { dashboard, dashboardQueries, metricNames, unknownSeries } from "../support/promql.ts";

/** Series names a scrape of the operator can contain (histograms as _bucket, _sum, _count). */
async function exportedSeries(): Promise<Set<string>> {
  const metrics = new RuntimeMetrics();
  registerResourceMetrics(metrics.registry, () => []);
  registerConnectionMetrics(metrics.registry, () => []);
  const names = new Set<string>();
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
      "rollouts in progress and failed",
    ])
      expect(
        titles.some((t) => t.includes(topic)),
        topic,
      ).toBe(true);
  });
});

describe("resource state gauges", () => {
  const c = (type: string, status: string, reason = "R") => ({ type, status, reason });
  it("count resources by Ready/Synced and rollouts in progress and failed, at scrape time", async () => {
    const metrics = new RuntimeMetrics({ processMetrics: false });
    const resources = [
      { status: { conditions: [c("Ready", "True"), c("Synced", "True")] } },
      { status: { conditions: [c("Ready", "True"), c("Synced", "True")] } },
      { status: { conditions: [c("Ready", "False", "RolloutInProgress"), c("Synced", "True")] } },
      {
        status: {
          conditions: [c("Ready", "False"), c("Synced", "True"), c("Stalled", "True", "RevisionFailed")],
        },
      },
      { status: { conditions: [c("Ready", "Unknown"), c("Synced", "False", "NameConflict")] } },
      {},
    ];
    let current: typeof resources = [];
    registerResourceMetrics(metrics.registry, () => current);
    current = resources;
    const text = await metrics.registry.metrics();
    expect(text).toContain('dms_resources{ready="True",synced="True"} 2');
    expect(text).toContain('dms_resources{ready="False",synced="True"} 2');
    expect(text).toContain('dms_resources{ready="Unknown",synced="False"} 1');
    expect(text).toContain('dms_resources{ready="None",synced="None"} 1');
    expect(text).toContain('dms_rollouts{state="in_progress"} 1');
    expect(text).toContain('dms_rollouts{state="failed"} 1');
    current = resources.slice(0, 1);
    const later = await metrics.registry.metrics();
    expect(later).toContain('dms_resources{ready="True",synced="True"} 1');
    expect(later).not.toContain('ready="Unknown"');
  });

  it("give each connection's readiness, with its reason, at scrape time", async () => {
    const metrics = new RuntimeMetrics({ processMetrics: false });
    let current = [
      { key: "ServiceConnection/team-a/prod", status: { conditions: [c("Ready", "True", "Connected")] } },
      {
        key: "ClusterServiceConnection/shared",
        status: { conditions: [c("Ready", "False", "Unauthorized")] },
      },
      { key: "ServiceConnection/team-b/new" },
    ];
    registerConnectionMetrics(metrics.registry, () => current);
    const text = await metrics.registry.metrics();
    expect(text).toContain(
      'dms_connection_ready{connection="ServiceConnection/team-a/prod",reason="Connected"} 1',
    );
    expect(text).toContain(
      'dms_connection_ready{connection="ClusterServiceConnection/shared",reason="Unauthorized"} 0',
    );
    expect(text).toContain('dms_connection_ready{connection="ServiceConnection/team-b/new",reason="None"} 0');
    current = current.slice(0, 1);
    expect(await metrics.registry.metrics()).not.toContain("shared");
  });
});
