/**
 * The composition root of the operator: the only place that wires adapters to the core.
 * `dms-operator run` calls {@link runOperator}; the integration tests call {@link buildOperator}
 * to run the very same wiring in-process.
 */
import { randomBytes } from "node:crypto";
import { hostname } from "node:os";
import type { Logger } from "pino";
import { ServiceClient } from "./api/client.ts";
import { deploymentsPort } from "./api/port.ts";
import type { ServiceConfig } from "./config.ts";
import { secretKeyRefs } from "./crd/mapping.ts";
import { KubeClient } from "./kube/client.ts";
import { loadKubeConfig } from "./kube/config.ts";
import { type DeploymentObject, KubeDeployments } from "./kube/deployments.ts";
import { KubeEventRecorder } from "./kube/events.ts";
import { KubeLease } from "./kube/lease.ts";
import { objectKey, refOf } from "./kube/object.ts";
import { eventsPort, resourcePort, secretsPort } from "./kube/ports.ts";
import { KubeSecrets } from "./kube/secrets.ts";
import { sameNameKeys } from "./reconcile/claims.ts";
import { DeploymentReconciler } from "./reconcile/reconciler.ts";
import { RemoteSnapshot } from "./reconcile/remote.ts";
import { type Clock, systemClock } from "./runtime/clock.ts";
import { Controller } from "./runtime/controller.ts";
import { HealthServer } from "./runtime/health.ts";
import { LeaderElector } from "./runtime/leader.ts";
import { Manager, type Runnable } from "./runtime/manager.ts";
import { RuntimeMetrics } from "./runtime/metrics.ts";
import { registerResourceMetrics } from "./runtime/resource-metrics.ts";
import { VERSION } from "./version.ts";

