/**
 * The settings of `dms-operator run`, from flags, then environment variables, then defaults,
 * validated at start-up: every problem is one line naming the flag, its variable, and the fix.
 * The table of settings (`settings.ts`) says, per setting, its variable, how its text is read, its
 * default and its help; {@link runConfigFrom} reads them in one loop (`readSettings`, config.ts,
 * which reads the service settings too), checks the rules that join settings, and gives the
 * operator's settings object (`OperatorConfig`).
 */

import {
  type ConfigResult,
  type Env,
  readSettings,
  type ServiceFlags,
  type Setting,
  type SettingValues,
  serviceConfigFrom,
  serviceSettingProblems,
  settingName,
} from "../config.ts";
import type { LogFormat } from "../runtime/log.ts";
import { parseBindAddress } from "../serving/bind-address.ts";
import {
  defaultListingDeadlineMs,
  defaultMaxReconcilesPerConnection,
  type OperatorConfig,
} from "../wiring/operator-config.ts";
import { type LOG_LEVELS, RUN_SETTINGS } from "./settings.ts";

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
  // The CLI's check of the same settings: a base URL ending in /v2 would send every call to 404.
  const { baseUrl: baseUrlProblem } = serviceSettingProblems(service.config, flags);
  if (baseUrlProblem) problems.unshift(baseUrlProblem);
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

/**
 * What `run` says at start, but runs with: no API key for a default connection off this machine.
 * Not a refusal: the default connection serves only the Deployment resources without
 * `spec.connectionRef`, and an install whose resources all name a ServiceConnection (each with
 * its own Secret) has none; those it has are refused 401 by the service, and said so there.
 */
export function runStartWarnings(config: Pick<OperatorConfig, "service">, flags: ServiceFlags): string[] {
  const { apiKey } = serviceSettingProblems(config.service, flags);
  return apiKey
    ? [
        `${apiKey}: the default connection (Deployment resources without spec.connectionRef) is refused every request without one`,
      ]
    : [];
}

function nameOf(key: keyof typeof RUN_SETTINGS): string {
  const setting: Setting<unknown> = RUN_SETTINGS[key];
  return settingName(key, setting.env);
}
