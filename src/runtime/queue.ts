/**
 * A keyed work queue with client-go workqueue / kube-rs scheduler semantics. Keys are opaque
 * strings (the controller uses `namespace/name`); the queue holds keys, never events, because
 * reconciles are level-based and always re-read the object.
 */
import { Backoff, type BackoffOptions } from "./backoff.ts";
import { type Clock, systemClock } from "./clock.ts";
import { BORROW_MS, type FlowOf, Flows } from "./queue-flows.ts";
import {
  FOLLOW_UP,
  FRESH,
  IN_FLIGHT,
  isScheduled,
  type KeyRecord,
  KeyRecords,
  type Line,
  NO_LINE,
  READY,
  RESYNC,
} from "./queue-records.ts";
import { KeySchedules } from "./queue-schedules.ts";

export type { FlowOf, KeyFlow } from "./queue-flows.ts";

/**
 * Hooks the queue calls so a metrics layer can observe it without the queue knowing Prometheus.
 * All are optional; durations are in seconds.
 */
export interface QueueMetricsHooks {
  /** Number of keys waiting to be picked up (not counting delayed or in-flight ones). */
  depth?(depth: number): void;
  /** A key was accepted by `add` (including a delayed add coming due), deduplicated or not. */
  added?(): void;
  /** A key was scheduled again after a failure (`addRateLimited`). */
  retried?(): void;
  /** Time from a key becoming ready to a worker picking it up. */
  queueLatency?(seconds: number): void;
  /** Time from pick-up to `done`. */
  workDuration?(seconds: number): void;
}

/** Options of {@link WorkQueue}. */
export interface WorkQueueOptions {
  clock?: Clock;
  /** Per-key failure backoff; default base 1 s, max 5 min, full jitter. */
  backoff?: Backoff | BackoffOptions;
  metrics?: QueueMetricsHooks;
  /** Whose work each key is (see {@link KeyFlow}); read when a key becomes ready. Default: one flow. */
  flowOf?: FlowOf;
  /** Keys of one flow (and of one part of a flow) in flight at once. Default: no cap. */
  maxPerFlow?: number;
  /** A flow (or part) at its cap borrows while its keys take less than this in flight ({@link BORROW_MS}). */
  borrowMs?: number;
  /**
   * The seats (the controller's concurrency): at most this many keys in flight, reclaimed seats not
   * counted, a borrowing flow's at most its fair share (see the class contract): more workers may
   * call `get` than there are seats. Default: no limit but the workers calling `get`.
   */
  workers?: number;
}