/** Everything the operator needs to run, validated (see `config.ts`). */
export interface OperatorConfig {
  /** The service endpoint; its `retries` is not used: the controller alone retries a reconcile. */
  service: ServiceConfig;
  kubeconfig?: string;
  context?: string;
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
  const identity = deps.identity ?? `${process.env.POD_NAME ?? hostname()}_${randomBytes(4).toString("hex")}`;
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
    logger,
    onResponse: metrics.recordServiceCall,
  });
  const service = deploymentsPort(client);

  const scope = {
    ...(config.namespaces.length > 0 ? { namespaces: config.namespaces } : {}),
    ...(config.labelSelector ? { labelSelector: config.labelSelector } : {}),
  };
  const deployments = new KubeDeployments({ client: kubeClient, scope, logger, clock });
  registerResourceMetrics(metrics.registry, () => deployments.list());
  const secrets = new KubeSecrets({ client: kubeClient, namespaces: config.namespaces, logger, clock });
  const recorder = new KubeEventRecorder({ client: kubeClient, reportingInstance: identity, clock, logger });
  // One resync tick's reconciles are spread over this window and read the tick's listing.
  const spreadMs = Math.min(config.resyncMs / 10, 60_000);
  const snapshot = new RemoteSnapshot(service, clock, spreadMs + 30_000);
  const reconciler = new DeploymentReconciler({
    resources: resourcePort(deployments),
    service,
    secrets: secretsPort(secrets),
    events: eventsPort(recorder),
    snapshot,
    clock,
    logger,
    pollMs: config.pollMs,
    createGraceMs: config.createGraceMs,
  });
  const controller = new Controller({
    name: "deployment",
    reconcile: reconciler.reconcile,
    concurrency: config.concurrency,
    resyncMs: 0,
    reconcileTimeoutMs: config.reconcileTimeoutMs,
    listKeys: () => deployments.list().map((o) => objectKey(refOf(o))),
    clock,
    metrics: metrics.controllerHooks("deployment"),
    logger,
  });
  subscribeTriggers(deployments, secrets, controller);

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
  health.addReadinessCheck(serviceReachable(client, clock));

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
  manager.add(
    runnable("deployment-controller", true, async (signal, halt) => {
      // Workers start once the caches hold every resource and Secret in scope.
      await untilAborted(Promise.all([deployments.synced, secrets.synced]), signal);
      if (signal.aborted) return;
      // A start (a restart, a new leader) reconciles everything, like a resync: one listing
      // answers for the settled resources instead of one lookup each.
      await snapshot.refresh(signal).catch((error: unknown) => {
        if (!signal.aborted)
          logger.warn(
            { err: error instanceof Error ? error.message : String(error) },
            "initial listing failed",
          );
      });
      if (!signal.aborted) await controller.start(signal, halt);
    }),
  );
  manager.add(
    runnable("drift-resync", true, (signal) =>
      resyncLoop({ config, clock, snapshot, controller, deployments, spreadMs, logger }, signal),
    ),
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

/** Enqueues reconciles on the changes that matter: not on the operator's own status writes. */
function subscribeTriggers(deployments: KubeDeployments, secrets: KubeSecrets, controller: Controller): void {
  const keyOf = (o: DeploymentObject) => objectKey(refOf(o));
  deployments.subscribe({
    onAdd: (o) => controller.enqueue(keyOf(o)),
    onUpdate: (old, o) => {
      if (specOrMetaChanged(old, o)) controller.enqueue(keyOf(o));
    },
    onDelete: (o) => {
      controller.forget(keyOf(o));
      // A resource that lost a name conflict to this one may now take the name.
      for (const key of sameNameKeys(o, deployments.list())) controller.enqueue(key);
    },
  });
  secrets.onChange((ref) => {
    for (const o of deployments.listNamespace(ref.namespace)) {
      if (secretKeyRefs(o.spec).some((r) => r.secret === ref.name)) controller.enqueue(keyOf(o));
    }
  });
}

/** True when an update is more than a status write: spec, annotations, labels, finalizers, deletion. */
function specOrMetaChanged(old: DeploymentObject, o: DeploymentObject): boolean {
  const a = old.metadata;
  const b = o.metadata;
  return (
    a.generation !== b.generation ||
    a.deletionTimestamp !== b.deletionTimestamp ||
    JSON.stringify(a.annotations ?? {}) !== JSON.stringify(b.annotations ?? {}) ||
    JSON.stringify(a.labels ?? {}) !== JSON.stringify(b.labels ?? {}) ||
    JSON.stringify(a.finalizers ?? []) !== JSON.stringify(b.finalizers ?? [])
  );
}

interface ResyncParts {
  config: OperatorConfig;
  clock: Clock;
  snapshot: RemoteSnapshot;
  controller: Controller;
  deployments: KubeDeployments;
  spreadMs: number;
  logger: Logger;
}

/**
 * Every resync period (±10 %): list the service once, then enqueue every resource spread over a
 * short window; their reconciles read that listing instead of asking the service one by one.
 */
async function resyncLoop(parts: ResyncParts, signal: AbortSignal): Promise<void> {
  const { config, clock, snapshot, controller, deployments, spreadMs, logger } = parts;
  while (!signal.aborted) {
    const wait = config.resyncMs * (0.9 + Math.random() * 0.2);
    try {
      await clock.sleep(wait, signal);
    } catch {
      return;
    }
    try {
      await snapshot.refresh(signal);
      controller.enqueueAll(
        deployments.list().map((o) => objectKey(refOf(o))),
        spreadMs,
      );
    } catch (error) {
      if (!signal.aborted)
        logger.warn(
          { err: error instanceof Error ? error.message : String(error) },
          "drift resync listing failed; retrying next period",
        );
    }
  }
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
  const namespace = le.namespace ?? process.env.POD_NAMESPACE ?? contextNamespace ?? "default";
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

/** The service answers an authenticated call (the OAuth provider listing), checked at most every 10 s. */
function serviceReachable(client: ServiceClient, clock: Clock) {
  let last: { at: number; error?: Error } | undefined;
  return {
    name: "service",
    check: async (signal: AbortSignal) => {
      if (!last || clock.now() - last.at > 10_000) {
        try {
          await client.listProviders({ signal });
          last = { at: clock.now() };
        } catch (error) {
          last = { at: clock.now(), error: error instanceof Error ? error : new Error(String(error)) };
        }
      }
      if (last.error) throw last.error;
    },
  };
}

function runnable(
  name: string,
  needLeaderElection: boolean,
  start: (signal: AbortSignal, halt: AbortSignal) => Promise<unknown>,
): Runnable {
  return { name, needLeaderElection, start: async (signal, halt) => void (await start(signal, halt)) };
}

/** Resolves when `promise` does or `signal` aborts, whichever comes first. */
function untilAborted(promise: Promise<unknown>, signal: AbortSignal): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    if (signal.aborted) return resolve();
    const onAbort = () => resolve();
    signal.addEventListener("abort", onAbort, { once: true });
    promise.then(
      () => {
        signal.removeEventListener("abort", onAbort);
        resolve();
      },
      (error: unknown) => {
        signal.removeEventListener("abort", onAbort);
        reject(error);
      },
    );
  });
}
