/**
 * The gauges read from the caches at each scrape (resources, connections, refusals), and the
 * warning when the cache outgrows the heap it was sized for.
 */
import type { Logger } from "pino";
import { Counter } from "prom-client";
import type { NamespaceBound } from "../connection/namespace-bound.ts";
import type { ConnectionSessions } from "../connection/registry.ts";
import { connectionKey, DEFAULT_CONNECTION, idOf } from "../crd/conventions.ts";
import { registerRefusalMetrics } from "../gauges/refusal-metrics.ts";
import { registerConnectionMetrics, registerResourceMetrics } from "../gauges/resource-metrics.ts";
import type { KubeConnections } from "../kube/connections.ts";
import type { KubeDeployments } from "../kube/custom-resources.ts";
import { REASON } from "../reconcile/reasons.ts";
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

/**
 * Registers the resource, connection and refusal gauges on `metrics`' registry. A ServiceConnection
 * past `--max-connections-per-namespace` (`overLimit`: it gets no client, its Ready condition says
 * why) has no `dms_connection_ready` series: a tenant may make as many as it likes under new names,
 * and the served ones are at most that many per namespace.
 */
export function registerCacheMetrics(
  metrics: RuntimeMetrics,
  deployments: KubeDeployments,
  kubeConnections: KubeConnections,
  connections: Pick<ConnectionSessions, "refusals"> & { bound: Pick<NamespaceBound, "overLimit"> },
): void {
  registerResourceMetrics(metrics.registry, () => deployments.list(), { stalledReasons: STALLED_REASONS });
  registerConnectionMetrics(metrics.registry, () =>
    kubeConnections.all.flatMap((r) =>
      r.list().flatMap((c) => {
        const id = idOf(c);
        return connections.bound.overLimit(id) ? [] : [{ key: connectionKey(id), ...c }];
      }),
    ),
  );
  registerRefusalMetrics(metrics.registry, () => connections.refusals(deployments.list()));
}

/** The counter of changes made outside the resources, by connection and kind. */
export const EXTERNAL_CHANGES_METRIC = "dms_external_changes_total";

/** The connection labels of `dms_external_changes_total` held before they are looked at again between scrapes. */
const PRUNE_AT = 64;

/**
 * Registers `dms_external_changes_total{connection, kind}` on `metrics`' registry, and returns
 * what the reconciler counts with (`externalChange`): `connection` is the connection's key, as
 * `dms_connection_ready` names it (`ServiceConnection/<namespace>/<name>`: two namespaces'
 * connections of one name count apart), and `kind` is `revision` (a revision the operator did not
 * create) or `fields` (fields that differed from a spec already applied, corrected or reported).
 * Both kinds start at 0 for the default connection. A connection's series go once it is no longer
 * served: watched and within `--max-connections-per-namespace` (`overLimit`). Its name is a
 * tenant's: one made and deleted under new names again and again would add series without end.
 * They are looked at when scraped, and when a new label comes past twice as many as the last look
 * kept (at least {@link PRUNE_AT}): bounded without scrapes too.
 */
export function externalChangeCounter(
  metrics: RuntimeMetrics,
  kubeConnections: Pick<KubeConnections, "all">,
  connections: { bound: Pick<NamespaceBound, "overLimit"> },
): (connection: string, kind: "revision" | "fields") => void {
  const kinds = ["revision", "fields"] as const;
  const counted = new Set<string>();
  let pruneAt = PRUNE_AT;
  const prune = () => {
    if (counted.size === 0) return;
    const served = new Set<string>();
    for (const r of kubeConnections.all)
      for (const c of r.list()) {
        const id = idOf(c);
        if (!connections.bound.overLimit(id)) served.add(connectionKey(id));
      }
    for (const connection of counted) {
      if (served.has(connection)) continue;
      for (const kind of kinds) counter.remove({ connection, kind });
      counted.delete(connection);
    }
    pruneAt = Math.max(PRUNE_AT, 2 * counted.size);
  };
  const counter: Counter = new Counter({
    name: EXTERNAL_CHANGES_METRIC,
    help: "Changes made to the service's deployments outside their resources (the service's UI, langgraph deploy, another tool), by connection (its key, namespace included) and kind: revision (a revision the operator did not create) or fields (fields that differed from a spec already applied)",
    labelNames: ["connection", "kind"],
    registers: [metrics.registry],
    collect: prune,
  });
  for (const kind of kinds) counter.inc({ connection: DEFAULT_CONNECTION, kind }, 0);
  return (connection, kind) => {
    // Counted before the look, which drops it too when its connection is no longer served.
    counter.inc({ connection, kind });
    if (connection === DEFAULT_CONNECTION || counted.has(connection)) return;
    counted.add(connection);
    if (counted.size > pruneAt) prune();
  };
}

/** Warns when the cache holds more resources than the heap limit (NODE_OPTIONS) was sized for. */
export function watchHeapBudget(deployments: KubeDeployments, logger: Logger): void {
  const heapBudget = new HeapBudgetCheck((fields, message) => logger.warn(fields, message));
  deployments.subscribe({ onAdd: () => heapBudget.add(1), onDelete: () => heapBudget.add(-1) });
}
