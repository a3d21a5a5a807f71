/**
 * The budgets the service's client sends within, each shared: its requests per second, and the
 * memory the answers in flight take.
 *
 * Client-side rate limit: one token bucket per client, shared by every caller of that client, so
 * a busy controller with many workers stays under one requests-per-second budget, and a 429 from
 * the service pauses all of them, not only the caller that received it.
 *
 * The memory the service's answers take while they are read and parsed, bounded for the whole
 * process: a per-request byte limit alone does not keep the operator alive, since many answers
 * are in flight at once (a reconcile per worker, a listing per connection, probes), and since
 * `JSON.parse` builds far more than the text's size from some shapes (1 MiB of `{},{},…` becomes
 * over 20 MiB of objects).
 *
 * So each answer is weighed as it arrives, by an estimate of the heap its parsed form takes, and
 * the answers in flight together may hold at most a share of the V8 heap limit, one tenant's at
 * most half of it. An answer that holds nothing yet waits for room (it stops reading the socket;
 * its request timeout still runs); one that holds some and finds no room for more is refused
 * rather than wait: answers waiting for each other while each holds a part would never finish.
 */

import type { ApiClock } from "../runtime/clock.ts";
import { OverflowError } from "./errors.ts";
import { RESERVATION_KEPT_MS, ReservedTokens } from "./reserved-tokens.ts";

/**
 * A token bucket that refills `qps` tokens per second up to `burst`, and can be paused.
 *
 * Contract: {@link acquire} resolves when the caller may send one request. Callers are served
 * in arrival order (a waiter reserves its token on arrival, so a later caller never overtakes an
 * earlier one); over any window of `t` seconds at most `burst + qps·t` acquisitions resolve. An
 * acquisition aborted while waiting gives its reservation back and rejects with the signal's
 * reason. While paused ({@link pause}) no acquisition resolves; afterwards the bucket holds at
 * most one token, so work resumes at `qps` rather than in a burst. A caller that will not wait
 * may {@link reserve} its token instead, in the same order, and send once it is due without
 * acquiring ({@link reservedFor}, {@link take}): a deferred reconcile keeps its place in the
 * line instead of losing every token to the callers that wait.
 */
export class TokenBucket {
  readonly #fullQps: number;
  readonly #fullBurst: number;
  readonly #share: () => number;
  readonly #clock: ApiClock;
  #tokens: number;
  #updatedAt: number;
  #pausedUntil = Number.NEGATIVE_INFINITY;
  /** Counts pauses, so that a waiter can tell that one began while it slept. */
  #pauses = 0;
  /** Tokens reserved and not taken yet, in line (reserved-tokens.ts); none: no reservation held. */
  #reserved: ReservedTokens | undefined;

  /**
   * `share` (default 1) is this process's part of the budget, read at each refill: replicas that
   * split one connection's work split its `qps` and `burst` the same way (a burst never below 1).
   */
  constructor(options: { qps: number; burst: number; clock: ApiClock; share?: () => number }) {
    if (!(options.qps > 0)) throw new RangeError(`qps must be > 0, got ${options.qps}`);
    if (!(options.burst >= 1)) throw new RangeError(`burst must be >= 1, got ${options.burst}`);
    this.#fullQps = options.qps;
    this.#fullBurst = options.burst;
    this.#share = options.share ?? (() => 1);
    this.#clock = options.clock;
    this.#tokens = options.burst;
    this.#updatedAt = options.clock.now();
  }

