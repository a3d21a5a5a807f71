/**
 * The gauges read from the caches at each scrape (resources, connections, refusals), and the
 * warning when the cache outgrows the heap it was sized for.
 */
import type { Logger } from "pino";
import type { ConnectionSessions } from "../connection/registry.ts";
import { connectionKey, idOf } from "../identity/connection.ts";
import type { KubeConnections } from "../kube/connections.ts";
import type { KubeDeployments } from "../kube/deployments.ts";
import { HeapBudgetCheck } from "../runtime/heap-budget.ts";
import type { RuntimeMetrics } from "../runtime/metrics.ts";
import { registerRefusalMetrics } from "../runtime/refusal-metrics.ts";
import { registerConnectionMetrics, registerResourceMetrics } from "../runtime/resource-metrics.ts";

/** Registers the resource, connection and refusal gauges on `metrics`' registry. */
export function registerCacheMetrics(
  metrics: RuntimeMetrics,
  deployments: KubeDeployments,
  kubeConnections: KubeConnections,
  connections: Pick<ConnectionSessions, "refusals">,
): void {
  registerResourceMetrics(metrics.registry, () => deployments.list());
  registerConnectionMetrics(metrics.registry, () =>
    kubeConnections.all.flatMap((r) => r.list()).map((c) => ({ key: connectionKey(idOf(c)), ...c })),
  );
  registerRefusalMetrics(metrics.registry, () => connections.refusals(deployments.list()));
}

/** Warns when the cache holds more resources than the heap limit (NODE_OPTIONS) was sized for. */
export function watchHeapBudget(deployments: KubeDeployments, logger: Logger): void {
  const heapBudget = new HeapBudgetCheck((fields, message) => logger.warn(fields, message));
  deployments.subscribe({ onAdd: () => heapBudget.add(1), onDelete: () => heapBudget.add(-1) });
}
