// The dashboard's panels and the alerts' expressions read series a running operator really
// exports: the operator (leader election on, /metrics on loopback) reconciles a resource through
// the default connection and watches a ServiceConnection, then its /metrics is scraped and every
// metric a query names must be in the scrape, and every label it groups, matches or shows must be
// one of that metric's there. A renamed metric or label, or a panel or alert written for one that
// never existed, fails here rather than showing "No data", one line for all, or never firing.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freshNamespace, waitFor } from "../support/cluster.ts";
import { startOperator, startTestSimulator, TEST_API_KEY, type TestOperator } from "../support/operator.ts";
import {
  alertQueries,
  dashboardQueries,
  metricNames,
  scrapedLabels,
  shardedReplicaLabels,
  unknownLabels,
  unknownSeries,
} from "../support/promql.ts";
import { ClusterUser } from "../support/resources.ts";

describe("the dashboard's and the alerts' queries, against a scrape of a running operator", () => {
  let namespace: string;
  let op: TestOperator;
  let close: () => Promise<void>;
  let scraped: Set<string>;
  let labels: Map<string, Set<string>>;
  const user = new ClusterUser();

  beforeAll(async () => {
    namespace = await freshNamespace("metrics-queries");
    const sim = await startTestSimulator();
    close = () => sim.close();
    op = startOperator({
      simulator: sim,
      namespaces: [namespace],
      listen: true,
      leaderElection: { namespace, name: "metrics-queries-leader" },
    });
    await user.createTenantConnection(namespace, sim.url, TEST_API_KEY);
    await user.create(namespace, "scraped", {
      source: "internal_docker",
      sourceConfig: { resourceSpec: { minScale: 1, maxScale: 2 } },
      sourceRevisionConfig: { imageUri: "registry.example.com/agent:1" },
    });
    await user.waitReady(namespace, "scraped");
    const { metrics } = await op.operator.addresses();
    if (!metrics) throw new Error("the operator serves no metrics");
    // Once the connection has been checked and the Lease taken, every family has a series.
    labels = await waitFor(
      async () => {
        const text = await (await fetch(`${metrics}/metrics`)).text();
        const found = scrapedLabels(text);
        return text.includes('dms_connection_ready{connection="ServiceConnection/') &&
          text.includes("leader_election_master_status{") &&
          found.has("dms_resources")
          ? found
          : undefined;
      },
      { description: "a scrape with the connection's and the Lease's series", timeoutMs: 30_000 },
    );
    // This operator is not sharded: the series only a sharded replica exports are taken from the
    // code that registers them (the resources' counts read one to tell the two kinds apart).
    for (const [name, own] of shardedReplicaLabels()) labels.set(name, own);
    scraped = new Set(labels.keys());
  }, 120_000);

  afterAll(async () => {
    await op?.stop();
    await close?.();
  });

  it("finds in the scrape every series a panel of the dashboard queries", () => {
    const queries = dashboardQueries();
    expect(queries.length).toBeGreaterThan(8);
    expect(unknownSeries(queries, scraped)).toEqual([]);
  });

  it("finds in the scrape every series an alert reads (Prometheus's own `up` aside)", () => {
    const queries = alertQueries();
    const read = queries.flatMap((q) => metricNames(q.expr));
    expect(read).toContain("dms_connection_ready");
    // Exported before any resource is Stalled or held: zero, not absent.
    expect(read).toContain("dms_resources_stalled");
    expect(read).toContain("dms_rollouts_held_max_age_seconds");
    expect(unknownSeries(queries, scraped)).toEqual([]);
  });

  it("finds on the scraped series every label a panel or an alert groups, matches or shows", () => {
    const queries = [...dashboardQueries(), ...alertQueries()];
    expect(labels.get("dms_service_requests_total")).toEqual(new Set(["method", "route", "status"]));
    expect(labels.get("workqueue_queue_duration_seconds_bucket")).toEqual(new Set(["name", "le"]));
    expect(unknownLabels(queries, labels)).toEqual([]);
    expect(
      unknownLabels([{ where: "panel", expr: "sum by (connection) (dms_service_requests_total)" }], labels),
    ).toEqual(["panel: connection"]);
  });

  it("fails for a series the scrape lacks", () => {
    expect(unknownSeries([{ where: "panel", expr: "sum(dms_resources_wedged)" }], scraped)).toEqual([
      "panel: dms_resources_wedged",
    ]);
  });
});
