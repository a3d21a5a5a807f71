/**
 * The settings of `dms-operator run`, in one table: a row per setting, keyed by its name, says
 * its flag (the name's long form, `maxSecretBytes` → `--max-secret-bytes`), its environment
 * variable (`DMS_` and the name in capitals, but `KUBECONFIG`; none for the flags of leader
 * election's timings and of the kubeconfig's context), how its text is read and bounded (the
 * parser, whose schema is the chart value's), its default, its help, and how the Helm chart
 * passes it (`chart`, see `ChartValue` in config.ts). The service's settings are rows of the same
 * kind, shared with every command that calls the service (`SERVICE_SETTINGS`, service-settings.ts).
 *
 * From it: `run`'s flags and their help (`run.ts`), the reading of flags and variables
 * (`runConfigFrom`, `run-config.ts`), the chart's `config.*` in values.schema.json
 * ({@link chartConfigSchema}, written by `npm run generate`), and the checks that values.yaml and
 * the operating guide list every setting (test/unit/run-config.test.ts, test/tools/helm-chart.test.ts).
 * A new setting is a row here, then a field of `OperatorConfig` set in `runConfigFrom`.
 */

import { ADDRESS_POLICIES } from "../api/address-policy.ts";
import type { DefaultConnectionSelector } from "../connection/access.ts";
import { parseSelector } from "../crd/label-selector.ts";
import { DEFAULT_MAX_SECRET_BYTES } from "../reconcile/secret-budget.ts";
import { SERVICE_FLAG_SETTINGS } from "../service-settings.ts";
import { parseBindAddress } from "../serving/bind-address.ts";
import { type ChartValue, type Parsed, parsers, type Settings, type ValueSchema } from "../setting.ts";
import { DEFAULT_SHARD_LABEL_POLICY } from "../wiring/shard-label-policy.ts";
import { DEFAULT_MAX_CONNECTIONS_PER_NAMESPACE, LOG_FORMATS } from "./words.ts";

/** `--shard-label-policy`: whether a sharded replica requires the shard label policy at start. */
const SHARD_LABEL_POLICY_MODES = ["required", "unenforced"] as const;

/** Accepted `--log-level` values. */
export const LOG_LEVELS = ["trace", "debug", "info", "warn", "error", "fatal", "silent"] as const;

/**
 * Highest `--max-secret-bytes` (16 MiB): a reconcile holds a few copies of what it sends, times
 * `--concurrency`, within the operator's heap.
 */
export const MAX_SECRET_BYTES_CEILING = 16_777_216;

/** Highest `--concurrency`, and so of `--max-reconciles-per-connection`. */
export const MAX_CONCURRENCY = 64;

