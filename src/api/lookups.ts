/**
 * The host-name lookups of the service clients, shared by owner as the threads they run on are.
 *
 * `dns.lookup` is getaddrinfo(3) on libuv's thread pool, a few threads for the whole process,
 * which also decode the answers' gzip and read files. A lookup cannot be cancelled: a request
 * that times out leaves its lookup in the pool until the system resolver gives up (its timeout ×
 * attempts × the search domains of a pod's `ndots:5`, tens of seconds). A tenant whose name's
 * server never answers would hold every thread with its own few calls. So lookups in flight are
 * bounded (`total`, three quarters of the pool: the rest decode and read), an owner's (a
 * namespace's connections together, or a shared connection) at a quarter of those (`perOwner`),
 * each counted until getaddrinfo itself returns; the lookups waiting start an owner at a time, in
 * turn; and a lookup of a name being looked up (same options) joins it, as does one of a name the
 * same owner's lookup waits for, so a tenant's calls to one name hold one thread, however many
 * they are (never another owner's waiting lookup: that would wait behind a share it does not spend).
 */
import type { LookupAddress, LookupOptions } from "node:dns";
import type { LookupFunction } from "node:net";

/** What a lookup calls back with (as `dns.lookup` does: an address, or all of them). */
type Done = (error: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void;

/** One lookup, waiting or in flight, and every caller it answers. */
interface Lookup {
  key: string;
  owner: string;
  hostname: string;
  options: LookupOptions;
  resolve: LookupFunction;
  callers: Done[];
}

/** How many lookups may be in flight: in all, and of one owner. */
export interface LookupLimits {
  total: number;
  perOwner: number;
}

/** Libuv's default thread pool, when `UV_THREADPOOL_SIZE` does not say (or says something out of range). */
const DEFAULT_POOL = 4;

/** The limits for a thread pool of `pool` threads: three quarters of it, a quarter of that each. */
export function lookupLimits(pool = threadPoolSize(process.env.UV_THREADPOOL_SIZE)): LookupLimits {
  const total = Math.max(1, Math.floor((pool * 3) / 4));
  return { total, perOwner: Math.max(1, Math.floor(total / 4)) };
}

/**
 * The thread pool's size as libuv reads `UV_THREADPOOL_SIZE`: 4 when unset, else its leading
 * integer (`atoi`: `16abc` is 16), 0 or none read as 1, past 1,024 (or negative, which libuv
 * reads unsigned) as 1,024.
 */
export function threadPoolSize(value: string | undefined): number {
  if (value === undefined) return DEFAULT_POOL;
  const size = Number.parseInt(value, 10);
  if (Number.isNaN(size) || size === 0) return 1;
  return size < 0 ? 1024 : Math.min(size, 1024);
}

/** See the module comment. One per process: {@link LOOKUPS}. */
export class LookupShares {
  readonly #limits: LookupLimits;
  /**
   * The lookups in flight, by name and options, which any owner's lookup of the same joins; and
   * those waiting, by owner, name and options, which only the same owner's joins (another's would
   * wait behind a share it does not spend: a tenant's full share would hold the public service's
   * name for everyone).
   */
  readonly #inFlightByKey = new Map<string, Lookup>();
  readonly #waitingByKey = new Map<string, Lookup>();
  /** The lookups waiting, by owner. */
  readonly #waiting = new Map<string, Lookup[]>();
  /** When each owner waiting or in flight last had a lookup started (a count of starts). */
  readonly #turns = new Map<string, number>();
  #turn = 0;
  /** Lookups in flight, by owner. */
  readonly #running = new Map<string, number>();
  #inFlight = 0;

  constructor(limits: LookupLimits = lookupLimits()) {
    this.#limits = limits;
  }

  /** Lookups in flight, in all and of `owner`. */
  inFlight(owner?: string): number {
    return owner === undefined ? this.#inFlight : (this.#running.get(owner) ?? 0);
  }

  /** `resolve` as `owner`'s lookups use it: within the owner's share. */
  lookupFor(owner: string, resolve: LookupFunction): LookupFunction {
    return (hostname, options, callback) => {
      const key = `${hostname}\0${options.family ?? 0}\0${options.all === true ? 1 : 0}\0${options.hints ?? 0}`;
      const joined = this.#inFlightByKey.get(key) ?? this.#waitingByKey.get(`${owner}\0${key}`);
      if (joined !== undefined) {
        joined.callers.push(callback as Done);
        return;
      }
      const lookup: Lookup = { key, owner, hostname, options, resolve, callers: [callback as Done] };
      this.#waitingByKey.set(`${owner}\0${key}`, lookup);
      const waiting = this.#waiting.get(owner);
      if (waiting === undefined) this.#waiting.set(owner, [lookup]);
      else waiting.push(lookup);
      this.#next();
    };
  }

  /**
   * Starts waiting lookups while there is room: of the owners below their share, the one whose
   * last lookup started longest ago (one that has none first), a lookup at a time.
   */
  #next(): void {
    while (this.#inFlight < this.#limits.total) {
      let chosen: string | undefined;
      let earliest = Number.POSITIVE_INFINITY;
      for (const owner of this.#waiting.keys()) {
        if ((this.#running.get(owner) ?? 0) >= this.#limits.perOwner) continue;
        const turn = this.#turns.get(owner) ?? -1;
        if (turn < earliest) [earliest, chosen] = [turn, owner];
      }
      const waiting = chosen === undefined ? undefined : this.#waiting.get(chosen);
      const next = waiting?.shift();
      if (chosen === undefined || next === undefined) return;
      if (waiting?.length === 0) this.#waiting.delete(chosen);
      this.#turns.set(chosen, this.#turn++);
      this.#start(next);
    }
  }

  #start(lookup: Lookup): void {
    const { owner, key } = lookup;
    this.#waitingByKey.delete(`${owner}\0${key}`);
    // Another owner's lookup of the name started while this one waited: one answer for both.
    const running = this.#inFlightByKey.get(key);
    if (running !== undefined) {
      running.callers.push(...lookup.callers);
      // It took no thread: an owner left with none waiting or in flight has no turn (as `end` drops it).
      if (!this.#running.has(owner) && !this.#waiting.has(owner)) this.#turns.delete(owner);
      return;
    }
    this.#inFlightByKey.set(key, lookup);
    this.#inFlight += 1;
    this.#running.set(owner, (this.#running.get(owner) ?? 0) + 1);
    let ended = false;
    const end: Done = (error, address, family) => {
      if (ended) return;
      ended = true;
      this.#inFlight -= 1;
      const running = (this.#running.get(owner) ?? 1) - 1;
      if (running > 0) this.#running.set(owner, running);
      else {
        this.#running.delete(owner);
        if (!this.#waiting.has(owner)) this.#turns.delete(owner);
      }
      this.#inFlightByKey.delete(key);
      this.#next();
      for (const caller of lookup.callers) caller(error, address, family);
    };
    try {
      lookup.resolve(lookup.hostname, lookup.options, end as Parameters<LookupFunction>[2]);
    } catch (error) {
      // `dns.lookup` throws at once on arguments it refuses: the callers' error, not the process's.
      end(error as NodeJS.ErrnoException, "", 0);
    }
  }
}

/** The process's lookups, within the limits of its thread pool as it started. */
export const LOOKUPS = new LookupShares();
