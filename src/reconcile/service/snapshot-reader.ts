/**
 * The reading of the service that fills a connection's snapshot (`snapshot.ts`): the whole
 * listing, or a sharded replica's share by id ({@link POLL_BATCH} per call) unless the whole
 * listing costs fewer calls than the lookups by name it saves, each under the listing deadline.
 * What a read leaves ({@link ListingRead}) goes to the store of `snapshot-store.ts`.
 */

import type { Clock } from "../../runtime/clock.ts";
import { whilePaced } from "../../runtime/clock.ts";
import { NameFilter } from "../../runtime/name-filter.ts";
import type { DeploymentListings } from "../ports.ts";
import type { Deployment, UnreadableDeployment } from "../service-types.ts";
import { idBatches, POLL_BATCH } from "./deployments-port.ts";
import { ListedIds, NO_LISTED_IDS } from "./listed-ids.ts";

/**
 * Unreadable items of a listing kept with what is known of them (their id, name and message),
 * for the message of a resource they may be the deployment of. The others are counted, and
 * their names kept in the filter of names not held: a lookup of such a name is made live.
 */
export const UNREADABLE_KEPT = 100;

/** The error a listing that missed its deadline rejects with. */
export class ListingDeadlineError extends Error {
  override readonly name = "ListingDeadlineError";
}

/** What a read of the service leaves besides its entries: see `SnapshotStore`'s fields. */
export interface ListingRead {
  unheld: NameFilter;
  unreadable: Unreadable;
  /** The whole listing: it may say that a name is free. */
  named: boolean;
  /** Sharded, a whole listing's: the id it showed under each name (`listed-ids.ts`). */
  listed: ListedIds;
}

/** The reader's settings: the snapshot's options (`RemoteSnapshotOptions`), their defaults applied. */
export interface ReaderOptions {
  maxAgeMs: number;
  deadlineMs: number;
  wanted: (name: string) => boolean;
  share: (() => Iterable<string>) | undefined;
  unrecorded: () => readonly string[];
}

/** Reads the service for a snapshot, and remembers what a sharded read decides its next one on. */
export class SnapshotReader {
  readonly #port: DeploymentListings;
  readonly #clock: Clock;
  readonly #maxAgeMs: number;
  readonly #deadlineMs: number;
  readonly #wanted: (name: string) => boolean;
  readonly #share: (() => Iterable<string>) | undefined;
  readonly #unrecorded: () => readonly string[];
  /** The last answer of `#unrecorded` and when it was taken (see `#waiting`). */
  #waitingMemo: { names: readonly string[]; at: number } | undefined;
  /**
   * Sharded: the pages the connection's whole listing takes, as far as known (the last whole
   * listing's, or at least as many as a listing given up for its length had read).
   */
  #wholePages = 0;
  /** Sharded: whole listings that failed in a row (not those given up for their length). */
  #wholeFailures = 0;
  /** Sharded: no whole listing is tried before then, after one failed (see `#readShareOrAll`). */
  #wholeRetryAt = Number.NEGATIVE_INFINITY;

  constructor(port: DeploymentListings, clock: Clock, options: ReaderOptions) {
    this.#port = port;
    this.#clock = clock;
    this.#maxAgeMs = options.maxAgeMs;
    this.#deadlineMs = options.deadlineMs;
    this.#wanted = options.wanted;
    this.#share = options.share;
    this.#unrecorded = options.unrecorded;
  }

  /** Sharded: the snapshot reads a share ({@link ReaderOptions.share}). */
  get sharded(): boolean {
    return this.#share !== undefined;
  }

  /**
   * One read of the service, each deployment it holds going to `hold`: the share or the whole
   * listing (sharded, see `#readShareOrAll`), else the whole listing under the deadline. Of a whole
   * listing's other items the names are kept in a filter sized after `expectUnheld`.
   */
  read(signal: AbortSignal, hold: (d: Deployment) => void, expectUnheld: number): Promise<ListingRead> {
    return this.#share
      ? this.#readShareOrAll(this.#share, signal, hold, expectUnheld)
      : this.#withinDeadline(signal, (s) => this.#readListing(s, hold, expectUnheld));
  }

