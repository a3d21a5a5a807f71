/**
 * The work queue's records of keys (queue.ts): one per key while it is anywhere in the queue
 * (dropped when its run ends with nothing more to do), and each key's failures
 * (`addRateLimited`'s backoff). What schedules a key for later is queue-schedules.ts's. The
 * contract is `WorkQueue`'s.
 */
import type { Backoff } from "./backoff.ts";
import { IDLE, isIdle, type KeyRecord, NO_LINE, newRecord, READY } from "./queue-lines.ts";

/** The records of the queue's keys. */
export class KeyRecords {
  /**
   * Each key's record, kept while the key is anywhere in the queue: dropped when its run ends
   * with nothing more to do ({@link release}), or by a sweep once idle and not added lately (see
   * {@link #sweep}: a delayed add cancelled).
   */
  readonly #records = new Map<string, KeyRecord>();
  /** The sweep generation, and the number of records over which a record added sweeps. */
  #seen = 0;
  #sweepAbove = 1024;
  /** Within `pass`: its keys are the pass's (no sweep while they are added). */
  #inPass = false;

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
      if (this.#records.size >= this.#sweepAbove && !this.#inPass) this.#sweep();
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

  /** Runs `add`, which makes the records of a pass's keys: a sweep first, none while they are added. */
  pass(add: () => void): void {
    this.#sweep();
    this.#inPass = true;
    try {
      add();
    } finally {
      this.#inPass = false;
    }
  }

  /**
   * At shut-down: `unschedule` called with each record, no key ready or dirty, the records of idle
   * keys dropped.
   */
  clear(unschedule: (record: KeyRecord) => void): void {
    for (const [key, record] of this.#records) {
      unschedule(record);
      record.dirty = NO_LINE;
      if (record.state === READY) record.state = IDLE;
      if (record.state === IDLE) this.#records.delete(key);
    }
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
