/**
 * The composition root of the operator: construction only, in the order the parts need each
 * other. `dms-operator run` calls {@link runOperator}; the integration tests call
 * {@link buildOperator} to run the very same wiring in-process.
 */
import { randomBytes } from "node:crypto";
import { hostname } from "node:os";
import { setFlagsFromString } from "node:v8";
import type { Logger } from "pino";
import { NamespaceAccess } from "./connection/access.ts";
import { ConnectionReconciler, idOf } from "./connection/controller.ts";
import { ConnectionRegistry } from "./connection/registry.ts";
import { DEFAULT_CONNECTION } from "./identity/connection.ts";
import { KubeClient } from "./kube/client.ts";
import { loadKubeConfig } from "./kube/config.ts";
import { KubeConnections } from "./kube/connections.ts";
import { KubeDeployments } from "./kube/deployments.ts";
import { ConflictError } from "./kube/errors.ts";
import { KubeEventRecorder } from "./kube/events.ts";
import { KubeNamespaces } from "./kube/namespaces.ts";
import { eventsPort, regardingOf, resourcePort, secretsPort } from "./kube/reconcile-adapters.ts";
import { KubeSecrets } from "./kube/secrets.ts";
import { DeploymentReconciler } from "./reconcile/reconciler.ts";
import { RolloutPoller } from "./reconcile/remote.ts";
import { type Clock, systemClock } from "./runtime/clock.ts";
import { Controller } from "./runtime/controller.ts";
import { HealthServer } from "./runtime/health.ts";
import { Manager } from "./runtime/manager.ts";
import { RuntimeMetrics } from "./runtime/metrics.ts";
import { ResyncedController } from "./runtime/resync.ts";
import { VERSION } from "./version.ts";
import { type Caches, cachesReadiness, cachesSynced, informers } from "./wiring/caches.ts";
import { refusalAwareResources } from "./wiring/claimants.ts";
import * as index from "./wiring/indexes.ts";
import { leaderElector } from "./wiring/leader-election.ts";
import { metricsProtection } from "./wiring/metrics-endpoint.ts";
import * as settings from "./wiring/operator-config.ts";
import { registerCacheMetrics, watchHeapBudget } from "./wiring/operator-metrics.ts";
import { connectionPassKeys, deploymentPassScope, deploymentPassTiming } from "./wiring/resync-passes.ts";
import { rolloutPollTargets } from "./wiring/rollout-poll.ts";
import { serviceConnector, sessionFactory } from "./wiring/service-connections.ts";
import * as triggers from "./wiring/triggers.ts";

export { defaultListingDeadlineMs, type OperatorConfig } from "./wiring/operator-config.ts";

/** The wired operator: start the manager with a signal; the parts are exposed for tests. */
export interface Operator {
  manager: Manager;
  controller: Controller;
  health: HealthServer;
  metrics: RuntimeMetrics;
  identity: string;
  /** Where the health and metrics servers listen, once `manager.start` has opened them. */
  addresses(): Promise<{ metrics?: string; probes?: string }>;
}

/** Injected edges of the operator (real ones by default). */
export interface OperatorDeps {
  logger: Logger;
  clock?: Clock;
  /** Overrides the process identity used for leader election and events. */
  identity?: string;
}

