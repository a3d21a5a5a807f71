/**
 * The context of the real process (see {@link processContext}). Light: the completion of `kubectl
 * dms …` runs with it and nothing of the command harness (program.ts) loaded.
 */
import type { CliContext } from "./context.ts";

/**
 * The status of a command whose reader went away (`… | head -1`): 128 + SIGPIPE, what the shell
 * reports of kubectl, which the signal ends there.
 */
export const EXIT_CLOSED_PIPE = 141;

/**
 * Ends the process at once, saying nothing, when the reader of standard output or error has gone
 * (EPIPE), as kubectl ends: nobody reads what is left to write. Any other failure of a stream is
 * thrown, as Node would.
 */
function endOnClosedPipe(error: NodeJS.ErrnoException): void {
  if (error.code !== "EPIPE") throw error;
  process.exit(EXIT_CLOSED_PIPE);
}

/**
 * The context of the real process: its streams, environment, and a signal fired by the first
 * SIGINT/SIGTERM (graceful stop); a second signal exits at once with status 130. The operator's
 * own `run` stops through the same signal.
 */
export function processContext(): CliContext {
  const stop = new AbortController();
  const onSignal = () => {
    if (!stop.signal.aborted) {
      stop.abort(new Error("shutdown requested by signal"));
      return;
    }
    process.stderr.write("error: interrupted again; exiting at once\n");
    process.exit(130);
  };
  process.on("SIGTERM", onSignal);
  process.on("SIGINT", onSignal);
  process.stdout.on("error", endOnClosedPipe);
  process.stderr.on("error", endOnClosedPipe);
  return {
    out: (chunk) => process.stdout.write(chunk),
    err: (chunk) => process.stderr.write(chunk),
    stdoutIsTTY: process.stdout.isTTY === true,
    stderrIsTTY: process.stderr.isTTY === true,
    env: process.env,
    stopSignal: stop.signal,
    readStdin: () => process.stdin,
  };
}
