/**
 * The composition root of the operator: the only place that wires adapters to the core.
 * `dms-operator run` calls {@link runOperator}; the integration tests call {@link buildOperator}
 * to run the very same wiring in-process.
 */
import { randomBytes } from "node:crypto";
import { hostname } from "node:os";
import type { Logger } from "pino";
import { ServiceClient } from "./api/client.ts";
import { deploymentsPort } from "./api/service-adapter.ts";
import type { ServiceConfig } from "./config.ts";
import { KubeClient } from "./kube/client.ts";
import { loadKubeConfig } from "./kube/config.ts";
import { KubeDeployments } from "./kube/deployments.ts";
import { KubeEventRecorder } from "./kube/events.ts";
import { KubeLease } from "./kube/lease.ts";
import { objectKey, refOf } from "./kube/object.ts";
import { eventsPort, resourcePort, secretsPort } from "./kube/reconcile-adapters.ts";
import { KubeSecrets } from "./kube/secrets.ts";
import { subscribeTriggers } from "./kube/triggers.ts";
import { CLAIM_INDEX, claimIndexer } from "./reconcile/claims.ts";
import { SECRET_INDEX, secretIndexer } from "./reconcile/inputs.ts";
import { DeploymentReconciler } from "./reconcile/reconciler.ts";
import { POLL_INDEX, pollIndexer, RemoteSnapshot, RolloutPoller } from "./reconcile/remote.ts";
import { type Clock, systemClock } from "./runtime/clock.ts";
import { Controller } from "./runtime/controller.ts";
import { HealthServer } from "./runtime/health.ts";
import { HeapBudgetCheck } from "./runtime/heap-budget.ts";
import { LeaderElector } from "./runtime/leader.ts";
import { Manager, type Runnable } from "./runtime/manager.ts";
import { RuntimeMetrics } from "./runtime/metrics.ts";
import { registerResourceMetrics } from "./runtime/resource-metrics.ts";
import { ResyncedController } from "./runtime/resync.ts";
import { VERSION } from "./version.ts";

