/**
 * The controller loop: N workers take keys from a {@link WorkQueue} and call the reconciler,
 * turning its outcome into the next schedule (backoff on error, or the delay the outcome asks
 * for). controller-runtime's contract, service-agnostic. It schedules nothing on its own: the
 * periodic pass over every object is `ResyncedController`'s (resync.ts). As controller-runtime's
 * does, it gives each reconcile its log's fields (`controller`, `namespace`, `name` and its own
 * `reconcileID`, {@link inReconcile}) and what it logs through ({@link LazyReconcileLog}).
 */
import { randomUUID } from "node:crypto";
import type { Logger } from "pino";
import { pino } from "pino";
import type { BackoffOptions } from "./backoff.ts";
import { spread } from "./backoff.ts";
import { type Clock, DeferredError, followSignal, systemClock, withinDeadline } from "./clock.ts";
import { currentReconcile, type ReconcileFields } from "./log.ts";
import type { Runnable } from "./manager.ts";
import { type FlowOf, type QueueMetricsHooks, WorkQueue } from "./queue.ts";
import { parseObjectKey } from "./queue-records.ts";
import { ReconcileTimeoutError, scheduleAfterError } from "./reconcile-errors.ts";
import { reportWaiting, type WaitingReport } from "./waiting-report.ts";

/**
 * What a reconcile asks the controller to do next (kube-rs's `Action`), one of:
 * - `done`: in line; nothing until a change or the next periodic pass, or, with `intervalMs`
 *   (this object's own check interval), again after that long ±jitter;
 * - `requeueAfter`: work in progress; reconcile again after `ms`;
 * - `retry`: not an error, but again after the key's backoff (a write lost a race);
 * - `gone`: the object no longer exists; schedule nothing (a new event will bring it back).
 */
export type ReconcileResult =
  | { kind: "done"; intervalMs?: number }
  | { kind: "requeueAfter"; ms: number }
  | { kind: "retry" }
  | { kind: "gone" };

/** The {@link ReconcileResult}s, built by name. */
export const Action = {
  done: (intervalMs?: number): ReconcileResult =>
    intervalMs === undefined ? { kind: "done" } : { kind: "done", intervalMs },
  requeueAfter: (ms: number): ReconcileResult => ({ kind: "requeueAfter", ms }),
  retry: (): ReconcileResult => ({ kind: "retry" }),
  gone: (): ReconcileResult => ({ kind: "gone" }),
} as const;

/**
 * Reconciles one key. Must be level-based (re-read the object), must honour `signal` (it aborts
 * on timeout and when leadership is lost), and may throw: `TerminalError` (reconcile-errors.ts) means no retry;
 * an error with a numeric `retryAfterMs` property delays the retry at least that long (HTTP 429);
 * any other error is retried with per-key exponential backoff.
 */
export type Reconciler = (key: string, signal: AbortSignal) => Promise<ReconcileResult>;

/** controller-runtime's `result` label values. */
export type ReconcileOutcome = "success" | "error" | "requeue" | "requeue_after";

/** Hooks for controller metrics; `metrics.ts` provides an implementation. All optional. */
export interface ControllerMetricsHooks {
  reconciled?(outcome: ReconcileOutcome, seconds: number): void;
  /** An error was returned by a reconcile; `terminal` when it was a `TerminalError`. */
  errored?(terminal: boolean): void;
  activeWorkers?(count: number): void;
  maxConcurrent?(count: number): void;
  queue?: QueueMetricsHooks;
  /** Receives a probe of the current queue's in-flight work, for the unfinished-work gauges. */
  observeInFlight?(probe: () => { unfinishedSeconds: number; longestSeconds: number }): void;
  /** Receives a probe of the keys waiting at their flow's cap, per flow or label (`WorkQueue.waitingAtCap`). */
  observeWaiting?(probe: () => Map<string, number>): void;
}