  /** Waits for a token; see the class contract. */
  async acquire(signal?: AbortSignal): Promise<void> {
    for (;;) {
      if (signal?.aborted) throw signal.reason;
      const paused = this.pausedForMs();
      if (paused > 0) {
        await this.#clock.sleep(paused, signal);
        continue;
      }
      this.#refill();
      // Reserve first, even into debt: the debt is what orders waiters fairly.
      this.#tokens -= 1;
      if (this.#tokens >= 0) return;
      const waitMs = (-this.#tokens / this.#qps) * 1000;
      const pausesBefore = this.#pauses;
      try {
        await this.#clock.sleep(waitMs, signal);
      } catch (error) {
        this.#giveBack();
        throw error;
      }
      if (this.#pauses === pausesBefore) return;
      // A pause began while this caller waited: its turn is after the pause, in a new queue.
      this.#giveBack();
    }
  }

  /**
   * Pauses every acquisition for `ms` from now (a longer pause already in force is kept) and
   * drains the bucket to one token, so that the requests after the pause come at `qps`.
   */
  pause(ms: number): void {
    if (!(ms > 0)) return;
    this.#refill();
    this.#pausedUntil = Math.max(this.#pausedUntil, this.#clock.now() + ms);
    // At most one token left: the first request after the pause goes at once (a token owed to
    // callers that already waited stays owed: they resume at `qps` too), the next ones at `qps`.
    this.#tokens = Math.min(this.#tokens, 1);
    this.#pauses += 1;
  }

  /**
   * How long a caller arriving now would wait for its token, in ms (the pause left included),
   * without reserving one: what the callers before it reserved is in it.
   */
  waitMs(): number {
    this.#refill();
    const paused = this.pausedForMs();
    const owed = 1 - this.#tokens;
    return paused + (owed > 0 ? (owed / this.#qps) * 1000 : 0);
  }

  /**
   * Reserves the next token for `holder`, unless it holds one, and returns the ms until it is due
   * (the pause left included). The token is counted as taken now, in arrival order among the
   * waiters, the holders' namespaces in turns among the reservations (reserved-tokens.ts); the
   * holder sends once it is due, after {@link take}.
   */
  reserve(holder: string): number {
    const now = this.#clock.now();
    this.#reserved ??= new ReservedTokens();
    const reserved = this.#reserved;
    // Those due more than RESERVATION_KEPT_MS ago go (the oldest first).
    reserved.dropDueBefore(now - RESERVATION_KEPT_MS);
    const at = reserved.get(holder);
    if (at !== undefined) return Math.max(0, at - now);
    this.#refill();
    this.#tokens -= 1;
    const waitMs = this.pausedForMs() + (this.#tokens < 0 ? (-this.#tokens / this.#qps) * 1000 : 0);
    return reserved.add(holder, now + waitMs, now) - now;
  }

  /** The ms until `holder`'s reserved token is due (0: due), or undefined when it holds none. */
  reservedFor(holder: string): number | undefined {
    const at = this.#reserved?.get(holder);
    return at === undefined ? undefined : Math.max(0, at - this.#clock.now());
  }

  /** Takes `holder`'s reserved token: its request goes without {@link acquire}. */
  take(holder: string): void {
    this.#reserved?.delete(holder);
    if (this.#reserved?.size === 0) this.#reserved = undefined;
  }

  /** The requests per second this process may send now (its share of the budget). */
  get qps(): number {
    return this.#qps;
  }

  /** How long the current pause still lasts, in ms (0 when not paused). */
  pausedForMs(): number {
    return Math.max(0, this.#pausedUntil - this.#clock.now());
  }

  get #qps(): number {
    return this.#fullQps * this.#part();
  }

  get #burst(): number {
    return Math.max(1, this.#fullBurst * this.#part());
  }

  #part(): number {
    const share = this.#share();
    return share > 0 && share <= 1 ? share : 1;
  }

  #giveBack(): void {
    this.#refill();
    this.#tokens = Math.min(this.#burst, this.#tokens + 1);
  }

  #refill(): void {
    const now = this.#clock.now();
    // No tokens accrue during a pause.
    const from = Math.max(this.#updatedAt, Math.min(now, this.#pausedUntil));
    const elapsed = Math.max(0, now - from) / 1000;
    this.#updatedAt = now;
    this.#tokens = Math.min(this.#burst, this.#tokens + elapsed * this.#qps);
  }
}

// What V8 (Node 24, 64-bit, no pointer compression) spends on parsed JSON, measured on the worst
// shapes found (distinct keys per object, `{}` and `[]` runs, a dictionary object of numbers):
// at most about 185 bytes per object or array and 8 to 32 per value or member beyond the text
// of its strings. The weight is an upper bound of what was measured (the heap is at most 0.85 of
// it), and about 2.5 times the heap a realistic listing page takes (test/contract/response-bounds).
/** Weight of each JSON object or array of an answer, in bytes. */
export const CONTAINER_WEIGHT = 192;
/** Weight of each member or element separator (`,` and `:`) of an answer, in bytes. */
export const SEPARATOR_WEIGHT = 32;

/**
 * Weighs JSON text chunk by chunk: its bytes plus {@link CONTAINER_WEIGHT} per `{` or `[` and
 * {@link SEPARATOR_WEIGHT} per `,` or `:` outside strings (inside a string they are text, and
 * parse to text: a value full of `[` weighs its bytes, so one tenant's long values cannot make a
 * shared connection's page weigh more than the budget). Whether a chunk starts inside a string,
 * or after a backslash, carries over from the chunk before: one weigher per answer. `deepest` is
 * how deep its objects and arrays nested so far (`[` `{` and `]` `}` are one bit apart).
 */
export class JsonWeigher {
  #inString = false;
  #escaped = false;
  #depth = 0;
  deepest = 0;

  /** The weight of the next `chunk` of the text. */
  weigh(chunk: Buffer): number {
    let containers = 0;
    let separators = 0;
    let depth = this.#depth;
    let inString = this.#inString;
    let escaped = this.#escaped;
    for (let i = 0; i < chunk.length; i++) {
      const c = chunk[i] as number;
      if (inString) {
        if (escaped) escaped = false;
        else if (c === 0x5c) escaped = true;
        else if (c === 0x22) inString = false;
      } else if (c === 0x22) inString = true;
      else if ((c | 0x20) === 0x7b) {
        containers++;
        if (++depth > this.deepest) this.deepest = depth;
      } else if ((c | 0x20) === 0x7d) depth--;
      else if (c === 0x2c || c === 0x3a) separators++;
    }
    [this.#inString, this.#escaped, this.#depth] = [inString, escaped, depth];
    return chunk.length + containers * CONTAINER_WEIGHT + separators * SEPARATOR_WEIGHT;
  }
}

type Waiter = { weight: number; owner: string | undefined; resolve(): void };

/**
 * The part of a {@link ResponseMemory} one owner's answers (a tenant's, over however many
 * connections) may hold together: half, room for every other tenant's while its answers trickle
 * until their timeout. Not less: the heaviest honest page (100 deployments, every field filled)
 * weighs 13 MB, and must fit one share of the shipped heap's 33 MiB. So two tenants whose
 * answers trickle hold it all, each answer until its timeout: the others' answers wait meanwhile.
 */
export const OWNER_SHARE = 0.5;

/**
 * The weight the answers in flight may hold together, shared by every client of the process.
 *
 * Contract: {@link open} starts one answer's account; its `take` resolves once the weight is
 * held. An account that holds nothing waits while others hold too much, in arrival order but past
 * those whose owner holds its share ({@link OWNER_SHARE}); one that holds some is never made to
 * wait. `take` rejects with an {@link OverflowError} (`memory`) when the answer's own weight would
 * exceed the capacity (an owner's: its share), or when an account that holds some finds no room
 * (`shared`). `close` gives the weight back. An aborted wait rejects with the signal's reason.
 */
export class ResponseMemory {
  /** The weight all answers in flight may hold together, in bytes. */
  readonly capacity: number;
  /** The weight one owner's answers may hold together. */
  readonly ownerCapacity: number;
  #held = 0;
  /** The weight held by each owner holding some. */
  readonly #owners = new Map<string, number>();
  readonly #waiters: Waiter[] = [];

  constructor(capacity: number, ownerShare = OWNER_SHARE) {
    if (!(capacity > 0)) throw new RangeError(`capacity must be > 0, got ${capacity}`);
    this.capacity = capacity;
    this.ownerCapacity = Math.max(1, Math.floor(capacity * ownerShare));
  }

  /** The weight held now by every answer in flight. */
  get held(): number {
    return this.#held;
  }

  /** An account for one answer of `owner`; close it when the answer is parsed (or abandoned). */
  open(owner?: string): MemoryAccount {
    let own = 0;
    let closed = false;
    const limit = owner === undefined ? this.capacity : this.ownerCapacity;
    return {
      take: async (weight, signal) => {
        if (closed) throw new Error("the account is closed");
        const tenant = owner === undefined ? {} : ({ tenant: true } as const);
        if (own + weight > limit)
          throw new OverflowError({ bound: "memory", limit, shared: false, ...tenant });
        if (own === 0) {
          await this.#acquire(weight, owner, signal);
          // Closed while it waited (or before it ran on): the weight goes back, not held for good.
          if (closed) {
            this.#release(weight, owner);
            throw new Error("the account is closed");
          }
        } else if (this.#fits(weight, owner)) this.#add(weight, owner);
        // Waiting while holding a part could wait forever for others that do the same.
        else if (this.#held + weight > this.capacity)
          throw new OverflowError({ bound: "memory", limit: this.capacity, shared: true });
        else throw new OverflowError({ bound: "memory", limit, shared: true, ...tenant });
        own += weight;
      },
      close: () => {
        if (closed) return;
        closed = true;
        this.#release(own, owner);
        own = 0;
      },
    };
  }

  #ownerFits(weight: number, owner: string | undefined): boolean {
    return owner === undefined || (this.#owners.get(owner) ?? 0) + weight <= this.ownerCapacity;
  }

  #fits(weight: number, owner: string | undefined): boolean {
    return this.#held + weight <= this.capacity && this.#ownerFits(weight, owner);
  }

  /** Adds `weight` (given back: negative) to what is held, in all and by `owner`. */
  #add(weight: number, owner: string | undefined): void {
    this.#held += weight;
    if (owner === undefined) return;
    const now = (this.#owners.get(owner) ?? 0) + weight;
    if (now > 0) this.#owners.set(owner, now);
    else this.#owners.delete(owner);
  }

  #acquire(
    weight: number,
    owner: string | undefined,
    signal: AbortSignal | undefined,
  ): Promise<void> | undefined {
    // Past the waiters whose owner holds its share; not past one waiting for room in all.
    if (this.#fits(weight, owner) && !this.#waiters.some((w) => this.#ownerFits(w.weight, w.owner))) {
      this.#add(weight, owner);
      return undefined;
    }
    if (signal?.aborted) return Promise.reject(signal.reason);
    return new Promise<void>((resolve, reject) => {
      const waiter: Waiter = {
        weight,
        owner,
        resolve: () => {
          signal?.removeEventListener("abort", onAbort);
          resolve();
        },
      };
      const onAbort = () => {
        const at = this.#waiters.indexOf(waiter);
        if (at !== -1) this.#waiters.splice(at, 1);
        // One that left the head of the queue may let the next ones through.
        this.#release(0, undefined);
        reject(signal?.reason);
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      this.#waiters.push(waiter);
    });
  }

  #release(weight: number, owner: string | undefined): void {
    this.#add(-weight, owner);
    // In arrival order, past each waiter whose owner holds its share.
    for (let i = 0; i < this.#waiters.length; i++) {
      const next = this.#waiters[i] as Waiter;
      if (!this.#ownerFits(next.weight, next.owner)) continue;
      if (this.#held + next.weight > this.capacity) return;
      this.#waiters.splice(i--, 1);
      this.#add(next.weight, next.owner);
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