  /**
   * `read` under the listing deadline: past it, the signal `read` is given aborts and this
   * rejects with a {@link ListingDeadlineError} (whatever `read` ended with). Unless `signal`
   * (the callers') aborted first: then what `read` ended with is passed on.
   */
  async #withinDeadline<T>(signal: AbortSignal, read: (signal: AbortSignal) => Promise<T>): Promise<T> {
    const deadlineMs = this.#deadlineMs;
    const deadline = new AbortController();
    // The deadline bounds the service's time: it moves by each wait for a token of this
    // connection's rate limit (runtime/clock.ts), which the reconciles share.
    let endsAt = this.#clock.now() + deadlineMs;
    const arm = () =>
      Number.isFinite(deadlineMs)
        ? this.#clock.setTimer(Math.max(0, endsAt - this.#clock.now()), () =>
            deadline.abort(new ListingDeadlineError(`the listing did not end within ${deadlineMs} ms`)),
          )
        : () => {};
    let cancel = arm();
    const paced = (waitedMs: number) => {
      if (deadline.signal.aborted || !Number.isFinite(deadlineMs)) return;
      endsAt += waitedMs;
      cancel();
      cancel = arm();
    };
    try {
      const result = await whilePaced(paced, () => read(AbortSignal.any([signal, deadline.signal])));
      if (deadline.signal.aborted && !signal.aborted) throw deadline.signal.reason;
      return result;
    } catch (error) {
      throw deadline.signal.aborted && !signal.aborted ? deadline.signal.reason : error;
    } finally {
      cancel();
    }
  }

  /**
   * The whole listing: each wanted item goes to `hold`. Of the other items only their names' bits
   * in a filter are kept, sized after the last listing's count; and sharded, every item's name
   * and id in `listed`.
   */
  async #readListing(
    signal: AbortSignal,
    hold: (d: Deployment) => void,
    expectUnheld: number,
    onItem: () => void = () => {},
    listed: ListedIds = NO_LISTED_IDS,
  ): Promise<ListingRead> {
    /** How many deployments of each wanted name this listing showed (at most two are held). */
    const perName = new Map<string, number>();
    const unheld = new NameFilter(expectUnheld);
    const unreadable = new Unreadable(unheld);
    await this.#port.listAll(
      signal,
      (d) => {
        onItem();
        listed.add(d.name, d.id);
        if (!this.#wanted(d.name)) {
          unheld.add(d.name);
          return;
        }
        // A name the service shows more than once is ambiguous however many times: a listing
        // repeating one claimed name holds the first two of them, not all.
        const shown = perName.get(d.name) ?? 0;
        if (shown >= MAX_HELD_PER_NAME) return;
        perName.set(d.name, shown + 1);
        hold(d);
      },
      (item) => {
        onItem();
        listed.unreadable(item.name);
        unreadable.add(item);
      },
    );
    return { unheld, unreadable, named: true, listed };
  }

  /**
   * Sharded: the whole listing when it costs fewer calls than the lookups by name it saves (more
   * of the replica's resources wait for one than it has pages), else the share by id. A whole
   * listing that turns out longer than that is given up as soon as it does (its length is
   * remembered, so it is not tried again until that many resources wait) and the share read by
   * id: it never costs more calls than the lookups it was to save. One that fails otherwise
   * (its deadline, a 5xx) is given up too, the share read by id in the same pass under a deadline
   * of its own, and no whole listing is tried again for a while ({@link WHOLE_RETRY_PERIODS}):
   * a whole listing that fails never fails the share's read.
   */
  async #readShareOrAll(
    share: () => Iterable<string>,
    signal: AbortSignal,
    hold: (d: Deployment) => void,
    lastExpectUnheld: number,
  ): Promise<ListingRead> {
    const waiting = this.#waiting(true);
    if (waiting.length > this.#wholePages && this.#clock.now() >= this.#wholeRetryAt) {
      const tooLong = new AbortController();
      let items = 0;
      const counted = () => {
        items += 1;
        if (items > waiting.length * POLL_BATCH && !tooLong.signal.aborted)
          tooLong.abort(new Error("the whole listing is longer than the lookups it saves"));
      };
      // Most of a sharded replica's listing is the other replicas' deployments, not held, and a
      // connection being filled grows between two listings: room for twice the last count, so
      // that the filter of names not held still says "free" of the names that are.
      const expectUnheld = 2 * Math.max(lastExpectUnheld, this.#wholePages * POLL_BATCH);
      // No more names than the items it may read before it is given up.
      const listed = new ListedIds(waiting.length * POLL_BATCH, expectUnheld / 2);
      try {
        const read = await this.#withinDeadline(signal, async (s) => {
          const whole = await this.#readListing(
            AbortSignal.any([s, tooLong.signal]),
            hold,
            expectUnheld,
            counted,
            listed,
          );
          // A port that ends quietly at an abort has not read the whole listing.
          if (tooLong.signal.aborted) throw tooLong.signal.reason;
          return whole;
        });
        if (!signal.aborted) {
          this.#wholePages = Math.ceil(items / POLL_BATCH);
          this.#wholeFailures = 0;
        }
        return read;
      } catch (error) {
        if (signal.aborted) throw error;
        // What was read is at least that long, whatever ended it.
        this.#wholePages = Math.max(this.#wholePages, Math.ceil(items / POLL_BATCH));
        if (!tooLong.signal.aborted) {
          this.#wholeFailures += 1;
          const periods =
            WHOLE_RETRY_PERIODS[Math.min(this.#wholeFailures, WHOLE_RETRY_PERIODS.length) - 1] ?? 1;
          this.#wholeRetryAt = this.#clock.now() + periods * this.#maxAgeMs;
        }
      }
    }
    return this.#withinDeadline(signal, (s) => this.#readShare(share, s, hold));
  }

  /**
   * The service names of the replica's resources that will look one up by name (see
   * `RemoteSnapshotOptions.unrecorded`). Taken at each read (`fresh`), and between reads at
   * most once per {@link WAITING_MEMO_MS}: a lookup by name that asks whether a whole listing
   * pays costs no walk over the connection's resources of its own.
   */
  #waiting(fresh = false): readonly string[] {
    const now = this.#clock.now();
    if (fresh || this.#waitingMemo === undefined || now - this.#waitingMemo.at >= WAITING_MEMO_MS)
      this.#waitingMemo = { names: this.#unrecorded(), at: now };
    return this.#waitingMemo.names;
  }

  /**
   * Sharded, whether a whole listing may be tried for a lookup by name (see the snapshot's
   * `#wholeListingPays`): none failed lately, and more of the replica's resources wait for a
   * lookup by name than the whole listing has pages (as far as known).
   */
  wholeListingPays(): boolean {
    if (this.#clock.now() < this.#wholeRetryAt) return false;
    return this.#waiting().length > this.#wholePages;
  }

  /**
   * The share's deployments by id, {@link POLL_BATCH} per call: each one asked and answered goes
   * to `hold`. An item not asked for is ignored; an id asked and not answered is not held, so its
   * entry is dropped as a listing drops one it does not show (the lookup of a recorded id the
   * snapshot lacks asks the service before giving it up, see `observe.ts`). A batch that fails
   * fails the read: nothing of it is taken as gone.
   */
  async #readShare(
    share: () => Iterable<string>,
    signal: AbortSignal,
    hold: (d: Deployment) => void,
  ): Promise<ListingRead> {
    for (const batch of idBatches(share())) {
      const asked = new Set(batch);
      const found = await this.#port.getByIds(batch, signal);
      if (signal.aborted) break;
      for (const d of found) {
        if (!asked.delete(d.id)) continue;
        hold(d);
      }
    }
    const unheld = new NameFilter(0);
    return { unheld, unreadable: new Unreadable(unheld), named: false, listed: NO_LISTED_IDS };
  }
}