/**
 * Keyed work queue.
 *
 * Guarantees:
 * - Dedupe: a key waiting to be picked up is held once however often it is added.
 * - Exclusivity: a key handed out by `get` is not handed out again until `done(key)`. Adding it
 *   meanwhile marks it dirty; `done` puts it back, so the change is processed after, never lost.
 * - `addAfter`: the earliest requested time wins; a later request for a key already scheduled
 *   sooner (or already waiting) is ignored.
 * - `addRateLimited` schedules the key after its per-key backoff; `forget` resets the backoff.
 * - Two lines of ready keys, each first in first out: fresh work (`add`, and `addAfter` coming due)
 *   and follow-ups (`addAfter(..., { followUp: true })` and `addRateLimited` coming due: the
 *   requeues and retries of work in progress). When both hold keys, `get` takes from each in turn.
 *   Fresh work's turn takes an event's key before a resync's (`addSpread`, `addAfter(..., {
 *   resync: true })`: a pass, an object's interval), which wait in a line of their own: an edit of
 *   one resource of a connection is not held behind that connection's pass over 10,000.
 *   A follow-up is then never held behind a backlog of fresh work (a create waiting to be read
 *   back behind 10,000 creates not yet made), and fresh work still gets every other turn however
 *   many follow-ups come due (a mass rollout polled every few seconds). Turns are counted in keys
 *   taken, not in time: while fresh reconciles wait on a rate limit, follow-ups come back at the
 *   pace those end. Both lines are kept per flow (below), and per part of a flow.
 * - Flows (`flowOf`, `maxPerFlow`; API Priority and Fairness with connections as flows): at most
 *   `maxPerFlow` keys of one flow are in flight at once, and at most `maxPerFlow` of one part of a
 *   flow. A ready key whose flow or part is at its cap waits in its flow's queue without being
 *   handed out, however many `get`s wait: a worker never holds it. `get` serves the flows in
 *   turn (round robin, skipping those at their cap), and within a flow its parts in turn: a flow
 *   whose work is slow takes at most its cap of the workers, and a key of another flow is handed
 *   out as soon as a worker is free, whatever the slow flow's backlog.
 * - Borrowing (work-conserving, within a bound in time and a fair share): when a `get` finds no key of a flow (and
 *   part) below its cap, a flow at its cap may borrow the worker, if its keys are short: it ended
 *   more keys in a row in less than `borrowMs` since its last longer one than it holds seats beyond
 *   its cap, and none of its keys in flight has run `borrowMs` already (likewise its part, when the
 *   part is at its cap), nor took it on average lately. A flow then earns a borrowed seat per
 *   short key and loses them all at a long one; a flow that never ended a key (a new one: its state is dropped with its last key)
 *   borrows nothing, and a slow one never. The last cap's worth of idle workers is never lent:
 *   other flows' keys find them at once, and a flow whose short keys turn slow (a service that
 *   stops answering) holds all but those until its seats are reclaimed (below; with 16 workers and
 *   a cap of 4: 12, and 4 for the others, for at most `borrowMs`; lending all but one left the
 *   others one worker for 10 s when a connection became a black hole: edits beside it p99 808 ms). Borrowed seats are given back as their
 *   keys end: a worker coming free takes first a key of a flow below its cap (and of a part below
 *   its cap), so another flow's keys beyond the idle ones wait at most about `borrowMs` for a seat
 *   (see {@link BORROW_MS}).
 * - Reclaiming (`workers` given): a borrowed seat whose key has run `borrowMs` is given back at
 *   that moment, though its key runs on: it no longer counts against `workers`, so another key may
 *   be handed out to one more worker (the caller runs up to `workers` − cap more than `workers`),
 *   while the flow, its cap still full of keys in flight and one of them long, borrows no more and
 *   its next keys wait. A connection whose quick service stops answering thus holds its borrowed
 *   seats `borrowMs` at most, not until its calls time out; it is given at most as many reconciles
 *   in flight beyond the seats as it had borrowed.
 * - A fair share of the borrowed seats: while other flows are active (a key ready or in flight, or
 *   one ended within the last `borrowMs`), a flow borrows only up to its share of the workers among
 *   the active ones, `workers` ÷ their number (never below the cap): two active flows, 8 of 16 each;
 *   a flow alone, every worker but the cap's worth kept idle. A flow borrowing beside a quiet one
 *   (an edit now and then) thus leaves it half the workers rather than a cap's worth, and loads
 *   what they share besides the workers (the API server, the operator's CPU) at most that much:
 *   a connection whose 1,000 resources all wrote a status at once (its listing missed its
 *   deadline) on 12 of 16 workers made the edits of the connection beside it wait 1.1-1.7 s for
 *   the API server, on 4 idle workers of their own.
 * - `shutDown` stops intake: later adds are ignored, pending delayed adds are cancelled, keys not
 *   yet picked up are dropped (the work is level-based: the next run resyncs everything), and
 *   `get` resolves `undefined`. In-flight keys finish; `drained()` resolves when the last is done.
 */
export class WorkQueue {
  readonly #clock: Clock;
  /** The clock's reading when the queue started: the records' times count from it. */
  readonly #origin: number;
  readonly #backoff: Backoff;
  /** Per key, its failures since its last `forget` (client-go's ItemExponentialFailureRateLimiter). */
  readonly #failures = new Map<string, number>();
  readonly #metrics: QueueMetricsHooks;
  readonly #flowOf: FlowOf;
  readonly #flows: Flows;
  /** Each key's record, and what schedules keys for later (entered only for a key that has one). */
  readonly #records = new KeyRecords();
  readonly #schedules: KeySchedules;
  /** Ready keys, in every line. */
  #ready = 0;
  #waiters: Array<(key: string | undefined) => void> = [];
  #drainWaiters: Array<() => void> = [];
  #shuttingDown = false;

