/**
 * The memory the service's answers take while they are read and parsed, bounded for the whole
 * process: a per-request byte limit alone does not keep the operator alive, since many answers
 * are in flight at once (a reconcile per worker, a listing per connection, probes), and since
 * `JSON.parse` builds far more than the text's size from some shapes (1 MiB of `{},{},…` becomes
 * over 20 MiB of objects).
 *
 * So each answer is weighed as it arrives, by an estimate of the heap its parsed form takes, and
 * the answers in flight together may hold at most a share of the V8 heap limit. An answer whose
 * weight alone exceeds that share is refused. An answer that holds nothing yet waits for room
 * (it stops reading the socket; its request timeout still runs); one that already holds some and
 * finds no room for more is refused rather than wait, since answers waiting for each other while
 * each holds a part would never finish.
 */

// What V8 (Node 24, 64-bit, no pointer compression) spends on parsed JSON, measured on the worst
// shapes found (distinct keys per object, `{}` and `[]` runs, a dictionary object of numbers):
// at most about 185 bytes per object or array and 8 to 32 per value or member beyond the text
// of its strings. The weight is an upper bound of what was measured (the heap is at most 0.85 of
// it), and about 2.5 times the heap a realistic listing page takes (test/contract/response-bounds).
/** Weight of each JSON object or array of an answer, in bytes. */
export const CONTAINER_WEIGHT = 192;
/** Weight of each member or element separator (`,` and `:`) of an answer, in bytes. */
export const SEPARATOR_WEIGHT = 32;

/** Share of V8's heap limit the answers in flight may take together. */
export const HEAP_SHARE = 1 / 3;

/**
 * Why an answer was refused: its size; its weight against the shared budget, alone (`shared`
 * false) or with the answers in flight beside it (`shared` true).
 */
export type Overflow =
  | { bound: "bytes"; limit: number }
  | { bound: "memory"; limit: number; shared: boolean };

/** An answer exceeded a bound; the reading stopped there. */
export class OverflowError extends Error {
  override readonly name = "OverflowError";
  readonly overflow: Overflow;
  constructor(overflow: Overflow) {
    super(`the answer exceeded its ${overflow.bound} bound of ${overflow.limit} bytes`);
    this.overflow = overflow;
  }
}

/**
 * Weighs JSON text chunk by chunk: its bytes plus {@link CONTAINER_WEIGHT} per `{` or `[` and
 * {@link SEPARATOR_WEIGHT} per `,` or `:` outside strings (inside a string they are text, and
 * parse to text: a value full of `[` weighs its bytes, so one tenant's long values cannot make a
 * shared connection's page weigh more than the budget). Whether a chunk starts inside a string,
 * or after a backslash, carries over from the chunk before: one weigher per answer.
 */
export class JsonWeigher {
  #inString = false;
  #escaped = false;

  /** The weight of the next `chunk` of the text. */
  weigh(chunk: Buffer): number {
    let containers = 0;
    let separators = 0;
    let inString = this.#inString;
    let escaped = this.#escaped;
    for (let i = 0; i < chunk.length; i++) {
      const c = chunk[i];
      if (inString) {
        if (escaped) escaped = false;
        else if (c === 0x5c) escaped = true;
        else if (c === 0x22) inString = false;
      } else if (c === 0x22) inString = true;
      else if (c === 0x7b || c === 0x5b) containers++;
      else if (c === 0x2c || c === 0x3a) separators++;
    }
    this.#inString = inString;
    this.#escaped = escaped;
    return chunk.length + containers * CONTAINER_WEIGHT + separators * SEPARATOR_WEIGHT;
  }
}

interface Waiter {
  weight: number;
  resolve: () => void;
  reject: (reason: unknown) => void;
}

/**
 * The weight the answers in flight may hold together, shared by every client of the process.
 *
 * Contract: {@link open} starts one answer's account; its `take` resolves once the weight is
 * held. An account that holds nothing waits, in arrival order, while others hold too much; one
 * that holds some is never made to wait. `take` rejects with an {@link OverflowError} (`memory`)
 * when the answer's own weight would exceed the capacity, or when an account that holds some
 * finds no room (`shared`). `close` gives the answer's weight back. An aborted wait rejects with
 * the signal's reason and holds nothing.
 */
export class ResponseMemory {
  /** The weight all answers in flight may hold together, in bytes. */
  readonly capacity: number;
  #held = 0;
  readonly #waiters: Waiter[] = [];

  constructor(capacity: number) {
    if (!(capacity > 0)) throw new RangeError(`capacity must be > 0, got ${capacity}`);
    this.capacity = capacity;
  }

  /** The weight held now by every answer in flight. */
  get held(): number {
    return this.#held;
  }

  /** An account for one answer; close it when the answer is parsed (or abandoned). */
  open(): MemoryAccount {
    let own = 0;
    let closed = false;
    return {
      take: async (weight, signal) => {
        if (closed) throw new Error("the account is closed");
        if (own + weight > this.capacity)
          throw new OverflowError({ bound: "memory", limit: this.capacity, shared: false });
        if (own === 0) await this.#acquire(weight, signal);
        else if (this.#held + weight <= this.capacity) this.#held += weight;
        // Waiting while holding a part could wait forever for others that do the same.
        else throw new OverflowError({ bound: "memory", limit: this.capacity, shared: true });
        own += weight;
      },
      close: () => {
        if (closed) return;
        closed = true;
        this.#release(own);
        own = 0;
      },
    };
  }

  #acquire(weight: number, signal: AbortSignal | undefined): Promise<void> | undefined {
    if (this.#waiters.length === 0 && this.#held + weight <= this.capacity) {
      this.#held += weight;
      return undefined;
    }
    if (signal?.aborted) return Promise.reject(signal.reason);
    return new Promise<void>((resolve, reject) => {
      const waiter: Waiter = {
        weight,
        resolve: () => {
          signal?.removeEventListener("abort", onAbort);
          resolve();
        },
        reject,
      };
      const onAbort = () => {
        const at = this.#waiters.indexOf(waiter);
        if (at !== -1) this.#waiters.splice(at, 1);
        // One that left the head of the queue may let the next ones through.
        this.#release(0);
        reject(signal?.reason);
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      this.#waiters.push(waiter);
    });
  }

  #release(weight: number): void {
    this.#held -= weight;
    for (;;) {
      const next = this.#waiters[0];
      if (next === undefined || this.#held + next.weight > this.capacity) return;
      this.#waiters.shift();
      this.#held += next.weight;
      next.resolve();
    }
  }
}

/** One answer's share of a {@link ResponseMemory}. */
export interface MemoryAccount {
  /** Holds `weight` more for this answer; see {@link ResponseMemory}. */
  take(weight: number, signal?: AbortSignal): Promise<void>;
  /** Gives back everything this answer holds; idempotent. */
  close(): void;
}

let shared: ResponseMemory | undefined;

/**
 * The process's budget: {@link HEAP_SHARE} of V8's heap limit (about 33 MiB under the shipped
 * `--max-old-space-size=96`). Every client uses it unless given another.
 */
export function processResponseMemory(): ResponseMemory {
  shared ??= new ResponseMemory(
    Math.floor(process.getBuiltinModule("node:v8").getHeapStatistics().heap_size_limit * HEAP_SHARE),
  );
  return shared;
}