/** Options of {@link Controller}. */
export interface ControllerOptions {
  name: string;
  reconcile: Reconciler;
  /**
   * Workers, i.e. reconciles that may run at once (distinct keys). Default 1. With `flowOf`, a
   * reconcile that borrowed a seat and has run `borrowMs` no longer counts (its seat is reclaimed,
   * queue.ts): up to `concurrency` − `maxPerFlow` such reconciles run beyond it.
   */
  concurrency?: number;
  /** Spread of a `done` result's interval, as a fraction of it (±). Default 0.1. */
  intervalJitter?: number;
  /** Per-reconcile timeout; its signal aborts after this. Default 2 min. */
  reconcileTimeoutMs?: number;
  /** Failure backoff; default base 1 s, max 5 min, full jitter. */
  backoff?: BackoffOptions;
  /** Whether the manager must hold the lease to run it. Default true. */
  needLeaderElection?: boolean;
  /** Whose work each key is: at most `maxPerFlow` reconciles of one flow at once (queue.ts). */
  flowOf?: FlowOf;
  /** Reconciles of one flow (and of one part of it) at once; default `concurrency` (no cap). */
  maxPerFlow?: number;
  /** A flow at its cap borrows idle workers while its reconciles end sooner (queue.ts's `borrowMs`). */
  borrowMs?: number;
  /** The report of keys held back at their flow's cap (waiting-report.ts). Default none. */
  waiting?: WaitingReport;
  clock?: Clock;
  random?: () => number;
  metrics?: ControllerMetricsHooks;
  logger?: Logger;
}

/**
 * Runs a reconciler over a keyed work queue. Implements {@link Runnable}; it may be started again
 * after it stopped (a new leadership term), each run with a fresh queue.
 *
 * Guarantees: one key is never reconciled by two workers at once; a reconciler that throws or
 * rejects never crashes the process (the error is logged once, here, and retried per its kind);
 * keys enqueued while the controller is not running are dropped (level-based: whoever starts it
 * enqueues every key then, as `ResyncedController` does).
 */
export class Controller implements Runnable {
  readonly name: string;
  readonly needLeaderElection: boolean;
  readonly #opts: ControllerOptions;
  readonly #clock: Clock;
  readonly #random: () => number;
  readonly #metrics: ControllerMetricsHooks;
  readonly #log: Logger;
  readonly #concurrency: number;
  #queue: WorkQueue | undefined;
  #active = 0;
  /** Keys deferred (`DeferredError`) and not picked up since, and the flow of each. */
  readonly #deferred = new Map<string, string>();
  /** Passes under way: the keys each still waits for, and how to end it. */
  readonly #passes = new Set<{ pending: Set<string>; end: () => void }>();

  constructor(options: ControllerOptions) {
    this.name = options.name;
    this.needLeaderElection = options.needLeaderElection ?? true;
    this.#opts = options;
    this.#clock = options.clock ?? systemClock;
    this.#random = options.random ?? Math.random;
    this.#metrics = options.metrics ?? {};
    this.#log = (options.logger ?? pino({ level: "silent" })).child({ controller: options.name });
    this.#concurrency = Math.max(1, Math.floor(options.concurrency ?? 1));
  }

  /** Makes `key` ready now. Ignored while the controller is not running. */
  enqueue(key: string): void {
    this.#queue?.add(key);
  }

  /**
   * Enqueues every key at a random moment of [0, spreadMs) (`WorkQueue.addSpread`), so a resync
   * of N objects does not start N reconciles in the same instant. Ignored while not running.
   */
  enqueueAll(keys: Iterable<string>, spreadMs: number): void {
    this.#queue?.addSpread(keys, spreadMs, this.#random);
  }

  /**
   * Enqueues every key like {@link enqueueAll} and resolves once each has been reconciled (or
   * failed, or was forgotten) since: one resync pass, however long it takes. Resolves at once
   * when the controller is not running, and when it stops.
   */
  pass(keys: Iterable<string>, spreadMs: number): Promise<void> {
    const pending = new Set(keys);
    if (!this.running || pending.size === 0) return Promise.resolve();
    return new Promise<void>((resolve) => {
      const pass = {
        pending,
        end: () => {
          this.#passes.delete(pass);
          resolve();
        },
      };
      this.#passes.add(pass);
      this.enqueueAll(pending, spreadMs);
    });
  }

  /** Unschedules `key`'s pending interval, requeue or retry (its object was deleted). */
  forget(key: string): void {
    this.#deferred.delete(key);
    this.#queue?.cancel(key);
    this.#queue?.forget(key);
    this.#settle(key);
  }

