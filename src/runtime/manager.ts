/**
 * The manager runs the process's long-lived parts ("runnables": informers, the controller, the
 * health server) until the root signal fires, starts leader-gated ones only while this process
 * holds the lease, and shuts down in order: stop intake, finish in-flight work, release the lease.
 */
import type { Logger } from "pino";
import { pino } from "pino";
import { type CancelTimer, type Clock, systemClock } from "./clock.ts";
import type { LeaderElector } from "./leader.ts";

/**
 * A long-lived part of the process.
 *
 * Contract of `start`: run until `signal` aborts, then stop taking new work and resolve once the
 * work in flight is done; when `halt` aborts (leadership lost, or the shutdown deadline passed),
 * abandon in-flight work at once. Rejecting means the runnable failed: the manager shuts down.
 * A leader-gated runnable may be started again for a later leadership term.
 */
export interface Runnable {
  readonly name: string;
  readonly needLeaderElection: boolean;
  start(signal: AbortSignal, halt: AbortSignal): Promise<void>;
}

/** Graceful shutdown took longer than the deadline; in-flight work was abandoned. */
export class ShutdownTimeoutError extends Error {
  override readonly name = "ShutdownTimeoutError";
}

/** Options of {@link Manager}. */
export interface ManagerOptions {
  /** Leader election; without it leader-gated runnables start at once (election disabled). */
  elector?: LeaderElector;
  /** Time allowed from the root signal to a complete stop. Default 30 s. */
  shutdownTimeoutMs?: number;
  clock?: Clock;
  logger?: Logger;
}

/**
 * Runs runnables; see the module comment.
 *
 * `start(signal)` resolves once every runnable has stopped after `signal` aborted (and the lease
 * is released); rejects with {@link ShutdownTimeoutError} when that takes longer than the
 * deadline (in-flight work is halted first), or, when a runnable failed, with an error whose
 * message is `<runnable> failed: <its message>` and whose cause is its error (after the others
 * stopped). Losing leadership is not a failure: leader-gated runnables are aborted at
 * once and the manager campaigns again.
 */
export class Manager {
  readonly #runnables: Runnable[] = [];
  readonly #elector: LeaderElector | undefined;
  readonly #shutdownTimeoutMs: number;
  readonly #clock: Clock;
  readonly #log: Logger;
  #started = false;

  constructor(options: ManagerOptions = {}) {
    this.#elector = options.elector;
    this.#shutdownTimeoutMs = options.shutdownTimeoutMs ?? 30_000;
    this.#clock = options.clock ?? systemClock;
    this.#log = (options.logger ?? pino({ level: "silent" })).child({ component: "manager" });
  }

  /** Registers a runnable; only before `start`. */
  add(runnable: Runnable): void {
    if (this.#started) throw new Error(`cannot add runnable ${runnable.name}: the manager has started`);
    this.#runnables.push(runnable);
  }

  async start(signal: AbortSignal): Promise<void> {
    if (this.#started) throw new Error("the manager was already started");
    this.#started = true;
    const stop = new AbortController();
    const halt = new AbortController();
    let failure: { runnable: string; error: unknown } | undefined;
    let cancelDeadline: CancelTimer = () => {};
    const deadline = new Promise<never>((_, reject) => {
      const onStop = () => {
        cancelDeadline = this.#clock.setTimer(this.#shutdownTimeoutMs, () => {
          const error = new ShutdownTimeoutError(`shutdown exceeded ${this.#shutdownTimeoutMs} ms`);
          halt.abort(error);
          reject(error);
        });
      };
      if (stop.signal.aborted) onStop();
      else stop.signal.addEventListener("abort", onStop, { once: true });
    });
    deadline.catch(() => {});
    const onRoot = () => {
      this.#log.info("shutting down");
      stop.abort(signal.reason);
    };
    if (signal.aborted) onRoot();
    else signal.addEventListener("abort", onRoot, { once: true });

    const run = async (runnable: Runnable, runSignal: AbortSignal, runHalt: AbortSignal) => {
      this.#log.info({ runnable: runnable.name }, "starting");
      try {
        await runnable.start(runSignal, runHalt);
        this.#log.info({ runnable: runnable.name }, "stopped");
      } catch (err) {
        this.#log.error({ runnable: runnable.name, err }, "runnable failed; shutting down");
        failure ??= { runnable: runnable.name, error: err };
        stop.abort(err);
      }
    };

    const free = this.#runnables.filter((r) => !r.needLeaderElection);
    const gated = this.#runnables.filter((r) => r.needLeaderElection);
    const all = Promise.all([
      ...free.map((r) => run(r, stop.signal, halt.signal)),
      this.#runGated(gated, stop.signal, halt.signal, run),
    ]);
    try {
      await Promise.race([all, deadline]);
    } finally {
      cancelDeadline();
      signal.removeEventListener("abort", onRoot);
    }
    // The cause's message goes in the line itself: the CLI prints the chain only under --verbose,
    // and "a runnable failed" alone does not tell the user what to fix.
    if (failure !== undefined) {
      const { runnable, error } = failure;
      const why = error instanceof Error ? error.message : String(error);
      throw new Error(`${runnable} failed: ${why}`, { cause: error });
    }
  }

  async #runGated(
    gated: Runnable[],
    stop: AbortSignal,
    halt: AbortSignal,
    run: (r: Runnable, s: AbortSignal, h: AbortSignal) => Promise<void>,
  ): Promise<void> {
    if (gated.length === 0) return;
    const elector = this.#elector;
    if (!elector) {
      await Promise.all(gated.map((r) => run(r, stop, halt)));
      return;
    }
    while (!stop.aborted) {
      const outcome = await elector.run(stop, async (leading) => {
        this.#log.info({ identity: elector.identity }, "became leader; starting leader-gated runnables");
        const termStop = AbortSignal.any([stop, leading]);
        const termHalt = AbortSignal.any([halt, leading]);
        await Promise.all(gated.map((r) => run(r, termStop, termHalt)));
      });
      if (outcome === "lost") this.#log.warn("leader-gated runnables stopped; campaigning again");
      // Leader work that ended on its own while we were not stopping: do not spin re-acquiring.
      else if (!stop.aborted) return;
    }
  }
}
