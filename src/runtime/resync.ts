/**
 * A controller and its drift resync, run as one leader-only runnable: the single owner of "every
 * object is reconciled again, periodically".
 *
 * The objects fall into groups (one per connection to the service, say), and each group has a
 * pass of its own: it reads the outside world once for its objects (the service's listing, say),
 * passes its keys to the controller as soon as that reading is in, and holds the reading until
 * its next one is in hand: through the whole pass however long it takes, and between passes,
 * where the reconciles of changes read it too. A group's next pass starts a period after its last
 * one ended, never over it. Groups never wait for each other: a reading that is slow, endless or
 * failing delays its own group only.
 *
 * The controller schedules nothing else on its own: an object's reconcile may ask to be looked
 * at again after some time (`Action.requeueAfter` while work is in progress, `Action.done` with
 * the object's own interval), which is that object's affair, not a pass.
 */
import type { Logger } from "pino";
import { pino } from "pino";
import { spread } from "./backoff.ts";
import { type Clock, systemClock, untilAborted } from "./clock.ts";
import type { Controller } from "./controller.ts";
import type { Runnable } from "./manager.ts";

/** The group of a resync that has only one. */
export const ONE_GROUP = "";

/** Options of {@link ResyncedController}. */
export interface ResyncOptions {
  controller: Controller;
  /** Resolves once the caches `keys` reads are filled (the workers start after it). */
  synced: () => Promise<unknown>;
  /**
   * The groups in scope now, by name; read at the start and at each
   * {@link ResyncedController.groupsChanged}. Default: one group, {@link ONE_GROUP}.
   */
  groups?: () => Iterable<string>;
  /** The keys of every object of `group` now (the watch cache's). */
  keys: (group: string) => Iterable<string>;
  /**
   * The keys of the objects that belong to no group at the start: reconciled once then, so that
   * the start is level-based for every object. Default: none.
   */
  ungrouped?: () => Iterable<string>;
  /**
   * Reads the world once for a pass of `group`; resolves with the release of what it holds,
   * called once the group's next reading is in hand, or failed, or the group left the scope, or
   * the resync stops. A rejection is logged and the group's keys are passed all the same: their
   * reconciles learn from the reading's owner that it failed, and report it. A group whose
   * reading failed is read again after `retryMs`, not a period.
   */
  prepare: (group: string, signal: AbortSignal) => Promise<() => void>;
  /** Time from the end of one pass of a group to the start of its next, ±`jitter`. */
  periodMs: number;
  /**
   * Longest time from a pass whose reading failed to the group's next reading, ±`jitter`: the
   * first retry comes after `retryBaseMs`, each next one after twice the last, up to this.
   * Default `periodMs`.
   */
  retryMs?: number;
  /** The first retry's wait after a failed reading (see `retryMs`). Default `retryMs`. */
  retryBaseMs?: number;
  /** Fraction of the period by which it varies; default 0.1. */
  jitter?: number;
  /** A periodic pass spreads its keys over this long, so N reconciles do not start at once. */
  spreadMs: number;
  clock?: Clock;
  random?: () => number;
  logger?: Logger;
}

/** The groups' pass loops of a running {@link ResyncedController}. */
interface RunningGroups {
  signal: AbortSignal;
  /** The loop of each group in scope, by group: aborting `stop` ends it. */
  loops: Map<string, { stop: AbortController }>;
  /** Every loop not ended yet (a group that left the scope may still be letting go). */
  unfinished: Set<Promise<void>>;
}

/** See the module comment. A group's first pass enqueues its keys at once. */
export class ResyncedController implements Runnable {
  readonly name: string;
  readonly needLeaderElection: boolean;
  readonly #o: ResyncOptions;
  readonly #clock: Clock;
  readonly #log: Logger;
  /** While running: the resync's signal, the pass loop of each group, and every loop not ended. */
  #running: RunningGroups | undefined;

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
    const running = this.#o.controller.start(signal, halt);
    const state: RunningGroups = { signal, loops: new Map(), unfinished: new Set() };
    this.#running = state;
    try {
      this.#o.controller.enqueueAll(this.#o.ungrouped?.() ?? [], 0);
      this.groupsChanged();
      await running;
    } finally {
      if (this.#running === state) this.#running = undefined;
      for (const loop of state.loops.values()) loop.stop.abort();
      await Promise.all(state.unfinished);
    }
  }

  /**
   * The groups in scope may have changed: a new group gets its pass loop (its first reading at
   * once), and a group gone stops its loop and lets go of its reading. Ignored while not running.
   */
  groupsChanged(): void {
    const state = this.#running;
    if (!state || state.signal.aborted) return;
    const now = new Set(this.#o.groups?.() ?? [ONE_GROUP]);
    for (const [group, loop] of state.loops) {
      if (now.has(group)) continue;
      loop.stop.abort();
      state.loops.delete(group);
    }
    for (const group of now) {
      if (state.loops.has(group)) continue;
      const stop = new AbortController();
      const done = this.#passes(group, AbortSignal.any([state.signal, stop.signal]));
      state.unfinished.add(done);
      const end = () => state.unfinished.delete(done);
      done.then(end, end);
      state.loops.set(group, { stop });
    }
  }

  /** The passes of one group, until `signal` aborts (the resync stops, or the group is gone). */
  async #passes(group: string, signal: AbortSignal): Promise<void> {
    const { periodMs, spreadMs, jitter = 0.1, random } = this.#o;
    const retryMs = this.#o.retryMs ?? periodMs;
    let held: (() => void) | undefined;
    let failed = 0;
    try {
      for (let first = true; !signal.aborted; first = false) {
        const next = await this.#prepare(group, signal, first);
        held?.();
        held = next;
        if (signal.aborted) break;
        await untilAborted(this.#o.controller.pass(this.#o.keys(group), first ? 0 : spreadMs), signal);
        failed = next ? 0 : failed + 1;
        const waitMs = next
          ? periodMs
          : Math.min(retryMs, (this.#o.retryBaseMs ?? retryMs) * 2 ** (failed - 1));
        try {
          await this.#clock.sleep(spread(waitMs, jitter, random), signal);
        } catch {
          break;
        }
      }
    } finally {
      held?.();
    }
  }

  /** The group's reading, or undefined when it failed (logged). */
  async #prepare(group: string, signal: AbortSignal, first: boolean): Promise<(() => void) | undefined> {
    try {
      return await this.#o.prepare(group, signal);
    } catch (error) {
      if (!signal.aborted)
        this.#log.warn(
          { group, err: error instanceof Error ? error.message : String(error) },
          first ? "first reading of a resync group failed" : "resync reading failed",
        );
      return undefined;
    }
  }
}