  /** `key` was reconciled (or is gone): the passes waiting for it may end. */
  #settle(key: string): void {
    for (const pass of this.#passes) {
      pass.pending.delete(key);
      if (pass.pending.size === 0) pass.end();
    }
  }

  /** True while started and not yet stopping. */
  get running(): boolean {
    return this.#queue !== undefined && !this.#queue.shuttingDown;
  }

  /**
   * Runs the workers until `signal` aborts, then stops intake and resolves once in-flight
   * reconciles finished. `halt` aborts in-flight reconciles at once (their signals fire).
   */
  async start(signal: AbortSignal, halt: AbortSignal = new AbortController().signal): Promise<void> {
    if (this.running) throw new Error(`controller ${this.name} is already running`);
    const queue = new WorkQueue({
      clock: this.#clock,
      backoff: { random: this.#random, ...this.#opts.backoff },
      metrics: this.#metrics.queue ?? {},
      ...(this.#opts.flowOf
        ? {
            flowOf: this.#opts.flowOf,
            maxPerFlow: this.#opts.maxPerFlow ?? this.#concurrency,
            workers: this.#concurrency,
            ...(this.#opts.borrowMs === undefined ? {} : { borrowMs: this.#opts.borrowMs }),
          }
        : {}),
    });
    this.#queue = queue;
    this.#deferred.clear();
    this.#metrics.maxConcurrent?.(this.#concurrency);
    this.#metrics.observeInFlight?.(() => queue.inFlight());
    if (this.#opts.flowOf) this.#metrics.observeWaiting?.(() => this.#waiting(queue));
    const stopReports = reportWaiting(queue, this.#opts.waiting, this.#clock, this.#log);
    const onStop = () => queue.shutDown();
    signal.addEventListener("abort", onStop, { once: true });
    if (signal.aborted) queue.shutDown();
    this.#log.info({ workers: this.#concurrency }, "starting workers");
    // With flows, the seats a borrowing flow held past the bound are reclaimed (queue.ts): one more
    // worker each, at most as many as a flow may borrow, while those reconciles run on.
    const reclaimable = this.#opts.flowOf
      ? Math.max(0, this.#concurrency - Math.max(1, Math.floor(this.#opts.maxPerFlow ?? this.#concurrency)))
      : 0;
    const workers = Array.from({ length: this.#concurrency + reclaimable }, () => this.#work(queue, halt));
    await Promise.all(workers);
    await queue.drained();
    stopReports();
    for (const pass of this.#passes) pass.end();
    signal.removeEventListener("abort", onStop);
    this.#log.info("workers stopped");
  }

  /** Per flow (or its parts' label), the keys waiting at its cap and those deferred (see `observeWaiting`). */
  #waiting(queue: WorkQueue): Map<string, number> {
    const out = queue.waitingAtCap();
    // A deferred key come due and ready is counted by the queue, if at all.
    for (const [key, flow] of this.#deferred)
      if (!queue.isReady(key)) out.set(flow, (out.get(flow) ?? 0) + 1);
    return out;
  }

  async #work(queue: WorkQueue, halt: AbortSignal): Promise<void> {
    for (;;) {
      const key = await queue.get();
      if (key === undefined) return;
      // Every line logged during it carries controller, namespace, name and its own reconcileID.
      await inReconcile(this.name, key, () => this.#process(queue, key, halt));
    }
  }

  async #process(queue: WorkQueue, key: string, halt: AbortSignal): Promise<void> {
    const timeoutMs = this.#opts.reconcileTimeoutMs ?? 120_000;
    const followed = followSignal(halt);
    const cancelTimer = this.#clock.setTimer(timeoutMs, () =>
      followed.abort(new ReconcileTimeoutError(`reconcile of ${key} exceeded ${timeoutMs} ms`)),
    );
    const { signal } = followed;
    const started = this.#clock.now();
    this.#deferred.delete(key);
    this.#metrics.activeWorkers?.(++this.#active);
    // Work the reconcile starts that outlives it is under no deadline once it ended (clock.ts).
    let ended = false;
    try {
      // The reconciler may throw synchronously; starting it inside the promise chain catches that too.
      // What waits inside the reconcile may ask how long it has left (clock.ts).
      const timeLeft = () => started + timeoutMs - this.#clock.now();
      const result = await withinDeadline({ timeLeft, holder: key, ended: () => ended }, () =>
        Promise.resolve().then(() => this.#opts.reconcile(key, signal)),
      );
      const outcome = this.#scheduleAfterSuccess(queue, key, result);
      this.#metrics.reconciled?.(outcome, (this.#clock.now() - started) / 1000);
    } catch (error) {
      const errored = (terminal: boolean) => this.#metrics.errored?.(terminal);
      const { flowOf } = this.#opts;
      scheduleAfterError(
        { queue, log: this.#log, flowOf, deferred: this.#deferred, errored },
        key,
        error,
        halt.aborted,
      );
      const outcome = error instanceof DeferredError ? "requeue_after" : "error";
      this.#metrics.reconciled?.(outcome, (this.#clock.now() - started) / 1000);
    } finally {
      ended = true;
      cancelTimer();
      followed.release();
      this.#metrics.activeWorkers?.(--this.#active);
      queue.done(key);
      this.#settle(key);
    }
  }

  #scheduleAfterSuccess(queue: WorkQueue, key: string, result: ReconcileResult): ReconcileOutcome {
    if (result.kind === "retry") {
      queue.addRateLimited(key);
      return "requeue";
    }
    queue.forget(key);
    // Follow-ups of work in progress: never held behind a backlog of fresh work (queue.ts).
    if (result.kind === "requeueAfter" && result.ms >= 0) {
      queue.addAfter(key, result.ms, { followUp: true });
      return "requeue_after";
    }
    // An object's own interval is a resync, not work in progress: an edit goes before it.
    if (result.kind === "done" && result.intervalMs !== undefined && result.intervalMs > 0)
      queue.addAfter(key, spread(result.intervalMs, this.#opts.intervalJitter ?? 0.1, this.#random), {
        resync: true,
      });
    return "success";
  }
}

/**
 * Runs `fn` as the reconcile of `key` by `controller`: lines logged within it, by any logger
 * that `createLogger` (log.ts) made, carry the reconcile's fields and a new `reconcileID`.
 */
export function inReconcile<T>(controller: string, key: string, fn: () => T): T {
  const { namespace, name } = parseObjectKey(key);
  return currentReconcile.run(new ReconcileScope(controller, namespace, name), fn);
}

/**
 * One reconcile's fields. Its id is drawn when first read: most reconciles log nothing, and a
 * resync pass runs 10,000 of them.
 */
class ReconcileScope implements ReconcileFields {
  readonly controller: string;
  readonly namespace: string;
  readonly name: string;
  #id: string | undefined;

  constructor(controller: string, namespace: string, name: string) {
    this.controller = controller;
    this.namespace = namespace;
    this.name = name;
  }

  get reconcileID(): string {
    this.#id ??= randomUUID();
    return this.#id;
  }
}

/** What a reconcile logs through: its lines carry the resource and the reconcile's id. */
export interface ReconcileLog {
  isLevelEnabled(level: "debug" | "info" | "warn"): boolean;
  debug(fields: object, message: string): void;
  info(message: string): void;
  info(fields: object, message: string): void;
  warn(fields: object, message: string): void;
}

/**
 * A reconcile's logger, its child of `parent` made when a line is first written at a level
 * `parent` writes. Most reconciles write nothing (a resync pass runs 10,000 of them), and a pino
 * child serializes and redacts its bindings when it is made: garbage that lived as long as the
 * reconcile, long enough for V8 to move it to its old space.
 */
export class LazyReconcileLog implements ReconcileLog {
  readonly #parent: Logger;
  readonly #bindings: () => Record<string, unknown>;
  #child: Logger | undefined;

  constructor(parent: Logger, bindings: () => Record<string, unknown>) {
    this.#parent = parent;
    this.#bindings = bindings;
  }

  isLevelEnabled(level: "debug" | "info" | "warn"): boolean {
    return this.#parent.isLevelEnabled(level);
  }

  debug(fields: object, message: string): void {
    if (this.#parent.isLevelEnabled("debug")) this.#log().debug(fields, message);
  }

  info(fieldsOrMessage: object | string, message?: string): void {
    if (!this.#parent.isLevelEnabled("info")) return;
    if (typeof fieldsOrMessage === "string") this.#log().info(fieldsOrMessage);
    else this.#log().info(fieldsOrMessage, message);
  }

  warn(fields: object, message: string): void {
    if (this.#parent.isLevelEnabled("warn")) this.#log().warn(fields, message);
  }

  #log(): Logger {
    this.#child ??= this.#parent.child(this.#bindings());
    return this.#child;
  }
}