/** Builds the operator from `config`. Throws one clear Error when Kubernetes is not configured. */
export function buildOperator(config: settings.OperatorConfig, deps: OperatorDeps): Operator {
  const { logger } = deps;
  const clock = deps.clock ?? systemClock;
  const identity = deps.identity ?? `${config.podName ?? hostname()}_${randomBytes(4).toString("hex")}`;
  const kube = loadKubeConfig({
    ...(config.kubeconfig ? { kubeconfig: config.kubeconfig } : {}),
    ...(config.context ? { context: config.context } : {}),
  });
  logger.info({ kubernetes: kube.description }, "Kubernetes configuration loaded");
  const client = new KubeClient(kube.config);
  const metrics = new RuntimeMetrics();
  // Namespace selectors need the namespaces' labels: ClusterServiceConnections may carry one, and
  // the default connection may have one. Without either, namespaces are not watched (a namespaced
  // install cannot: namespaces are cluster-scoped). ClusterServiceConnections need cluster-wide
  // list/watch, which an install limited to some namespaces (a Role) does not have.
  const clusterKind = config.clusterConnections ?? config.namespaces.length === 0;
  const byNamespace = clusterKind || config.defaultConnectionNamespaceSelector !== undefined;
  const { namespaces: watched, labelSelector } = config;
  const scope = {
    ...(watched.length > 0 ? { namespaces: watched } : {}),
    ...(labelSelector ? { labelSelector } : {}),
  };
  const caches: Caches = {
    namespaces: byNamespace ? new KubeNamespaces({ client, logger, clock }) : undefined,
    deployments: new KubeDeployments({
      client,
      scope,
      logger,
      clock,
      indexers: index.deploymentIndexers(byNamespace),
    }),
    secrets: new KubeSecrets({ client, namespaces: watched, logger, clock }),
    connections: new KubeConnections({
      client,
      namespaces: watched,
      clusterKind,
      logger,
      clock,
      indexers: index.connectionIndexers,
    }),
  };
  const { deployments, secrets, namespaces, connections: kubeConnections } = caches;
  const recorder = new KubeEventRecorder({ client, reportingInstance: identity, clock, logger });
  const connect = serviceConnector(logger, metrics);
  const listingDeadlineMs = config.listingDeadlineMs ?? settings.defaultListingDeadlineMs(config.resyncMs);
  const newSession = sessionFactory(config, listingDeadlineMs, deployments, clock, logger);
  const selector = config.defaultConnectionNamespaceSelector;
  const connections = new ConnectionRegistry({
    connections: kubeConnections,
    defaultSession: newSession(connect(config.service, DEFAULT_CONNECTION).port, DEFAULT_CONNECTION),
    connect,
    session: newSession,
    access: new NamespaceAccess({
      ...(namespaces ? { labels: (name: string) => namespaces.labels(name) } : {}),
      ...(selector ? { defaultSelector: selector } : {}),
    }),
  });
  registerCacheMetrics(metrics, deployments, kubeConnections, connections);
  const reconciler = new DeploymentReconciler({
    resources: refusalAwareResources(resourcePort(deployments, index.CLAIM_INDEX), connections),
    sessions: connections,
    secrets: secretsPort(secrets),
    events: eventsPort(recorder),
    clock,
    logger,
    pollMs: config.pollMs,
    createGraceMs: config.createGraceMs,
    maxSecretBytes: config.maxSecretBytes,
  });
  const controller = new Controller({
    name: "deployment",
    reconcile: reconciler.reconcile,
    concurrency: config.concurrency,
    reconcileTimeoutMs: config.reconcileTimeoutMs,
    clock,
    metrics: metrics.controllerHooks("deployment"),
    logger,
  });
  const synced = cachesSynced(caches);
  // A connection that has just become usable was listed by its check a moment ago.
  const reuseListingMs = Math.min(config.resyncMs / 2, 60_000);
  const resync = new ResyncedController({
    controller,
    synced,
    ...deploymentPassScope(deployments, connections),
    prepare: async (key, signal) => {
      const session = connections.session(key);
      if (!session) return () => {};
      if (!session.snapshot.listedWithin(reuseListingMs)) await session.snapshot.refresh(signal);
      return session.snapshot.holdFresh();
    },
    ...deploymentPassTiming(config.resyncMs),
    clock,
    logger,
  });
  const enqueueUsers = triggers.connectionUsersEnqueuer(deployments, controller, index.CONNECTION_INDEX);
  const connectionReconciler = new ConnectionReconciler({
    registry: connections,
    connections: kubeConnections,
    defaults: config.service,
    secrets: secretsPort(secrets),
    usage: (key) => deployments.byIndex(index.CONNECTION_INDEX, key).length,
    userNamespaces: (key) =>
      deployments.byIndex(index.CONNECTION_INDEX, key).map((o) => o.metadata.namespace ?? ""),
    onChange: (key) => {
      enqueueUsers(key);
      resync.groupsChanged();
    },
    event: (c, type, reason, note) =>
      void recorder.record(regardingOf(c, idOf(c).kind), { type, reason, action: "Probe", note }),
    isConflict: (error) => error instanceof ConflictError,
    clock,
    logger,
  });
  const connectionController = new Controller({
    name: "connection",
    reconcile: connectionReconciler.reconcile,
    concurrency: settings.CONNECTION_CONCURRENCY,
    reconcileTimeoutMs: config.reconcileTimeoutMs,
    clock,
    metrics: metrics.controllerHooks("connection"),
    logger,
  });
  triggers.subscribeTriggers(deployments, secrets, controller, index.CLAIM_INDEX, index.SECRET_INDEX);
  triggers.subscribeConnectionTriggers({
    deployments,
    connections: kubeConnections,
    secrets,
    connectionController,
    secretIndex: index.CONNECTION_SECRET_INDEX,
  });
  if (namespaces)
    triggers.subscribeNamespaceTriggers(namespaces, deployments, {
      namespaceIndex: index.NAMESPACE_INDEX,
      claimIndex: index.CLAIM_INDEX,
      deploymentController: controller,
      connectionController,
    });
  watchHeapBudget(deployments, logger);
  const health = new HealthServer({
    metricsBindAddress: config.metricsBindAddress,
    probeBindAddress: config.healthProbeBindAddress,
    registry: metrics.registry,
    ...metricsProtection(config, client, clock, logger),
    clock,
    logger,
  });
  health.addReadinessCheck(cachesReadiness(caches));
  const le = config.leaderElection;
  const manager = new Manager({
    ...(le.enabled
      ? { elector: leaderElector(le, client, kube.namespace, identity, metrics, logger, clock) }
      : {}),
    shutdownTimeoutMs: config.shutdownTimeoutMs,
    clock,
    logger,
  });
  for (const informer of informers(caches)) manager.add(informer);
  // The connections are checked (and re-probed) once per probe interval; their first check
  // enqueues the resources waiting for them.
  manager.add(
    new ResyncedController({
      controller: connectionController,
      synced,
      keys: connectionPassKeys(kubeConnections),
      prepare: async () => () => {},
      periodMs: settings.CONNECTION_PROBE_MS,
      spreadMs: 0,
      clock,
      logger,
    }),
  );
  manager.add(health);
  manager.add(resync);
  const pollTargets = rolloutPollTargets(deployments, connections);
  manager.add(new RolloutPoller({ targets: pollTargets, periodMs: config.pollMs, clock, logger }));
  return { manager, controller, health, metrics, identity, addresses: () => health.listening };
}

/** Runs the operator until `signal` aborts; resolves after a graceful shutdown. */
export async function runOperator(
  config: settings.OperatorConfig,
  deps: OperatorDeps,
  signal: AbortSignal,
): Promise<void> {
  // Measured at 10,000 resources (docs/benchmarks.md, "Memory"): the heap is collected and
  // compacted closer to its live size, for a few percent more CPU.
  if (config.optimizeForSize) setFlagsFromString("--optimize-for-size");
  const operator = buildOperator(config, deps);
  const namespaces = config.namespaces.length > 0 ? config.namespaces : "all";
  const optimizeForSize = config.optimizeForSize ?? false;
  deps.logger.info(
    { version: VERSION, identity: operator.identity, namespaces, optimizeForSize },
    "starting dms-operator",
  );
  await operator.manager.start(signal);
  deps.logger.info("dms-operator stopped");
}
