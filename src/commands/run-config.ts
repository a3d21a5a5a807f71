/**
 * The settings of `dms-operator run`, from flags, then environment variables, then defaults,
 * validated at start-up: every problem is one line naming the flag, its variable, and the fix.
 */
import {
  type ConfigResult,
  type Env,
  isNamespaceName,
  parseBool,
  pickSetting,
  type ServiceFlags,
  serviceConfigFrom,
} from "../config.ts";
import type { OperatorConfig } from "../main.ts";
import { parseDuration } from "../reconcile/annotations.ts";
import { parseBindAddress } from "../runtime/health.ts";

/** Environment variable of each `run` setting. */
export const RUN_ENV = {
  kubeconfig: "KUBECONFIG",
  namespaces: "DMS_NAMESPACES",
  labelSelector: "DMS_LABEL_SELECTOR",
  concurrency: "DMS_CONCURRENCY",
  resyncPeriod: "DMS_RESYNC_PERIOD",
  leaderElect: "DMS_LEADER_ELECT",
  leaderElectionNamespace: "DMS_LEADER_ELECTION_NAMESPACE",
  leaderElectionId: "DMS_LEADER_ELECTION_ID",
  metricsBindAddress: "DMS_METRICS_BIND_ADDRESS",
  healthProbeBindAddress: "DMS_HEALTH_PROBE_BIND_ADDRESS",
  logLevel: "DMS_LOG_LEVEL",
  shutdownTimeout: "DMS_SHUTDOWN_TIMEOUT",
  pollInterval: "DMS_POLL_INTERVAL",
  createGrace: "DMS_CREATE_GRACE",
  reconcileTimeout: "DMS_RECONCILE_TIMEOUT",
  revisionTracking: "DMS_REVISION_TRACKING",
} as const;

/** `run` flags as commander parses them. */
export interface RunFlags extends ServiceFlags {
  kubeconfig?: string;
  context?: string;
  namespaces?: string;
  labelSelector?: string;
  concurrency?: string;
  resyncPeriod?: string;
  leaderElect?: boolean;
  leaderElectionNamespace?: string;
  leaderElectionId?: string;
  leaseDuration?: string;
  renewDeadline?: string;
  retryPeriod?: string;
  metricsBindAddress?: string;
  healthProbeBindAddress?: string;
  logLevel?: string;
  shutdownTimeout?: string;
  pollInterval?: string;
  createGrace?: string;
  reconcileTimeout?: string;
  revisionTracking?: string;
}

/** Lowest `--poll-interval`, in ms. */
export const MIN_POLL_MS = 1_000;
/** Lowest `--create-grace`, in ms (it must also be at least the poll interval). */
export const MIN_CREATE_GRACE_MS = 5_000;

/** Lowest `--reconcile-timeout`, in ms (it must also exceed the service request timeout). */
export const MIN_RECONCILE_TIMEOUT_MS = 5_000;

/** Accepted `--log-level` values. */
export const LOG_LEVELS = ["trace", "debug", "info", "warn", "error", "fatal", "silent"] as const;

