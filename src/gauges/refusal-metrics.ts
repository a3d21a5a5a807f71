/**
 * `dms_connection_refused{connection}`: how many Deployment resources a namespace selector
 * refuses, per connection (`default` for `--default-connection-namespace-selector`,
 * `ClusterServiceConnection/<name>` for a `spec.namespaceSelector`). The default connection has
 * no status to count them in; the gauge counts both alike. Computed when Prometheus scrapes, in
 * one pass over the watch cache (as `dms_resources` is), never per reconcile.
 */
import { Gauge, type Registry } from "prom-client";

/** The gauge's name. */
export const REFUSAL_METRIC = "dms_connection_refused";

/** Registers the gauge on `registry`; `count` is called once per scrape. */
export function registerRefusalMetrics(registry: Registry, count: () => ReadonlyMap<string, number>): void {
  new Gauge({
    name: REFUSAL_METRIC,
    help: "Deployment resources refused their connection by its namespace selector (reason ConnectionNotAllowed), per connection.",
    labelNames: ["connection"],
    registers: [registry],
    collect() {
      this.reset();
      for (const [connection, n] of count()) this.set({ connection }, n);
    },
  });
}