/** The settings of `run` itself, in the order `--help` lists them (the service's follow). */
export const RUN_SETTINGS = {
  kubeconfig: {
    env: "KUBECONFIG",
    parse: parsers.text,
    arg: "<path>",
    help: "kubeconfig file; in a cluster the service account is used",
    chart: { none: "in a pod the ServiceAccount's token is used" },
  },
  context: {
    parse: parsers.text,
    arg: "<name>",
    help: "kubeconfig context",
    chart: { none: "in a pod the ServiceAccount's token is used" },
  },
  namespaces: {
    env: "DMS_NAMESPACES",
    parse: parsers.namespaceList,
    default: "",
    shown: "all",
    arg: "<a,b>",
    help: "namespaces to watch, comma-separated",
    chart: "config",
  },
  clusterConnections: {
    env: "DMS_CLUSTER_CONNECTIONS",
    parse: parsers.boolean,
    shown: "on when watching all namespaces",
    help: "watch ClusterServiceConnections (needs cluster-wide list/watch on them)",
    chart: "config",
  },
  labelSelector: {
    env: "DMS_LABEL_SELECTOR",
    parse: parsers.text,
    arg: "<selector>",
    help: "only resources matching this label selector",
    chart: "config",
  },
  defaultConnectionNamespaceSelector: {
    env: "DMS_DEFAULT_CONNECTION_NAMESPACE_SELECTOR",
    parse: namespaceSelector,
    shown: "every watched namespace",
    arg: "<selector>",
    help: "which namespaces may use the default connection (resources without spec.connectionRef), by their labels, e.g. dms.dev/tenant=platform",
    chart: "config",
  },
  concurrency: {
    env: "DMS_CONCURRENCY",
    parse: parsers.number({ integer: true, min: 1, max: MAX_CONCURRENCY, unit: "reconciles at once" }),
    default: "16",
    arg: "<n>",
    help: "reconciles at once",
    chart: "config",
  },
  maxReconcilesPerConnection: {
    env: "DMS_MAX_RECONCILES_PER_CONNECTION",
    parse: parsers.number({ integer: true, min: 1, max: MAX_CONCURRENCY, unit: "reconciles at once" }),
    shown: "a quarter of --concurrency rounded up",
    arg: "<n>",
    help: "the most reconciles one connection (and, under a ClusterServiceConnection, one namespace; a namespace's ServiceConnections together) may hold at once, beyond which it borrows only workers idle while its reconciles end within 5 s",
    chart: "config",
  },
  resyncPeriod: {
    env: "DMS_RESYNC_PERIOD",
    parse: parsers.duration("10s"),
    default: "10m",
    arg: "<duration>",
    help: "drift check period",
    chart: "config",
  },
  listingDeadline: {
    env: "DMS_LISTING_DEADLINE",
    parse: parsers.duration("1s"),
    shown: "1m (at most half the resync period)",
    arg: "<duration>",
    help: "longest one connection's periodic listing may take; past it, its resources report ListingDeadlineExceeded and make no call until one ends in time (below --resync-period)",
    chart: "config",
  },
  leaderElect: {
    env: "DMS_LEADER_ELECT",
    parse: parsers.boolean,
    default: "true",
    shown: "on",
    help: "elect a leader through a Lease",
    chart: { value: "leaderElection.enabled" },
  },
  leaderElectionNamespace: {
    env: "DMS_LEADER_ELECTION_NAMESPACE",
    parse: parsers.text,
    shown: "the pod's",
    arg: "<ns>",
    help: "namespace of the Lease",
    chart: { value: "leaderElection.namespace" },
  },
  leaderElectionId: {
    env: "DMS_LEADER_ELECTION_ID",
    parse: parsers.text,
    default: "dms-operator-leader",
    arg: "<name>",
    help: "name of the Lease",
    chart: { value: "leaderElection.id" },
  },
  leaseDuration: {
    parse: parsers.duration(),
    default: "15s",
    arg: "<duration>",
    help: "leader lease duration",
    chart: { value: "leaderElection.leaseDuration" },
  },
  renewDeadline: {
    parse: parsers.duration(),
    default: "10s",
    arg: "<duration>",
    help: "leader renew deadline",
    chart: { value: "leaderElection.renewDeadline" },
  },
  retryPeriod: {
    parse: parsers.duration(),
    default: "2s",
    arg: "<duration>",
    help: "leader retry period",
    chart: { value: "leaderElection.retryPeriod" },
  },
  sharded: {
    env: "DMS_SHARDED",
    parse: parsers.boolean,
    default: "false",
    shown: "off",
    help: "spread the resources over every replica (a Lease per replica, POD_NAME); the leader assigns them",
    chart: { value: "sharding.enabled" },
  },
  shardLabelPolicy: {
    env: "DMS_SHARD_LABEL_POLICY",
    parse: parsers.oneOf(SHARD_LABEL_POLICY_MODES),
    default: "required",
    arg: "<required|unenforced>",
    help: "with --sharded: required, a replica starts only once the ValidatingAdmissionPolicy keeping everyone else off the shard labels and its binding exist; unenforced, it runs without them, accepting that a tenant who may edit its resources can make two replicas write one deployment",
    chart: { value: "sharding.labelPolicyMode" },
  },
  shardLabelPolicyName: {
    env: "DMS_SHARD_LABEL_POLICY_NAME",
    parse: parsers.text,
    default: DEFAULT_SHARD_LABEL_POLICY,
    arg: "<name>",
    help: "name of that ValidatingAdmissionPolicy and of its binding",
    chart: { value: "sharding.labelPolicyName" },
  },
  metricsBindAddress: {
    env: "DMS_METRICS_BIND_ADDRESS",
    parse: bindAddress,
    shown: ":8443 (:8080 with --metrics-secure=false)",
    arg: "<addr>",
    help: "where /metrics listens, 0 to disable",
    chart: { value: "metrics.port" },
  },
  metricsSecure: {
    env: "DMS_METRICS_SECURE",
    parse: parsers.boolean,
    default: "true",
    arg: "[true|false]",
    help: "serve /metrics over HTTPS to scrapers whose bearer token the API server authenticates (TokenReview) and allows get on /metrics (SubjectAccessReview); false: plain HTTP to anyone",
    chart: { value: "metrics.secure" },
  },
  metricsCertDir: {
    env: "DMS_METRICS_CERT_DIR",
    parse: parsers.text,
    shown: "a self-signed certificate",
    arg: "<dir>",
    help: "directory with tls.crt and tls.key for /metrics (a mounted kubernetes.io/tls Secret; re-read when renewed)",
    chart: { value: "metrics.certSecret" },
  },
  healthProbeBindAddress: {
    env: "DMS_HEALTH_PROBE_BIND_ADDRESS",
    parse: bindAddress,
    default: ":8081",
    arg: "<addr>",
    help: "where /healthz and /readyz listen",
    chart: { value: "healthProbes.port" },
  },
  logLevel: {
    env: "DMS_LOG_LEVEL",
    parse: parsers.oneOf(LOG_LEVELS),
    default: "info",
    arg: "<level>",
    help: "trace, debug, info, warn, error",
    chart: "config",
  },
  logFormat: {
    env: "DMS_LOG_FORMAT",
    parse: parsers.oneOf(LOG_FORMATS),
    shown: "json (console on a terminal)",
    arg: "<format>",
    help: "json (one object per line) or console (one line for a person)",
    chart: "config",
  },
  shutdownTimeout: {
    env: "DMS_SHUTDOWN_TIMEOUT",
    parse: parsers.duration(),
    default: "30s",
    arg: "<duration>",
    help: "graceful shutdown deadline",
    chart: "config",
  },
  // A tiny poll interval turns every rollout into a tight requeue loop against the service.
  pollInterval: {
    env: "DMS_POLL_INTERVAL",
    parse: parsers.duration("1s"),
    default: "5s",
    arg: "<duration>",
    help: "status polling while rolling out or deleting",
    chart: "config",
  },
  createGrace: {
    env: "DMS_CREATE_GRACE",
    parse: parsers.duration(),
    default: "60s",
    arg: "<duration>",
    help: "how long to wait for a created deployment to be listed before creating again",
    chart: "config",
  },
  reconcileTimeout: {
    env: "DMS_RECONCILE_TIMEOUT",
    parse: parsers.duration(),
    default: "2m",
    arg: "<duration>",
    help: "longest one reconcile may run; more than --timeout-ms",
    chart: "config",
  },
  revisionTracking: {
    env: "DMS_REVISION_TRACKING",
    parse: parsers.onOff,
    default: "on",
    arg: "<on|off>",
    help: "while a rollout is in progress, read the latest revision so that a failed build or deploy is reported as RevisionFailed",
    chart: "config",
  },
  // Bounds what one resource makes the operator hold: each entry of spec.secrets sends its value,
  // so one large Secret key listed many times would be multiplied in every body, hash and diff.
  maxSecretBytes: {
    env: "DMS_MAX_SECRET_BYTES",
    parse: parsers.number({ integer: true, min: 1_024, max: MAX_SECRET_BYTES_CEILING, unit: "bytes" }),
    default: String(DEFAULT_MAX_SECRET_BYTES),
    arg: "<bytes>",
    help: "most bytes of secret values one Deployment resource may send, each entry counted (over it: SecretsTooLarge)",
    chart: "config",
  },
  connectionAddressPolicy: {
    env: "DMS_CONNECTION_ADDRESS_POLICY",
    parse: parsers.oneOf(ADDRESS_POLICIES),
    default: "allow-private",
    arg: "<policy>",
    help: "which addresses the service's connections may reach: allow-private (public, private and loopback) or public-only; link-local and cloud metadata addresses never",
    chart: "config",
  },
  maxConnectionsPerNamespace: {
    env: "DMS_MAX_CONNECTIONS_PER_NAMESPACE",
    parse: parsers.number({ integer: true, min: 1, max: 10_000, unit: "connections" }),
    default: String(DEFAULT_MAX_CONNECTIONS_PER_NAMESPACE),
    arg: "<n>",
    help: "most ServiceConnections of one namespace that get a client, the oldest first (the others: Ready=False, TooManyConnections)",
    chart: "config",
  },
  optimizeForSize: {
    env: "DMS_OPTIMIZE_FOR_SIZE",
    parse: parsers.onOff,
    default: "on",
    arg: "<on|off>",
    help: "V8 favours memory over speed: its heap stays close to what is live, no allocation site is pretenured (flags NODE_OPTIONS cannot carry), and the garbage of a burst of work is collected once the process is quiet",
    chart: "config",
  },
} satisfies Settings;