  constructor(options: WorkQueueOptions = {}) {
    const clock = options.clock ?? systemClock;
    this.#clock = clock;
    this.#origin = clock.now();
    this.#backoff = options.backoff instanceof Backoff ? options.backoff : new Backoff(options.backoff);
    this.#metrics = options.metrics ?? {};
    this.#flowOf = options.flowOf ?? (() => undefined);
    const cap = options.maxPerFlow ?? Number.POSITIVE_INFINITY;
    this.#flows = new Flows({
      clock,
      now: () => this.#now(),
      cap: cap >= 1 ? Math.floor(cap) : 1,
      borrowMs: options.borrowMs ?? BORROW_MS,
      workers: options.workers,
      reclaimed: () => this.#handOut(),
    });
    this.#schedules = new KeySchedules(this.#records, {
      clock,
      now: () => this.#now(),
      ready: (record, line) => this.#makeReady(record, line),
    });
  }

  /** Makes `key` ready now as fresh work (deduplicated; deferred to `done` if the key is in flight). */
  add(key: string): void {
    if (this.#shuttingDown) return;
    this.#makeReady(this.#records.record(key), FRESH);
  }

  /**
   * Makes `key` ready after `delayMs`, unless it is ready or scheduled sooner already; with
   * `followUp`, in the follow-ups' line, with `resync` in the resyncs' (see the class contract).
   */
  addAfter(key: string, delayMs: number, options: { followUp?: boolean; resync?: boolean } = {}): void {
    if (this.#shuttingDown) return;
    const line = options.followUp ? FOLLOW_UP : options.resync ? RESYNC : FRESH;
    const record = this.#records.record(key);
    if (delayMs <= 0) this.#makeReady(record, line);
    else this.#schedules.after(record, delayMs, line);
  }

  /**
   * Makes each of `keys` ready as a resync at a random moment of [0, `spreadMs`), one of
   * `SPREAD_MOMENTS` (queue-schedules.ts) evenly spaced ones, as `addAfter(key, offset)` would for
   * each: a key ready already, or scheduled no later than its moment, keeps that; one scheduled
   * later comes at its moment instead; one made ready, scheduled sooner or cancelled before its
   * moment does not come again at it.
   *
   * Why not `addAfter` per key: a timer per key cost ~570 bytes, alive for the whole spread
   * (5.4 MiB at 10,000 keys in a resync pass, long-lived enough to reach V8's old space and to
   * be collected only by a full collection); here a key costs its place in an array of its
   * moment's records, and its record holds its time.
   */
  addSpread(keys: Iterable<string>, spreadMs: number, random: () => number = Math.random): void {
    if (this.#shuttingDown) return;
    this.#schedules.spread(keys, spreadMs, random);
  }

  /**
   * Schedules `key` as a follow-up after its next backoff delay, but no sooner than `minDelayMs`
   * (a server's Retry-After), and returns the delay used in ms.
   */
  addRateLimited(key: string, minDelayMs = 0): number {
    if (this.#shuttingDown) return 0;
    const failures = this.numRequeues(key);
    this.#failures.set(key, failures + 1);
    const delay = Math.max(minDelayMs, this.#backoff.delayMs(failures));
    this.#metrics.retried?.();
    this.addAfter(key, delay, { followUp: true });
    return delay;
  }

  /** Resets `key`'s failure backoff (call after a success). Does not unschedule it. */
  forget(key: string): void {
    this.#failures.delete(key);
  }

  /** Failures recorded for `key` since the last `forget`. */
  numRequeues(key: string): number {
    return this.#failures.get(key) ?? 0;
  }

  /** Cancels a delayed add of `key` (for instance because the object was deleted). */
  cancel(key: string): void {
    const record = this.#records.get(key);
    if (record) this.#schedules.unschedule(record);
  }

  /**
   * Resolves with the next ready key and marks it in flight; the caller must call `done(key)`.
   * Resolves `undefined` once the queue is shut down, or when `signal` aborts while waiting.
   */
  get(signal?: AbortSignal): Promise<string | undefined> {
    if (this.#shuttingDown || signal?.aborted) return Promise.resolve(undefined);
    // The idle workers besides this one: those waiting.
    const key = this.#take(this.#waiters.length);
    if (key !== undefined) return Promise.resolve(key);
    return new Promise((resolve) => {
      const waiter = (k: string | undefined) => {
        signal?.removeEventListener("abort", onAbort);
        resolve(k);
      };
      const onAbort = () => {
        this.#waiters = this.#waiters.filter((w) => w !== waiter);
        resolve(undefined);
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      this.#waiters.push(waiter);
    });
  }

  /** Ends processing of `key`; if it was added meanwhile, it becomes ready again. */
  done(key: string): void {
    const record = this.#records.get(key);
    if (record?.state !== IN_FLIGHT) return;
    this.#metrics.workDuration?.((this.#now() - record.startedAt) / 1000);
    this.#flows.end(record);
    const line = record.dirty;
    if (line !== NO_LINE) {
      record.dirty = NO_LINE;
      if (!this.#shuttingDown) {
        // Added while in flight: in the line it was added to (a follow-up's if any add was one).
        this.#enqueue(record, line);
        this.#reportDepth();
      }
    } else this.#records.release(record);
    // A seat of the flow came free: a key of it waiting at its cap may go now.
    this.#handOut();
    if (this.#flows.running.length === 0) this.#notifyDrained();
  }

  /** Stops intake; see the class contract. Idempotent. */
  shutDown(): void {
    if (this.#shuttingDown) return;
    this.#shuttingDown = true;
    this.#schedules.clear();
    this.#ready = 0;
    this.#flows.clear();
    for (const waiter of this.#waiters) waiter(undefined);
    this.#waiters = [];
    this.#reportDepth();
    if (this.#flows.running.length === 0) this.#notifyDrained();
  }

  /** Resolves when the queue is shut down and no key is in flight. */
  drained(): Promise<void> {
    if (this.#shuttingDown && this.#flows.running.length === 0) return Promise.resolve();
    return new Promise((resolve) => this.#drainWaiters.push(resolve));
  }

  /** True once `shutDown` was called. */
  get shuttingDown(): boolean {
    return this.#shuttingDown;
  }

  /** Keys ready to be picked up, in both lines (those waiting at their flow's cap included). */
  get length(): number {
    return this.#ready;
  }

  /**
   * Per flow (or its parts' `label`), the ready keys that wait only because their flow, or their
   * part of it, has its cap of keys in flight (0 for none left out). One look at each part.
   */
  waitingAtCap(): Map<string, number> {
    return this.#flows.waitingAtCap();
  }

  /**
   * The keys that became ready before `before` (clock ms) and still wait only because their flow,
   * or their part of it, is at its cap, in flows whose keys lately took `slowMs` or more each in
   * flight, or that hold a key in flight that long already (a flow whose work is slow, not a
   * large pass of quick keys); each part's lines in order, the oldest first.
   */
  waitingSince(before: number, slowMs = 0): string[] {
    return this.#flows.waitingSince(before - this.#origin, slowMs);
  }

  /** Keys the queue holds a record of: ready, in flight, scheduled, or idle and not yet swept. */
  get held(): number {
    return this.#records.size;
  }

  /** Keys currently scheduled for later. */
  get delayedCount(): number {
    return this.#schedules.scheduled;
  }

  /** Work in flight: summed and longest age in seconds (client-go's unfinished-work gauges). */
  inFlight(): { count: number; unfinishedSeconds: number; longestSeconds: number } {
    return this.#flows.inFlight(this.#now());
  }

  /** Whether `key` waits to be picked up (in either line of its flow). */
  isReady(key: string): boolean {
    return this.#records.get(key)?.state === READY;
  }

  /** The queue's time: ms since it started. */
  #now(): number {
    return this.#clock.now() - this.#origin;
  }

  #makeReady(record: KeyRecord, line: Line): void {
    if (this.#shuttingDown) return;
    this.#metrics.added?.();
    if (isScheduled(record)) this.#schedules.unschedule(record);
    if (record.state === IN_FLIGHT) {
      record.dirty = Math.max(line, record.dirty) as Line;
      return;
    }
    if (record.state === READY) {
      // Already waiting: it keeps its place, unless it waits as a resync and is now more.
      if (line === RESYNC || record.line !== RESYNC) return;
      if (!this.#flows.unready(record)) return;
      this.#ready -= 1;
    }
    this.#enqueue(record, line);
    this.#handOut();
    this.#reportDepth();
  }

  /** Puts the record last in its line of its flow's part (the flow read now). */
  #enqueue(record: KeyRecord, line: Line): void {
    this.#flows.enqueue(record, this.#flowOf(record.key), line);
    this.#ready += 1;
  }

  /** The next key (see `Flows.take`), its queue latency observed. */
  #take(waitingBesides: number): string | undefined {
    if (this.#ready === 0) return undefined;
    const record = this.#flows.take(waitingBesides);
    if (record === undefined) return undefined;
    this.#ready -= 1;
    this.#metrics.queueLatency?.((record.startedAt - record.readyAt) / 1000);
    this.#reportDepth();
    return record.key;
  }

  #handOut(): void {
    while (this.#waiters.length > 0) {
      const key = this.#take(this.#waiters.length - 1);
      if (key === undefined) return;
      this.#waiters.shift()?.(key);
    }
  }

  #reportDepth(): void {
    this.#metrics.depth?.(this.length);
  }

  #notifyDrained(): void {
    if (!this.#shuttingDown) return;
    const waiters = this.#drainWaiters;
    this.#drainWaiters = [];
    for (const resolve of waiters) resolve();
  }
}
