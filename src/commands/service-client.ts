/**
 * The service client of a command, from its flags and the environment, and the `--connection`
 * flag: loaded when a command runs, not when its help is shown (context.ts is the light part).
 */
import { pino } from "pino";
import { ServiceClient } from "../api/client.ts";
import type { RetryEvent } from "../api/transport.ts";
import {
  type Env,
  flagOf,
  SERVICE_ENV,
  type ServiceConfig,
  type ServiceFlags,
  serviceConfigFrom,
} from "../config.ts";
import { parseConnectionArg } from "../connection/settings.ts";
import type { ConnectionRef } from "../naming/connection.ts";
import type { CliContext, ConnectionFlags } from "./context.ts";
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
  return serviceClientOf(result.config, flags, ctx);
}

/** A client for `config`; under `--verbose`, each request is logged to stderr. */
export function serviceClientOf(
  config: ServiceConfig,
  flags: { verbose?: boolean },
  ctx: CliContext,
): ServiceClient {
  const logger = flags.verbose
    ? pino({ level: "debug", base: null }, { write: (line: string) => ctx.err(line) })
    : undefined;
  // Under --verbose the logger already says it; on a terminal one line per retry says why the wait.
  const onRetry = ctx.stderrIsTTY && !logger ? (e: RetryEvent) => ctx.err(`${retryLine(e)}\n`) : undefined;
  return new ServiceClient({
    ...config,
    connectTimeoutMs: Math.min(CLI_CONNECT_TIMEOUT_MS, config.timeoutMs ?? CLI_CONNECT_TIMEOUT_MS),
    ...(logger ? { logger } : {}),
    ...(onRetry ? { onRetry } : {}),
  });
}

/**
 * Time a command gives a connection to open. A host that drops packets would otherwise hold
 * each attempt for the whole request timeout (10 s, five attempts: ~50 s of silence); an
 * answering host opens a connection in well under a second, even across continents.
 */
export const CLI_CONNECT_TIMEOUT_MS = 5000;

/**
 * The service settings a connection gives (its spec and Secret): their flags cannot be combined
 * with `--connection`, and their environment variables do not apply to a connection.
 */
const CONNECTION_SETTINGS = [
  "baseUrl",
  "apiKey",
  "apiKeyFile",
  "tenantId",
  "insecureSkipTlsVerify",
  "caFile",
] as const;

/**
 * `--connection <kind/name>`, parsed, or undefined when not given. A {@link UsageError} lists
 * every mistake: a malformed value, no cluster to read it from (`hasCluster`: by default, whether
 * `--kubeconfig` is given; `logs` and `revisions` also find one as kubectl does), and the flags
 * whose settings the connection gives (refused rather than mixed: a key must never be sent to
 * another tenant's URL, and a flag that would be silently ignored is a trap).
 */
export function connectionFlag(
  flags: ConnectionFlags,
  hasCluster = flags.kubeconfig !== undefined,
): ConnectionRef | undefined {
  if (flags.connection === undefined) return undefined;
  const parsed = parseConnectionArg(flags.connection);
  const problems = parsed.ok ? [] : [parsed.problem];
  if (!hasCluster)
    problems.push(
      "--connection needs --kubeconfig: the connection and the Secret holding its API key are read from the cluster; add --kubeconfig <path> (and --context <name>)",
    );
  const given = CONNECTION_SETTINGS.filter((key) => flags[key] !== undefined).map((key) => flagOf(key));
  if (given.length > 0)
    problems.push(
      `${given.join(", ")}: not with --connection, whose spec and Secret give the service's URL, API key, tenant and TLS setting; drop ${given.length > 1 ? "them" : "it"}, or drop --connection to give the settings by flags`,
    );
  if (!parsed.ok || problems.length > 0) throw new UsageError(problems);
  return parsed.ref;
}

// serviceConfigOf replaces the URL: this one only satisfies serviceConfigFrom, which requires one.
const CONNECTION_URL_PLACEHOLDER = "https://connection.invalid";

/**
 * The settings a connection's spec leaves to the command's own (headers, QPS, burst, timeout,
 * retries): its flags and environment, without those a connection gives. A {@link UsageError}
 * when one of them is invalid.
 */
export function connectionDefaultsFrom(flags: ServiceFlags, env: Env): ServiceConfig {
  const own = (key: string) => !CONNECTION_SETTINGS.some((c) => c === key || SERVICE_ENV[c] === key);
  const kept = Object.fromEntries(Object.entries(flags).filter(([key]) => own(key)));
  const ownEnv = Object.fromEntries(Object.entries(env).filter(([key]) => own(key)));
  const result = serviceConfigFrom({ ...kept, baseUrl: CONNECTION_URL_PLACEHOLDER }, ownEnv);
  if (!result.ok) throw new UsageError(result.problems);
  return result.config;
}
