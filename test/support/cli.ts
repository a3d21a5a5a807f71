/** Runs the CLI in-process with captured output, as the tests of its commands need. */
import type { CliContext, RegisterCommand } from "../../src/commands/context.ts";
import { runProgram } from "../../src/commands/program.ts";

/** A context that writes nothing anywhere, for tests that build a program without running it. */
export function silentContext(): CliContext {
  return {
    out: () => {},
    err: () => {},
    stdoutIsTTY: false,
    env: {},
    stopSignal: new AbortController().signal,
  };
}

/** A context that keeps what is written, in `written.stdout` and `written.stderr`. */
export function capturingContext(): { ctx: CliContext; written: { stdout: string; stderr: string } } {
  const written = { stdout: "", stderr: "" };
  const ctx: CliContext = {
    ...silentContext(),
    out: (text) => {
      written.stdout += text;
    },
    err: (text) => {
      written.stderr += text;
    },
  };
  return { ctx, written };
}

/** A finished run: exit status and what it wrote. */
export interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

/**
 * Runs `dms-operator <args>` with `commands` registered; `stdin` is what `-f -` reads; `name` is
 * the program's name in help texts (default `dms-operator`).
 */
export async function runCli(
  args: string[],
  options: {
    commands: readonly RegisterCommand[];
    env?: Record<string, string>;
    stdin?: string;
    name?: string;
    /** Whether stderr is a terminal (progress lines are written only then); default false. */
    stderrIsTTY?: boolean;
  },
): Promise<Run> {
  let stdout = "";
  let stderr = "";
  const { stdin } = options;
  const ctx: CliContext = {
    out: (t) => {
      stdout += t;
    },
    err: (t) => {
      stderr += t;
    },
    stdoutIsTTY: false,
    stderrIsTTY: options.stderrIsTTY ?? false,
    env: options.env ?? {},
    stopSignal: new AbortController().signal,
    ...(stdin === undefined
      ? {}
      : {
          readStdin: async function* () {
            yield stdin;
          },
        }),
  };
  const code = await runProgram(args, ctx, options.commands, options.name);
  return { code, stdout, stderr };
}
