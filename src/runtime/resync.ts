/**
 * A controller and its drift resync, run as one leader-only runnable: the single owner of "every
 * object is reconciled again, periodically". Each pass first reads the outside world once (the
 * service's listing, say) and holds that reading until the next pass's reading is in hand: through
 * the whole pass however long it takes, and between passes, where the reconciles of changes read
 * it too. The next pass starts a period after the last one ended, never over it.
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
   * Reads the world once for a pass; resolves with the release of what it holds, called once the
   * next pass's reading is in hand, or failed, or the resync stops. A rejection is logged: the
   * start-up pass still enqueues every key (level-based start), a periodic pass is skipped until
   * the next period (and the reading before it is released: it is a period older than it may be).
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
    let held = await this.#prepare(signal, true);
    try {
      if (signal.aborted) return;
      const running = this.#o.controller.start(signal, halt);
      await this.#o.controller.pass(this.#o.keys(), 0);
      const { periodMs, spreadMs } = this.#o;
      while (!signal.aborted) {
        try {
          await this.#clock.sleep(spread(periodMs, this.#o.jitter ?? 0.1, this.#o.random), signal);
        } catch {
          break;
        }
        const next = await this.#prepare(signal, false);
        held?.();
        held = next;
        if (next) await this.#o.controller.pass(this.#o.keys(), spreadMs);
      }
      await running;
    } finally {
      held?.();
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
}
