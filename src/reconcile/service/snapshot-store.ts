/**
 * What a connection's snapshot holds of the service's deployments, and its answers from them: by
 * id and by exact name, kept up to date with this operator's own writes and the reconciles'
 * lookups, and how its last listing ended ({@link SnapshotStore.listingFailure}, which every
 * reconcile through the connection asks first). The snapshot of `snapshot.ts` is this store with
 * the reading of the service (`snapshot-reader.ts`) that fills it, a read at a time
 * ({@link SnapshotStore.beginRead}): what a reconcile reads and writes of the snapshot is here,
 * what a pass does to fill it is there.
 */

import type { Clock } from "../../runtime/clock.ts";
import {
  addItem,
  itemsOf,
  type OneOrMany,
  type PackedRecord,
  packRecord,
  removeItem,
  Shapes,
  SharedValues,
  unpackRecord,
} from "../../runtime/compact.ts";
import { NameFilter } from "../../runtime/name-filter.ts";
import type { Deployment } from "../service-types.ts";
import { entryAnswers, type ListingState, listedWithin, listingAnswers } from "./freshness.ts";
import { UnreadableDeploymentError, unreadableMessage } from "./lookup-errors.ts";
import { type ListingRead, Unreadable } from "./snapshot-reader.ts";

/**
 * Why the connection's last listing does not answer for the service: it missed its deadline
 * (`deadline`), or failed before it (`failed`, with the error it failed with). `deadlineMs` is
 * the deadline it ran under.
 */
export type ListingFailure =
  | { kind: "deadline"; deadlineMs: number }
  | { kind: "failed"; deadlineMs: number; error: unknown };

/** A read of the service under way: see {@link SnapshotStore.beginRead}. */
export interface ReadUnderWay {
  /** Holds a deployment the read showed, unless a write answered since the read started. */
  hold: (d: Deployment) => void;
  /** Takes what the read left for the snapshot's, and drops the entries it did not hold. */
  end: (read: ListingRead) => void;
}

/**
 * A listing of all deployments taken at one instant, indexed by id and by exact name, and kept
 * up to date with this operator's own writes. Entries are held as JSON text: a tenant's whole
 * listing then costs about its size on the wire, not the several times more of parsed objects.
 */
export class SnapshotStore {
  readonly #clock: Clock;
  readonly #maxAgeMs: number;
  /**
   * Whether the last read was a whole listing, which may say that a name is free: always
   * unsharded; sharded, when the last read listed the whole connection.
   */
  #named: boolean;
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
  /** Why the last listing that ended did not answer; undefined once one succeeded. */
  #failure: ListingFailure | undefined;

  constructor(clock: Clock, maxAgeMs: number, named: boolean) {
    this.#clock = clock;
    this.#maxAgeMs = maxAgeMs;
    this.#named = named;
  }

  /** True when the last listing that succeeded started less than `ms` ago (see freshness.ts). */
  listedWithin(ms: number): boolean {
    return listedWithin(this.#takenAt, this.#clock.now(), ms);
  }

  /** The bookkeeping the listing's freshness is decided on (see freshness.ts). */
  #listingState(): ListingState {
    return { takenAt: this.#takenAt, holds: this.#holds, maxAgeMs: this.#maxAgeMs };
  }

  /**
   * Starts a read of the service into the snapshot: each item it holds replaces its entry
   * ({@link ReadUnderWay.hold}), and its end ({@link ReadUnderWay.end}) drops what it did not.
   */
  protected beginRead(): ReadUnderWay {
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
    const end = (read: ListingRead) => {
      this.#named = read.named;
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
    };
    return { hold, end };
  }

  /**
   * Why the last listing that ended (not given up by its callers) did not answer for the
   * service: missed its deadline or failed. Undefined once a listing succeeded, and before any
   * ended. While it is set, the connection's calls may hang as its listing did: its resources
   * make none (see the reconciler's listing guard, `observe.ts`).
   */
  listingFailure(): ListingFailure | undefined {
    return this.#failure;
  }

  /** Records how the last listing ended: `undefined` when it answered. */
  protected listingEnded(failure: ListingFailure | undefined): void {
    this.#failure = failure;
  }

  /** This snapshot's clock, for what its subclass times itself. */
  protected get clock(): Clock {
    return this.#clock;
  }

  /** How many names the next whole listing's filter of names not held is sized for. */
  protected get expectUnheld(): number {
    return this.#expectUnheld;
  }

  /** True while the last read was a whole listing (see `#named`) and answers (see {@link isFresh}). */
  protected answersNames(): boolean {
    return this.#named && this.isFresh();
  }

  /** True when the snapshot holds an entry for `id` (from a read or a write). */
  protected holds(id: string): boolean {
    return this.#entries.has(id);
  }

  /** True when the poller read `id` and no reconcile has taken that read yet. */
  protected pollUntaken(id: string): boolean {
    return this.#polled.has(id);
  }

  /** Records what the poller read of a deployment, for the next reconcile that reads it. */
  protected observedByPoll(deployment: Deployment): void {
    this.observed(deployment);
    this.#polled.add(deployment.id);
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
   * (`RemoteSnapshotOptions.share`) says only while its last read was the whole listing:
   * a read of ids shows no names, so every lookup by name (adoption, the check before a create)
   * then asks the service (see `RemoteSnapshot.byNameOrWholeListing`). A name a whole listing did
   * not show is free, sharded or not, for a resource that arrived since (a move) too: a create its
   * earlier owner may have made is recorded on it first (its intent, which makes the lookup ask
   * the service), its rivals move with it, and any other create since makes the POST answer 409,
   * whose retry adopts what the name holds.
   * Throws {@link UnreadableDeploymentError} when an unreadable item carries this name.
   */
  byName(name: string): Deployment[] | undefined {
    if (!this.#named || !this.isFresh()) return undefined;
    const problem = this.#unreadable.byName.get(name);
    if (problem !== undefined) throw new UnreadableDeploymentError(unreadableMessage(name, problem));
    if (this.#unheld.has(name)) return undefined;
    const ids = this.#entries.idsNamed(name);
    if (ids.length === 0 && this.#unreadable.unnamed) return undefined;
    return ids.flatMap((id) => this.#entries.read(id) ?? []);
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

/** Writes whose answered latest revision {@link SnapshotStore.ownLatest} holds (the newest). */
const OWN_LATEST_HELD = 512;

/** The first listing's guess of names not held; the next ones go by the last count. */
const FIRST_LISTING_UNHELD = 1024;
