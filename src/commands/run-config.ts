/**
 * The settings of `dms-operator run`, from flags, then environment variables, then defaults,
 * validated at start-up: every problem is one line naming the flag, its variable, and the fix.
 * One table says, per setting, its variable, how its text is read, its default and its help;
 * `run.ts` registers the flags from it and {@link runConfigFrom} reads them in one loop
 * (`readSettings`, config.ts, which reads the service settings too).
 */

import { ADDRESS_POLICIES } from "../api/address-policy.ts";
import {
  type ConfigResult,
  type Env,
  type Parsed,
  parsers,
  readSettings,
  type ServiceFlags,
  type Setting,
  type Settings,
  type SettingValues,
  serviceConfigFrom,
  settingName,
} from "../config.ts";
import type { DefaultConnectionSelector } from "../connection/access.ts";
import { DEFAULT_MAX_CONNECTIONS_PER_NAMESPACE } from "../connection/registry.ts";
import { parseSelector } from "../crd/label-selector.ts";
import { DEFAULT_MAX_SECRET_BYTES } from "../reconcile/secret-budget.ts";
import { LOG_FORMATS, type LogFormat } from "../runtime/log.ts";
import { parseBindAddress } from "../serving/health.ts";
import {
  defaultListingDeadlineMs,
  defaultMaxReconcilesPerConnection,
  type OperatorConfig,
} from "../wiring/operator-config.ts";
import { DEFAULT_SHARD_LABEL_POLICY } from "../wiring/shard-label-policy.ts";

/** `--shard-label-policy`: whether a sharded replica requires the shard label policy at start. */
const SHARD_LABEL_POLICY_MODES = ["required", "unenforced"] as const;

/** Accepted `--log-level` values. */
export const LOG_LEVELS = ["trace", "debug", "info", "warn", "error", "fatal", "silent"] as const;

/**
 * Highest `--max-secret-bytes` (16 MiB): a reconcile holds a few copies of what it sends, times
 * `--concurrency`, within the operator's heap.
 */
export const MAX_SECRET_BYTES_CEILING = 16_777_216;

