/**
 * What the reconciler knows of the service's deployments, and how it looks one up.
 *
 * The service has no watch, so drift is found by polling. Polling each resource on its own would
 * cost N calls per resync; instead a resync pass lists every deployment once (ceil(N/100) calls
 * with pages of 100) into a snapshot, and the reconciles of that pass read from it, by id or by
 * exact name (adoption, and the check before a create). Reconciles caused by a change of the
 * resource look the deployment up live, every write refreshes the snapshot's entry with the
 * service's answer, and the deployments of resources in progress are re-read together, a hundred
 * per call ({@link RemoteSnapshot.poll}, by the rollout poller of `rollout-poller.ts`).
 *
 * The snapshot keeps only the deployments its connection's resources may ask about: those whose
 * name a resource claims ({@link RemoteSnapshotOptions.wanted}). A tenant's server answers with
 * as many deployments as it likes (thousands managed elsewhere, or an endless hostile listing):
 * the operator then holds the page being read, not the listing.
 *
 * A sharded replica reads its share only ({@link RemoteSnapshotOptions.share}): the deployments
 * its own resources record, by id, a hundred per call, so that the replicas together cost about
 * what one listing costs. Such a read cannot say that a name is free (it shows no deployment it
 * was not asked for), so a lookup by name is then made live: a resource without a known
 * deployment asks the service by exact name, and no create goes out without that answer. That is
 * a call per new resource besides its POST: when more of the replica's resources will look
 * their deployment up by name ({@link RemoteSnapshotOptions.unrecorded}) than the connection's
 * whole listing has pages, the replica reads the whole listing instead (its share is in it), and
 * that listing answers their lookups by name as an unsharded one does
 * ({@link RemoteSnapshot.byNameOrWholeListing}); a whole listing that fails is followed by the
 * read of the share by id in the same pass.
 */

import { withDetailCut } from "../../api/errors.ts";
import { isUuid } from "../../api/wire.ts";
import { whilePaced } from "../../runtime/abort.ts";
import type { Clock } from "../../runtime/clock.ts";
import { NameFilter } from "../../runtime/name-filter.ts";
import { addItem, itemsOf, type OneOrMany, removeItem } from "../../runtime/one-or-many.ts";
import {
  type PackedRecord,
  packRecord,
  Shapes,
  SharedValues,
  unpackRecord,
} from "../../runtime/packed-record.ts";
import { SharedCall } from "../../runtime/shared-call.ts";
import type { DeploymentListings } from "../ports.ts";
import type { Deployment, UnreadableDeployment } from "../service-types.ts";
import { entryAnswers, type ListingState, listedWithin, listingAnswers } from "./freshness.ts";
import { UnreadableDeploymentError, unreadableMessage } from "./lookup-errors.ts";

/** Ids per `deployment_ids` lookup: the service's largest page, so one call answers for all. */
export const POLL_BATCH = 100;

/** Options of {@link RemoteSnapshot}. */
export interface RemoteSnapshotOptions {
  /**
   * How long a listing answers for the service when nothing holds it: an edit on the service is
   * seen by the next pass. The resync holds each listing ({@link RemoteSnapshot.holdFresh}) until
   * the next one is taken, so this only bounds a listing that is no longer renewed (the next one
   * failed).
   */
  maxAgeMs: number;
  /**
   * How long one listing may take (`--listing-deadline`); past it the listing is given up and
   * recorded as missed ({@link RemoteSnapshot.listingFailure}). Default: no deadline.
   */
  listingDeadlineMs?: number;
  /**
   * Whether a resource of this connection claims the service name `name` (the claim index of
   * the cache: O(1), no scan). Only those deployments are held; of the others the snapshot keeps
   * a filter of names, so that it never says a name is free that the listing held (see
   * {@link RemoteSnapshot.byName}). Default: every name (a snapshot without resources to ask).
   */
  wanted?: (name: string) => boolean;
  /**
   * Sharded (`run --sharded`): the deployment ids this replica's resources of the connection
   * record, gone through once per read. Given, a read asks the service for these ids only
   * (`deployment_ids`, {@link POLL_BATCH} per call) instead of listing every deployment, and
   * the snapshot answers no lookup by name (see {@link RemoteSnapshot.byName}). Default: the
   * whole listing.
   */
  share?: () => Iterable<string>;
  /**
   * Sharded: the service names of this replica's resources of the connection that will look
   * their deployment up by name (no deployment id recorded; neither paused, deleted, refused the
   * connection nor the loser of a name conflict). When there are more of them than the whole
   * listing has pages, a read lists the whole connection instead of the share's ids, and that
   * listing answers their lookups by name, and only theirs (see the module comment). Asked once
   * per read, and between reads at most once a second. Default: none.
   */
  unrecorded?: () => readonly string[];
}

