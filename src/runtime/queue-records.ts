/**
 * The work queue's records of keys (queue.ts): one per key while it is anywhere in the queue
 * (dropped when its run ends with nothing more to do), what schedules a key for later
 * (`addAfter`'s timers, the moments of `addSpread`), and each key's failures
 * (`addRateLimited`'s backoff). The contract is `WorkQueue`'s.
 */
import type { Backoff } from "./backoff.ts";
import type { CancelTimer, Clock } from "./clock.ts";
import { IDLE, isIdle, type KeyRecord, type Line, NO_LINE, newRecord, READY, RESYNC } from "./queue-lines.ts";

/**
 * How many moments {@link KeyRecords.spread} cuts a spread into: one timer and one array of keys
 * per moment, rather than a timer per key.
 */
export const SPREAD_MOMENTS = 32;

/** What {@link KeyRecords} is told of the queue. Times are the queue's (ms since it started). */
export interface KeyRecordsOptions {
  clock: Pick<Clock, "setTimer">;
  now: () => number;
  /** Makes a record ready in `line` (a delayed add or a spread's moment come due). */
  ready: (record: KeyRecord, line: Line) => void;
}

/** The records of the queue's keys, and their schedules. */
export class KeyRecords {
  readonly #o: KeyRecordsOptions;
  /**
   * Each key's record, kept while the key is anywhere in the queue: dropped when its run ends
   * with nothing more to do ({@link release}), or by a sweep once idle and not added lately (see
   * {@link #sweep}: a delayed add cancelled).
   */
  readonly #records = new Map<string, KeyRecord>();
  /** The sweep generation, and the number of records over which a record added sweeps. */
  #seen = 0;
  #sweepAbove = 1024;
  /** Within `spread`: its keys are the pass's (no sweep while they are added). */
  #spreading = false;
  /** The timers of spreads not yet come due. */
  readonly #spreads = new Set<CancelTimer>();
  /** Keys scheduled for later: a delayed add's or a spread's. */
  scheduled = 0;

  constructor(options: KeyRecordsOptions) {
    this.#o = options;
  }

  /** How many keys have a record. */
  get size(): number {
    return this.#records.size;
  }

  /** `key`'s record, if it has one. */
  get(key: string): KeyRecord | undefined {
    return this.#records.get(key);
  }

  /** `key`'s record, made if missing; marked added in this sweep generation. */
  record(key: string): KeyRecord {
    let record = this.#records.get(key);
    if (!record) {
      if (this.#records.size >= this.#sweepAbove && !this.#spreading) this.#sweep();
      record = newRecord(key, this.#seen);
      this.#records.set(key, record);
    }
    record.seen = this.#seen;
    return record;
  }

  /**
   * Drops `record` if it holds nothing (idle, nothing scheduled): a key whose run ended with no
   * more to do costs nothing until it is added again. Between two passes (a pass's spread is a
   * tenth of the period) that is every key: 10,000 records were 2.2 MiB held for nothing.
   */
  release(record: KeyRecord): void {
    if (isIdle(record) && this.#records.get(record.key) === record) this.#records.delete(record.key);
  }

  /** `WorkQueue.addAfter` for a positive delay. */
  after(record: KeyRecord, delayMs: number, line: Line): void {
    const at = this.#o.now() + delayMs;
    if (this.#keepsSchedule(record, at)) return;
    record.cancelDelay = this.#o.clock.setTimer(delayMs, () => {
      this.unschedule(record);
      this.#o.ready(record, line);
    });
    record.delayAt = at;
    this.scheduled += 1;
  }

  /** `WorkQueue.addSpread`; a pass: the records of keys in neither it nor the passes before go. */
  spread(keys: Iterable<string>, spreadMs: number, random: () => number): void {
    this.#sweep();
    this.#spreading = true;
    try {
      this.#spread(keys, spreadMs, random);
    } finally {
      this.#spreading = false;
    }
  }

  #spread(keys: Iterable<string>, spreadMs: number, random: () => number): void {
    const now = this.#o.now();
    const stepMs = Math.max(0, spreadMs) / SPREAD_MOMENTS;
    const moments: KeyRecord[][] = [];
    for (const key of keys) {
      const moment = Math.min(SPREAD_MOMENTS - 1, Math.floor(random() * SPREAD_MOMENTS));
      const delayMs = Math.floor(moment * stepMs);
      const record = this.record(key);
      if (delayMs <= 0) {
        this.#o.ready(record, RESYNC);
        continue;
      }
      const at = now + delayMs;
      if (this.#keepsSchedule(record, at)) continue;
      record.spreadAt = at;
      this.scheduled += 1;
      let due = moments[moment];
      if (!due) {
        due = [];
        moments[moment] = due;
      }
      due.push(record);
    }
    moments.forEach((due, moment) => {
      const delayMs = Math.floor(moment * stepMs);
      const at = now + delayMs;
      const cancel = this.#o.clock.setTimer(delayMs, () => {
        this.#spreads.delete(cancel);
        for (const record of due) if (record.spreadAt === at) this.#o.ready(record, RESYNC);
      });
      this.#spreads.add(cancel);
    });
  }

