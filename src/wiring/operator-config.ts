/**
 * The operator's settings object, as `commands/run-config.ts` gives it from the table of settings
 * (`commands/settings.ts`: each setting's flag, variable, chart value, default, bound and help),
 * and the constants of the operator that are not settings; what `main.ts` builds from them and
 * with what.
 */
import type { Logger } from "pino";
import type { AddressPolicy } from "../api/address-policy.ts";
import type { ServiceConfig } from "../config.ts";
import type { DefaultConnectionSelector } from "../connection/access.ts";
import type { Clock } from "../runtime/clock.ts";
import type { Controller } from "../runtime/controller.ts";
import type { Manager } from "../runtime/manager.ts";
import type { RuntimeMetrics } from "../runtime/metrics.ts";
import type { HealthServer } from "../serving/health.ts";

/** How often a connection's credentials are probed again. */
export const CONNECTION_PROBE_MS = 300_000;
/**
 * Connections checked at once. A check waits on the network (a Secret read, a probe bounded by
 * its deadline, a status write): enough of them that twenty connections whose service never
 * answers do not hold back a new, healthy connection's check.
 */
export const CONNECTION_CONCURRENCY = 32;
/**
 * The checks of one namespace's ServiceConnections at once (their flow's cap, connection/access.ts):
 * a namespace of a hundred connections whose service never answers holds 8 of the 32 (a quarter,
 * as the Deployment controller's cap is of its workers), not all: twenty of them are checked in
 * three probe deadlines rather than one. Its checks that end within 5 s borrow the idle others.
 */
export const CONNECTION_CHECKS_PER_NAMESPACE = 8;

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
  /**
   * Reconciles of one connection at once (`--max-reconciles-per-connection`); of a
   * ClusterServiceConnection, or of the default connection, also of one namespace; of a
   * namespace's ServiceConnections, of them together. The others
   * wait in their connection's queue without holding a worker. Default: a quarter of
   * `concurrency`, rounded up ({@link defaultMaxReconcilesPerConnection}).
   */
  maxReconcilesPerConnection?: number;
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
  /**
   * `--sharded`: every replica reconciles a share of the resources (a Lease per replica, the
   * leader assigns by label); needs leader election. Default off: one leader does all the work.
   */
  sharded?: boolean;
  /**
   * With `sharded`: the name of the ValidatingAdmissionPolicy (and of its binding) that keeps
   * everyone but the operator off the shard labels; a replica refuses to start without them.
   * Absent: not checked (`--shard-label-policy=unenforced`).
   */
  shardLabelPolicy?: string;
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
   * The V8 flags of runtime/heap-tuning.ts for this process (`runOperator` only: they are
   * process-wide).
   */
  optimizeForSize?: boolean;
  /**
   * What the service clients may connect to besides public addresses
   * (`--connection-address-policy`, address-policy.ts); link-local and metadata addresses never.
   * Default `allow-private`.
   */
  connectionAddressPolicy?: AddressPolicy;
  /** Most ServiceConnections per namespace that get a client (`--max-connections-per-namespace`). */
  maxConnectionsPerNamespace?: number;
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
  /** What the rollout windows' search is timed on; default the thread's CPU time (tests: one that stands still). */
  searchCounter?: () => number;
}

export { defaultMaxReconcilesPerConnection } from "../connection/access.ts";

/**
 * The listing deadline when none is given: a minute, or half the resync period when that is
 * shorter (a listing must end well before the next pass is due).
 */
export function defaultListingDeadlineMs(resyncMs: number): number {
  return Math.min(60_000, resyncMs / 2);
}
