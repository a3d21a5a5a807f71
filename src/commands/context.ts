/**
 * What every command shares: the process's streams and environment (injected, so a command
 * never reaches for `process` itself), the usage error, and the service connection flags.
 */
import { type Command, InvalidArgumentError } from "commander";
import { pino } from "pino";
import { ServiceClient } from "../api/client.ts";
import type { RetryEvent } from "../api/transport.ts";
import { isUuid } from "../api/wire.ts";
import {
  type Env,
  flagOf,
  isNamespaceName,
  SERVICE_ENV,
  SERVICE_FLAG_SETTINGS,
  type ServiceConfig,
  type ServiceFlags,
  serviceConfigFrom,
  settingFlag,
  settingHelp,
} from "../config.ts";
import { parseConnectionArg } from "../connection/settings.ts";
import type { ConnectionRef } from "../naming/connection.ts";
import { retryLine } from "./service-hints.ts";
import { UsageError } from "./usage-error.ts";

export { UsageError };

/** The outside world of a command. */
export interface CliContext {
  /** Writes to standard output (the command's result). */
  out(text: string): void;
  /** Writes to standard error (diagnostics). */
  err(text: string): void;
  /** Whether standard output is a terminal: decides the default output format. */
  stdoutIsTTY: boolean;
  /** Whether standard error is a terminal: progress lines (a retry, a wait) are written there only then. */
  stderrIsTTY?: boolean;
  env: Env;
  /** Resolves when the process is asked to stop (SIGINT/SIGTERM); long-running commands await it. */
  stopSignal: AbortSignal;
  /** Reads standard input to its end (`plan -f -`); absent where there is none to read. */
  readStdin?: () => Promise<string>;
}

/** Registers a command (and its subcommands) on the program. */
export type RegisterCommand = (program: Command, ctx: CliContext) => void;

/**
 * Adds the service connection flags (each documenting its default and environment variable, from
 * the table of service settings) to `command`. `help` overrides the description of a flag whose
 * meaning the command narrows (e.g. `run`'s `--retries`).
 */
export function addServiceOptions(command: Command, help: { retries?: string } = {}): Command {
  for (const [key, setting] of Object.entries(SERVICE_FLAG_SETTINGS)) {
    const narrowed =
      key === "retries" && help.retries !== undefined ? { ...setting, help: help.retries } : setting;
    command.option(settingFlag(key, setting), settingHelp(narrowed));
  }
  return command;
}

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

/** Help of `--connection`, shared by the commands that take it. */
export const CONNECTION_HELP =
  "ServiceConnection/<name> (of --namespace, else the kubeconfig context's) or ClusterServiceConnection/<name>, read with the Secret of its API key from the cluster (needs --kubeconfig); replaces --base-url, --api-key(-file), --tenant-id, --insecure-skip-tls-verify and --ca-file";

/** The flags `--connection` reads, as commander parses them. */
export interface ConnectionFlags extends ServiceFlags {
  connection?: string;
  kubeconfig?: string;
  context?: string;
}

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

const UUID_EXAMPLE = "0b6f3c2e-7d2a-4c59-9b8e-3f1a2b4c5d6e";

/** Flag parser: a namespace name (a DNS-1123 label). */
export function namespaceArgument(value: string): string {
  if (!isNamespaceName(value))
    throw new InvalidArgumentError(
      "must be a namespace name: lower-case letters, digits and '-', at most 63.",
    );
  return value;
}

/** Flag parser: a uuid, or commander's one-line invalid-argument error. */
export function uuidArgument(value: string): string {
  if (!isUuid(value)) throw new InvalidArgumentError(`must be a uuid like ${UUID_EXAMPLE}.`);
  return value;
}

/** Flag parser: a comma-separated list of uuids (empty items are an error, not skipped). */
export function uuidListArgument(value: string): string[] {
  const ids = value.split(",").map((id) => id.trim());
  const bad = ids.find((id) => !isUuid(id));
  if (bad !== undefined) {
    throw new InvalidArgumentError(`${JSON.stringify(bad)} is not a uuid; give ids like ${UUID_EXAMPLE},...`);
  }
  return ids;
}

/** Flag parser: a comma-separated list of non-empty ids. */
export function idListArgument(value: string): string[] {
  const ids = value.split(",").map((id) => id.trim());
  if (ids.some((id) => id === "")) throw new InvalidArgumentError("give ids separated by commas, e.g. a,b.");
  return ids;
}

/** Flag parser: an integer from `min` to `max`. */
export function integerArgument(min: number, max: number): (value: string) => number {
  return (value) => {
    const n = Number(value);
    if (!Number.isInteger(n) || n < min || n > max) {
      throw new InvalidArgumentError(`must be an integer from ${min} to ${max}.`);
    }
    return n;
  };
}
