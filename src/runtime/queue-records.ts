/**
 * The work queue's keys and their records (queue.ts). A key has one format for every object,
 * namespaced or cluster-scoped (client-go's), by which the caches key their objects too. A key has
 * one record while it is anywhere in the queue (and a while after, see {@link KeyRecords}'s
 * sweep); its state, line, part and times live in the record, so a pass over 10,000 keys adds no
 * map entry, boxes no time and allocates no object per key: the maps and lines that held them grew
 * through every doubling and were rebuilt each pass, promoted to V8's old generation pass after
 * pass. Here too: the lines of ready keys, and the parts of a flow that hold them with their
 * seats (queue-flows.ts). What schedules a key for later is queue-schedules.ts's. The contract is
 * `WorkQueue`'s.
 */
import type { CancelTimer } from "./clock.ts";

/** Namespace and name of an object; `namespace` is `""` for a cluster-scoped one. */
export interface ObjectRef {
  namespace: string;
  name: string;
}

/** The key of an object: `namespace/name`, or `name` when cluster-scoped. */
export function objectKey(ref: ObjectRef): string {
  return ref.namespace ? `${ref.namespace}/${ref.name}` : ref.name;
}

/** The key of an object by its metadata (no namespace: cluster-scoped), as {@link objectKey}. */
export function keyOfMeta(o: {
  readonly metadata: { readonly name: string; readonly namespace?: string | undefined };
}): string {
  return objectKey({ namespace: o.metadata.namespace ?? "", name: o.metadata.name });
}

/** The reference a key was made from: the inverse of {@link objectKey} (names hold no `/`). */
export function parseObjectKey(key: string): ObjectRef {
  const slash = key.indexOf("/");
  return slash < 0
    ? { namespace: "", name: key }
    : { namespace: key.slice(0, slash), name: key.slice(slash + 1) };
}

/**
 * The line a key is added to, by precedence when one key is added to several: a follow-up over
 * fresh work over a resync (a resync added to a key waiting as fresh work leaves it there; fresh
 * work added to a key waiting as a resync moves it to the fresh line).
 */
export const RESYNC = 0;
export const FRESH = 1;
export const FOLLOW_UP = 2;
export type Line = typeof RESYNC | typeof FRESH | typeof FOLLOW_UP;
/** No line: a record not added while in flight. */
export const NO_LINE = -1;

/** A record's state: nowhere (perhaps scheduled), waiting in a line, handed out. */
export const IDLE = 0;
export const READY = 1;
export const IN_FLIGHT = 2;

/** Where a ready or in-flight key is counted. */
export interface Place {
  flow: string;
  part: string;
  /** What its waiting keys are counted under while it holds seats (`waitingAtCap`): the flow, or its own. */
  label: string;
}

/**
 * One key's record. Times are ms since the queue started (small integers, not boxed). -1: none.
 */
export interface KeyRecord {
  readonly key: string;
  state: typeof IDLE | typeof READY | typeof IN_FLIGHT;
  /** The line it waits in (READY), or was added to while in flight (`dirty`, NO_LINE if not). */
  line: Line;
  dirty: Line | typeof NO_LINE;
  /** Bumped at each enqueue: an entry of a line whose ticket differs is stale (the key moved). */
  ticket: number;
  /** The part it waits or runs in (READY, IN_FLIGHT). */
  place: Place | undefined;
  readyAt: number;
  startedAt: number;
  /** Its index in the in-flight records (IN_FLIGHT). */
  slot: number;
  reclaim: CancelTimer | undefined;
  /** A delayed add (`addAfter`): when it comes due, and its timer. */
  delayAt: number;
  cancelDelay: CancelTimer | undefined;
  /** A spread's moment it waits for (`addSpread`). */
  spreadAt: number;
  /** The sweep generation it was last added in. */
  seen: number;
}

export function newRecord(key: string, seen: number): KeyRecord {
  return {
    key,
    state: IDLE,
    line: RESYNC,
    dirty: NO_LINE,
    ticket: 0,
    place: undefined,
    readyAt: 0,
    startedAt: 0,
    slot: -1,
    reclaim: undefined,
    delayAt: -1,
    cancelDelay: undefined,
    spreadAt: -1,
    seen,
  };
}

/** Whether a record holds nothing the queue must keep (it may be dropped). */
export function isIdle(record: KeyRecord): boolean {
  return record.state === IDLE && !isScheduled(record);
}

/** Whether a record has a delayed add or a spread's moment to come (queue-schedules.ts). */
export function isScheduled(record: KeyRecord): boolean {
  return record.delayAt !== -1 || record.spreadAt !== -1;
}

const TICKETS = 0x3fffffff;

/**
 * A first-in-first-out line of records, a ring buffer kept between passes. A record taken out of
 * the line other than at its head (moved to another line) leaves a stale entry, skipped when
 * reached (its ticket no longer matches); `size` counts the live ones.
 */
export class RecordLine {
  #records: Array<KeyRecord | undefined> = new Array(16).fill(undefined);
  #tickets: number[] = new Array(16).fill(0);
  #head = 0;
  /** Entries held, stale ones included. */
  #count = 0;
  /** Live entries. */
  size = 0;