/** Everything the operator needs to run, validated (see `config.ts`). */
export interface OperatorConfig {
  /**
   * The service endpoint. Its `retries` only applies to the pages of a listing (a resync must not
   * be given up for one 429 or 5xx); every other call is retried by the controller alone.
   */
  service: ServiceConfig;
  kubeconfig?: string;
  context?: string;
  /** The pod this instance runs in (`POD_NAME`, from the downward API): the base of its identity. */
  podName?: string;
  /** Namespaces to watch; empty means all. */
  namespaces: string[];
  labelSelector?: string;
  concurrency: number;
  /** Drift resync period; the service is listed once per period for all resources. */
  resyncMs: number;
  leaderElection: {
    enabled: boolean;
    namespace?: string;
    name: string;
    leaseDurationMs: number;
    renewDeadlineMs: number;
    retryPeriodMs: number;
  };
  metricsBindAddress: string;
  healthProbeBindAddress: string;
  shutdownTimeoutMs: number;
  /** While rolling out, creating or deleting, look again after this long. */
  pollMs: number;
  /** How long a missing listing after a create is blamed on lag (see the reconciler). */
  createGraceMs: number;
  /**
   * Longest one reconcile may run before its signal aborts; the failure is then reported on the
   * resource. Must exceed `service.timeoutMs`, so a hung call fails (and is reported) first.
   */
  reconcileTimeoutMs: number;
  /** Read the latest revision while a rollout is in progress (`--revision-tracking`). */
  revisionTracking: boolean;
}

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
export function buildOperator(config: OperatorConfig, deps: OperatorDeps): Operator {
  const { logger } = deps;
  const clock = deps.clock ?? systemClock;
  const identity = deps.identity ?? `${config.podName ?? hostname()}_${randomBytes(4).toString("hex")}`;
  const kube = loadKubeConfig({
    ...(config.kubeconfig ? { kubeconfig: config.kubeconfig } : {}),
    ...(config.context ? { context: config.context } : {}),
  });
  logger.info({ kubernetes: kube.description }, "Kubernetes configuration loaded");
  const kubeClient = new KubeClient(kube.config);
  const metrics = new RuntimeMetrics();
  // One retry layer: the controller's per-key backoff, which honours Retry-After through
  // failureOf. Client retries on top held a worker through up to 4 waits of up to 60 s each
  // (past the reconcile timeout on a 429) before the controller even saw the failure.
  const client = new ServiceClient({
    ...config.service,
    retries: 0,
    // `--retries` in `run`: retries of one page of a listing (the resync's), never of a write.
    pageRetries: config.service.retries,
    logger,
    onResponse: metrics.recordServiceCall,
    onUnknownValue: metrics.recordUnknownValue,
    onUnreadable: metrics.recordUnreadable,
  });
  const service = deploymentsPort(client);

  const scope = {
    ...(config.namespaces.length > 0 ? { namespaces: config.namespaces } : {}),
    ...(config.labelSelector ? { labelSelector: config.labelSelector } : {}),
  };
  const deployments = new KubeDeployments({
    client: kubeClient,
    scope,
    logger,
    clock,
    indexers: { [CLAIM_INDEX]: claimIndexer, [SECRET_INDEX]: secretIndexer, [POLL_INDEX]: pollIndexer },
  });
  registerResourceMetrics(metrics.registry, () => deployments.list());
  const secrets = new KubeSecrets({ client: kubeClient, namespaces: config.namespaces, logger, clock });
  const recorder = new KubeEventRecorder({ client: kubeClient, reportingInstance: identity, clock, logger });
  const snapshot = new RemoteSnapshot(service, clock, { maxAgeMs: config.resyncMs });
  const reconciler = new DeploymentReconciler({
    resources: resourcePort(deployments, CLAIM_INDEX),
    service,
    secrets: secretsPort(secrets),
    events: eventsPort(recorder),
    snapshot,
    clock,
    logger,
    pollMs: config.pollMs,
    createGraceMs: config.createGraceMs,
    revisionTracking: config.revisionTracking,
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
  subscribeTriggers(deployments, secrets, controller, CLAIM_INDEX, SECRET_INDEX);
  // Warns when the cache holds more resources than the heap limit (NODE_OPTIONS) was sized for.
  const heapBudget = new HeapBudgetCheck((fields, message) => logger.warn(fields, message));
  deployments.subscribe({ onAdd: () => heapBudget.add(1), onDelete: () => heapBudget.add(-1) });

  const health = new HealthServer({
    metricsBindAddress: config.metricsBindAddress,
    probeBindAddress: config.healthProbeBindAddress,
    registry: metrics.registry,
    clock,
    logger,
  });
  health.addReadinessCheck({
    name: "informers",
    check: async () => {
      if (!deployments.hasSynced() || !secrets.hasSynced()) throw new Error("caches not synced yet");
    },
  });
  // The service's reachability is not the operator's health: an outage there is reported on the
  // resources (ServiceUnavailable, Unauthorized), never by making every replica NotReady.

  const manager = new Manager({
    ...(config.leaderElection.enabled
      ? { elector: elector(config, kubeClient, kube.namespace, identity, metrics, logger, clock) }
      : {}),
    shutdownTimeoutMs: config.shutdownTimeoutMs,
    clock,
    logger,
  });
  manager.add(runnable("deployment-informer", false, (signal) => deployments.run(signal)));
  manager.add(runnable("secret-informer", false, (signal) => secrets.run(signal)));
  manager.add(health);
  // A start (a restart, a new leader) is a pass like every resync: one listing answers for every
  // resource instead of one lookup each, and serves the whole pass however long it takes.
  manager.add(
    new ResyncedController({
      controller,
      synced: () => Promise.all([deployments.synced, secrets.synced]),
      keys: () => deployments.list().map((o) => objectKey(refOf(o))),
      prepare: async (signal) => {
        await snapshot.refresh(signal);
        return snapshot.holdFresh();
      },
      periodMs: config.resyncMs,
      spreadMs: Math.min(config.resyncMs / 10, 60_000),
      clock,
      logger,
    }),
  );
  manager.add(
    new RolloutPoller({
      snapshot,
      ids: () => deployments.byIndex(POLL_INDEX, POLL_INDEX).flatMap((o) => o.status?.deploymentId ?? []),
      periodMs: config.pollMs,
      clock,
      logger,
    }),
  );
  return { manager, controller, health, metrics, identity, addresses: () => health.listening };
}

/** Runs the operator until `signal` aborts; resolves after a graceful shutdown. */
export async function runOperator(
  config: OperatorConfig,
  deps: OperatorDeps,
  signal: AbortSignal,
): Promise<void> {
  const operator = buildOperator(config, deps);
  deps.logger.info(
    {
      version: VERSION,
      identity: operator.identity,
      namespaces: config.namespaces.length > 0 ? config.namespaces : "all",
    },
    "starting dms-operator",
  );
  await operator.manager.start(signal);
  deps.logger.info("dms-operator stopped");
}

function elector(
  config: OperatorConfig,
  client: KubeClient,
  contextNamespace: string | undefined,
  identity: string,
  metrics: RuntimeMetrics,
  logger: Logger,
  clock: Clock,
): LeaderElector {
  const le = config.leaderElection;
  const namespace = le.namespace ?? contextNamespace ?? "default";
  return new LeaderElector({
    lease: new KubeLease(client, { namespace, name: le.name }),
    identity,
    leaseDurationMs: le.leaseDurationMs,
    renewDeadlineMs: le.renewDeadlineMs,
    retryPeriodMs: le.retryPeriodMs,
    clock,
    logger,
    onLeadingChange: (leading) => metrics.setLeader(le.name, leading),
  });
}

function runnable(
  name: string,
  needLeaderElection: boolean,
  start: (signal: AbortSignal, halt: AbortSignal) => Promise<unknown>,
): Runnable {
  return { name, needLeaderElection, start: async (signal, halt) => void (await start(signal, halt)) };
}
