/**
 * What every command shares: the process's streams and environment (injected, so a command
 * never reaches for `process` itself), the usage error, the service connection flags and the
 * flags' parsers. Light: a command's registration (its `--help`) imports it, so it loads neither
 * the service client nor the wire types (those are in service-client.ts, loaded to run).
 */
import { type Command, InvalidArgumentError } from "commander";
import type { Env, ServiceFlags } from "../config.ts";
import { UsageError } from "./usage-error.ts";
import { DEFAULT_MAX_RESPONSE_BYTES, flagOf, isNamespaceName, isUuid, SERVICE_ENV } from "./words.ts";

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
 * Adds the service connection flags (each documenting its environment variable) to `command`.
 * `help` overrides the description of a flag whose meaning the command narrows (e.g. `run`'s
 * `--retries`).
 */
export function addServiceOptions(command: Command, help: { retries?: string } = {}): Command {
  const env = (key: keyof typeof SERVICE_ENV) => `(env ${SERVICE_ENV[key]})`;
  return command
    .option(`${flagOf("baseUrl")} <url>`, `service base URL, e.g. https://api.example.com ${env("baseUrl")}`)
    .option(
      `${flagOf("apiKey")} <key>`,
      `API key; prefer the env variable or a file: flags are visible to other users ${env("apiKey")}`,
    )
    .option(
      `${flagOf("apiKeyFile")} <path>`,
      `file holding the API key, e.g. a mounted Secret ${env("apiKeyFile")}`,
    )
    .option(`${flagOf("tenantId")} <id>`, `tenant id sent with every request ${env("tenantId")}`)
    .option(
      `${flagOf("apiKeyHeader")} <name>`,
      `header carrying the key (default X-Api-Key) ${env("apiKeyHeader")}`,
    )
    .option(
      `${flagOf("tenantHeader")} <name>`,
      `header carrying the tenant (default X-Tenant-Id) ${env("tenantHeader")}`,
    )
    .option(
      flagOf("insecureSkipTlsVerify"),
      `accept any TLS certificate (self-signed endpoints only) ${env("insecureSkipTlsVerify")}`,
    )
    .option(
      `${flagOf("caFile")} <path>`,
      `PEM file of CA certificates trusted besides the system's, e.g. a private CA of a self-hosted service ${env("caFile")}`,
    )
    .option(`${flagOf("timeoutMs")} <ms>`, `timeout of each request (default 10000) ${env("timeoutMs")}`)
    .option(
      `${flagOf("maxResponseBytes")} <bytes>`,
      `largest response body accepted, after decompression (default ${DEFAULT_MAX_RESPONSE_BYTES}) ${env("maxResponseBytes")}`,
    )
    .option(
      `${flagOf("retries")} <n>`,
      `${help.retries ?? "retries of a retryable failure (default 4)"} ${env("retries")}`,
    )
    .option(`${flagOf("qps")} <n>`, `client-side requests per second (default 20) ${env("qps")}`)
    .option(`${flagOf("burst")} <n>`, `client-side burst (default 40) ${env("burst")}`);
}

/** Help of `--connection`, shared by the commands that take it. */
export const CONNECTION_HELP =
  "ServiceConnection/<name> (of --namespace, else the kubeconfig context's) or ClusterServiceConnection/<name>, read with the Secret of its API key from the cluster (needs --kubeconfig); replaces --base-url, --api-key(-file), --tenant-id, --insecure-skip-tls-verify and --ca-file";

/** The flags `--connection` reads, as commander parses them. */
export interface ConnectionFlags extends ServiceFlags {
  connection?: string;
  kubeconfig?: string;
  context?: string;
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