  /** Drops the record's delayed add or spread's moment, if any. */
  unschedule(record: KeyRecord): void {
    if (record.spreadAt !== -1) {
      record.spreadAt = -1;
      this.scheduled -= 1;
    }
    if (record.delayAt === -1) return;
    record.cancelDelay?.();
    record.cancelDelay = undefined;
    record.delayAt = -1;
    this.scheduled -= 1;
  }

  /** At shut-down: every schedule cancelled, no key ready or dirty, the records of idle keys dropped. */
  clear(): void {
    for (const cancel of this.#spreads) cancel();
    this.#spreads.clear();
    for (const [key, record] of this.#records) {
      this.unschedule(record);
      record.dirty = NO_LINE;
      if (record.state === READY) record.state = IDLE;
      if (record.state === IDLE) this.#records.delete(key);
    }
  }

  /**
   * The earliest-wins rule of `addAfter` and `addSpread`: true when the key is ready, due again
   * after its run, or scheduled no later than `at` (a new schedule at `at` changes nothing);
   * otherwise its later schedule, a timer or a spread's moment, is dropped for the caller's sooner
   * one (the moment then passes the key by).
   */
  #keepsSchedule(record: KeyRecord, at: number): boolean {
    if (record.state === READY || record.dirty !== NO_LINE) return true;
    if (record.delayAt !== -1 && record.delayAt <= at) return true;
    if (record.spreadAt !== -1 && record.spreadAt <= at) return true;
    this.unschedule(record);
    return false;
  }

  /**
   * Drops the records that hold nothing and were not added in this generation or the one before,
   * and starts a generation. Run at each spread (a pass) and, outside one, when the records
   * doubled since the last sweep: the records of keys no longer added (deleted objects) go within
   * a few passes, and a pass's records stay for the next.
   */
  #sweep(): void {
    this.#records.forEach((record, key) => {
      if (record.seen < this.#seen - 1 && isIdle(record)) this.#records.delete(key);
    });
    this.#seen += 1;
    this.#sweepAbove = 2 * this.#records.size + 1024;
  }
}

/**
 * Per-key failure counts over one {@link Backoff}: client-go's ItemExponentialFailureRateLimiter
 * with jitter.
 *
 * Contract: `next(key)` returns the delay for the key's current failure count and then increments
 * it; `forget(key)` resets the count to zero (call it on success); `failures(key)` reads it.
 */
export class KeyedBackoff {
  readonly #backoff: Backoff;
  readonly #failures = new Map<string, number>();

  constructor(backoff: Backoff) {
    this.#backoff = backoff;
  }

  next(key: string): number {
    const failures = this.#failures.get(key) ?? 0;
    this.#failures.set(key, failures + 1);
    return this.#backoff.delayMs(failures);
  }

  forget(key: string): void {
    this.#failures.delete(key);
  }

  failures(key: string): number {
    return this.#failures.get(key) ?? 0;
  }
}
