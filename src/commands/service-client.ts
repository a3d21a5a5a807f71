/**
 * The service client of a command, from its flags and the environment: loaded when a command
 * runs, not when its help is shown (context.ts is the light part). What `--connection` needs (the
 * connection's schema) is connections.ts's, loaded only by the commands that take it.
 */
import type { pino as Pino } from "pino";
import { ServiceClient } from "../api/client.ts";
import type { RetryEvent } from "../api/client-options.ts";
import type { ServiceError } from "../api/errors.ts";
import {
  flagOf,
  SERVICE_ENV,
  type ServiceConfig,
  type ServiceFlags,
  serviceConfigFrom,
  serviceSettingProblems,
} from "../config.ts";
import type { CliContext } from "./context.ts";
import { retryLine } from "./service-hints.ts";
import { UsageError } from "./usage-error.ts";

/**
 * A client configured from the command's flags and the environment, or a {@link UsageError}.
 * Under `--verbose` (pass `optsWithGlobals()`), each request is logged to stderr.
 */
export function serviceClientFrom(
  flags: ServiceFlags & { verbose?: boolean },
  ctx: CliContext,
): ServiceClient {
  const result = serviceConfigFrom(flags, ctx.env);
  if (!result.ok) throw new UsageError(result.problems);
  const problems = commandConfigProblems(result.config, flags);
  if (problems.length > 0) throw new UsageError(problems);
  return serviceClientOf(result.config, flags, ctx);
}

/**
 * What a command's settings get wrong before anything is sent (`run` checks the operator's with
 * the same {@link serviceSettingProblems}): each names the fix.
 */
export function commandConfigProblems(config: ServiceConfig, flags: ServiceFlags): string[] {
  const { baseUrl, apiKey } = serviceSettingProblems(config, flags);
  return [
    ...(baseUrl ? [baseUrl] : []),
    ...(apiKey ? [`${apiKey}; the service refuses every request without one`] : []),
  ];
}

/** A client for `config`; under `--verbose`, each request is logged to stderr. */
export function serviceClientOf(
  config: ServiceConfig,
  flags: { verbose?: boolean },
  ctx: CliContext,
): ServiceClient {
  const logger = flags.verbose
    ? loadPino()({ level: "debug", base: null }, { write: (line: string) => ctx.err(line) })
    : undefined;
  // Under --verbose the logger already says it; on a terminal one line per retry says why the wait.
  const sayRetry = ctx.stderrIsTTY && !logger;
  const onRetry = (e: RetryEvent) => {
    // Nothing listens there: retrying for seconds would not change it, and the user waits.
    if (refused(e.error)) throw new RefusedConnectionError(config.baseUrl, e.error);
    if (sayRetry) ctx.err(`${retryLine(e)}\n`);
  };
  return new ServiceClient({
    ...config,
    connectTimeoutMs: Math.min(CLI_CONNECT_TIMEOUT_MS, config.timeoutMs ?? CLI_CONNECT_TIMEOUT_MS),
    ...(logger ? { logger } : {}),
    onRetry,
  });
}

/** The logger's library, loaded under `--verbose` only (its ~30 modules are not a command's). */
function loadPino(): typeof Pino {
  return (
    process.getBuiltinModule("node:module").createRequire(import.meta.url)("pino") as { pino: typeof Pino }
  ).pino;
}

/** Whether `error` is a connection the service's host refused (nothing listens at the port). */
function refused(error: ServiceError): boolean {
  return error.kind === "network" && (error.cause as { code?: unknown } | undefined)?.code === "ECONNREFUSED";
}

/**
 * A command's connection to the service refused: said once, with the URL and what to check, at
 * the first refusal (the CLI does not retry it: a command's user is waiting, and the operator's
 * own client retries as before).
 */
export class RefusedConnectionError extends Error {
  override readonly name = "RefusedConnectionError";
  constructor(baseUrl: string, cause: ServiceError) {
    super(
      `${cause.method} ${cause.route}: connection refused by ${baseUrl}: nothing listens there; check ${flagOf("baseUrl")} / ${SERVICE_ENV.baseUrl} (its host and port), and that the service (or the simulator) is running`,
      { cause },
    );
  }
}

/**
 * Time a command gives a connection to open. A host that drops packets would otherwise hold
 * each attempt for the whole request timeout (10 s, five attempts: ~50 s of silence); an
 * answering host opens a connection in well under a second, even across continents.
 */
export const CLI_CONNECT_TIMEOUT_MS = 5000;
