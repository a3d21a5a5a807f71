/**
 * The composition root of the operator: the only place that wires adapters to the core.
 * `dms-operator run` calls {@link runOperator}; the integration tests call {@link buildOperator}
 * to run the very same wiring in-process.
 */
import { randomBytes } from "node:crypto";
import { hostname } from "node:os";
import { setFlagsFromString } from "node:v8";
import type { Logger } from "pino";
import { ServiceClient } from "./api/client.ts";
import type { ServiceConfig } from "./config.ts";
import { type DefaultConnectionSelector, NamespaceAccess } from "./connection/access.ts";
import { ConnectionReconciler, idOf } from "./connection/controller.ts";
import { ConnectionRegistry, type ConnectionService } from "./connection/registry.ts";
import { secretsOf } from "./connection/settings.ts";
import { connectionKey, DEFAULT_CONNECTION } from "./identity/connection.ts";
import { KubeClient } from "./kube/client.ts";
import { loadKubeConfig } from "./kube/config.ts";
import { KubeConnections } from "./kube/connections.ts";
import { KubeDeployments } from "./kube/deployments.ts";
import { ConflictError } from "./kube/errors.ts";
import { KubeEventRecorder } from "./kube/events.ts";
import { KubeLease } from "./kube/lease.ts";
import { KubeNamespaces } from "./kube/namespaces.ts";
import { objectKey, refOf } from "./kube/object.ts";
import { eventsPort, regardingOf, resourcePort, secretsPort } from "./kube/reconcile-adapters.ts";
import { KubeReviews } from "./kube/reviews.ts";
import { KubeSecrets } from "./kube/secrets.ts";
import { CLAIM_INDEX, claimIndexer, claimOn, connectionKeyOf } from "./reconcile/claims.ts";
import { startPass } from "./reconcile/freshness.ts";
import { SECRET_INDEX, secretIndexer } from "./reconcile/inputs.ts";
import { DeploymentReconciler } from "./reconcile/reconciler.ts";
import { POLL_INDEX, pollIndexer, RolloutPoller } from "./reconcile/remote.ts";
import { ServiceSession } from "./reconcile/session.ts";
import { type Clock, systemClock } from "./runtime/clock.ts";
import { Controller } from "./runtime/controller.ts";
import { HealthServer, type HealthServerOptions } from "./runtime/health.ts";
import { HeapBudgetCheck } from "./runtime/heap-budget.ts";
import { LeaderElector } from "./runtime/leader.ts";
import { Manager, type Runnable } from "./runtime/manager.ts";
import { RuntimeMetrics } from "./runtime/metrics.ts";
import { MetricsAuthenticator } from "./runtime/metrics-auth.ts";
import { registerRefusalMetrics } from "./runtime/refusal-metrics.ts";
import { registerConnectionMetrics, registerResourceMetrics } from "./runtime/resource-metrics.ts";
import { ResyncedController } from "./runtime/resync.ts";
import { DirectoryCertificate, SelfSignedCertificate } from "./runtime/serving-cert.ts";
import { VERSION } from "./version.ts";
import { deploymentsPort } from "./wiring/service-adapter.ts";
import {
  subscribeConnectionTriggers,
  subscribeNamespaceTriggers,
  subscribeTriggers,
} from "./wiring/triggers.ts";

/** The cache index of Deployment resources by the key of the connection they use. */
const CONNECTION_INDEX = "connection";
/** The cache index of Deployment resources by namespace (kept only when namespaces are watched). */
const NAMESPACE_INDEX = "namespace";
/** The cache index of connections by the Secrets they read, API key and CA (`namespace/name`). */
const CONNECTION_SECRET_INDEX = "apiKeySecret";
/** How often a connection's credentials are probed again. */
const CONNECTION_PROBE_MS = 300_000;
/**
 * Connections checked at once. A check waits on the network (a Secret read, a probe bounded by
 * its deadline, a status write): enough of them that twenty connections whose service never
 * answers do not hold back a new, healthy connection's check.
 */
