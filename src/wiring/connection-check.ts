/**
 * The connection check: the reconciler of both connection kinds, its controller, and the pass
 * that checks (and re-probes) every connection once per probe interval; their first check
 * enqueues the resources waiting for them.
 */
import type { Logger } from "pino";
import type { ServiceConfig } from "../config.ts";
import { ConnectionReconciler } from "../connection/controller.ts";
import type { ConnectionRegistry } from "../connection/registry.ts";
import { connectionCheckFlowOf, connectionKey, idOf } from "../crd/conventions.ts";
import { ConflictError } from "../kube/errors.ts";
import { type KubeEventRecorder, regardingOf } from "../kube/events.ts";
import { secretsPort } from "../kube/secrets.ts";
import type { Clock } from "../runtime/clock.ts";
import { Controller } from "../runtime/controller.ts";
import type { RuntimeMetrics } from "../runtime/metrics.ts";
import { ResyncedController } from "../runtime/resync.ts";
import type { ClusterUsers } from "../sharding/cluster-users.ts";
import { type Caches, cachesSynced } from "./caches.ts";
import { CONNECTION_INDEX } from "./indexes.ts";
import {
  CONNECTION_CHECKS_PER_NAMESPACE,
  CONNECTION_CONCURRENCY,
  CONNECTION_PROBE_MS,
} from "./operator-config.ts";
import { connectionPassKeys } from "./resync-passes.ts";

/** What {@link connectionCheck} is built from. */
export interface ConnectionCheckParts {
  registry: ConnectionRegistry;
  /**
   * `--sharded`: the check runs on every replica (each needs the connections' clients), but the
   * users of a connection are counted, and its finalizer and status written, by the leader only,
   * from its store of every resource (a replica's own cache holds its share only).
   */
  sharded?: ClusterUsers;
  caches: Caches;
  recorder: KubeEventRecorder;
  /** The settings a connection leaves unset (the default connection's). */
  defaults: ServiceConfig;
  reconcileTimeoutMs: number;
  metrics: RuntimeMetrics;
  /** Called when a connection became usable or unusable, or its selector or windows changed. */
  onChange(key: string): void;
  clock: Clock;
  logger: Logger;
}

/** The connection check's controller and its periodic pass (a runnable of the manager). */
export function connectionCheck(o: ConnectionCheckParts): {
  controller: Controller;
  pass: ResyncedController;
} {
  const { deployments, secrets, connections } = o.caches;
  const { clock, logger } = o;
  const reconciler = new ConnectionReconciler({
    registry: o.registry,
    connections,
    defaults: o.defaults,
    secrets: secretsPort(secrets),
    ...(o.sharded
      ? { usage: o.sharded.count, userNamespaces: o.sharded.namespaces, writes: o.sharded.ready }
      : {
          usage: (key: string) => deployments.byIndex(CONNECTION_INDEX, key).length,
          userNamespaces: (key: string) =>
            deployments.byIndex(CONNECTION_INDEX, key).map((d) => d.metadata.namespace ?? ""),
        }),
    onChange: o.onChange,
    enqueue: (key) => controller.enqueue(key),
    event: (c, type, reason, note) =>
      void o.recorder.record(regardingOf(c, idOf(c).kind), { type, reason, action: "Probe", note }),
    isConflict: (error) => error instanceof ConflictError,
    clock,
    logger,
  });
  const controller = new Controller({
    name: "connection",
    // Sharded, every replica checks the connections its resources use: each needs the clients.
    needLeaderElection: !o.sharded,
    reconcile: reconciler.reconcile,
    concurrency: CONNECTION_CONCURRENCY,
    flowOf: connectionCheckFlowOf,
    maxPerFlow: CONNECTION_CHECKS_PER_NAMESPACE,
    reconcileTimeoutMs: o.reconcileTimeoutMs,
    clock,
    // Its flows are namespaces: `dms_connection_waiting_reconciles` counts the Deployments' waits only.
    metrics: { ...o.metrics.controllerHooks("connection"), observeWaiting: undefined },
    logger,
  });
  const pass = new ResyncedController({
    controller,
    synced: cachesSynced(o.caches),
    keys: connectionPassKeys(connections),
    prepare: async () => () => {},
    periodMs: CONNECTION_PROBE_MS,
    spreadMs: 0,
    clock,
    logger,
  });
  // The leader's counts: a connection whose users changed is written again, and every one once
  // the leader's store is synced (a replica that has just become the leader).
  o.sharded?.subscribe((key) => {
    if (!o.sharded?.ready()) return;
    for (const k of key === undefined ? connectionPassKeys(connections)() : [key]) controller.enqueue(k);
  });
  // A namespace relabelled: the leader's own share may hold none of its resources (which enqueue
  // the connections they use, kube/triggers.ts), yet the selectors' refusals it counts change.
  if (o.sharded)
    o.caches.namespaces?.onLabelsChange(() => {
      if (!o.sharded?.ready()) return;
      for (const c of connections.cluster?.list() ?? [])
        if (c.spec.namespaceSelector) controller.enqueue(connectionKey(idOf(c)));
    });
  return { controller, pass };
}
