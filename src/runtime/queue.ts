/**
 * A keyed work queue with client-go workqueue / kube-rs scheduler semantics. Keys are opaque
 * strings (the controller uses `namespace/name`); the queue holds keys, never events, because
 * reconciles are level-based and always re-read the object.
 */
import { Backoff, type BackoffOptions, KeyedBackoff } from "./backoff.ts";
import { type CancelTimer, type Clock, systemClock } from "./clock.ts";

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

/**
 * How many moments {@link WorkQueue.addSpread} cuts a spread into: one timer and one array of keys
 * per moment, rather than a timer per key.
 */
export const SPREAD_MOMENTS = 32;

/**
 * Whose work a key is (API Priority and Fairness's flow): `flow` (a tenant's connection, say),
 * and within it, when the flow is shared by several parties, the `part` the key belongs to (a
 * namespace of a connection many namespaces use). Keys of one flow share its cap; keys of one part
 * share the part's cap too.
 */
export interface KeyFlow {
  flow: string;
  part?: string;
}

/** The flow of a key; `undefined`: the one flow of keys that name none (`""`). */
export type FlowOf = (key: string) => KeyFlow | undefined;

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
  /**
   * A flow (or part) at its cap may borrow a worker no other flow could be handed a key for while
   * its keys take less than this long in flight ({@link BORROW_MS}, see the class contract).
   */
  borrowMs?: number;
  /**
   * The seats (the controller's concurrency): at most this many keys in flight, a borrowed key that
   * has run `borrowMs` not counted (reclaimed); a flow borrowing holds at most its fair share of
   * them among the flows active lately (see the class contract). Given, more workers may call
   * `get` than there are seats (those that take reclaimed seats). Default: no limit but the
   * workers calling `get`.
   */
  workers?: number;
}

/**
 * How long a flow's keys may take in flight for it to borrow workers beyond its cap, by default:
 * 5 s. A worker lent to a flow at its cap is given back when the borrowed key ends: another flow's
 * key finds the one worker never lent at once, and its next keys wait for a borrowed seat at most
 * about this long (each borrowed key's flow ended its recent keys sooner, and none in flight has
 * run this long), in expectation the borrowing flow's time per key over the seats it borrowed (a
 * pass of ~20 ms keys on 11 borrowed seats: ~2 ms; creates of 0.5 s each on a loaded machine:
 * ~50 ms). Long enough that a lone flow's keys on a busy machine (a third of them over 1 s at
 * load 25) keep borrowing; a slow service's reads (~10 s each, up to the deadline) never do.
 */
export const BORROW_MS = 5_000;

/** The keys of one part of a flow waiting to be picked up, and how many of its keys are in flight. */
interface Part {
  /** Where it is: one object that every key of the part points at (no object per key). */
  place: Place;
  inFlight: number;
  /** Ready fresh keys in FIFO order, with the time each became ready (for queue latency). */
  fresh: Map<string, number>;
  /** Ready follow-ups (requeues, retries) in FIFO order, likewise. */
  followUps: Map<string, number>;
  /** Ready resync keys (passes, an object's interval), taken in fresh work's turn after its keys. */
  resyncs: Map<string, number>;
  /** The line the part took from last, when both held keys: the other goes next. */
  tookFollowUp: boolean;
  /** Its keys ended in less than the borrow bound since its last that did not (see {@link Seats}). */
  shortRun: number;
}

/**
 * Seats a flow, or a part of a flow, may hold: `inFlight` up to the cap, and beyond it while
 * `inFlight - cap < shortRun` (keys it ended in a row in less than the borrow bound: a flow earns
 * one borrowed seat per short key, and loses them all at a long one).
 */
interface Seats {
  inFlight: number;
  shortRun: number;
}

/** One flow: its parts in round-robin order, and how many of its keys are in flight. */
interface Flow extends Seats {
  parts: Map<string, Part>;
  /** How long its keys were in flight lately, in ms (a moving average; 0 before the first). */
  workMs: number;
}

/** The weight of the latest key's time in flight in its flow's moving average. */
const WORK_WEIGHT = 0.2;

/** Where a ready or in-flight key is counted. */
interface Place {
  flow: string;
  part: string;
}