/**
 * Unreadable items of a listing kept with what is known of them (their id, name and message),
 * for the message of a resource they may be the deployment of. The others are counted, and
 * their names kept in the filter of names not held: a lookup of such a name is made live.
 */
export const UNREADABLE_KEPT = 100;

/**
 * Why the connection's last listing does not answer for the service: it missed its deadline
 * (`deadline`), or failed before it (`failed`, with the error it failed with). `deadlineMs` is
 * the deadline it ran under.
 */
export type ListingFailure =
  | { kind: "deadline"; deadlineMs: number }
  | { kind: "failed"; deadlineMs: number; error: unknown };

/** The error a listing that missed its deadline rejects with. */
export class ListingDeadlineError extends Error {
  override readonly name = "ListingDeadlineError";
}

/**
 * A listing of all deployments taken at one instant, indexed by id and by exact name, and kept
 * up to date with this operator's own writes. Entries are held as JSON text: a tenant's whole
 * listing then costs about its size on the wire, not the several times more of parsed objects.
 */
export class RemoteSnapshot {
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
   * Whether the last read was a whole listing, which may say that a name is free: always
   * unsharded; sharded, when the last read listed the whole connection.
   */
  #named: boolean;
  /**
   * Sharded: the pages the connection's whole listing takes, as far as known (the last whole
   * listing's, or at least as many as a listing given up for its length had read).
   */
  #wholePages = 0;
  /** Sharded: whole listings that failed in a row (not those given up for their length). */
  #wholeFailures = 0;
  /** Sharded: no whole listing is tried before then, after one failed (see `#readShareOrAll`). */
  #wholeRetryAt = Number.NEGATIVE_INFINITY;
  /**
   * Sharded, after a whole listing: the names it may say are free, those of the replica's
   * resources waiting for a lookup by name when it started (see `#readShareOrAll`).
   */
  #mayBeFree: ReadonlySet<string> | undefined;
  readonly #listing: SharedCall<void>;
  /** Why the last listing that ended did not answer; undefined once one succeeded. */
  #failure: ListingFailure | undefined;
  readonly #entries = new Entries();
  /** When the current listing started; entries written or polled since carry their own time. */
  #takenAt = Number.NEGATIVE_INFINITY;
  readonly #seenAt = new Map<string, number>();
  /**
   * Entries the poller read that no reconcile has taken yet: not polled again until one has,
   * and taken by that reconcile however long its key waited in the queue.
   */
  readonly #polled = new Set<string>();
  /** Entries known only from a write's answer, not yet from a read (a listing may lag a create). */
  #unlisted = new Set<string>();
  /** The items of the last listing that could not be read, by what is known of them. */
  #unreadable = new Unreadable(new NameFilter(0));
  /**
   * The names of the last listing's deployments (and unreadable items) that were not held: the
   * snapshot cannot say what the service has under them.
   */
  #unheld = new NameFilter(0);
  /** How many names the next listing's filter is sized for: the last listing's count. */
  #expectUnheld = FIRST_LISTING_UNHELD;
  /** Resync passes under way: while any is, the listing stays fresh. */
  #holds = 0;
  /** Counts writes to the snapshot, to tell a write made while a listing was under way. */
  #writes = 0;
  /**
   * The count of the latest write per id (the entry itself is in `#entries`, or absent when
   * forgotten); pruned as listings supersede the writes.
   */
  readonly #written = new Map<string, number>();
  /**
   * The latest revision each of the last {@link OWN_LATEST_HELD} writes answered, by deployment id:
   * a revision this process's own write made, should its status write have failed since (a
   * conflict, a restart of the API server) and not recorded it, is not taken for one someone else
   * made. Bounded: only the window between a write and its status write matters.
   */
  readonly #ownLatest = new Map<string, string>();

  constructor(port: DeploymentListings, clock: Clock, options: RemoteSnapshotOptions) {
    this.#port = port;
    this.#clock = clock;
    this.#maxAgeMs = options.maxAgeMs;
    this.#deadlineMs = options.listingDeadlineMs ?? Number.POSITIVE_INFINITY;
    this.#wanted = options.wanted ?? (() => true);
    this.#share = options.share;
    this.#unrecorded = options.unrecorded ?? (() => []);
    this.#named = options.share === undefined;
    this.#listing = new SharedCall((signal) => this.#list(signal));
  }