const CONNECTION_CONCURRENCY = 32;
/** Longest wait before a connection whose listing missed its deadline or failed is listed again. */
const LISTING_RETRY_MS = 60_000;
/** The first wait before a failed listing is tried again (doubling up to LISTING_RETRY_MS). */
const LISTING_RETRY_BASE_MS = 2_000;

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
  /**
   * Watch ClusterServiceConnections (needs cluster-wide list/watch). Default: when watching all
   * namespaces; an install limited to some namespaces has only a Role.
   */
  clusterConnections?: boolean;
  labelSelector?: string;
  /**
   * Which namespaces may use the default connection (resources without `spec.connectionRef`):
   * `--default-connection-namespace-selector`. Absent: every watched namespace.
   */
  defaultConnectionNamespaceSelector?: DefaultConnectionSelector;
  concurrency: number;
  /** Drift resync period; each connection is listed once per period for all its resources. */
  resyncMs: number;
  /**
   * How long one connection's listing may take (`--listing-deadline`); its resources report
   * `ListingDeadlineExceeded` and make no call until one ends in time. Must be below `resyncMs`.
   * Default: a minute, or half the resync period when that is shorter.
   */
  listingDeadlineMs?: number;
  leaderElection: {
    enabled: boolean;
    namespace?: string;
    name: string;
    leaseDurationMs: number;
    renewDeadlineMs: number;
    retryPeriodMs: number;
  };
  metricsBindAddress: string;
  /**
   * Serve `/metrics` over HTTPS, each scrape authenticated (TokenReview) and authorized
   * (SubjectAccessReview, `get` on `/metrics`): `--metrics-secure`. Default true.
   */
  metricsSecure?: boolean;
  /** `tls.crt` and `tls.key` for `/metrics` (`--metrics-cert-dir`); default a self-signed certificate. */
  metricsCertDir?: string;
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
  /**
   * The most bytes of secret values one Deployment resource may send (`--max-secret-bytes`);
   * over it the resource is Stalled with `SecretsTooLarge`. Default 1 MiB.
   */
  maxSecretBytes?: number;
  /**
   * V8's `--optimize-for-size` for this process (`runOperator` only: it is process-wide). Node
   * refuses the flag in NODE_OPTIONS, so `run` sets it itself, before the cache fills.
   */
  optimizeForSize?: boolean;
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
  // One client per connection (the default one of the flags, and one per connection resource),
  // each with its own rate limit, Retry-After pause and listing.
  const connect = (service: ServiceConfig, connection: string): ConnectionService => {
    // One retry layer: the controller's per-key backoff, which honours Retry-After through
    // failureOf. Client retries on top held a worker through up to 4 waits of up to 60 s each
    // (past the reconcile timeout on a 429) before the controller even saw the failure.
    const client = new ServiceClient({
      ...service,
      retries: 0,
      // `--retries` in `run`: retries of one page of a listing (the resync's), never of a write.
      pageRetries: service.retries,
      logger: connection === DEFAULT_CONNECTION ? logger : logger.child({ connection }),
      onResponse: metrics.recordServiceCall,
      onUnknownValue: metrics.recordUnknownValue,
      onUnreadable: metrics.recordUnreadable,
    });
    return {
      port: deploymentsPort(client),
      probe: async (signal) => (await client.listProviders({ signal })).length,
    };
  };
  const listingDeadlineMs = config.listingDeadlineMs ?? defaultListingDeadlineMs(config.resyncMs);
  // A connection's snapshot holds only the deployments its resources claim (the claim index: no
  // scan, no string kept per resource): a tenant's listing, however long, costs its pages only.
  const newSession = (port: ReturnType<typeof deploymentsPort>, key: string) =>
    new ServiceSession(port, {
      clock,
      logger,
      listingMaxAgeMs: config.resyncMs,
      listingDeadlineMs,
      wanted: (name) => deployments.byIndex(CLAIM_INDEX, claimOn(key, name)).length > 0,
      revisionTracking: config.revisionTracking,
    });

  // Namespace selectors need the namespaces' labels: ClusterServiceConnections may carry one, and
  // the default connection may have one. Without either, namespaces are not watched (a namespaced
  // install cannot: namespaces are cluster-scoped).
  const clusterKind = config.clusterConnections ?? config.namespaces.length === 0;
  const namespaces =
    clusterKind || config.defaultConnectionNamespaceSelector
      ? new KubeNamespaces({ client: kubeClient, logger, clock })
      : undefined;
  const scope = {
    ...(config.namespaces.length > 0 ? { namespaces: config.namespaces } : {}),
    ...(config.labelSelector ? { labelSelector: config.labelSelector } : {}),
  };
  const deployments = new KubeDeployments({
    client: kubeClient,
    scope,
    logger,
    clock,
    indexers: {
      [CLAIM_INDEX]: claimIndexer,
      [SECRET_INDEX]: secretIndexer,
      [POLL_INDEX]: pollIndexer,
      ...(namespaces
        ? { [NAMESPACE_INDEX]: (o: { metadata: { namespace?: string } }) => [o.metadata.namespace ?? ""] }
        : {}),
      // Resources of the default connection are not indexed: it is never counted or re-checked.
      [CONNECTION_INDEX]: (o) => {
        const key = connectionKeyOf(o);
        return key === DEFAULT_CONNECTION ? [] : [key];
      },
    },
  });
  registerResourceMetrics(metrics.registry, () => deployments.list());
  const secrets = new KubeSecrets({ client: kubeClient, namespaces: config.namespaces, logger, clock });
  const recorder = new KubeEventRecorder({ client: kubeClient, reportingInstance: identity, clock, logger });
  // ClusterServiceConnections need cluster-wide list/watch, which an install limited to some
  // namespaces (a Role) does not have.
  const kubeConnections = new KubeConnections({
    client: kubeClient,
    namespaces: config.namespaces,
    clusterKind,
    logger,
    clock,
    // Its API key's Secret and its CA's: a change of either reaches the connection.
    indexers: { [CONNECTION_SECRET_INDEX]: (c) => secretsOf(idOf(c), c.spec).map(objectKey) },
  });
  registerConnectionMetrics(metrics.registry, () =>
    kubeConnections.all.flatMap((r) => r.list()).map((c) => ({ key: connectionKey(idOf(c)), ...c })),
  );
  let enqueueUsers = (_key: string) => {};
  let connectionsChanged = () => {};
  const connections = new ConnectionRegistry({
    connections: kubeConnections,
    defaultSession: newSession(connect(config.service, DEFAULT_CONNECTION).port, DEFAULT_CONNECTION),
    connect,
    session: newSession,
    access: new NamespaceAccess({
      ...(namespaces ? { labels: (name: string) => namespaces.labels(name) } : {}),
      ...(config.defaultConnectionNamespaceSelector
        ? { defaultSelector: config.defaultConnectionNamespaceSelector }
        : {}),
    }),
  });
  const connectionReconciler = new ConnectionReconciler({
    registry: connections,
    connections: kubeConnections,
    defaults: config.service,
    secrets: secretsPort(secrets),
    usage: (key) => deployments.byIndex(CONNECTION_INDEX, key).length,
    userNamespaces: (key) =>
      deployments.byIndex(CONNECTION_INDEX, key).map((o) => o.metadata.namespace ?? ""),
    onChange: (key) => {
      enqueueUsers(key);
      connectionsChanged();
    },
    event: (c, type, reason, note) =>
      void recorder.record(regardingOf(c, idOf(c).kind), { type, reason, action: "Probe", note }),
    isConflict: (error) => error instanceof ConflictError,
    clock,
    logger,
  });
  const resources = resourcePort(deployments, CLAIM_INDEX);
  const reconciler = new DeploymentReconciler({
    // A resource refused its connection claims no name on it: a hostile namespace cannot hold
    // another team's name on a shared tenant by creating its resource first.
    resources: {
      ...resources,
      // One that owns a deployment there (its status records one: only the operator writes
      // status) keeps its claim, so a relabelled namespace does not hand it to a rival.
      claimants: (claim) =>
        resources.claimants(claim).filter((o) => Boolean(o.status?.deploymentId) || !connections.refuses(o)),
    },
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
  const connectionController = new Controller({
    name: "connection",
    reconcile: connectionReconciler.reconcile,
    concurrency: CONNECTION_CONCURRENCY,
    reconcileTimeoutMs: config.reconcileTimeoutMs,
    clock,
    metrics: metrics.controllerHooks("connection"),
    logger,
  });
  subscribeTriggers(deployments, secrets, controller, CLAIM_INDEX, SECRET_INDEX);
  enqueueUsers = subscribeConnectionTriggers({
    deployments,
    connections: kubeConnections,
    secrets,
    deploymentController: controller,
    connectionController,
    connectionIndex: CONNECTION_INDEX,
    secretIndex: CONNECTION_SECRET_INDEX,
  });
  if (namespaces)
    subscribeNamespaceTriggers(namespaces, deployments, {
      namespaceIndex: NAMESPACE_INDEX,
      claimIndex: CLAIM_INDEX,
      deploymentController: controller,
      connectionController,
    });
  registerRefusalMetrics(metrics.registry, () => connections.refusals(deployments.list()));
  // Warns when the cache holds more resources than the heap limit (NODE_OPTIONS) was sized for.
  const heapBudget = new HeapBudgetCheck((fields, message) => logger.warn(fields, message));
  deployments.subscribe({ onAdd: () => heapBudget.add(1), onDelete: () => heapBudget.add(-1) });

  const health = new HealthServer({
    metricsBindAddress: config.metricsBindAddress,
    probeBindAddress: config.healthProbeBindAddress,
    registry: metrics.registry,
    ...metricsProtection(config, kubeClient, clock, logger),
    clock,
    logger,
  });
  health.addReadinessCheck({
    name: "informers",
    check: async () => {
      if (
        !deployments.hasSynced() ||
        !secrets.hasSynced() ||
        !kubeConnections.hasSynced() ||
        (namespaces && !namespaces.hasSynced())
      )
        throw new Error("caches not synced yet");
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
  manager.add(runnable("connection-informer", false, (signal) => kubeConnections.run(signal)));
  if (namespaces) manager.add(runnable("namespace-informer", false, (signal) => namespaces.run(signal)));
  const synced = () =>
    Promise.all([deployments.synced, secrets.synced, kubeConnections.synced, namespaces?.synced]);
  // The connections are checked (and re-probed) once per probe interval; their first check
  // enqueues the resources waiting for them.
  manager.add(
    new ResyncedController({
      controller: connectionController,
      synced,
      keys: () => kubeConnections.all.flatMap((r) => r.list()).map((c) => connectionKey(idOf(c))),
      prepare: async () => () => {},
      periodMs: CONNECTION_PROBE_MS,
      spreadMs: 0,
      clock,
      logger,
    }),
  );
  manager.add(health);
  // The periodic pass is per connection: each usable connection (the default one included) is
  // listed on its own, under --listing-deadline, and its resources are enqueued as soon as ITS
  // listing is in. One that is slow, endless or failing delays only its own resources, which then
  // report it without a call (see the reconciler). A start (a restart, a new
  // leader) is a pass like every resync: one listing per connection answers for its resources.
  const keyOf = (o: Parameters<typeof refOf>[0]) => objectKey(refOf(o));
  // A connection that has just become usable was listed by its check a moment ago.
  const reuseListingMs = Math.min(config.resyncMs / 2, 60_000);
  const resync = new ResyncedController({
    controller,
    synced,
    groups: () => connections.sessions().map((s) => s.key),
    // The default connection's resources are the only ones outside the connection index: found
    // by going through the cache once per pass of that connection, as the single pass did.
    keys: (key) =>
      key === DEFAULT_CONNECTION
        ? deployments.list().flatMap((o) => (connectionKeyOf(o) === DEFAULT_CONNECTION ? [keyOf(o)] : []))
        : deployments.byIndex(CONNECTION_INDEX, key).map(keyOf),
    // Resources of a connection not usable at the start: told so once (its check enqueues them
    // again when that changes).
    ungrouped: () => {
      const usable = new Set(connections.sessions().map((s) => s.key));
      return deployments.list().flatMap((o) => (usable.has(connectionKeyOf(o)) ? [] : [keyOf(o)]));
    },
    prepare: async (key, signal) => {
      const session = connections.session(key);
      if (!session) return () => {};
      return startPass(session.snapshot, reuseListingMs, signal);
    },
    periodMs: config.resyncMs,
    retryMs: Math.min(config.resyncMs, LISTING_RETRY_MS),
    // A failed listing is tried again soon, then less often: its resources heal within seconds
    // of the service's, while one that stays down costs a listing a minute.
    retryBaseMs: Math.min(config.resyncMs, LISTING_RETRY_BASE_MS),
    spreadMs: Math.min(config.resyncMs / 10, 60_000),
    clock,
    logger,
  });
  connectionsChanged = () => resync.groupsChanged();
  manager.add(resync);
  manager.add(
    new RolloutPoller({
      targets: () => {
        const ids = new Map<string, string[]>();
        for (const o of deployments.byIndex(POLL_INDEX, POLL_INDEX)) {
          const id = o.status?.deploymentId;
          // A resource refused its connection makes no call through it, polls included.
          if (!id || connections.refuses(o)) continue;
          const key = connectionKeyOf(o);
          const list = ids.get(key);
          if (list) list.push(id);
          else ids.set(key, [id]);
        }
        return [...ids].flatMap(([key, list]) => {
          const session = connections.session(key);
          return session ? [{ snapshot: session.snapshot, ids: list }] : [];
        });
      },
      periodMs: config.pollMs,
      clock,
      logger,
    }),
  );
  return { manager, controller, health, metrics, identity, addresses: () => health.listening };
}

/**
 * The listing deadline when none is given: a minute, or half the resync period when that is
 * shorter (a listing must end well before the next pass is due).
 */
export function defaultListingDeadlineMs(resyncMs: number): number {
  return Math.min(60_000, resyncMs / 2);
}

/** Runs the operator until `signal` aborts; resolves after a graceful shutdown. */
export async function runOperator(
  config: OperatorConfig,
  deps: OperatorDeps,
  signal: AbortSignal,
): Promise<void> {
  // Measured at 10,000 resources (docs/benchmarks.md, "Memory"): the heap is collected and
  // compacted closer to its live size, for a few percent more CPU.
  if (config.optimizeForSize) setFlagsFromString("--optimize-for-size");
  const operator = buildOperator(config, deps);
  deps.logger.info(
    {
      version: VERSION,
      identity: operator.identity,
      namespaces: config.namespaces.length > 0 ? config.namespaces : "all",
      optimizeForSize: config.optimizeForSize ?? false,
    },
    "starting dms-operator",
  );
  await operator.manager.start(signal);
  deps.logger.info("dms-operator stopped");
}

/**
 * HTTPS and the token and access reviews of `/metrics`, unless `--metrics-secure=false`. The
 * reviews go through the operator's own client: its ServiceAccount may create both.
 */
function metricsProtection(
  config: OperatorConfig,
  client: KubeClient,
  clock: Clock,
  logger: Logger,
): Pick<HealthServerOptions, "metricsCertificate" | "metricsAuthenticator"> {
  // Without a metrics listener (`--metrics-bind-address=0`) there is nothing to protect.
  if (config.metricsSecure === false || config.metricsBindAddress.trim() === "0") return {};
  return {
    metricsCertificate: config.metricsCertDir
      ? new DirectoryCertificate({ dir: config.metricsCertDir, clock, logger })
      : new SelfSignedCertificate({ clock }),
    metricsAuthenticator: new MetricsAuthenticator({ reviews: new KubeReviews(client), clock, logger }),
  };
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
