/**
 * The composition root of the operator: construction only, in the order the parts need each
 * other (the modules of `wiring/` say how each part is joined). `dms-operator run` calls
 * {@link runOperator}; the integration tests call {@link buildOperator} to run the very same
 * wiring in-process.
 */
import { connectionShares } from "./connection/access.ts";
import { resourcePort } from "./kube/custom-resources.ts";
import { eventsPort, KubeEventRecorder } from "./kube/events.ts";
import { secretsPort } from "./kube/secrets.ts";
import { refusalAware } from "./reconcile/inputs.ts";
import { DeploymentReconciler } from "./reconcile/reconciler.ts";
import { RolloutPoller } from "./reconcile/service/rollout-poller.ts";
import { systemClock } from "./runtime/clock.ts";
import { Controller } from "./runtime/controller.ts";
import { quietCollection, tuneHeapForSize } from "./runtime/heap-tuning.ts";
import { Manager } from "./runtime/manager.ts";
import { RuntimeMetrics } from "./runtime/metrics.ts";
import { ResyncedController } from "./runtime/resync.ts";
import { HealthServer } from "./serving/health.ts";
import { VERSION } from "./version.ts";
import { cachesReadiness, cachesSynced, informers, watchCaches } from "./wiring/caches.ts";
import { connectionCheck } from "./wiring/connection-check.ts";
import { CLAIM_INDEX } from "./wiring/indexes.ts";
import { installKey } from "./wiring/install-key.ts";
import { kubeAccess } from "./wiring/kube-access.ts";
import { leaderElection } from "./wiring/leader-election.ts";
import { metricsProtection } from "./wiring/metrics-endpoint.ts";
import type { Operator, OperatorConfig, OperatorDeps } from "./wiring/operator-config.ts";
import { externalChangeCounter, registerCacheMetrics, watchHeapBudget } from "./wiring/operator-metrics.ts";
import { deploymentPassScope, deploymentPassTiming } from "./wiring/resync-passes.ts";
import { rolloutPollTargets } from "./wiring/rollout-poll.ts";
import { connectionRegistry } from "./wiring/service-connections.ts";
import { replicaRole } from "./wiring/sharding.ts";
import { connectionUsersEnqueuer, subscribeAll } from "./wiring/triggers.ts";

export type { Operator, OperatorConfig } from "./wiring/operator-config.ts";

/** Builds the operator from `config`. Throws one clear Error when Kubernetes is not configured. */
export function buildOperator(config: OperatorConfig, deps: OperatorDeps): Operator {
  const { logger } = deps;
  const clock = deps.clock ?? systemClock;
  const { client, namespace, identity } = kubeAccess(config, deps);
  const metrics = new RuntimeMetrics();
  const le = config.leaderElection;
  const key = installKey(client, le.namespace ?? namespace ?? "default", clock, logger);
  const ringSeed = (signal: AbortSignal) => key.ready(signal);
  const replica = replicaRole(config, namespace, { client, identity, metrics, ringSeed, clock, logger });
  const caches = watchCaches(replica.scope(config), client, clock, logger, replica.deployments);
  const { deployments, secrets } = caches;
  const recorder = new KubeEventRecorder({ client, reportingInstance: identity, clock, logger });
  const connections = connectionRegistry(config, caches, metrics, clock, logger, replica.clientIdentity);
  registerCacheMetrics(metrics, deployments, caches.connections, connections);
  const reconciler = new DeploymentReconciler({
    resources: refusalAware(resourcePort(deployments, CLAIM_INDEX), (o) => connections.refuses(o)),
    sessions: connections,
    secrets: secretsPort(secrets),
    events: eventsPort(recorder),
    clock,
    logger,
    pollMs: config.pollMs,
    createGraceMs: config.createGraceMs,
    maxSecretBytes: config.maxSecretBytes,
    secretDigest: key.digest,
    configMaps: caches.configMaps,
    externalChange: externalChangeCounter(metrics, caches.connections, connections),
    ...(deps.searchCounter ? { searchCounter: deps.searchCounter } : {}),
  });
  const controller = new Controller({
    name: "deployment",
    reconcile: replica.guard(reconciler.reconcile),
    needLeaderElection: replica.leaderOnly,
    concurrency: config.concurrency,
    // Each connection's share of the workers (connection/access.ts).
    ...connectionShares(config, deployments, clock, logger),
    reconcileTimeoutMs: config.reconcileTimeoutMs,
    clock,
    metrics: metrics.controllerHooks("deployment"),
    logger,
  });
  replica.attach(deployments, (key) => controller.enqueue(key));
  const resync = new ResyncedController({
    controller,
    // The reconciles make secrets digests: they start once the install key is read.
    synced: key.after(cachesSynced(caches)),
    ...deploymentPassScope(deployments, connections),
    ...deploymentPassTiming(config.resyncMs, connections),
    clock,
    logger,
  });
  const enqueueUsers = connectionUsersEnqueuer(deployments, controller);
  const check = connectionCheck({
    registry: connections,
    ...(replica.users ? { sharded: replica.users } : {}),
    caches,
    recorder,
    defaults: config.service,
    reconcileTimeoutMs: config.reconcileTimeoutMs,
    metrics,
    onChange: (key) => {
      enqueueUsers(key);
      resync.groupsChanged();
    },
    clock,
    logger,
  });
  subscribeAll(caches, controller, check.controller);
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
  const manager = new Manager({
    ...leaderElection(le, { client, namespace, identity, metrics, logger, clock }, replica.leaderObserved),
    shutdownTimeoutMs: config.shutdownTimeoutMs,
    clock,
    logger,
  });
  const pollTargets = rolloutPollTargets(deployments, connections);
  const poller = new RolloutPoller({ targets: pollTargets, periodMs: config.pollMs, clock, logger });
  const runnables = [...informers(caches), key, check.pass, health, resync, replica.ownShare(poller)];
  for (const runnable of [...runnables, ...replica.runnables]) manager.add(runnable);
  return { manager, controller, health, metrics, identity, addresses: () => health.listening };
}

/** Runs the operator until `signal` aborts; resolves after a graceful shutdown. */
export async function runOperator(
  config: OperatorConfig,
  deps: OperatorDeps,
  signal: AbortSignal,
): Promise<void> {
  // See runtime/heap-tuning.ts: process-wide, so here rather than in buildOperator.
  if (config.optimizeForSize) tuneHeapForSize();
  const operator = buildOperator(config, deps);
  for (const r of quietCollection(config.optimizeForSize, deps.clock ?? systemClock)) operator.manager.add(r);
  const namespaces = config.namespaces.length > 0 ? config.namespaces : "all";
  const optimizeForSize = config.optimizeForSize ?? false;
  deps.logger.info(
    { version: VERSION, identity: operator.identity, namespaces, optimizeForSize },
    "starting dms-operator",
  );
  // The process lives until `signal` aborts, whatever it serves. With no listening socket
  // (--metrics-bind-address=0 --health-probe-bind-address=0) and an API server out of reach, its
  // only pending work is backoff timers, which are unref'd: Node would end it mid-retry, with
  // status 13 and no word of why. Held, it keeps retrying and logging each failure, as it does
  // with probes on, and a controller-runtime manager does.
  const alive = setInterval(() => {}, 2 ** 31 - 1);
  try {
    await operator.manager.start(signal);
  } finally {
    clearInterval(alive);
  }
  deps.logger.info("dms-operator stopped");
}