  /** Puts `record` last (its ticket bumped: any entry of it elsewhere is stale now). */
  push(record: KeyRecord): void {
    record.ticket = (record.ticket + 1) & TICKETS;
    if (this.#count === this.#records.length) {
      if (this.size * 2 <= this.#count) this.#compact();
      else this.#grow();
    }
    const at = (this.#head + this.#count) & (this.#records.length - 1);
    this.#records[at] = record;
    this.#tickets[at] = record.ticket;
    this.#count += 1;
    this.size += 1;
  }

  /** Takes the first live record out, or undefined when there is none. */
  shift(): KeyRecord | undefined {
    const mask = this.#records.length - 1;
    while (this.#count > 0) {
      const record = this.#records[this.#head] as KeyRecord;
      const live = this.#live(this.#head);
      this.#records[this.#head] = undefined;
      this.#head = (this.#head + 1) & mask;
      this.#count -= 1;
      if (live) {
        this.size -= 1;
        return record;
      }
    }
    return undefined;
  }

  /** Counts `record` out of the line (it moved): its entry is stale once its ticket is bumped. */
  drop(record: KeyRecord): void {
    record.ticket = (record.ticket + 1) & TICKETS;
    this.size -= 1;
  }

  /** Calls `each` with the live records in order until it returns false. */
  each(each: (record: KeyRecord) => boolean): void {
    const mask = this.#records.length - 1;
    for (let i = 0; i < this.#count; i++) {
      const at = (this.#head + i) & mask;
      if (this.#live(at) && !each(this.#records[at] as KeyRecord)) return;
    }
  }

  /** Empties the line, its room kept. */
  clear(): void {
    const mask = this.#records.length - 1;
    for (let i = 0; i < this.#count; i++) this.#records[(this.#head + i) & mask] = undefined;
    this.#head = 0;
    this.#count = 0;
    this.size = 0;
  }

  #live(at: number): boolean {
    const record = this.#records[at] as KeyRecord;
    return record.state === READY && record.ticket === this.#tickets[at];
  }

  /** Keeps the live entries only, in order, in place. */
  #compact(): void {
    const mask = this.#records.length - 1;
    let kept = 0;
    for (let i = 0; i < this.#count; i++) {
      const from = (this.#head + i) & mask;
      if (!this.#live(from)) continue;
      const to = (this.#head + kept) & mask;
      this.#records[to] = this.#records[from];
      this.#tickets[to] = this.#tickets[from] as number;
      kept += 1;
    }
    for (let i = kept; i < this.#count; i++) this.#records[(this.#head + i) & mask] = undefined;
    this.#count = kept;
  }

  #grow(): void {
    const length = this.#records.length;
    const records: Array<KeyRecord | undefined> = new Array(length * 2).fill(undefined);
    const tickets: number[] = new Array(length * 2).fill(0);
    for (let i = 0; i < this.#count; i++) {
      records[i] = this.#records[(this.#head + i) & (length - 1)];
      tickets[i] = this.#tickets[(this.#head + i) & (length - 1)] as number;
    }
    this.#records = records;
    this.#tickets = tickets;
    this.#head = 0;
  }
}

/**
 * Emptied lines kept for the next parts (a part is dropped when it holds no key, at the end of
 * every pass), one pile per line of at most 64: a pass's lines keep the room they grew to rather
 * than growing it again, each for the same line (a pass's resyncs line grows largest).
 */
export class LinePool {
  readonly #free: [RecordLine[], RecordLine[], RecordLine[]] = [[], [], []];

  take(line: Line): RecordLine {
    return this.#free[line].pop() ?? new RecordLine();
  }

  give(line: Line, records: RecordLine): void {
    records.clear();
    if (this.#free[line].length < 64) this.#free[line].push(records);
  }
}

/**
 * Seats a flow, or a part of a flow, may hold: `inFlight` up to the cap, and beyond it while
 * `inFlight - cap < shortRun` (keys it ended in a row in less than the borrow bound: a flow earns
 * one borrowed seat per short key, and loses them all at a long one).
 */
export interface Seats {
  inFlight: number;
  shortRun: number;
}

/** The keys of one part of a flow waiting to be picked up, and how many of its keys are in flight. */
export interface Part extends Seats {
  /** Where it is: one object that every key of the part points at (no object per key). */
  place: Place;
  /** Ready fresh keys in FIFO order (each record holds when it became ready, for queue latency). */
  fresh: RecordLine;
  /** Ready follow-ups (requeues, retries) in FIFO order, likewise. */
  followUps: RecordLine;
  /** Ready resync keys (passes, an object's interval), taken in fresh work's turn after its keys. */
  resyncs: RecordLine;
  /** The line the part took from last, when both held keys: the other goes next. */
  tookFollowUp: boolean;
}

/** The line `line` of `part`. */
export function lineOf(part: Part, line: Line): RecordLine {
  return line === FOLLOW_UP ? part.followUps : line === FRESH ? part.fresh : part.resyncs;
}

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