  /**
   * Lists everything once; concurrent callers share the same listing. Each caller's `signal`
   * ends its own wait (rejecting with its reason) without failing the others; the listing itself
   * is aborted only once every caller waiting for it has given up, or at its deadline (then it
   * rejects with a {@link ListingDeadlineError}). How it ended is {@link listingFailure}.
   */
  refresh(signal: AbortSignal): Promise<void> {
    return this.#listing.run(signal);
  }

  /**
   * Why the last listing that ended (not given up by its callers) did not answer for the
   * service: missed its deadline or failed. Undefined once a listing succeeded, and before any
   * ended. While it is set, the connection's calls may hang as its listing did: its resources
   * make none (see the reconciler).
   */
  listingFailure(): ListingFailure | undefined {
    return this.#failure;
  }

  /** True when the last listing that succeeded started less than `ms` ago (see freshness.ts). */
  listedWithin(ms: number): boolean {
    return listedWithin(this.#takenAt, this.#clock.now(), ms);
  }

  /** The bookkeeping the listing's freshness is decided on (see freshness.ts). */
  #listingState(): ListingState {
    return { takenAt: this.#takenAt, holds: this.#holds, maxAgeMs: this.#maxAgeMs };
  }

  async #list(signal: AbortSignal): Promise<void> {
    const deadlineMs = this.#deadlineMs;
    try {
      await this.#listUnder(signal);
      if (!signal.aborted) this.#failure = undefined;
    } catch (error) {
      // Given up by every caller (a shutdown, a lost leadership): that says nothing of the service.
      if (signal.aborted) throw error;
      this.#failure =
        error instanceof ListingDeadlineError
          ? { kind: "deadline", deadlineMs }
          : { kind: "failed", deadlineMs, error: withDetailCut(error, KEPT_DETAIL_CHARS) };
      throw error;
    }
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
    // connection's rate limit (runtime/abort.ts), which the reconciles share.
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

  async #listUnder(signal: AbortSignal): Promise<void> {
    const startedAt = this.#clock.now();
    const writesBefore = this.#writes;
    const newer = (id: string) => (this.#written.get(id) ?? 0) > writesBefore;
    // Each item read replaces its entry as its page arrives, as text: neither the parsed listing
    // nor a second copy of the snapshot is ever held. A write answered after the read started is
    // newer than what the read shows, and stays. Only the ids held are remembered, so the read's
    // cost is bounded by the connection's resources, not by what the service answers.
    const held = new Set<string>();
    const hold = (d: Deployment) => {
      held.add(d.id);
      if (!newer(d.id)) this.#entries.put(d);
    };
    const read = this.#share
      ? await this.#readShareOrAll(this.#share, signal, hold)
      : await this.#withinDeadline(signal, (s) => this.#readListing(s, hold));
    if (signal.aborted) return;
    this.#named = read.named;
    this.#mayBeFree = read.mayBeFree;
    this.#unreadable = read.unreadable;
    this.#unheld = read.unheld;
    // A read of ids shows no names: the next whole listing is sized after the last one.
    if (read.named) this.#expectUnheld = read.unheld.count;
    // What the read did not hold is gone from the service, or not asked about, unless written
    // since it started.
    for (const id of this.#entries.ids()) if (!held.has(id) && !newer(id)) this.#entries.delete(id);
    for (const [id, at] of this.#written) if (at <= writesBefore) this.#written.delete(id);
    this.#unlisted = new Set([...this.#written.keys()].filter((id) => this.#unlisted.has(id)));
    const entries = this.#entries;
    for (const [id, at] of this.#seenAt) if (at <= startedAt || !entries.has(id)) this.#seenAt.delete(id);
    for (const id of this.#polled) if (!entries.has(id)) this.#polled.delete(id);
    this.#takenAt = startedAt;
  }

  /**
   * The whole listing: each wanted item goes to `hold`. Of the other items only their names' bits
   * in a filter are kept, sized after the last listing's count.
   */
  async #readListing(
    signal: AbortSignal,
    hold: (d: Deployment) => void,
    onItem: () => void = () => {},
    expectUnheld = this.#expectUnheld,
  ): Promise<ListingRead> {
    /** How many deployments of each wanted name this listing showed (at most two are held). */
    const perName = new Map<string, number>();
    const unheld = new NameFilter(expectUnheld);
    const unreadable = new Unreadable(unheld);
    await this.#port.listAll(
      signal,
      (d) => {
        onItem();
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
        unreadable.add(item);
      },
    );
    return { unheld, unreadable, named: true, mayBeFree: undefined };
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
      const expectUnheld = 2 * Math.max(this.#expectUnheld, this.#wholePages * POLL_BATCH);
      try {
        const read = await this.#withinDeadline(signal, async (s) => {
          const whole = await this.#readListing(
            AbortSignal.any([s, tooLong.signal]),
            hold,
            counted,
            expectUnheld,
          );
          // A port that ends quietly at an abort has not read the whole listing.
          if (tooLong.signal.aborted) throw tooLong.signal.reason;
          return whole;
        });
        if (!signal.aborted) {
          this.#wholePages = Math.ceil(items / POLL_BATCH);
          this.#wholeFailures = 0;
        }
        // Another replica's create made after this listing started is not in it: only the names
        // this replica's waiting resources claimed at its start may be answered free.
        return { ...read, mayBeFree: new Set(waiting) };
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
   * {@link RemoteSnapshotOptions.unrecorded}). Taken at each read (`fresh`), and between reads at
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
   * Whether a lookup by name should wait for a whole listing rather than ask the service: sharded,
   * the last read was of the share by id (or is too old), no whole listing failed lately, and
   * more of the replica's resources wait for a lookup by name than the whole listing has pages
   * (as far as known).
   */
  #wholeListingPays(): boolean {
    if (!this.#share || this.#failure !== undefined) return false;
    if (this.#named && this.isFresh()) return false;
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
    return { unheld, unreadable: new Unreadable(unheld), named: false, mayBeFree: undefined };
  }

  /** How many deployments the snapshot holds now (the listing's wanted ones and those written). */
  get size(): number {
    return this.#entries.size;
  }

  /**
   * Keeps the listing fresh until the returned release is called: the resync holds each listing
   * until the next one is taken, so that a pass reads its listing however long it takes and the
   * reconciles between passes (new resources, changes) read it too, with no live lookups.
   */
  holdFresh(): () => void {
    this.#holds += 1;
    let held = true;
    return () => {
      if (held) this.#holds -= 1;
      held = false;
    };
  }

  /** True while the last listing may answer for the service (see freshness.ts). */
  isFresh(): boolean {
    return listingAnswers(this.#listingState(), this.#clock.now());
  }

  /**
   * The snapshot's answer for `id`: the deployment, `null` when the listing did not have it, or
   * `undefined` when the snapshot is too old to say (the rule is freshness.ts's
   * {@link entryAnswers}). With `withinMs`, only an entry the service answered in the last
   * `withinMs` counts (a rollout being polled), or one the poller read for the next reconcile.
   * Reading changes nothing: a reconcile that acts on a poll's read takes it with
   * {@link takePollAnswer}.
   */
  byId(id: string, withinMs?: number): Deployment | null | undefined {
    const entry = { pollUntaken: this.#polled.has(id), seenAt: this.#seenAt.get(id) };
    if (!entryAnswers(this.#listingState(), entry, this.#clock.now(), withinMs)) return undefined;
    const problem = this.#unreadable.byId.get(id);
    if (problem !== undefined) throw new UnreadableDeploymentError(problem);
    return this.#entries.read(id) ?? null;
  }

  /**
   * Takes the poller's read of `id` for the reconcile that read the entry: the poller reads it
   * again only after that (its next reconcile needs a newer read). A poll is taken by the next
   * reconcile that reads the entry, however long the queue held its key.
   */
  takePollAnswer(id: string): void {
    this.#polled.delete(id);
  }

  /**
   * The deployments named exactly `name` (several: the service holds duplicates), `[]` when the
   * listing had none, or `undefined` when the snapshot cannot say: too old, the listing held an
   * unreadable item without a name (a live lookup by name tells whether it is this one), or the
   * listing showed the name while no resource claimed it (so it was not held; a name that a
   * resource claimed since is then looked up live, never taken as free). A snapshot of a share
   * ({@link RemoteSnapshotOptions.share}) says only while its last read was the whole listing:
   * a read of ids shows no names, so every lookup by name (adoption, the check before a create)
   * then asks the service (see {@link byNameOrWholeListing}). Nor does a sharded whole listing
   * say free a name that no waiting resource of the replica claimed when it started: another
   * replica may have created it since.
   * Throws {@link UnreadableDeploymentError} when an unreadable item carries this name.
   */
  byName(name: string): Deployment[] | undefined {
    if (!this.#named || !this.isFresh()) return undefined;
    const problem = this.#unreadable.byName.get(name);
    if (problem !== undefined) throw new UnreadableDeploymentError(unreadableMessage(name, problem));
    if (this.#unheld.has(name)) return undefined;
    const ids = this.#entries.idsNamed(name);
    if (ids.length === 0 && (this.#unreadable.unnamed || this.#mayBeFree?.has(name) === false))
      return undefined;
    return ids.flatMap((id) => this.#entries.read(id) ?? []);
  }

  /**
   * {@link byName}, after a whole listing of the connection when that costs fewer calls than the
   * lookups by name it answers: sharded, while more of the replica's resources lack a deployment
   * id than the listing has pages (the creates of a new share, a replica's start). Concurrent
   * lookups share one listing ({@link refresh}); a listing given up for its length, or a failed
   * one, leaves the answer undefined: the lookup asks the service by name.
   */
  async byNameOrWholeListing(name: string, signal: AbortSignal): Promise<Deployment[] | undefined> {
    const known = this.byName(name);
    if (known !== undefined || !this.#wholeListingPays()) return known;
    // A failed listing is said by listingFailure(), as a pass's is: the lookup asks on its own.
    await this.refresh(signal).catch(() => {
      if (signal.aborted) throw signal.reason;
    });
    return this.byName(name);
  }

  /**
   * Records what a write (a create, a PATCH) answered, so the next reconcile sees it. A deployment
   * no read has shown yet (a create's) stays unlisted ({@link isListed}) until one does.
   */
  remember(deployment: Deployment): void {
    const listed = this.isListed(deployment.id);
    this.#record(deployment);
    if (!listed) this.#unlisted.add(deployment.id);
    const latest = deployment.latest_revision_id;
    if (!latest) return;
    this.#ownLatest.delete(deployment.id);
    this.#ownLatest.set(deployment.id, latest);
    if (this.#ownLatest.size > OWN_LATEST_HELD)
      this.#ownLatest.delete(this.#ownLatest.keys().next().value ?? "");
  }

  /** The latest revision the last write of `id` this process made answered, while it is held. */
  ownLatest(id: string): string | undefined {
    return this.#ownLatest.get(id);
  }

  /** Records what a read (a lookup, a poll) answered: the service lists this deployment. */
  observed(deployment: Deployment): void {
    this.#record(deployment);
    this.#unlisted.delete(deployment.id);
    // A reconcile's own lookup: it has what the service says now, so a poll read before is spent.
    this.#polled.delete(deployment.id);
  }

  /** True when a read of the service showed the entry `id` (not only a write's answer). */
  isListed(id: string): boolean {
    return this.#entries.has(id) && !this.#unlisted.has(id);
  }

  #record(deployment: Deployment): void {
    this.#entries.put(deployment);
    this.#seenAt.set(deployment.id, this.#clock.now());
    this.#written.set(deployment.id, ++this.#writes);
  }

  /** Forgets a deployment that the service no longer has. */
  forget(id: string): void {
    this.#entries.delete(id);
    this.#unlisted.delete(id);
    this.#polled.delete(id);
    this.#seenAt.set(id, this.#clock.now());
    this.#written.set(id, ++this.#writes);
  }

  /**
   * Re-reads the deployments `ids` from the service, {@link POLL_BATCH} per call, and records
   * them. An id polled before whose read no reconcile has taken yet is skipped: when reconciles
   * queue up (thousands of creates at once), polling their deployments again every period would
   * spend the rate limit on reads nobody takes, and slow down the queue further. An id the
   * service did not return is left as it was: a listing may lag behind a create.
   */
  async poll(ids: readonly string[], signal: AbortSignal): Promise<void> {
    const due = ids.filter((id) => !this.#polled.has(id));
    for (const batch of idBatches(due)) {
      const asked = new Set(batch);
      const found = await this.#port.getByIds(batch, signal);
      for (const deployment of found) {
        if (!asked.delete(deployment.id)) continue;
        this.observed(deployment);
        this.#polled.add(deployment.id);
      }
    }
  }
}

/** What a read of the service leaves besides its entries: see {@link RemoteSnapshot}'s fields. */
interface ListingRead {
  unheld: NameFilter;
  unreadable: Unreadable;
  /** The whole listing: it may say that a name is free. */
  named: boolean;
  /** Of a whole listing, the only names it may say are free; undefined: any name. */
  mayBeFree: ReadonlySet<string> | undefined;
}

/**
 * `ids` in batches of at most {@link POLL_BATCH}, each id once. An id that is not a uuid is left
 * out: the client refuses to send one, which would fail the whole batch for the others (a
 * status is a record anyone who may write it can forge); its resource's own lookup reports it.
 */
export function idBatches(ids: Iterable<string>): string[][] {
  const batches: string[][] = [];
  const seen = new Set<string>();
  let batch: string[] = [];
  for (const id of ids) {
    if (seen.has(id) || !isUuid(id)) continue;
    seen.add(id);
    batch.push(id);
    if (batch.length === POLL_BATCH) {
      batches.push(batch);
      batch = [];
    }
  }
  if (batch.length > 0) batches.push(batch);
  return batches;
}

/**
 * Deployments held as JSON text by id ({@link PackedRecord}: the id is the key, the name held
 * once, the field names once per shape and the values many deployments share once, in this
 * connection's own tables), with the index by exact
 * name. A name held by one deployment (nearly all) maps to its id itself, not to a collection of
 * one ({@link OneOrMany}).
 */
class Entries {
  readonly #byId = new Map<string, PackedRecord>();
  readonly #shapes = new Shapes();
  readonly #values = new SharedValues();
  readonly #byName = new Map<string, OneOrMany<string>>();

  /** The deployment `id` as it was put, or undefined. */
  read(id: string): Deployment | undefined {
    const entry = this.#byId.get(id);
    return entry === undefined ? undefined : unpackRecord<Deployment>(id, entry, this.#values);
  }

  has(id: string): boolean {
    return this.#byId.has(id);
  }

  get size(): number {
    return this.#byId.size;
  }

  /** The ids held, as a list (safe to delete from while going through it). */
  ids(): string[] {
    return [...this.#byId.keys()];
  }

  idsNamed(name: string): readonly string[] {
    return [...itemsOf(this.#byName.get(name))];
  }

  /**
   * Holds `deployment`. An entry whose text did not change keeps the string it has, and its
   * shape array unless the table gave another (it started again): a resync listing that finds
   * 10,000 deployments unchanged then leaves the old generation of the heap as it was, instead
   * of replacing 10,000 long-lived strings.
   */
  put(deployment: Deployment): void {
    const { id } = deployment;
    const packed = packRecord(deployment, this.#shapes, this.#values);
    const { name } = packed;
    const held = this.#byId.get(id);
    if (held?.name === name) {
      if (held.text !== packed.text) held.text = packed.text;
      if (held.keys !== packed.keys) held.keys = packed.keys;
      return;
    }
    if (held) this.#unindex(id, held.name);
    this.#byId.set(id, packed);
    this.#byName.set(name, addItem(this.#byName.get(name), id));
  }

  delete(id: string): void {
    const entry = this.#byId.get(id);
    if (!entry) return;
    this.#byId.delete(id);
    this.#unindex(id, entry.name);
  }

  #unindex(id: string, name: string): void {
    const rest = removeItem(this.#byName.get(name), id);
    if (rest === undefined) this.#byName.delete(name);
    else this.#byName.set(name, rest);
  }
}

/**
 * A listing's unreadable items by id and by name, at most {@link UNREADABLE_KEPT} of them; the
 * names of the rest go to the listing's filter of names not held (the count of all is the client's
 * metric). `unnamed` when one had no name (it could be any name's).
 */
class Unreadable {
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

/**
 * Characters of a failed listing's detail kept until the next listing: several times what a
 * condition shows (4,096), so a value near its start is still found whole by redaction.
 */
const KEPT_DETAIL_CHARS = 16_384;

/** Writes whose answered latest revision {@link RemoteSnapshot.ownLatest} holds (the newest). */
const OWN_LATEST_HELD = 512;

/** Deployments held per name: two already say the name is ambiguous (see {@link RemoteSnapshot.byName}). */
const MAX_HELD_PER_NAME = 2;

/**
 * Resync periods without a whole listing after one failed (its deadline, a 5xx), by the failures
 * in a row; the last one stays.
 */
const WHOLE_RETRY_PERIODS = [1, 2, 4, 8] as const;

/** How long the count of resources waiting for a lookup by name is reused between reads. */
const WAITING_MEMO_MS = 1_000;

/** The first listing's guess of names not held; the next ones go by the last count. */
const FIRST_LISTING_UNHELD = 1024;