/**
 * The line a key is added to, by precedence when one key is added to several: a follow-up over
 * fresh work over a resync (a resync added to a key waiting as fresh work leaves it there; fresh
 * work added to a key waiting as a resync moves it to the fresh line).
 */
const RESYNC = 0;
const FRESH = 1;
const FOLLOW_UP = 2;
type Line = typeof RESYNC | typeof FRESH | typeof FOLLOW_UP;

/** The flow of keys whose {@link FlowOf} names none. */
const SHARED: KeyFlow = { flow: "" };

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
  readonly #limiter: KeyedBackoff;
  readonly #metrics: QueueMetricsHooks;
  readonly #flowOf: FlowOf;
  readonly #cap: number;
  readonly #borrowMs: number;
  readonly #workers: number | undefined;
  /** Flows that ended a key lately and hold none now: when each ended its last (see {@link #active}). */
  readonly #endedAt = new Map<string, number>();
  /** Whether a flow or part is below its cap (one function for every `get`). */
  readonly #below = (seats: Seats) => seats.inFlight < this.#cap;
  /** The flows holding ready or in-flight keys, in round-robin order (the one served last is last). */
  readonly #flows = new Map<string, Flow>();
  /** Ready keys, and the flow and part each waits in. */
  readonly #ready = new Map<string, Place>();
  /** Keys added while in flight: re-queued at `done`, in the line they were added to (the foremost). */
  readonly #dirty = new Map<string, Line>();
  /** In-flight keys: when each was picked up, and the flow and part it counts in. */
  readonly #processing = new Map<string, Place & { at: number; reclaim?: CancelTimer }>();
  readonly #delayed = new Map<string, { at: number; cancel: CancelTimer }>();
  /** The timers of spread adds not yet come due. */
  readonly #spreads = new Set<CancelTimer>();
  /**
   * When each key of a spread is due: what `addAfter` and later spreads compare with (the
   * earliest wins), and what a moment checks before it makes a key ready (a key made ready,
   * scheduled sooner or cancelled since is no longer there, or is there with another time).
   */
  readonly #spreadAt = new Map<string, number>();
  #waiters: Array<(key: string | undefined) => void> = [];
  #drainWaiters: Array<() => void> = [];
  #shuttingDown = false;

  constructor(options: WorkQueueOptions = {}) {
    this.#clock = options.clock ?? systemClock;
    const backoff = options.backoff instanceof Backoff ? options.backoff : new Backoff(options.backoff);
    this.#limiter = new KeyedBackoff(backoff);
    this.#metrics = options.metrics ?? {};
    this.#flowOf = options.flowOf ?? (() => undefined);
    const cap = options.maxPerFlow ?? Number.POSITIVE_INFINITY;
    this.#cap = cap >= 1 ? Math.floor(cap) : 1;
    this.#borrowMs = options.borrowMs ?? BORROW_MS;
    this.#workers = options.workers;
  }

  /** Makes `key` ready now as fresh work (deduplicated; deferred to `done` if the key is in flight). */
  add(key: string): void {
    this.#makeReady(key, FRESH);
  }

  /**
   * Makes `key` ready after `delayMs`, unless it is ready or scheduled sooner already; with
   * `followUp`, in the follow-ups' line, with `resync` in the resyncs' (see the class contract).
   */
  addAfter(key: string, delayMs: number, options: { followUp?: boolean; resync?: boolean } = {}): void {
    if (this.#shuttingDown) return;
    const line = options.followUp ? FOLLOW_UP : options.resync ? RESYNC : FRESH;
    if (delayMs <= 0) {
      this.#makeReady(key, line);
      return;
    }
    const at = this.#clock.now() + delayMs;
    if (this.#keepsSchedule(key, at)) return;
    const cancel = this.#clock.setTimer(delayMs, () => {
      this.#delayed.delete(key);
      this.#makeReady(key, line);
    });
    this.#delayed.set(key, { at, cancel });
  }

  /**
   * Makes each of `keys` ready as a resync at a random moment of [0, `spreadMs`), one of
   * {@link SPREAD_MOMENTS} evenly spaced ones, as `addAfter(key, offset)` would for each: a key
   * ready already, or scheduled no later than its moment, keeps that; one scheduled later comes
   * at its moment instead; one made ready, scheduled sooner or cancelled before its moment does not
   * come again at it.
   *
   * Why not `addAfter` per key: a timer per key cost ~570 bytes, alive for the whole spread
   * (5.4 MiB at 10,000 keys in a resync pass, long-lived enough to reach V8's old space and to
   * be collected only by a full collection); here a key costs its place in an array and an entry
   * of its due time.
   */
  addSpread(keys: Iterable<string>, spreadMs: number, random: () => number = Math.random): void {
    if (this.#shuttingDown) return;
    const now = this.#clock.now();
    const stepMs = Math.max(0, spreadMs) / SPREAD_MOMENTS;
    const moments: string[][] = [];
    for (const key of keys) {
      const moment = Math.min(SPREAD_MOMENTS - 1, Math.floor(random() * SPREAD_MOMENTS));
      const delayMs = Math.floor(moment * stepMs);
      if (delayMs <= 0) {
        this.#makeReady(key, RESYNC);
        continue;
      }
      const at = now + delayMs;
      if (this.#keepsSchedule(key, at)) continue;
      this.#spreadAt.set(key, at);
      let due = moments[moment];
      if (!due) {
        due = [];
        moments[moment] = due;
      }
      due.push(key);
    }
    moments.forEach((due, moment) => {
      const delayMs = Math.floor(moment * stepMs);
      const at = now + delayMs;
      const cancel = this.#clock.setTimer(delayMs, () => {
        this.#spreads.delete(cancel);
        for (const key of due) if (this.#spreadAt.get(key) === at) this.#makeReady(key, RESYNC);
      });
      this.#spreads.add(cancel);
    });
  }

  /**
   * Schedules `key` as a follow-up after its next backoff delay, but no sooner than `minDelayMs`
   * (a server's Retry-After), and returns the delay used in ms.
   */
  addRateLimited(key: string, minDelayMs = 0): number {
    if (this.#shuttingDown) return 0;
    const delay = Math.max(minDelayMs, this.#limiter.next(key));
    this.#metrics.retried?.();
    this.addAfter(key, delay, { followUp: true });
    return delay;
  }

  /** Resets `key`'s failure backoff (call after a success). Does not unschedule it. */
  forget(key: string): void {
    this.#limiter.forget(key);
  }

  /** Failures recorded for `key` since the last `forget`. */
  numRequeues(key: string): number {
    return this.#limiter.failures(key);
  }

  /** Cancels a delayed add of `key` (for instance because the object was deleted). */
  cancel(key: string): void {
    this.#cancelDelayed(key);
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
    const started = this.#processing.get(key);
    if (started === undefined) return;
    this.#processing.delete(key);
    started.reclaim?.();
    this.#metrics.workDuration?.((this.#clock.now() - started.at) / 1000);
    const flow = this.#flows.get(started.flow);
    const part = flow?.parts.get(started.part);
    if (flow && part) {
      flow.inFlight -= 1;
      part.inFlight -= 1;
      const workMs = this.#clock.now() - started.at;
      flow.workMs = flow.workMs === 0 ? workMs : flow.workMs + WORK_WEIGHT * (workMs - flow.workMs);
      const short = workMs < this.#borrowMs;
      flow.shortRun = short ? flow.shortRun + 1 : 0;
      part.shortRun = short ? part.shortRun + 1 : 0;
      if (this.#cap !== Number.POSITIVE_INFINITY) {
        this.#endedAt.set(started.flow, this.#clock.now());
        // Flows gone for good (a deleted connection) are forgotten even while nothing borrows.
        if (this.#endedAt.size > 2 * this.#flows.size + 16) this.#active(this.#clock.now());
      }
      this.#prune(started, flow, part);
    }
    const line = this.#dirty.get(key);
    if (line !== undefined && this.#dirty.delete(key) && !this.#shuttingDown) {
      // Added while in flight: in the line it was added to (a follow-up's if any add was one).
      this.#enqueue(key, line);
      this.#reportDepth();
    }
    // A seat of the flow came free: a key of it waiting at its cap may go now.
    this.#handOut();
    if (this.#processing.size === 0) this.#notifyDrained();
  }

  /** Stops intake; see the class contract. Idempotent. */
  shutDown(): void {
    if (this.#shuttingDown) return;
    this.#shuttingDown = true;
    for (const { cancel } of this.#delayed.values()) cancel();
    this.#delayed.clear();
    for (const cancel of this.#spreads) cancel();
    this.#spreads.clear();
    this.#spreadAt.clear();
    this.#ready.clear();
    for (const [name, flow] of this.#flows) {
      for (const [partName, part] of flow.parts) {
        part.fresh.clear();
        part.followUps.clear();
        part.resyncs.clear();
        if (part.inFlight === 0) flow.parts.delete(partName);
      }
      if (flow.inFlight === 0) this.#flows.delete(name);
    }
    this.#dirty.clear();
    this.#endedAt.clear();
    for (const waiter of this.#waiters) waiter(undefined);
    this.#waiters = [];
    this.#reportDepth();
    if (this.#processing.size === 0) this.#notifyDrained();
  }

  /** Resolves when the queue is shut down and no key is in flight. */
  drained(): Promise<void> {
    if (this.#shuttingDown && this.#processing.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.#drainWaiters.push(resolve));
  }

  /** True once `shutDown` was called. */
  get shuttingDown(): boolean {
    return this.#shuttingDown;
  }

  /** Keys ready to be picked up, in both lines (those waiting at their flow's cap included). */
  get length(): number {
    return this.#ready.size;
  }

  /**
   * Per flow, the ready keys that wait only because their flow, or their part of it, has its cap
   * of keys in flight (0 for none is left out). Costs one look at each flow and part.
   */
  waitingAtCap(): Map<string, number> {
    const out = new Map<string, number>();
    for (const [name, flow] of this.#flows) {
      let waiting = 0;
      for (const part of flow.parts.values()) {
        const ready = part.fresh.size + part.followUps.size + part.resyncs.size;
        if (ready > 0 && (flow.inFlight >= this.#cap || part.inFlight >= this.#cap)) waiting += ready;
      }
      if (waiting > 0) out.set(name, waiting);
    }
    return out;
  }

  /**
   * The keys that became ready before `before` (clock ms) and still wait only because their flow,
   * or their part of it, is at its cap, in flows whose keys lately took `slowMs` or more each in
   * flight, or that hold a key in flight for that long already (a flow whose work is slow, not
   * merely a large one: a pass over 10,000 quick keys is not reported); each part's lines in
   * order, so the oldest come first.
   */
  waitingSince(before: number, slowMs = 0): string[] {
    // A flow is slow when its keys lately took `slowMs` each, or one in flight has run that long
    // (a service that never answers ends no reconcile to average).
    const now = this.#clock.now();
    const running = new Set<string>();
    for (const { flow, at } of this.#processing.values()) if (now - at >= slowMs) running.add(flow);
    const out: string[] = [];
    for (const [name, flow] of this.#flows) {
      if (flow.workMs < slowMs && !running.has(name)) continue;
      for (const part of flow.parts.values()) {
        if (flow.inFlight < this.#cap && part.inFlight < this.#cap) continue;
        for (const line of [part.fresh, part.followUps, part.resyncs])
          for (const [key, readyAt] of line) {
            if (readyAt >= before) break;
            out.push(key);
          }
      }
    }
    return out;
  }

  /** Keys currently scheduled for later. */
  get delayedCount(): number {
    return this.#delayed.size + this.#spreadAt.size;
  }

  /** Work in flight: summed and longest age in seconds (client-go's unfinished-work gauges). */
  inFlight(): { count: number; unfinishedSeconds: number; longestSeconds: number } {
    const now = this.#clock.now();
    let total = 0;
    let longest = 0;
    for (const { at } of this.#processing.values()) {
      const age = (now - at) / 1000;
      total += age;
      longest = Math.max(longest, age);
    }
    return { count: this.#processing.size, unfinishedSeconds: total, longestSeconds: longest };
  }

  /**
   * The earliest-wins rule of `addAfter` and `addSpread`: true when `key` is ready, due again
   * after its run, or scheduled no later than `at` (a new schedule at `at` changes nothing);
   * otherwise its later schedule, a timer or a spread's moment, is dropped for the caller's sooner
   * one (the moment then passes the key by).
   */
  #keepsSchedule(key: string, at: number): boolean {
    if (this.isReady(key) || this.#dirty.has(key)) return true;
    const existing = this.#delayed.get(key);
    if (existing && existing.at <= at) return true;
    const spreadAt = this.#spreadAt.get(key);
    if (spreadAt !== undefined && spreadAt <= at) return true;
    this.#cancelDelayed(key);
    return false;
  }

  /** Whether `key` waits to be picked up (in either line of its flow). */
  isReady(key: string): boolean {
    return this.#ready.has(key);
  }

  #makeReady(key: string, line: Line): void {
    if (this.#shuttingDown) return;
    this.#metrics.added?.();
    this.#cancelDelayed(key);
    if (this.#processing.has(key)) {
      this.#dirty.set(key, Math.max(line, this.#dirty.get(key) ?? RESYNC) as Line);
      return;
    }
    const place = this.#ready.get(key);
    if (place !== undefined) {
      // Already waiting: it keeps its place, unless it waits as a resync and is now more.
      const part = this.#flows.get(place.flow)?.parts.get(place.part);
      if (line === RESYNC || !part?.resyncs.delete(key)) return;
      this.#ready.delete(key);
    }
    this.#enqueue(key, line);
    this.#handOut();
    this.#reportDepth();
  }

  /** Puts `key` last in its line of its flow's part (the flow read now). */
  #enqueue(key: string, line: Line): void {
    const { flow: flowName, part: partName = "" } = this.#flowOf(key) ?? SHARED;
    let flow = this.#flows.get(flowName);
    if (!flow) {
      flow = { inFlight: 0, parts: new Map(), workMs: 0, shortRun: 0 };
      this.#flows.set(flowName, flow);
    }
    let part = flow.parts.get(partName);
    if (!part) {
      const place = { flow: flowName, part: partName };
      part = {
        place,
        inFlight: 0,
        fresh: new Map(),
        followUps: new Map(),
        resyncs: new Map(),
        tookFollowUp: false,
        shortRun: 0,
      };
      flow.parts.set(partName, part);
    }
    (line === FOLLOW_UP ? part.followUps : line === FRESH ? part.fresh : part.resyncs).set(
      key,
      this.#clock.now(),
    );
    this.#ready.set(key, part.place);
  }

  /**
   * The next key: of the first flow in round-robin order below its cap with a ready key in a part
   * below its cap (the flow then goes last, and so does the part within it); within the part,
   * from each line in turn while both hold keys, else from the one that does (fresh work's turn:
   * its events' keys, then its resyncs). None: the same among the flows that may borrow, a part
   * below its cap before one at it, if `idleBesides` (the workers idle besides the one taking)
   * leaves a cap's worth idle after it.
   */
  #take(waitingBesides: number): string | undefined {
    if (this.#ready.size === 0) return undefined;
    const free = this.#freeSeats();
    if (free <= 0) return undefined;
    const idleBesides = Math.min(waitingBesides, free - 1);
    const cap = this.#cap;
    const below = this.#below;
    const key = this.#takeFirst(below, below);
    if (key !== undefined || cap === Number.POSITIVE_INFINITY || idleBesides < cap) return key;
    // No flow below its cap has a key: lend the worker to one at its cap whose keys are short.
    const now = this.#clock.now();
    const long = new Set<string>();
    for (const { flow, part, at } of this.#processing.values())
      if (now - at >= this.#borrowMs) long.add(flow).add(`${flow}\u0000${part}`);
    const mayBorrow = (seats: Seats, name: string) =>
      seats.inFlight < cap || (seats.inFlight - cap < seats.shortRun && !long.has(name));
    // A flow whose keys took the bound on average lately borrows nothing either (a slow service
    // whose failures come at once between its slow reads); none beyond its share of the workers.
    const share = Math.max(
      cap,
      Math.floor((this.#workers ?? this.#processing.size + idleBesides + 1) / this.#active(now)),
    );
    const flowMay = (flow: Flow, name: string) =>
      flow.inFlight < cap || (mayBorrow(flow, name) && flow.workMs < this.#borrowMs && flow.inFlight < share);
    // A part below its cap first (its flow borrowing), then one at its cap: a part's cap holds
    // while another part of a flow that may borrow has a key.
    return (
      this.#takeFirst(flowMay, below) ??
      this.#takeFirst(flowMay, (part) => mayBorrow(part, `${part.place.flow}\u0000${part.place.part}`))
    );
  }

  /**
   * The seats free for a key now: `workers` less the keys in flight, those of a flow beyond its cap
   * that were taken beyond it and have run `borrowMs` not counted (reclaimed, see the class
   * contract; a flow's cap's worth always counts). Without `workers`: no limit (the workers
   * waiting in `get` are the seats).
   */
  #freeSeats(): number {
    if (this.#workers === undefined) return Number.POSITIVE_INFINITY;
    const now = this.#clock.now();
    const overdue = new Map<string, number>();
    for (const { flow, at, reclaim } of this.#processing.values())
      if (reclaim !== undefined && now - at >= this.#borrowMs)
        overdue.set(flow, (overdue.get(flow) ?? 0) + 1);
    let counted = this.#processing.size;
    for (const [name, keys] of overdue)
      counted -= Math.min(keys, Math.max(0, (this.#flows.get(name)?.inFlight ?? 0) - this.#cap));
    return this.#workers - counted;
  }

  /**
   * The flows active at `now`: those holding a key, ready or in flight, and those that ended one
   * within the last `borrowMs` (forgotten after it: at most one entry per flow, briefly).
   */
  #active(now: number): number {
    let active = this.#flows.size;
    for (const [name, at] of this.#endedAt) {
      if (now - at >= this.#borrowMs) this.#endedAt.delete(name);
      else if (!this.#flows.has(name)) active += 1;
    }
    return Math.max(1, active);
  }

  /** The next key of the first flow and part in turn that `flowMay` and `partMay` let take one. */
  #takeFirst(
    flowMay: (flow: Flow, name: string) => boolean,
    partMay: (part: Part) => boolean,
  ): string | undefined {
    for (const [flowName, flow] of this.#flows) {
      if (!flowMay(flow, flowName)) continue;
      for (const [partName, part] of flow.parts) {
        if (!partMay(part)) continue;
        const freshWork = part.fresh.size + part.resyncs.size;
        const followUp = part.followUps.size > 0 && (freshWork === 0 || !part.tookFollowUp);
        const line = followUp ? part.followUps : part.fresh.size > 0 ? part.fresh : part.resyncs;
        for (const [key, readyAt] of line) {
          line.delete(key);
          this.#ready.delete(key);
          part.tookFollowUp = followUp;
          // Taken beyond its flow's or its part's cap: a borrowed seat, reclaimed once it has run
          // the bound (a worker comes free for the others then; see the class contract).
          const borrowed = flow.inFlight >= this.#cap || part.inFlight >= this.#cap;
          part.inFlight += 1;
          flow.inFlight += 1;
          // Served: last in its flow's turn, and the flow last in the queue's.
          flow.parts.delete(partName);
          flow.parts.set(partName, part);
          this.#flows.delete(flowName);
          this.#flows.set(flowName, flow);
          const now = this.#clock.now();
          const reclaim =
            borrowed && this.#workers !== undefined
              ? this.#clock.setTimer(this.#borrowMs, () => this.#handOut())
              : undefined;
          this.#processing.set(key, {
            flow: flowName,
            part: partName,
            at: now,
            ...(reclaim ? { reclaim } : {}),
          });
          this.#metrics.queueLatency?.((now - readyAt) / 1000);
          this.#reportDepth();
          return key;
        }
      }
    }
    return undefined;
  }

  /** Drops a part, and then its flow, that holds no key any more. */
  #prune(place: Place, flow: Flow, part: Part): void {
    if (part.inFlight > 0 || part.fresh.size > 0 || part.followUps.size > 0 || part.resyncs.size > 0) return;
    flow.parts.delete(place.part);
    if (flow.inFlight === 0 && flow.parts.size === 0) this.#flows.delete(place.flow);
  }

  #handOut(): void {
    while (this.#waiters.length > 0) {
      const key = this.#take(this.#waiters.length - 1);
      if (key === undefined) return;
      this.#waiters.shift()?.(key);
    }
  }

  #cancelDelayed(key: string): void {
    this.#spreadAt.delete(key);
    const delayed = this.#delayed.get(key);
    if (!delayed) return;
    delayed.cancel();
    this.#delayed.delete(key);
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