/**
 * A listing's unreadable items by id and by name, at most {@link UNREADABLE_KEPT} of them; the
 * names of the rest go to the listing's filter of names not held (the count of all is the client's
 * metric). `unnamed` when one had no name (it could be any name's).
 */
export class Unreadable {
  readonly byId = new Map<string, string>();
  readonly byName = new Map<string, string>();
  unnamed = false;
  #kept = 0;
  readonly #unheld: NameFilter;

  constructor(unheld: NameFilter) {
    this.#unheld = unheld;
  }

  add(item: UnreadableDeployment): void {
    if (item.name === undefined) this.unnamed = true;
    if (this.#kept >= UNREADABLE_KEPT) {
      // Its id is not held either: a lookup of it asks the service, which says it is unreadable.
      if (item.name !== undefined) this.#unheld.add(item.name);
      return;
    }
    this.#kept += 1;
    if (item.id !== undefined) this.byId.set(item.id, item.message);
    if (item.name !== undefined) this.byName.set(item.name, item.message);
  }
}

/** Deployments held per name: two already say the name is ambiguous (see `RemoteSnapshot.byName`). */
const MAX_HELD_PER_NAME = 2;

/**
 * Resync periods without a whole listing after one failed (its deadline, a 5xx), by the failures
 * in a row; the last one stays.
 */
const WHOLE_RETRY_PERIODS = [1, 2, 4, 8] as const;

/** How long the count of resources waiting for a lookup by name is reused between reads. */
const WAITING_MEMO_MS = 1_000;