/** The settings of `run`, in the order `--help` lists them (the service's follow). */
export const RUN_SETTINGS = {
  kubeconfig: {
    env: "KUBECONFIG",
    parse: parsers.text,
    arg: "<path>",
    help: "kubeconfig file; in a cluster the service account is used",
  },
  context: { parse: parsers.text, arg: "<name>", help: "kubeconfig context" },
  namespaces: {
    env: "DMS_NAMESPACES",
    parse: parsers.namespaceList,
    default: "",
    shown: "all",
    arg: "<a,b>",
    help: "namespaces to watch, comma-separated",
  },
  clusterConnections: {
    env: "DMS_CLUSTER_CONNECTIONS",
    parse: parsers.boolean,
    shown: "on when watching all namespaces",
    help: "watch ClusterServiceConnections (needs cluster-wide list/watch on them)",
  },
  labelSelector: {
    env: "DMS_LABEL_SELECTOR",
    parse: parsers.text,
    arg: "<selector>",
    help: "only resources matching this label selector",
  },
  defaultConnectionNamespaceSelector: {
    env: "DMS_DEFAULT_CONNECTION_NAMESPACE_SELECTOR",
    parse: namespaceSelector,
    shown: "every watched namespace",
    arg: "<selector>",
    help: "which namespaces may use the default connection (resources without spec.connectionRef), by their labels, e.g. dms.dev/tenant=platform",
  },
  concurrency: {
    env: "DMS_CONCURRENCY",
    parse: parsers.number({ integer: true, min: 1, max: 64, unit: "reconciles at once" }),
    default: "16",
    arg: "<n>",
    help: "reconciles at once",
  },
  maxReconcilesPerConnection: {
    env: "DMS_MAX_RECONCILES_PER_CONNECTION",
    parse: parsers.number({ integer: true, min: 1, max: 64, unit: "reconciles at once" }),
    shown: "a quarter of --concurrency (rounded up)",
    arg: "<n>",
    help: "reconciles of one connection at once (of a ClusterServiceConnection or the default one: of one namespace too); the others wait without holding a worker",
  },
  resyncPeriod: {
    env: "DMS_RESYNC_PERIOD",
    parse: parsers.duration("10s"),
    default: "10m",
    arg: "<duration>",
    help: "drift check period",
  },
  listingDeadline: {
    env: "DMS_LISTING_DEADLINE",
    parse: parsers.duration("1s"),
    shown: "1m (at most half the resync period)",
    arg: "<duration>",
    help: "longest one connection's periodic listing may take; past it, its resources report ListingDeadlineExceeded and make no call until one ends in time (below --resync-period)",
  },
  leaderElect: {
    env: "DMS_LEADER_ELECT",
    parse: parsers.boolean,
    default: "true",
    shown: "on",
    help: "elect a leader through a Lease",
  },
  leaderElectionNamespace: {
    env: "DMS_LEADER_ELECTION_NAMESPACE",
    parse: parsers.text,
    shown: "the pod's",
    arg: "<ns>",
    help: "namespace of the Lease",
  },
  leaderElectionId: {
    env: "DMS_LEADER_ELECTION_ID",
    parse: parsers.text,
    default: "dms-operator-leader",
    arg: "<name>",
    help: "name of the Lease",
  },
  leaseDuration: {
    parse: parsers.duration(),
    default: "15s",
    arg: "<duration>",
    help: "leader lease duration",
  },
  renewDeadline: {
    parse: parsers.duration(),
    default: "10s",
    arg: "<duration>",
    help: "leader renew deadline",
  },
  retryPeriod: { parse: parsers.duration(), default: "2s", arg: "<duration>", help: "leader retry period" },
  sharded: {
    env: "DMS_SHARDED",
    parse: parsers.boolean,
    default: "false",
    shown: "off",
    help: "spread the resources over every replica (a Lease per replica, POD_NAME); the leader assigns them",
  },
  shardLabelPolicy: {
    env: "DMS_SHARD_LABEL_POLICY",
    parse: parsers.oneOf(SHARD_LABEL_POLICY_MODES),
    default: "required",
    arg: "<required|unenforced>",
    help: "with --sharded: required, a replica starts only once the ValidatingAdmissionPolicy keeping everyone else off the shard labels and its binding exist; unenforced, it runs without them, accepting that a tenant who may edit its resources can make two replicas write one deployment",
  },
  shardLabelPolicyName: {
    env: "DMS_SHARD_LABEL_POLICY_NAME",
    parse: parsers.text,
    default: DEFAULT_SHARD_LABEL_POLICY,
    arg: "<name>",
    help: "name of that ValidatingAdmissionPolicy and of its binding",
  },
  metricsBindAddress: {
    env: "DMS_METRICS_BIND_ADDRESS",
    parse: bindAddress,
    shown: ":8443 (:8080 with --metrics-secure=false)",
    arg: "<addr>",
    help: "where /metrics listens, 0 to disable",
  },
  metricsSecure: {
    env: "DMS_METRICS_SECURE",
    parse: parsers.boolean,
    default: "true",
    arg: "[true|false]",
    help: "serve /metrics over HTTPS to scrapers whose bearer token the API server authenticates (TokenReview) and allows get on /metrics (SubjectAccessReview); false: plain HTTP to anyone",
  },
  metricsCertDir: {
    env: "DMS_METRICS_CERT_DIR",
    parse: parsers.text,
    shown: "a self-signed certificate",
    arg: "<dir>",
    help: "directory with tls.crt and tls.key for /metrics (a mounted kubernetes.io/tls Secret; re-read when renewed)",
  },
  healthProbeBindAddress: {
    env: "DMS_HEALTH_PROBE_BIND_ADDRESS",
    parse: bindAddress,
    default: ":8081",
    arg: "<addr>",
    help: "where /healthz and /readyz listen",
  },
  logLevel: {
    env: "DMS_LOG_LEVEL",
    parse: parsers.oneOf(LOG_LEVELS),
    default: "info",
    arg: "<level>",
    help: "trace, debug, info, warn, error",
  },
  logFormat: {
    env: "DMS_LOG_FORMAT",
    parse: parsers.oneOf(LOG_FORMATS),
    shown: "json (console on a terminal)",
    arg: "<format>",
    help: "json (one object per line) or console (one line for a person)",
  },
  shutdownTimeout: {
    env: "DMS_SHUTDOWN_TIMEOUT",
    parse: parsers.duration(),
    default: "30s",
    arg: "<duration>",
    help: "graceful shutdown deadline",
  },
  // A tiny poll interval turns every rollout into a tight requeue loop against the service.
  pollInterval: {
    env: "DMS_POLL_INTERVAL",
    parse: parsers.duration("1s"),
    default: "5s",
    arg: "<duration>",
    help: "status polling while rolling out or deleting",
  },
  createGrace: {
    env: "DMS_CREATE_GRACE",
    parse: parsers.duration(),
    default: "60s",
    arg: "<duration>",
    help: "how long to wait for a created deployment to be listed before creating again",
  },
  reconcileTimeout: {
    env: "DMS_RECONCILE_TIMEOUT",
    parse: parsers.duration(),
    default: "2m",
    arg: "<duration>",
    help: "longest one reconcile may run; more than --timeout-ms",
  },
  revisionTracking: {
    env: "DMS_REVISION_TRACKING",
    parse: parsers.onOff,
    default: "on",
    arg: "<on|off>",
    help: "while a rollout is in progress, read the latest revision so that a failed build or deploy is reported as RevisionFailed",
  },
  // Bounds what one resource makes the operator hold: each entry of spec.secrets sends its value,
  // so one large Secret key listed many times would be multiplied in every body, hash and diff.
  maxSecretBytes: {
    env: "DMS_MAX_SECRET_BYTES",
    parse: parsers.number({ integer: true, min: 1_024, max: MAX_SECRET_BYTES_CEILING, unit: "bytes" }),
    default: String(DEFAULT_MAX_SECRET_BYTES),
    arg: "<bytes>",
    help: "most bytes of secret values one Deployment resource may send, each entry counted (over it: SecretsTooLarge)",
  },
  connectionAddressPolicy: {
    env: "DMS_CONNECTION_ADDRESS_POLICY",
    parse: parsers.oneOf(ADDRESS_POLICIES),
    default: "allow-private",
    arg: "<policy>",
    help: "which addresses the service's connections may reach: allow-private (public, private and loopback) or public-only; link-local and cloud metadata addresses never",
  },
  maxConnectionsPerNamespace: {
    env: "DMS_MAX_CONNECTIONS_PER_NAMESPACE",
    parse: parsers.number({ integer: true, min: 1, max: 10_000, unit: "connections" }),
    default: String(DEFAULT_MAX_CONNECTIONS_PER_NAMESPACE),
    arg: "<n>",
    help: "most ServiceConnections of one namespace that get a client, the oldest first (the others: Ready=False, TooManyConnections)",
  },
  optimizeForSize: {
    env: "DMS_OPTIMIZE_FOR_SIZE",
    parse: parsers.onOff,
    default: "on",
    arg: "<on|off>",
    help: "V8 favours memory over speed: its heap stays close to what is live, and no allocation site is pretenured (flags NODE_OPTIONS cannot carry)",
  },
} satisfies Settings;

