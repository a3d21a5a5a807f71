/**
 * The work queue's schedules (queue.ts): what makes a key ready later, `addAfter`'s timers and
 * the moments of `addSpread`, under the earliest-wins rule. A key's schedule lives in its record
 * (queue-records.ts); the queue enters here only for a key that has one, or to make one. The
 * contract is `WorkQueue`'s.
 */
import type { CancelTimer, Clock } from "./clock.ts";
import { type KeyRecord, type KeyRecords, type Line, NO_LINE, READY, RESYNC } from "./queue-records.ts";

/**
 * How many moments {@link KeySchedules.spread} cuts a spread into: one timer and one array of keys
 * per moment, rather than a timer per key.
 */
export const SPREAD_MOMENTS = 32;

/** What {@link KeySchedules} is told of the queue. Times are the queue's (ms since it started). */
export interface KeySchedulesOptions {
  clock: Pick<Clock, "setTimer">;
  now: () => number;
  /** Makes a record ready in `line` (a delayed add or a spread's moment come due). */
  ready: (record: KeyRecord, line: Line) => void;
}

/** The schedules of the queue's keys, in their records. */
export class KeySchedules {
  readonly #records: KeyRecords;
  readonly #o: KeySchedulesOptions;
  /** The timers of spreads not yet come due. */
  readonly #spreads = new Set<CancelTimer>();
  /** Keys scheduled for later: a delayed add's or a spread's. */
  scheduled = 0;

  constructor(records: KeyRecords, options: KeySchedulesOptions) {
    this.#records = records;
    this.#o = options;
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
    this.#records.pass(() => this.#spread(keys, spreadMs, random));
  }

  #spread(keys: Iterable<string>, spreadMs: number, random: () => number): void {
    const now = this.#o.now();
    const stepMs = Math.max(0, spreadMs) / SPREAD_MOMENTS;
    const moments: KeyRecord[][] = [];
    for (const key of keys) {
      const moment = Math.min(SPREAD_MOMENTS - 1, Math.floor(random() * SPREAD_MOMENTS));
      const delayMs = Math.floor(moment * stepMs);
      const record = this.#records.record(key);
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
    this.#records.clear((record) => this.unschedule(record));
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
}
