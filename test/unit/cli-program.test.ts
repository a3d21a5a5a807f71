// How the CLI harness reports a failure after SIGINT/SIGTERM: "interrupted" only when the failure
// is the interruption itself; any other error keeps its own one-line cause.
import type { Command } from "commander";
import { describe, expect, it } from "vitest";
import type { CliContext } from "../../src/commands/context.ts";
import { EXIT, runProgram } from "../../src/commands/program.ts";
import { Manager, ShutdownTimeoutError } from "../../src/runtime/manager.ts";

/** Runs a one-command program whose action fires the stop signal and then does `act`. */
async function runAfterSignal(act: (reason: unknown) => Promise<void>) {
  const stop = new AbortController();
  let stderr = "";
  const ctx: CliContext = {
    out: () => {},
    err: (text) => {
      stderr += text;
    },
    stdoutIsTTY: false,
    env: {},
    stopSignal: stop.signal,
  };
  const register = (program: Command) => {
    program.command("work").action(async () => {
      stop.abort(new Error("shutdown requested by signal"));
      await act(stop.signal.reason);
    });
  };
  const code = await runProgram(["work"], ctx, [register]);
  return { code, stderr };
}

describe("runProgram after a stop signal", () => {
  it("reports the interruption itself as 'interrupted' with status 130", async () => {
    expect(
      await runAfterSignal(async (reason) => {
        throw reason;
      }),
    ).toEqual({ code: EXIT.interrupted, stderr: "error: interrupted\n" });
    expect(
      await runAfterSignal(async (reason) => {
        throw new Error("listing aborted", { cause: reason });
      }),
    ).toEqual({ code: EXIT.interrupted, stderr: "error: interrupted\n" });
  });

  it("keeps the real cause of a failure that happened while stopping", async () => {
    expect(
      await runAfterSignal(async () => {
        throw new ShutdownTimeoutError("shutdown exceeded 30000 ms");
      }),
    ).toEqual({ code: EXIT.failed, stderr: "error: shutdown exceeded 30000 ms\n" });
  });

  it("names the failed runnable and its cause in the one line", async () => {
    const { code, stderr } = await runAfterSignal(async (reason) => {
      const manager = new Manager();
      manager.add({
        name: "health-server",
        needLeaderElection: false,
        start: async () => {
          throw new Error("listen EADDRINUSE: address already in use :8081");
        },
      });
      await manager.start(AbortSignal.abort(reason));
    });
    expect(code).toBe(EXIT.failed);
    expect(stderr).toBe("error: health-server failed: listen EADDRINUSE: address already in use :8081\n");
  });
});
