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
 * read of the share by id in the same pass. Of a name it showed but did not hold (its resource
 * reached the replica while it was read), it keeps the id it showed (`listed-ids.ts`), which the
 * lookup reads with the other lookups by id before asking the name ({@link byListedId}).
 */

import { withDetailCut } from "../../api/errors.ts";
import type { Clock } from "../../runtime/clock.ts";
import { SharedCall } from "../../runtime/shared-call.ts";
import type { DeploymentListings, DeploymentLookups, ReadAhead } from "../ports.ts";
import type { Deployment } from "../service-types.ts";
import { idBatches, type POLL_BATCH } from "./deployments-port.ts";
import { NO_LISTED_IDS } from "./listed-ids.ts";
import { UnreadableDeploymentError, unreadableMessage } from "./lookup-errors.ts";
import { ListingDeadlineError, SnapshotReader } from "./snapshot-reader.ts";
import { SnapshotStore } from "./snapshot-store.ts";

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
 * The snapshot of a connection: what it holds ({@link SnapshotStore}, `snapshot-store.ts`) and
 * the reads of the service that fill it ({@link SnapshotReader}, `snapshot-reader.ts`), one
 * listing at a time, shared by its callers.
 */
export class RemoteSnapshot extends SnapshotStore {
  readonly #port: DeploymentListings;
  readonly #reader: SnapshotReader;
  readonly #deadlineMs: number;
  readonly #listing: SharedCall<void>;
  readonly #share: (() => Iterable<string>) | undefined;
  /** The walk of the share {@link readAhead} takes its ids from, where it stands and when it began. */
  #ahead: { ids: Iterator<string>; at: number } = { ids: NO_IDS, at: Number.NEGATIVE_INFINITY };
  /** Sharded: the ids the last whole listing showed, by name (`listed-ids.ts`); none after a read by id. */
  #listed = NO_LISTED_IDS;

  constructor(port: DeploymentListings, clock: Clock, options: RemoteSnapshotOptions) {
    super(clock, options.maxAgeMs, options.share === undefined);
    this.#port = port;
    this.#share = options.share;
    this.#deadlineMs = options.listingDeadlineMs ?? Number.POSITIVE_INFINITY;
    this.#reader = new SnapshotReader(port, clock, {
      maxAgeMs: options.maxAgeMs,
      deadlineMs: this.#deadlineMs,
      wanted: options.wanted ?? (() => true),
      share: options.share,
      unrecorded: options.unrecorded ?? (() => []),
    });
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

  async #list(signal: AbortSignal): Promise<void> {
    const deadlineMs = this.#deadlineMs;
    try {
      await this.#listUnder(signal);
      if (!signal.aborted) this.listingEnded(undefined);
    } catch (error) {
      // Given up by every caller (a shutdown, a lost leadership): that says nothing of the service.
      if (signal.aborted) throw error;
      this.listingEnded(
        error instanceof ListingDeadlineError
          ? { kind: "deadline", deadlineMs }
          : { kind: "failed", deadlineMs, error: withDetailCut(error, KEPT_DETAIL_CHARS) },
      );
      throw error;
    }
  }

  async #listUnder(signal: AbortSignal): Promise<void> {
    const read = this.beginRead();
    const done = await this.#reader.read(signal, read.hold, this.expectUnheld);
    if (signal.aborted) return;
    read.end(done);
    this.#listed = done.listed;
  }

  /**
   * Sharded: the id the last whole listing showed under `name`, while that listing answers names
   * and showed one id under it (see `listed-ids.ts`). Only what {@link byListedId} reads: never an
   * answer of its own, never that a name is free.
   */
  listedId(name: string): string | undefined {
    return this.answersNames() ? this.#listed.idOf(name) : undefined;
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
   * Whether a lookup by name should wait for a whole listing rather than ask the service: sharded,
   * the last read was of the share by id (or is too old), no whole listing failed lately, and
   * more of the replica's resources wait for a lookup by name than the whole listing has pages
   * (as far as known).
   */
  #wholeListingPays(): boolean {
    if (!this.#reader.sharded || this.listingFailure() !== undefined) return false;
    if (this.answersNames()) return false;
    return this.#reader.wholeListingPays();
  }

  /**
   * Sharded: what lookups by id with room in their call read ahead (`deployments-port.ts`): the share's
   * ids this snapshot holds no entry for, the share gone through once and then not again for
   * {@link AHEAD_WALK_MS} (a share inherited or released to the replica is read in full calls
   * instead of a call per few reconciles; a settled share costs a walk at most that often). What
   * comes is held as a poll's read is, for the next reconcile. Undefined unsharded: a whole
   * listing holds every deployment asked about.
   */
  readAhead(): ReadAhead | undefined {
    const share = this.#share;
    if (share === undefined) return undefined;
    return {
      ids: (room, asked) => {
        const now = this.clock.now();
        let walk = this.#ahead;
        const ids: string[] = [];
        for (;;) {
          for (let next = walk.ids.next(); !next.done; next = walk.ids.next()) {
            const id = next.value;
            if (!this.holds(id) && !asked.has(id) && ids.push(id) >= room) return ids;
          }
          // Gone through: the share's list is let go (once: a later call finds it let go).
          if (walk.ids !== NO_IDS) this.#ahead = { ids: NO_IDS, at: walk.at };
          if (now - walk.at < AHEAD_WALK_MS) return ids;
          walk = this.#ahead = { ids: share()[Symbol.iterator](), at: now };
        }
      },
      found: (deployment) => this.observedByPoll(deployment),
    };
  }

  /**
   * Re-reads the deployments `ids` from the service, {@link POLL_BATCH} per call, and records
   * them. An id polled before whose read no reconcile has taken yet is skipped: when reconciles
   * queue up (thousands of creates at once), polling their deployments again every period would
   * spend the rate limit on reads nobody takes, and slow down the queue further. An id the
   * service did not return is left as it was: a listing may lag behind a create.
   */
  async poll(ids: readonly string[], signal: AbortSignal): Promise<void> {
    const due = ids.filter((id) => !this.pollUntaken(id));
    for (const batch of idBatches(due)) {
      const asked = new Set(batch);
      const found = await this.#port.getByIds(batch, signal);
      for (const deployment of found) {
        if (!asked.delete(deployment.id)) continue;
        this.observedByPoll(deployment);
      }
    }
  }
}

