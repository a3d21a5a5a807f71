/**
 * The command-line harness: builds the commander program from a list of command registrations,
 * runs it, and turns every failure into one line on stderr and an exit status.
 */
import { text } from "node:stream/consumers";
import { Command, CommanderError } from "commander";
import { RequestValidationError, ServiceError } from "../api/errors.ts";
import { shutdownSignal } from "../runtime/manager.ts";
import { VERSION } from "../version.ts";
import { type CliContext, type RegisterCommand, UsageError } from "./context.ts";
import { PROGRAM_NAME } from "./program-name.ts";
import { serviceErrorHint } from "./service-hints.ts";

/** Exit statuses: 0 success, 1 the operation failed, 2 the command was called wrongly, 130 interrupted. */
export const EXIT = { ok: 0, failed: 1, usage: 2, interrupted: 130 } as const;

/**
 * Thrown by a command that has already reported its outcome and must end with `status`, e.g.
 * `plan`, whose 2 means "changes planned" (so its own usage errors end with 1). Prints nothing.
 */
export class CommandExit extends Error {
  override readonly name = "CommandExit";
  readonly status: number;
  constructor(status: number) {
    super(`exit status ${status}`);
    this.status = status;
  }
}

/**
 * The `dms-operator` program with `commands` registered, writing through `ctx`, never exiting the
 * process. `name` is what help and usage texts call it (`kubectl dms` as a kubectl plugin).
 */
export function createProgram(
  ctx: CliContext,
  commands: readonly RegisterCommand[],
  name: string = PROGRAM_NAME,
): Command {
  const program = new Command(name)
    .description(
      "Kubernetes operator keeping Deployment Management Service deployments in line with Deployment resources",
    )
    .version(VERSION, "--version", "print the version of dms-operator")
    .option("--verbose", "log each service request to stderr and print stack traces of errors")
    .showSuggestionAfterError(true)
    .exitOverride()
    .configureOutput({ writeOut: (s) => ctx.out(s), writeErr: (s) => ctx.err(s) });
  for (const register of commands) register(program, ctx);
  return program;
}

/**
 * Runs the program on `argv` (user arguments only) and returns the exit status; `name` as in
 * {@link createProgram}.
 *
 * Contract: never throws; a failure is reported on stderr as `error: <one line>` (usage problems
 * may take one line each), with the stack and causes only under `--verbose`.
 */
export async function runProgram(
  argv: readonly string[],
  ctx: CliContext,
  commands: readonly RegisterCommand[],
  name: string = PROGRAM_NAME,
): Promise<number> {
  const program = createProgram(ctx, commands, name);
  try {
    await program.parseAsync([...argv], { from: "user" });
    return EXIT.ok;
  } catch (error) {
    if (error instanceof CommandExit) return error.status;
    // commander has already printed its own one-line message (or the help).
    if (error instanceof CommanderError) return error.exitCode === 0 ? EXIT.ok : EXIT.usage;
    return reportError(error, argv.includes("--verbose"), ctx);
  }
}

function reportError(error: unknown, verbose: boolean, ctx: CliContext): number {
  // Only a failure that IS the interruption is reported as such: an error after a signal (a
  // shutdown deadline passed, a runnable failed while stopping) keeps its own line.
  if (ctx.stopSignal.aborted && isInterruption(error, ctx.stopSignal.reason)) {
    ctx.err("error: interrupted\n");
    return EXIT.interrupted;
  }
  const usage = error instanceof RequestValidationError || error instanceof UsageError;
  const lines =
    error instanceof UsageError ? error.lines : [error instanceof Error ? error.message : String(error)];
  for (const line of lines) ctx.err(`error: ${line.replace(/\s*\n\s*/g, " ")}\n`);
  if (verbose) ctx.err(`${describeChain(error)}\n`);
  else if (error instanceof ServiceError && error.maybeApplied) {
    ctx.err("hint: the change may have been applied; list before repeating it\n");
  }
  const hint = error instanceof ServiceError ? serviceErrorHint(error) : undefined;
  if (hint) ctx.err(`hint: ${hint}\n`);
  return usage ? EXIT.usage : EXIT.failed;
}

/** Whether `error` is, or was caused by, the stop signal's abort (its reason, or an AbortError). */
function isInterruption(error: unknown, reason: unknown): boolean {
  for (let e: unknown = error, depth = 0; e !== undefined && depth < 5; depth++) {
    if (e === reason || (e instanceof Error && e.name === "AbortError")) return true;
    e = e instanceof Error ? e.cause : undefined;
  }
  return false;
}

function describeChain(error: unknown): string {
  const parts: string[] = [];
  for (let e: unknown = error, depth = 0; e !== undefined && depth < 5; depth++) {
    parts.push(e instanceof Error ? (e.stack ?? e.message) : String(e));
    e = e instanceof Error ? e.cause : undefined;
    if (e !== undefined) parts.push("caused by:");
  }
  return parts.join("\n");
}

/**
 * The context of the real process: its streams, environment, and a signal fired by the first
 * SIGINT/SIGTERM (graceful stop); a second signal exits at once with status 130.
 */
export function processContext(): CliContext {
  const stop = shutdownSignal(process, (code) => {
    process.stderr.write("error: interrupted again; exiting at once\n");
    process.exit(code);
  });
  return {
    out: (text) => process.stdout.write(text),
    err: (text) => process.stderr.write(text),
    stdoutIsTTY: process.stdout.isTTY === true,
    stderrIsTTY: process.stderr.isTTY === true,
    env: process.env,
    stopSignal: stop.signal,
    readStdin: () => text(process.stdin),
  };
}