/** The `run` configuration and its log level, or every problem found. */
export function runConfigFrom(
  flags: RunFlags,
  env: Env,
): ConfigResult<OperatorConfig & { logLevel: (typeof LOG_LEVELS)[number] }> {
  const problems: string[] = [];
  const service = serviceConfigFrom(flags, env);
  if (!service.ok) problems.push(...service.problems);
  else if (!service.config.baseUrl)
    problems.push("--base-url / DMS_BASE_URL: required, e.g. https://api.example.com");
  const pick = (key: keyof typeof RUN_ENV & keyof RunFlags): string | undefined =>
    pickSetting(flags[key], env[RUN_ENV[key]]);
  const label = (key: keyof typeof RUN_ENV, flag: string) => `${flag} / ${RUN_ENV[key]}`;
  const duration = (text: string | undefined, fallback: number, name: string, example: string): number => {
    if (text === undefined) return fallback;
    const ms = parseDuration(text);
    if (ms === undefined)
      problems.push(`${name}: ${JSON.stringify(text)} is not a duration; use e.g. ${example}`);
    return ms ?? fallback;
  };

  const concurrencyText = pick("concurrency");
  const concurrency = concurrencyText === undefined ? 16 : Number(concurrencyText);
  if (!Number.isInteger(concurrency) || concurrency < 1 || concurrency > 64)
    problems.push(`${label("concurrency", "--concurrency")}: must be an integer from 1 to 64`);
  const resyncMs = duration(pick("resyncPeriod"), 600_000, label("resyncPeriod", "--resync-period"), "10m");
  if (resyncMs < 10_000) problems.push(`${label("resyncPeriod", "--resync-period")}: must be at least 10s`);

  // Read as every other boolean setting is (config.ts): true/false, 1/0, yes/no.
  const leaderElect = flags.leaderElect ?? parseBool(pick("leaderElect"));
  if (leaderElect === null)
    problems.push(`${label("leaderElect", "--leader-elect")}: must be true or false (or 1/0, yes/no)`);
  const leaseDurationMs = duration(flags.leaseDuration, 15_000, "--lease-duration", "15s");
  const renewDeadlineMs = duration(flags.renewDeadline, 10_000, "--renew-deadline", "10s");
  const retryPeriodMs = duration(flags.retryPeriod, 2_000, "--retry-period", "2s");
  if (!(leaseDurationMs > renewDeadlineMs && renewDeadlineMs > 1.2 * retryPeriodMs))
    problems.push(
      "--lease-duration, --renew-deadline, --retry-period: need lease > renew deadline > 1.2 × retry period",
    );

  // A tiny poll interval turns every rollout into a tight requeue loop against the service; a
  // create grace shorter than the poll (or than the service's listing lag) lets the controller
  // create the same deployment twice before the first one is listed.
  const pollWhere = label("pollInterval", "--poll-interval");
  const pollMs = duration(pick("pollInterval"), 5_000, pollWhere, "5s");
  if (pollMs < MIN_POLL_MS) problems.push(`${pollWhere}: must be at least 1s`);
  const graceWhere = label("createGrace", "--create-grace");
  const createGraceMs = duration(pick("createGrace"), 60_000, graceWhere, "60s");
  if (createGraceMs < Math.max(MIN_CREATE_GRACE_MS, pollMs))
    problems.push(
      `${graceWhere}: must be at least 5s and at least the poll interval (${pick("pollInterval") ?? "5s"})`,
    );

  // A reconcile cut off while its one service call is still within the request timeout could
  // never report that call's failure: the call must be able to end before the reconcile does.
  const timeoutWhere = label("reconcileTimeout", "--reconcile-timeout");
  const reconcileTimeoutMs = duration(pick("reconcileTimeout"), 120_000, timeoutWhere, "2m");
  const requestTimeoutMs = service.ok ? service.config.timeoutMs : 0;
  if (reconcileTimeoutMs < MIN_RECONCILE_TIMEOUT_MS || reconcileTimeoutMs <= requestTimeoutMs)
    problems.push(
      `${timeoutWhere}: must be at least 5s and more than the service request timeout (--timeout-ms ${requestTimeoutMs})`,
    );

  const trackingWhere = label("revisionTracking", "--revision-tracking");
  const trackingText = pick("revisionTracking");
  const revisionTracking = parseOnOff(trackingText);
  if (revisionTracking === null)
    problems.push(`${trackingWhere}: must be on or off, got ${JSON.stringify(trackingText)}`);

  const metricsBindAddress = pick("metricsBindAddress") ?? ":8080";
  const healthProbeBindAddress = pick("healthProbeBindAddress") ?? ":8081";
  for (const [key, flag, value] of [
    ["metricsBindAddress", "--metrics-bind-address", metricsBindAddress],
    ["healthProbeBindAddress", "--health-probe-bind-address", healthProbeBindAddress],
  ] as const) {
    if (!isBindAddress(value))
      problems.push(`${label(key, flag)}: ${JSON.stringify(value)} is not [host]:port or 0`);
  }
  const logLevel = (pick("logLevel") ?? "info") as (typeof LOG_LEVELS)[number];
  if (!LOG_LEVELS.includes(logLevel))
    problems.push(`${label("logLevel", "--log-level")}: one of ${LOG_LEVELS.join(", ")}`);
  const namespaces = (pick("namespaces") ?? "")
    .split(",")
    .map((n) => n.trim())
    .filter((n) => n !== "");
  const bad = namespaces.find((n) => !isNamespaceName(n));
  if (bad !== undefined)
    problems.push(`${label("namespaces", "--namespaces")}: ${JSON.stringify(bad)} is not a namespace name`);

  const config = {
    service: service.ok ? service.config : ({} as never),
    ...(pick("kubeconfig") ? { kubeconfig: pick("kubeconfig") } : {}),
    ...(flags.context ? { context: flags.context } : {}),
    namespaces,
    ...(pick("labelSelector") ? { labelSelector: pick("labelSelector") } : {}),
    concurrency,
    resyncMs,
    leaderElection: {
      enabled: leaderElect ?? true,
      ...(pick("leaderElectionNamespace") ? { namespace: pick("leaderElectionNamespace") } : {}),
      name: pick("leaderElectionId") ?? "dms-operator-leader",
      leaseDurationMs,
      renewDeadlineMs,
      retryPeriodMs,
    },
    metricsBindAddress,
    healthProbeBindAddress,
    shutdownTimeoutMs: duration(
      pick("shutdownTimeout"),
      30_000,
      label("shutdownTimeout", "--shutdown-timeout"),
      "30s",
    ),
    pollMs,
    createGraceMs,
    reconcileTimeoutMs,
    revisionTracking: revisionTracking ?? true,
    logLevel,
  };
  return problems.length > 0 ? { ok: false, problems } : { ok: true, config };
}

/** `on`/`off` (or any boolean spelling of config.ts); undefined when not given, null when invalid. */
function parseOnOff(value: string | undefined): boolean | undefined | null {
  const v = value?.trim().toLowerCase();
  if (v === "on") return true;
  if (v === "off") return false;
  return parseBool(value);
}

/** True for `[host]:port` and for `0` (disabled); parseBindAddress throws on anything else. */
function isBindAddress(value: string): boolean {
  try {
    return value.trim() === "0" || parseBindAddress(value) !== undefined;
  } catch {
    return false;
  }
}
