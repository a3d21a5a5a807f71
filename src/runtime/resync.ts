/**
 * A controller and its drift resync, run as one leader-only runnable: the single owner of "every
 * object is reconciled again, periodically". Each pass first reads the outside world once (the
 * service's listing, say) and holds that reading until every key of the pass was reconciled;
 * the next pass starts a period after the last one ended, never over it.
 *
 * The controller schedules nothing else on its own: an object's reconcile may ask to be looked
 * at again after some time (`Action.requeueAfter` while work is in progress, `Action.done` with
 * the object's own interval), which is that object's affair, not a pass.
 */
import type { Logger } from "pino";
import { pino } from "pino";
import { untilAborted } from "./abort.ts";
import { spread } from "./backoff.ts";
import { type Clock, systemClock } from "./clock.ts";
import type { Controller } from "./controller.ts";
import type { Runnable } from "./manager.ts";

/** Options of {@link ResyncedController}. */
export interface ResyncOptions {
  controller: Controller;
  /** Resolves once the caches `keys` reads are filled (the workers start after it). */
  synced: () => Promise<unknown>;
  /** The keys of every object in scope now (the watch cache's). */
  keys: () => Iterable<string>;
  /**
   * Reads the world once for a pass; resolves with the release of what it holds for the pass. A
   * rejection is logged: the start-up pass still enqueues every key (level-based start), a
   * periodic pass is skipped until the next period.
   */
  prepare: (signal: AbortSignal) => Promise<() => void>;
  /** Time from the end of one pass to the start of the next, ±`jitter`. */
  periodMs: number;
  /** Fraction of the period by which it varies; default 0.1. */
  jitter?: number;
  /** A periodic pass spreads its keys over this long, so N reconciles do not start at once. */
  spreadMs: number;
  clock?: Clock;
  random?: () => number;
  logger?: Logger;
}

/** See the module comment. The start-up pass enqueues every key at once. */
export class ResyncedController implements Runnable {
  readonly name: string;
  readonly needLeaderElection: boolean;
  readonly #o: ResyncOptions;
  readonly #clock: Clock;
  readonly #log: Logger;

  constructor(options: ResyncOptions) {
    this.#o = options;
    this.name = options.controller.name;
    this.needLeaderElection = options.controller.needLeaderElection;
    this.#clock = options.clock ?? systemClock;
    this.#log = (options.logger ?? pino({ level: "silent" })).child({ controller: options.controller.name });
  }

  async start(signal: AbortSignal, halt: AbortSignal): Promise<void> {
    await untilAborted(this.#o.synced(), signal);
    if (signal.aborted) return;
    // The workers start once the start-up pass has read the world: its reconciles read that.
    const release = await this.#prepare(signal, true);
    if (signal.aborted) return release?.();
    const running = this.#o.controller.start(signal, halt);
    await this.#pass(0, release);
    await this.#passes(signal);
    await running;
  }

  async #passes(signal: AbortSignal): Promise<void> {
    const { periodMs, spreadMs } = this.#o;
    while (!signal.aborted) {
      try {
        await this.#clock.sleep(spread(periodMs, this.#o.jitter ?? 0.1, this.#o.random), signal);
      } catch {
        return;
      }
      const release = await this.#prepare(signal, false);
      if (release) await this.#pass(spreadMs, release);
    }
  }

  /** The pass's reading, or undefined when it failed (logged). */
  async #prepare(signal: AbortSignal, first: boolean): Promise<(() => void) | undefined> {
    try {
      return await this.#o.prepare(signal);
    } catch (error) {
      if (!signal.aborted)
        this.#log.warn(
          { err: error instanceof Error ? error.message : String(error) },
          first
            ? "start-up listing failed; reconciling with live lookups"
            : "resync listing failed; retrying next period",
        );
      return undefined;
    }
  }

  /** One pass over every key; the reading is released when it ends. */
  async #pass(spreadMs: number, release: (() => void) | undefined): Promise<void> {
    try {
      await this.#o.controller.pass(this.#o.keys(), spreadMs);
    } finally {
      release?.();
    }
  }
}