type RunValues = SettingValues<typeof RUN_SETTINGS>;

/** `run` flags as commander parses them (each setting's camel-cased name). */
export type RunFlags = ServiceFlags & { [K in keyof typeof RUN_SETTINGS]?: string | boolean };

/** Lowest `--create-grace`, in ms (it must also be at least the poll interval). */
export const MIN_CREATE_GRACE_MS = 5_000;

/** Lowest `--reconcile-timeout`, in ms (it must also exceed the service request timeout). */
export const MIN_RECONCILE_TIMEOUT_MS = 5_000;

/** What the rules between settings look at. */
interface RuleInput {
  values: RunValues;
  /** The poll interval as given (or its default), to name it in a problem. */
  pollText: string;
  /** The service request timeout, in ms (0 when the service settings are invalid). */
  requestTimeoutMs: number;
}

/** The rules that join settings: each a problem line when broken. */
const RULES: ReadonlyArray<(input: RuleInput) => string | undefined> = [
  ({ values: v }) =>
    v.leaseDuration > v.renewDeadline && v.renewDeadline > 1.2 * v.retryPeriod
      ? undefined
      : "--lease-duration, --renew-deadline, --retry-period: need lease > renew deadline > 1.2 × retry period",
  // The leader runs the sharder: without an election nobody assigns the resources.
  ({ values: v }) =>
    !v.sharded || v.leaderElect
      ? undefined
      : `${nameOf("sharded")}: needs leader election (drop --no-leader-elect): the elected leader assigns the resources to the replicas`,
  // A create grace shorter than the poll (or than the service's listing lag) lets the controller
  // create the same deployment twice before the first one is listed.
  ({ values: v, pollText }) =>
    v.createGrace >= Math.max(MIN_CREATE_GRACE_MS, v.pollInterval)
      ? undefined
      : `${nameOf("createGrace")}: must be at least 5s and at least the poll interval (${pollText})`,
  // A listing allowed the whole period would leave its connection's resources no pass at all when
  // it hangs, and its reading would be a period old before its pass began.
  ({ values: v }) =>
    v.listingDeadline === undefined || v.listingDeadline < v.resyncPeriod
      ? undefined
      : `${nameOf("listingDeadline")}: must be below the resync period (--resync-period / DMS_RESYNC_PERIOD); a listing deadline of a few minutes at most is usual`,
  // A reconcile cut off while its one service call is still within the request timeout could
  // never report that call's failure: the call must be able to end before the reconcile does.
  ({ values: v, requestTimeoutMs }) =>
    v.reconcileTimeout >= MIN_RECONCILE_TIMEOUT_MS && v.reconcileTimeout > requestTimeoutMs
      ? undefined
      : `${nameOf("reconcileTimeout")}: must be at least 5s and more than the service request timeout (--timeout-ms ${requestTimeoutMs})`,
  // The kubelet probes in plain HTTP: one listener cannot serve both.
  ({ values: v }) =>
    v.metricsSecure &&
    metricsAddressOf(v) !== "0" &&
    sameBindAddress(metricsAddressOf(v), v.healthProbeBindAddress)
      ? `${nameOf("metricsBindAddress")}: must differ from the health probe address (--health-probe-bind-address) while /metrics is served over HTTPS (--metrics-secure)`
      : undefined,
  ({ values: v }) =>
    v.maxReconcilesPerConnection === undefined || v.maxReconcilesPerConnection <= v.concurrency
      ? undefined
      : `${nameOf("maxReconcilesPerConnection")}: must be at most --concurrency (${v.concurrency}); leave it out for a quarter of it`,
  ({ values: v }) =>
    v.metricsCertDir !== undefined && !v.metricsSecure
      ? `${nameOf("metricsCertDir")}: only used over HTTPS; remove it, or drop --metrics-secure=false`
      : undefined,
];

