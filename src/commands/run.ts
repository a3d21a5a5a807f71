/**
 * `dms-operator run`: the operator itself (src/main.ts, loaded when it runs).
 */
import type { Command } from "commander";
import { settingFlag, settingHelp } from "../setting.ts";
import { addServiceOptions, type CliContext, UsageError } from "./context.ts";
import type { RunFlags } from "./run-config.ts";
import { RUN_SETTINGS } from "./settings.ts";

/**
 * Paths pino removes from every log line. pino matches keys case-sensitively: each header is named
 * as Node writes it (lower-cased) and as the transports set it. An `err` that is not an Error is
 * censored by the last key of each path, in any case (runtime/log.ts).
 */
export const RUN_REDACT = [
  "apiKey",
  "*.apiKey",
  "headers['x-api-key']",
  "*.headers['x-api-key']",
  "headers['X-Api-Key']",
  "*.headers['X-Api-Key']",
  "authorization",
  "*.authorization",
  "headers.authorization",
  "*.headers.authorization",
  "headers.Authorization",
  "*.headers.Authorization",
  "token",
  "*.token",
  "password",
  "*.password",
  "value",
  "*.value",
  "secrets",
  "*.secrets",
];

/** Registers `run`. */
export function registerRunCommand(program: Command, ctx: CliContext): void {
  const run = program
    .command("run")
    .description("run the operator: watch Deployment resources and keep the service's deployments in line");
  for (const [key, setting] of Object.entries(RUN_SETTINGS)) {
    run.option(settingFlag(key, setting), settingHelp(setting));
    if (key === "leaderElect")
      run.option("--no-leader-elect", "run without leader election (a single instance only)");
  }
  run.action(async (flags: RunFlags) => {
    // Its reading of the settings (the service's key and CA files, the proxies) is not its help's.
    const { runConfigFrom, runStartWarnings } = await import("./run-config.ts");
    const result = runConfigFrom(flags, ctx.env);
    if (!result.ok) throw new UsageError(result.problems);
    const { logLevel, logFormat, ...config } = result.config;
    // The operator's code is loaded to run it, not to show this command's help.
    const [{ runOperator }, { createLogger, defaultLogFormat }] = await Promise.all([
      import("../main.ts"),
      import("../runtime/log.ts"),
    ]);
    const format = logFormat ?? defaultLogFormat(process.stdout.isTTY);
    const logger = createLogger({ level: logLevel, format, redact: RUN_REDACT });
    for (const warning of runStartWarnings(config, flags)) logger.warn(warning);
    await runOperator(config, { logger }, ctx.stopSignal);
  });
  addServiceOptions(run, {
    retries:
      "retries of one page of a listing (the drift resync) after a 429, a 5xx or a lost connection; other calls are retried by the controller's backoff",
  });
}
