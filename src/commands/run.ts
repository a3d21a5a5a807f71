/**
 * `dms-operator run`: the operator itself.
 */
import type { Command } from "commander";
import { pino } from "pino";
import { runOperator } from "../main.ts";
import { addServiceOptions, type CliContext, UsageError } from "./context.ts";
import { RUN_ENV, type RunFlags, runConfigFrom } from "./run-config.ts";

/** Paths pino removes from every log line, wherever they appear. */
const REDACT = [
  "apiKey",
  "*.apiKey",
  "headers['x-api-key']",
  "*.headers['x-api-key']",
  "value",
  "*.value",
  "secrets",
  "*.secrets",
];

/** Registers `run`. */
export function registerRunCommand(program: Command, ctx: CliContext): void {
  const env = (key: keyof typeof RUN_ENV) => `(env ${RUN_ENV[key]})`;
  const run = program
    .command("run")
    .description("run the operator: watch Deployment resources and keep the service's deployments in line")
    .option(
      "--kubeconfig <path>",
      `kubeconfig file; in a cluster the service account is used ${env("kubeconfig")}`,
    )
    .option("--context <name>", "kubeconfig context")
    .option("--namespaces <a,b>", `namespaces to watch, comma-separated (default: all) ${env("namespaces")}`)
    .option(
      "--label-selector <selector>",
      `only resources matching this label selector ${env("labelSelector")}`,
    )
    .option("--concurrency <n>", `reconciles at once (default 4) ${env("concurrency")}`)
    .option("--resync-period <duration>", `drift check period (default 10m) ${env("resyncPeriod")}`)
    .option("--leader-elect", `elect a leader through a Lease (default on) ${env("leaderElect")}`)
    .option("--no-leader-elect", "run without leader election (a single instance only)")
    .option(
      "--leader-election-namespace <ns>",
      `namespace of the Lease (default: the pod's) ${env("leaderElectionNamespace")}`,
    )
    .option(
      "--leader-election-id <name>",
      `name of the Lease (default dms-operator-leader) ${env("leaderElectionId")}`,
    )
    .option("--lease-duration <duration>", "leader lease duration (default 15s)")
    .option("--renew-deadline <duration>", "leader renew deadline (default 10s)")
    .option("--retry-period <duration>", "leader retry period (default 2s)")
    .option(
      "--metrics-bind-address <addr>",
      `where /metrics listens, 0 to disable (default :8080) ${env("metricsBindAddress")}`,
    )
    .option(
      "--health-probe-bind-address <addr>",
      `where /healthz and /readyz listen (default :8081) ${env("healthProbeBindAddress")}`,
    )
    .option("--log-level <level>", `trace, debug, info, warn, error (default info) ${env("logLevel")}`)
    .option(
      "--shutdown-timeout <duration>",
      `graceful shutdown deadline (default 30s) ${env("shutdownTimeout")}`,
    )
    .option(
      "--poll-interval <duration>",
      `status polling while rolling out or deleting (default 5s) ${env("pollInterval")}`,
    )
    .option(
      "--create-grace <duration>",
      `how long to wait for a created deployment to be listed before creating again (default 60s) ${env("createGrace")}`,
    )
    .option(
      "--reconcile-timeout <duration>",
      `longest one reconcile may run; more than --timeout-ms (default 2m) ${env("reconcileTimeout")}`,
    )
    .option(
      "--revision-tracking <on|off>",
      `while a rollout is in progress, read the latest revision so that a failed build or deploy is reported as RevisionFailed (default on) ${env("revisionTracking")}`,
    )
    .action(async (flags: RunFlags) => {
      const result = runConfigFrom(flags, ctx.env);
      if (!result.ok) throw new UsageError(result.problems);
      const { logLevel, ...config } = result.config;
      const logger = pino({ level: logLevel, redact: { paths: REDACT, censor: "[REDACTED]" } });
      await runOperator(config, { logger }, ctx.stopSignal);
    });
  addServiceOptions(run, {
    retries:
      "retries of one page of a listing (the drift resync) after a 429, a 5xx or a lost connection; other calls are retried by the controller's backoff (default 4)",
  });
}
