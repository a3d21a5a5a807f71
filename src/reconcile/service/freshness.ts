/**
 * Every rule of "may I trust this read" of what the service said, in one place.
 *
 * The service has no watch: what the operator knows of it comes from a pass's listing, from the
 * rollout poller's reads, and from its own writes' answers, each of a different age. Which of
 * them may answer a reconcile's lookup is decided here, and only here:
 *
 * - {@link listingAnswers}: the connection's listing answers for the service while a pass holds
 *   it, or while it is younger than its maximum age;
 * - {@link entryAnswers}: one entry, read by id, answers when the listing does, or (a rollout
 *   being polled) when the service answered for it recently enough, or when the poller read it
 *   for this reconcile (taken explicitly, see `RemoteSnapshot.takePollAnswer`);
 * - `lookupTarget` (in `observe.ts`, beside the lookup it steers): what a reconcile asks the
 *   service about live, and how recent an entry it takes, from the resource's status and
 *   annotations;
 * - {@link startPass}: how a pass of the periodic resync starts its connection's listing (taking a
 *   new one unless one was just taken) and holds it until its next pass's listing is in hand.
 *
 * A sharded replica's listing is the read of its share by id (`RemoteSnapshotOptions.share` in
 * snapshot.ts): the same rules hold for it, its deadline and failure included; only a lookup by
 * name is never answered from it (a read by id cannot say that a name is free), unless the read
 * was the whole listing, taken while many of the replica's resources wait for their creates.
 *
 * The functions are pure over the bookkeeping they are given and a clock reading (`now`, ms
 * since the epoch): the snapshot keeps the bookkeeping, this module decides.
 */

/** What the connection's listing's freshness depends on (kept by the snapshot). */
export interface ListingState {
  /** When the last listing that succeeded started (ms); -Infinity before any. */
  takenAt: number;
  /** Passes holding the listing now. */
  holds: number;
  /** How long a listing answers when nothing holds it. */
  maxAgeMs: number;
}

/** True while the connection's last listing may answer for the service. */
export function listingAnswers(listing: ListingState, now: number): boolean {
  return listing.holds > 0 || now - listing.takenAt <= listing.maxAgeMs;
}

/** True when the last listing that succeeded started less than `ms` before `now`. */
export function listedWithin(takenAt: number, now: number, ms: number): boolean {
  return now - takenAt < ms;
}

/** What one entry's freshness depends on, besides its listing's. */
export interface EntryState {
  /** The poller read the entry and no reconcile took that read yet. */
  pollUntaken: boolean;
  /** When the service last answered for the entry (a write, a lookup, a poll); undefined: the listing's time. */
  seenAt: number | undefined;
}

/**
 * Whether the snapshot's entry may answer a lookup by id. An untaken poll read answers whatever
 * its age: it was read for the next reconcile, however long the queue held its key. With
 * `withinMs` (a rollout being polled) only an entry the service answered in the last `withinMs`
 * will do; without it, the listing's freshness decides.
 */
export function entryAnswers(
  listing: ListingState,
  entry: EntryState,
  now: number,
  withinMs: number | undefined,
): boolean {
  if (entry.pollUntaken) return true;
  if (withinMs === undefined) return listingAnswers(listing, now);
  return now - (entry.seenAt ?? listing.takenAt) <= withinMs;
}

/** The connection's listing as a pass uses it (the snapshot of the connection). */
export interface PassListing {
  listedWithin(ms: number): boolean;
  refresh(signal: AbortSignal): Promise<void>;
  holdFresh(): () => void;
}

/**
 * Starts a pass's listing of one connection: lists again unless a listing started less than
 * `reuseMs` ago (a connection that has just become usable was listed by its check a moment
 * before), then holds it. Resolves with the release, which the resync calls once the
 * connection's next pass has its listing in hand (or failed, or the connection left). A failed
 * listing rejects: the resync logs it and passes the keys, whose reconciles report it.
 */
export async function startPass(
  listing: PassListing,
  reuseMs: number,
  signal: AbortSignal,
): Promise<() => void> {
  if (!listing.listedWithin(reuseMs)) await listing.refresh(signal);
  return listing.holdFresh();
}