/**
 * The service's deployments named `name`, asked live and remembered in the snapshot. An item of
 * the listing the operator cannot read that may be this name's (its name, or no name at all)
 * stops the lookup: answering "none" would let the reconcile create a duplicate.
 */
export async function lookUpName(
  service: Pick<DeploymentLookups, "findByName">,
  snapshot: RemoteSnapshot,
  name: string,
  signal: AbortSignal,
): Promise<Deployment[]> {
  const { deployments, unreadable } = await service.findByName(name, signal);
  const hidden = unreadable.find((item) => item.name === undefined || item.name === name);
  if (hidden) throw new UnreadableDeploymentError(unreadableMessage(name, hidden.message));
  for (const deployment of deployments) snapshot.observed(deployment);
  return deployments;
}

/**
 * The deployment named `name` read through the id the snapshot's whole listing showed under it
 * (one lookup by id, which `IdBatches` sends with the others waiting), when the service answers
 * with exactly that name; undefined otherwise (not in the index, gone, another name, unreadable):
 * the caller then asks the service by name.
 */
export async function byListedId(
  service: Pick<DeploymentLookups, "getById">,
  snapshot: RemoteSnapshot,
  name: string,
  signal: AbortSignal,
): Promise<Deployment[] | undefined> {
  const id = snapshot.listedId(name);
  if (id === undefined) return undefined;
  const found = await service.getById(id, signal).catch((error: unknown) => {
    // The lookup by name says what the name holds, and whether the unreadable item is its.
    if (error instanceof UnreadableDeploymentError) return undefined;
    throw error;
  });
  if (found?.name !== name) return undefined;
  snapshot.observed(found);
  return [found];
}

/** How often at most a snapshot's read-ahead goes through its share again (see `RemoteSnapshot.readAhead`). */
export const AHEAD_WALK_MS = 5_000;

const NO_IDS: Iterator<string> = { next: () => ({ done: true, value: undefined }) };

/**
 * Characters of a failed listing's detail kept until the next listing: several times what a
 * condition shows (4,096), so a value near its start is still found whole by redaction.
 */
const KEPT_DETAIL_CHARS = 16_384;
