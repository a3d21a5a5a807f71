/**
 * The gauges read from the caches at each scrape (resources, connections, refusals), and the
 * warning when the cache outgrows the heap it was sized for.
 */
import type { Logger } from "pino";
import type { ConnectionSessions } from "../connection/registry.ts";
import { registerRefusalMetrics } from "../gauges/refusal-metrics.ts";
import { registerConnectionMetrics, registerResourceMetrics } from "../gauges/resource-metrics.ts";
import type { KubeConnections } from "../kube/connections.ts";
import type { KubeDeployments } from "../kube/deployments.ts";
import { connectionKey, idOf } from "../naming/connection.ts";
import { REASON } from "../reconcile/status/status.ts";
import { HeapBudgetCheck } from "../runtime/heap-budget.ts";
import type { RuntimeMetrics } from "../runtime/metrics.ts";

/**
 * The reasons a Deployment resource is Stalled for (failures that need a change of the spec, a
 * Secret or the service's state), counted apart by `dms_resources_stalled`; any other counts as
 * `Other`.
 */
export const STALLED_REASONS: readonly string[] = [
  REASON.RevisionFailed,
  REASON.RolloutTimeout,
  REASON.NameReserved,
  REASON.NameConflict,
  REASON.Immutable,
  REASON.DeploymentTypeMismatch,
  REASON.CannotClearSecrets,
  REASON.RebuildRouteMissing,
  REASON.SecretNotFound,
  REASON.SecretsTooLarge,
  REASON.InvalidSpec,
  REASON.UnreadableDeployment,
  REASON.ConnectionNotReady,
  REASON.ConnectionNotAllowed,
];

/** Registers the resource, connection and refusal gauges on `metrics`' registry. */
export function registerCacheMetrics(
  metrics: RuntimeMetrics,
  deployments: KubeDeployments,
  kubeConnections: KubeConnections,
  connections: Pick<ConnectionSessions, "refusals">,
): void {
  registerResourceMetrics(metrics.registry, () => deployments.list(), { stalledReasons: STALLED_REASONS });
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
