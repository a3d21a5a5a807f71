/**
 * What every command shares: the process's streams and environment (injected, so a command
 * never reaches for `process` itself), the usage error, the service connection flags and the
 * flags' parsers. Light: a command's registration (its `--help`) imports it, so it loads neither
 * the service client nor the wire types (those are in service-client.ts, loaded to run); the
 * service flags come from the rows of service-settings.ts, which is as light.
 */
import { type Command, InvalidArgumentError } from "commander";
import type { Env, ServiceFlags } from "../config.ts";
import { SERVICE_FLAG_SETTINGS } from "../service-settings.ts";
import { isNamespaceName, settingFlag, settingHelp } from "../setting.ts";
import { UsageError } from "./usage-error.ts";
import { isUuid } from "./words.ts";

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
  /** Standard input, chunk by chunk, read as far as needed (`plan -f -`); absent where there is none to read. */
  readStdin?: () => AsyncIterable<string | Uint8Array>;
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