/** Every setting of `run`: its own, then the service's. */
export const SETTINGS: Settings = { ...RUN_SETTINGS, ...SERVICE_FLAG_SETTINGS };

/** The name of a setting's chart value under `config`, if the chart passes it there. */
export function chartConfigName(key: string, chart: ChartValue | undefined): string | undefined {
  if (chart === "config") return key;
  return chart !== undefined && "config" in chart ? chart.config : undefined;
}

/**
 * The schema of the chart's `config` (values.schema.json): a value per setting the chart passes
 * there, bounded as the operator bounds it, empty or null for the operator's default; and the
 * older spellings still read. `npm run generate` writes it; a test checks the file holds it.
 */
export function chartConfigSchema(): ValueSchema {
  const properties: Record<string, ValueSchema> = {};
  for (const [key, setting] of Object.entries(SETTINGS)) {
    const name = chartConfigName(key, setting.chart);
    if (name === undefined) continue;
    const where = setting.env === undefined ? "" : ` (${setting.env})`;
    properties[name] = {
      ...(setting.parse.schema ?? { type: "string" }),
      description: `${setting.help ?? key}${where}`,
    };
    const chart = setting.chart;
    if (typeof chart === "object" && "deprecated" in chart && chart.deprecated !== undefined)
      properties[chart.deprecated] = {
        ...(setting.parse.schema ?? { type: "string" }),
        description: `deprecated spelling of ${name}, still read (not with it)`,
      };
  }
  return {
    type: "object",
    description:
      "settings of `dms-operator run`, each passed as its environment variable; empty or null: the operator's default",
    additionalProperties: false,
    properties,
  };
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
