/**
 * The tokens of a connection's rate limit reserved by deferred reconciles (budgets.ts's
 * `TokenBucket.reserve`), in line. The bucket makes one only when a reconcile defers, and drops
 * it once none is held: a reconcile that never defers never calls in here. The deferral itself
 * ({@link TokenWaitTooLongError}) and how long a reservation is kept are here too.
 *
 * Namespaces take turns in the line. A token is counted as taken when it is reserved, so a
 * reservation made behind a thousand others comes due a thousand tokens later; on a connection
 * several namespaces share (a ClusterServiceConnection, the default one) one namespace's thousand
 * edited resources, deferred on a slow rate, would keep another's one edit waiting behind them all.
 * So the line is in the order of start-time fair queuing (the namespaces its flows; a holder's
 * namespace is its key, `namespace/name`, up to the `/`): a reservation's turn is one after the
 * later of its namespace's last one in line and the last token taken; ties in the order reserved.
 * The times are the line's, not the holders': they are those the reservations would have had in
 * the order reserved, the first in line has the earliest, and a reservation put before others
 * moves each of them to the next one's time. A reservation whose time has come keeps it (none is
 * put before it). So the same times come due (the rate holds), each namespace's in the order
 * reserved, and a namespace holding none is at most a token or two per namespace holding some
 * away (their turn and the next), however many they hold.
 */
import { DeferredError } from "../runtime/clock.ts";

/**
 * A call of a reconcile would wait for its token longer than the reconcile has left (clock.ts):
 * it was not sent, no token was taken, and the reconcile may come back in `afterMs`, when a token
 * is due. Thrown by the transport instead of holding the reconcile's worker in the wait.
 */
export class TokenWaitTooLongError extends DeferredError {
  override readonly name: string = "TokenWaitTooLongError";
}

/**
 * How long a reserved token is kept for its holder past the moment it is due: a deferred
 * reconcile comes back then, give or take its turn in its connection's queue. One not taken by
 * then is dropped (its token is spent).
 */
export const RESERVATION_KEPT_MS = 600_000;

/** A holder's place in line: its turn, then the order reserved. */
interface Entry {
  holder: string;
  namespace: string;
  turn: number;
  order: number;
}

export class ReservedTokens {
  /** The reservations, by holder. */
  readonly #entries = new Map<string, Entry>();
  /** The reservations in line (by turn, then order). */
  readonly #line: Entry[] = [];
  /** The times due, earliest first: the line's first one is due at the first. */
  readonly #times: number[] = [];
  /** Each namespace holding some: the turn of its last one in line. */
  readonly #lastTurn = new Map<string, { turn: number; held: number }>();
  /** The turn of the last token taken. */
  #taken = 0;
  #order = 0;

  get size(): number {
    return this.#line.length;
  }

  /** When `holder`'s token is due; undefined when it holds none. */
  get(holder: string): number | undefined {
    const entry = this.#entries.get(holder);
    return entry && this.#times[this.#index(entry)];
  }

  /**
   * Puts `holder` (holding none) in line at its namespace's turn and returns when its token is
   * due; `last` is the time the bucket counted the token at (the line's end, in the order reserved).
   */
  add(holder: string, last: number, now: number): number {
    const namespace = namespaceOf(holder);
    const own = this.#lastTurn.get(namespace);
    // After every reservation due already, whatever its turn: at least the last one's turn (the
    // newest of a turn goes last in it).
    const due = this.#line[upperBound(this.#times, now) - 1];
    const turn = Math.max(Math.max(this.#taken, own?.turn ?? 0) + 1, due?.turn ?? 0);
    this.#lastTurn.set(namespace, { turn, held: (own?.held ?? 0) + 1 });
    const entry = { holder, namespace, turn, order: this.#order++ };
    this.#entries.set(holder, entry);
    const at = this.#index(entry);
    this.#line.splice(at, 0, entry);
    this.#times.splice(upperBound(this.#times, last), 0, last);
    return this.#times[at] as number;
  }

  /** Takes `holder`'s token (its request goes), or drops its reservation; nothing if it holds none. */
  delete(holder: string): void {
    const entry = this.#entries.get(holder);
    if (!entry) return;
    const at = this.#index(entry);
    this.#line.splice(at, 1);
    // The others keep their times: the one it held goes with it.
    this.#times.splice(at, 1);
    this.#forget(entry);
  }

  /** Drops the reservations due before `before` (the line's first ones). */
  dropDueBefore(before: number): void {
    let count = 0;
    while (count < this.#times.length && (this.#times[count] as number) < before) count++;
    if (count === 0) return;
    for (const entry of this.#line.splice(0, count)) this.#forget(entry);
    this.#times.splice(0, count);
  }

  /** Forgets `entry`, taken out of line: its turn is the last taken (if later), its namespace holds one less. */
  #forget(entry: Entry): void {
    this.#entries.delete(entry.holder);
    this.#taken = Math.max(this.#taken, entry.turn);
    const own = this.#lastTurn.get(entry.namespace);
    if (own && --own.held === 0) this.#lastTurn.delete(entry.namespace);
  }

  /** Where `entry` is, or would be, in line (a binary search: the line is sorted). */
  #index(entry: Entry): number {
    let low = 0;
    let high = this.#line.length;
    while (low < high) {
      const mid = (low + high) >>> 1;
      const other = this.#line[mid] as Entry;
      if (other.turn < entry.turn || (other.turn === entry.turn && other.order < entry.order)) low = mid + 1;
      else high = mid;
    }
    return low;
  }
}

/** The index of the first of `sorted` later than `value`. */
function upperBound(sorted: readonly number[], value: number): number {
  let low = 0;
  let high = sorted.length;
  while (low < high) {
    const mid = (low + high) >>> 1;
    if ((sorted[mid] as number) <= value) low = mid + 1;
    else high = mid;
  }
  return low;
}

/** A holder's namespace: its key up to the `/`; a key without one is its own. */
function namespaceOf(holder: string): string {
  const slash = holder.indexOf("/");
  return slash < 0 ? holder : holder.slice(0, slash);
}
