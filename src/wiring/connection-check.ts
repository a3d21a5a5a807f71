/**
 * The connection check: the reconciler of both connection kinds, its controller, and the pass
 * that checks (and re-probes) every connection once per probe interval; their first check
 * enqueues the resources waiting for them.
 */
import type { Logger } from "pino";
import type { ServiceConfig } from "../config.ts";
import { ConnectionReconciler } from "../connection/controller.ts";
import type { ConnectionRegistry } from "../connection/registry.ts";
import { ConflictError } from "../kube/errors.ts";
import type { KubeEventRecorder } from "../kube/events.ts";
import { regardingOf, secretsPort } from "../kube/reconcile-adapters.ts";
import { idOf } from "../naming/connection.ts";
import type { Clock } from "../runtime/clock.ts";
import { Controller } from "../runtime/controller.ts";
import type { RuntimeMetrics } from "../runtime/metrics.ts";
import { ResyncedController } from "../runtime/resync.ts";
import { type Caches, cachesSynced } from "./caches.ts";
import { CONNECTION_INDEX } from "./indexes.ts";
import { CONNECTION_CONCURRENCY, CONNECTION_PROBE_MS } from "./operator-config.ts";
import { connectionPassKeys } from "./resync-passes.ts";

/** What {@link connectionCheck} is built from. */
export interface ConnectionCheckParts {
  registry: ConnectionRegistry;
  /** Run on every replica, not only the leader (`--sharded`). */
  everyReplica?: boolean;
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
    usage: (key) => deployments.byIndex(CONNECTION_INDEX, key).length,
    userNamespaces: (key) =>
      deployments.byIndex(CONNECTION_INDEX, key).map((d) => d.metadata.namespace ?? ""),
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
    needLeaderElection: !o.everyReplica,
    reconcile: reconciler.reconcile,
    concurrency: CONNECTION_CONCURRENCY,
    reconcileTimeoutMs: o.reconcileTimeoutMs,
    clock,
    metrics: o.metrics.controllerHooks("connection"),
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
  return { controller, pass };
}