/** The metrics address given, or its default: `:8443` over HTTPS, `:8080` in plain HTTP. */
function metricsAddressOf(v: RunValues): string {
  return v.metricsBindAddress ?? (v.metricsSecure ? ":8443" : ":8080");
}

function sameBindAddress(a: string, b: string): boolean {
  const [x, y] = [parseBindAddress(a), parseBindAddress(b)];
  return (
    x !== undefined &&
    y !== undefined &&
    x.port !== 0 &&
    x.port === y.port &&
    (x.host ?? "") === (y.host ?? "")
  );
}

/** The `run` configuration and its log level, or every problem found. */
export function runConfigFrom(
  flags: RunFlags,
  env: Env,
): ConfigResult<OperatorConfig & { logLevel: (typeof LOG_LEVELS)[number]; logFormat?: LogFormat }> {
  const service = serviceConfigFrom(flags, env);
  const { values: v, given, problems } = readSettings(RUN_SETTINGS, flags, env);
  const input: RuleInput = {
    values: v,
    pollText: given.pollInterval ?? RUN_SETTINGS.pollInterval.default,
    requestTimeoutMs: service.ok ? service.config.timeoutMs : 0,
  };
  for (const rule of RULES) {
    const problem = rule(input);
    if (problem !== undefined) problems.push(problem);
  }
  if (!service.ok) return { ok: false, problems: [...service.problems, ...problems] };
  if (problems.length > 0) return { ok: false, problems };
  // In a pod the downward API's POD_NAMESPACE is the default: the Lease lives beside the operator.
  const leaseNamespace = v.leaderElectionNamespace ?? env.POD_NAMESPACE;
  const config = {
    service: service.config,
    ...(v.kubeconfig ? { kubeconfig: v.kubeconfig } : {}),
    ...(v.context ? { context: v.context } : {}),
    namespaces: v.namespaces,
    ...(v.clusterConnections !== undefined ? { clusterConnections: v.clusterConnections } : {}),
    ...(v.labelSelector ? { labelSelector: v.labelSelector } : {}),
    // An empty selector selects every namespace: the same as none, and no namespace watch.
    ...(v.defaultConnectionNamespaceSelector?.selector.length
      ? { defaultConnectionNamespaceSelector: v.defaultConnectionNamespaceSelector }
      : {}),
    concurrency: v.concurrency,
    maxReconcilesPerConnection:
      v.maxReconcilesPerConnection ?? defaultMaxReconcilesPerConnection(v.concurrency),
    resyncMs: v.resyncPeriod,
    listingDeadlineMs: v.listingDeadline ?? defaultListingDeadlineMs(v.resyncPeriod),
    ...(env.POD_NAME ? { podName: env.POD_NAME } : {}),
    leaderElection: {
      enabled: v.leaderElect,
      ...(leaseNamespace ? { namespace: leaseNamespace } : {}),
      name: v.leaderElectionId,
      leaseDurationMs: v.leaseDuration,
      renewDeadlineMs: v.renewDeadline,
      retryPeriodMs: v.retryPeriod,
    },
    ...(v.sharded ? { sharded: true } : {}),
    ...(v.sharded && v.shardLabelPolicy === "required" ? { shardLabelPolicy: v.shardLabelPolicyName } : {}),
    metricsBindAddress: metricsAddressOf(v),
    metricsSecure: v.metricsSecure,
    ...(v.metricsCertDir ? { metricsCertDir: v.metricsCertDir } : {}),
    healthProbeBindAddress: v.healthProbeBindAddress,
    shutdownTimeoutMs: v.shutdownTimeout,
    pollMs: v.pollInterval,
    createGraceMs: v.createGrace,
    reconcileTimeoutMs: v.reconcileTimeout,
    revisionTracking: v.revisionTracking,
    maxSecretBytes: v.maxSecretBytes,
    optimizeForSize: v.optimizeForSize,
    connectionAddressPolicy: v.connectionAddressPolicy,
    maxConnectionsPerNamespace: v.maxConnectionsPerNamespace,
    logLevel: v.logLevel,
    ...(v.logFormat === undefined ? {} : { logFormat: v.logFormat }),
  };
  return { ok: true, config };
}

function nameOf(key: keyof typeof RUN_SETTINGS): string {
  const setting: Setting<unknown> = RUN_SETTINGS[key];
  return settingName(key, setting.env);
}

/** A label selector in Kubernetes' string syntax, kept with its text for messages. */
function namespaceSelector(value: string): Parsed<DefaultConnectionSelector> {
  const parsed = parseSelector(value);
  if (!parsed.ok)
    return {
      problem: `${JSON.stringify(value)} is not a label selector: ${parsed.problem}; write requirements on namespace labels joined by commas, e.g. "dms.dev/tenant=platform" or "team in (a,b),!quarantine"`,
    };
  return { value: { text: value.trim(), selector: parsed.selector } };
}

/** `[host]:port`, or `0` (disabled); parseBindAddress throws on anything else. */
function bindAddress(value: string): Parsed<string> {
  let ok: boolean;
  try {
    ok = value.trim() === "0" || parseBindAddress(value) !== undefined;
  } catch {
    ok = false;
  }
  return ok ? { value } : { problem: `${JSON.stringify(value)} is not [host]:port or 0` };
}
