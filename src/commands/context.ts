/**
 * What every command shares: the process's streams and environment (injected, so a command
 * never reaches for `process` itself), the usage error, and the service connection flags.
 */
import { type Command, InvalidArgumentError, Option } from "commander";
import { pino } from "pino";
import { ServiceClient } from "../api/client.ts";
import { isUuid } from "../api/wire.ts";
import { type Env, flagOf, SERVICE_ENV, type ServiceFlags, serviceConfigFrom } from "../config.ts";

/** The outside world of a command. */
export interface CliContext {
  /** Writes to standard output (the command's result). */
  out(text: string): void;
  /** Writes to standard error (diagnostics). */
  err(text: string): void;
  /** Whether standard output is a terminal: decides the default output format. */
  stdoutIsTTY: boolean;
  env: Env;
  /** Resolves when the process is asked to stop (SIGINT/SIGTERM); long-running commands await it. */
  stopSignal: AbortSignal;
  /** Reads standard input to its end (`plan -f -`); absent where there is none to read. */
  readStdin?: () => Promise<string>;
}

/**
 * A mistake in how the command was called (bad flag value, missing setting): printed without a
 * stack trace and exits with status 2. `lines` are shown one per line.
 */
export class UsageError extends Error {
  override readonly name = "UsageError";
  readonly lines: readonly string[];
  constructor(lines: readonly string[]) {
    super(lines.join("; "));
    this.lines = lines;
  }
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
    .option(`${flagOf("timeoutMs")} <ms>`, `timeout of each request (default 10000) ${env("timeoutMs")}`)
    .option(
      `${flagOf("retries")} <n>`,
      `${help.retries ?? "retries of a retryable failure (default 4)"} ${env("retries")}`,
    )
    .option(`${flagOf("qps")} <n>`, `client-side requests per second (default 20) ${env("qps")}`)
    .option(`${flagOf("burst")} <n>`, `client-side burst (default 40) ${env("burst")}`);
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
  const logger = flags.verbose
    ? pino({ level: "debug", base: null }, { write: (line: string) => ctx.err(line) })
    : undefined;
  return new ServiceClient({ ...result.config, ...(logger ? { logger } : {}) });
}

/** Output formats of the listing commands. */
export const OUTPUT_FORMATS = ["table", "json", "yaml"] as const;
export type OutputFormat = (typeof OUTPUT_FORMATS)[number];

/** Adds `-o, --output <format>` to `command`. */
export function addOutputOption(command: Command): Command {
  return command.addOption(
    new Option(
      "-o, --output <format>",
      "output format (default: table when stdout is a terminal, json otherwise)",
    ).choices(OUTPUT_FORMATS),
  );
}

/** The format asked for, or the default for where stdout goes. */
export function outputFormat(flags: { output?: OutputFormat }, ctx: CliContext): OutputFormat {
  return flags.output ?? (ctx.stdoutIsTTY ? "table" : "json");
}

const UUID_EXAMPLE = "0b6f3c2e-7d2a-4c59-9b8e-3f1a2b4c5d6e";

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
