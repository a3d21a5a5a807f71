/**
 * A replica's side of an inherited share (`inheritance.ts`): from the ring's Lease watch, which
 * dead replicas' Leases are held by a sharder with a ring naming this replica (or naming a replica
 * that died since, whose own Lease's ring names this one: a chain of heirs), and for each one a
 * second watch of its resources (the `inherit` port), kept while the Lease stays so.
 */
import type { Logger } from "pino";
import { Backoff } from "../runtime/backoff.ts";
import type { CancelTimer, Clock } from "../runtime/clock.ts";
import { encodeInheritance, heirOf, type Inheritance, lastHeir, sameInheritance } from "./inheritance.ts";
import { isReplicaName, SHARDER_HOLDER_PREFIX } from "./labels.ts";
import { heldByReplica, type RingLease, recordKey } from "./membership.ts";
import { podOfIdentity } from "./release.ts";

/**
 * Adds a dead replica's resources that the ring on its Lease gives this replica to its cache (or a
 * live one's, released to it as it joined).
 */
export type InheritPort = (
  owner: string,
  mine: (claim: string) => boolean,
  signal: AbortSignal,
  /** Called once the watch's list is complete (the cache holds what it keeps). */
  listed?: () => void,
) => Promise<void>;

/** The ring `lease` carries while a sharder holds it (taken after it expired: its replica cannot write). */
export function heldRecord(lease: RingLease): Inheritance | undefined {
  const ring = lease.inheritance;
  return ring !== undefined && lease.record.holderIdentity.startsWith(SHARDER_HOLDER_PREFIX)
    ? ring
    : undefined;
}

/**
 * The records by which `self` inherits from the dead replica `owner`, given every held Lease's
 * record (`records`, by Lease name): `owner`'s, and those of its heirs that died since, and theirs
 * (every record a chain of heirs from `owner` may pass through: `lastHeir`), when one of them names
 * `self` among its members. Undefined otherwise (`self` is no heir of `owner`'s resources).
 */
export function inheritanceChain(
  self: string,
  owner: string,
  records: ReadonlyMap<string, Inheritance>,
): Map<string, Inheritance> | undefined {
  const first = records.get(owner);
  if (owner === self || first === undefined) return undefined;
  const chain = new Map([[owner, first]]);
  let named = false;
  const rings = [first];
  // Each record once: as many steps as there are held Leases at most.
  for (const ring of rings)
    for (const member of ring.members) {
      if (member === self) named = true;
      const next = records.get(member);
      if (next !== undefined && !chain.has(member)) {
        chain.set(member, next);
        rings.push(next);
      }
    }
  return named ? chain : undefined;
}

/**
 * How long a replica's Lease may go unrenewed (by this process's clock) before its survivors list
 * its share ahead of a take: two and a half renewals, and a third of the Lease at least — 5 s
 * with the defaults (15 s, renewed every 2 s), some 10 s before a sharder may take it.
 */
export function silenceMs(leaseDurationMs: number, retryPeriodMs: number): number {
  return Math.max(2.5 * retryPeriodMs, leaseDurationMs / 3);
}

/** What the key of a watch by a release starts with (a chain's key never does). */
const RELEASED_KEY = "released ";

/** A chain's records as one string (two chains are the same when these are). */
function chainKey(chain: ReadonlyMap<string, Inheritance>): string {
  return [...chain]
    .map(([name, ring]) => `${name}=${encodeInheritance(ring)}`)
    .sort()
    .join(" ");
}

/**
 * The ring by which `lease`, a live replica's own (or released by it), releases a joined share to
 * the process `identity` (see `release.ts`); undefined when it releases nothing to it.
 */
export function releaseFor(lease: RingLease, identity: string): Inheritance | undefined {
  const release = lease.released;
  const holder = lease.record.holderIdentity;
  if (release === undefined || release.identity !== identity) return undefined;
  return holder === "" || (heldByReplica(lease) && podOfIdentity(holder) === lease.name)
    ? release.ring
    : undefined;
}

/**
 * Runs (and stops) one inherited watch per held Lease that gives `self` a share, directly or
 * through a chain of heirs (`inheritanceChain`), and per live replica's Lease that releases a
 * joined share to this process (`release.ts`). `inherit` runs the watch of `owner`'s resources,
 * keeping those whose claim `mine` accepts, until its signal aborts. A watch whose chain changes
 * (an heir on it died and its Lease was taken) starts again, keeping by the new chain; a release
 * that becomes a held record (its owner died) starts again by the record.
 */
export class Heirs {
  readonly #self: string;
  readonly #seed: () => Uint8Array | undefined;
  readonly #inherit: InheritPort;
  readonly #logger: Logger;
  /** Every held Lease's record, by Lease name. */
  readonly #records = new Map<string, Inheritance>();
  /** This process's identity: a live replica's release names it (`release.ts`). */
  readonly #identity: string | undefined;
  /** The rings by which live replicas release a joined share to this process, by Lease name. */
  readonly #releases = new Map<string, Inheritance>();
  readonly #running = new Map<string, { key: string; stop: AbortController }>();
  /** The live replicas whose released share is listed here (see {@link holding}). */
  readonly #holding = new Set<string>();
  readonly #early: EarlyListing | undefined;
  /** Each other replica's Lease while a replica holds it: its last renewal seen, and its silence's timer or listing. */
  readonly #renewals = new Map<string, Renewals>();
  /** This replica's own Lease: its last record, and when this process saw it change. */
  #own: { key: string; at: number } | undefined;

  constructor(o: {
    self: string;
    /** The ring's key (the install key), read before the replica joins. */
    seed: () => Uint8Array | undefined;
    inherit: InheritPort;
    /** Lists a silent replica's share ahead of a take (see {@link EarlyListing}); none: at the take. */
    early?: EarlyListing | undefined;
    /** This process's identity (its Lease's holder): releases to it are taken up. None: none is. */
    identity?: string | undefined;
    logger: Logger;
  }) {
    this.#self = o.self;
    this.#identity = o.identity;
    this.#seed = o.seed;
    this.#inherit = o.inherit;
    this.#early = o.early;
    this.#logger = o.logger;
  }

  /** The dead replicas whose share this replica inherits now. */
  get owners(): string[] {
    return [...this.#running.keys()];
  }

  /**
   * The live replicas whose share, released to this one as it joined, it has listed: written on
   * its Lease, they label those resources for it from then on (`release.ts`).
   */
  holding(): string[] {
    return [...this.#holding];
  }

  /** The Lease `name` is now `lease` (undefined: deleted): starts, keeps or stops the watches. */
  update(name: string, lease: RingLease | undefined, signal: AbortSignal): void {
    this.#heard(name, lease, signal);
    const ring = lease ? heldRecord(lease) : undefined;
    const released =
      lease && this.#identity !== undefined && name !== this.#self
        ? releaseFor(lease, this.#identity)
        : undefined;
    // A renewal, or a new holder of the same hold: no record changed, nor any chain.
    if (
      sameInheritance(this.#records.get(name), ring) &&
      sameInheritance(this.#releases.get(name), released) &&
      !signal.aborted
    )
      return;
    if (ring === undefined) this.#records.delete(name);
    else this.#records.set(name, ring);
    if (released === undefined) this.#releases.delete(name);
    else this.#releases.set(name, released);
    for (const [owner, running] of this.#running) {
      const wanted = this.#wanted(owner);
      if (wanted !== undefined && wanted.key === running.key && !signal.aborted) continue;
      running.stop.abort();
      this.#running.delete(owner);
      this.#holding.delete(owner);
      this.#logger.info(
        { from: owner },
        wanted === undefined
          ? "no longer inheriting a share: its Lease was deleted or let go, or its release ended"
          : running.key.startsWith(RELEASED_KEY) && wanted.chain !== undefined
            ? "inheriting a share again: the replica releasing it died and its Lease was taken"
            : "inheriting a share again: an heir of it died and its Lease was taken",
      );
    }
    if (signal.aborted) return;
    for (const owner of new Set([...this.#records.keys(), ...this.#releases.keys()])) {
      if (this.#running.has(owner)) continue;
      const wanted = this.#wanted(owner);
      if (wanted !== undefined) this.#start(owner, wanted, signal);
    }
    // Taken, and its record gives this replica nothing (or there is none): the early list goes.
    const early = this.#renewals.get(name);
    if (early !== undefined && lease !== undefined && !heldByReplica(lease) && !this.#running.has(name)) {
      early.listing?.abort();
      this.#renewals.delete(name);
    }
  }

  /**
   * Follows the renewals of another replica's Lease: silent for the early listing's `silenceMs`,
   * its share is listed ahead of a take; renewed, released or deleted, that listing stops. A take
   * keeps it for the record that comes with it: the inherited watch then adopts it.
   */
  #heard(name: string, lease: RingLease | undefined, signal: AbortSignal): void {
    const early = this.#early;
    if (early === undefined || !isReplicaName(name)) return;
    if (name === this.#self) {
      // Its own renewals only (a sharder's take of its Lease is none).
      const key = lease && heldByReplica(lease) ? recordKey(lease.record) : undefined;
      if (key === undefined || key === this.#own?.key) return;
      this.#own = { key, at: early.clock.now() };
      // Its own renewal seen: the silences noticed while it was itself unrenewed, or behind another listing.
      for (const [other, entry] of this.#renewals) if (entry.due) this.#listEarly(other, entry, signal);
      return;
    }
    const seen = this.#renewals.get(name);
    if (lease !== undefined && !heldByReplica(lease) && lease.record.holderIdentity !== "") {
      // Taken: with a record, `update` next starts (adopting the list) or ends it; without, it ends.
      // Either way no listing starts any more.
      seen?.cancel();
      if (seen) seen.due = false;
      if (heldRecord(lease) !== undefined) return;
      seen?.listing?.abort();
      this.#renewals.delete(name);
      return;
    }
    const key = lease ? recordKey(lease.record) : undefined;
    if (seen !== undefined && seen.key === key) return;
    seen?.cancel();
    // Adopted by the inherited watch of `name`, the listing is that watch's now: nothing to say.
    if (seen?.listing && !this.#running.has(name))
      this.#logger.info(
        { from: name },
        "a silent replica's Lease was renewed or let go: its share's early listing stops",
      );
    seen?.listing?.abort();
    this.#renewals.delete(name);
    if (key === undefined || lease?.record.holderIdentity === "" || signal.aborted) return;
    const entry: Renewals = { key, due: false, cancel: () => {} };
    entry.cancel = early.clock.setTimer(early.silenceMs, () => {
      entry.due = true;
      this.#listEarly(name, entry, signal);
    });
    this.#renewals.set(name, entry);
  }

  /**
   * Lists the share of `name`, silent for the early listing's `silenceMs`, if this replica's own
   * Lease was seen renewed within that time (else the silence is as likely the API server's or
   * the watch's as the replica's: its own renewal seen retries it) and no other silent share is
   * being listed (one at a time: one share's objects held beside its own, whatever happens).
   */
  #listEarly(name: string, entry: Renewals, signal: AbortSignal): void {
    const early = this.#early;
    if (early === undefined || signal.aborted || this.#renewals.get(name) !== entry || entry.listing) return;
    const own = this.#own;
    if (own === undefined || early.clock.now() - own.at >= early.silenceMs) return;
    for (const [other, e] of this.#renewals) if (e.listing !== undefined && !this.#running.has(other)) return;
    entry.due = false;
    entry.listing = new AbortController();
    this.#logger.info(
      { from: name, silentMs: early.silenceMs },
      "a replica has not renewed its Lease: listing its share ahead of a take",
    );
    early.list(name, AbortSignal.any([signal, entry.listing.signal]));
  }

  /**
   * What this replica inherits from `owner` now: by the chain of held records from it, else by
   * the ring of its release to this process; undefined: nothing.
   */
  #wanted(
    owner: string,
  ): { key: string; chain?: ReadonlyMap<string, Inheritance>; released?: Inheritance } | undefined {
    const chain = inheritanceChain(this.#self, owner, this.#records);
    if (chain !== undefined) return { key: chainKey(chain), chain };
    const released = this.#releases.get(owner);
    return released === undefined
      ? undefined
      : { key: `${RELEASED_KEY}${encodeInheritance(released)}`, released };
  }

  #start(
    owner: string,
    wanted: { key: string; chain?: ReadonlyMap<string, Inheritance>; released?: Inheritance },
    signal: AbortSignal,
  ): void {
    const stop = new AbortController();
    this.#running.set(owner, { key: wanted.key, stop });
    const seed = this.#seed();
    const self = this.#self;
    const { chain, released } = wanted;
    let heir: (claim: string) => string | undefined;
    if (chain !== undefined) {
      this.#logger.info({ from: owner, through: [...chain.keys()] }, "inheriting a dead replica's share");
      heir = (claim) =>
        lastHeir(owner, (member) => {
          const ring = chain.get(member);
          return ring === undefined ? undefined : heirOf(claim, ring, seed);
        });
    } else if (released !== undefined) {
      this.#logger.info(
        { from: owner },
        "taking up the share a live replica released to this one as it joined",
      );
      heir = (claim) => heirOf(claim, released, seed);
    } else return;
    const current = () => this.#running.get(owner)?.stop === stop;
    // Listed: a released share's owner may label it for this replica now (a dead one's, the sharder).
    const listed = () => {
      if (released !== undefined && current() && !stop.signal.aborted) this.#holding.add(owner);
    };
    void this.#inherit(owner, (claim) => heir(claim) === self, AbortSignal.any([signal, stop.signal]), listed)
      .catch((err: unknown) => this.#logger.warn({ err, from: owner }, "an inherited watch failed"))
      .finally(() => {
        if (!current()) return;
        this.#running.delete(owner);
        this.#holding.delete(owner);
      });
  }

  /** Stops every inherited watch, and every early listing. */
  close(): void {
    for (const { stop } of this.#running.values()) stop.abort();
    this.#running.clear();
    this.#holding.clear();
    for (const { cancel, listing } of this.#renewals.values()) {
      cancel();
      listing?.abort();
    }
    this.#renewals.clear();
  }
}

/**
 * A survivor's listing of a silent replica's share ahead of a take: `list` watches the resources
 * of `owner` (all of them, shown to no reader) until its signal aborts or the inherited watch of
 * `owner` adopts it. Nothing is reconciled before the record of a take names this replica: the
 * list is only ready sooner (the take waits for the Lease to expire; the list needs that time).
 */
export interface EarlyListing {
  list(owner: string, signal: AbortSignal): void;
  /** See {@link silenceMs}. */
  silenceMs: number;
  clock: Pick<Clock, "now" | "setTimer">;
}

/** Another replica's Lease as {@link Heirs} follows it (see `#heard`). */
interface Renewals {
  /** Its last record, as membership keys it (`recordKey`): a renewal, release or take changes it. */
  key: string;
  cancel: CancelTimer;
  /** Silent for `silenceMs`, its listing waits for this replica's own renewal or another listing's end. */
  due: boolean;
  listing?: AbortController;
}

/** The retries of {@link readSeedForHeirs}: 1 s doubling to 30 s, jittered. */
export const SEED_RETRY = new Backoff({ baseMs: 1_000, maxMs: 30_000 });

/**
 * The ring's key for the inherited watches, read again after each failure ({@link SEED_RETRY})
 * until it is had; undefined once `signal` aborts. Each failure is logged at warn: meanwhile the
 * replica inherits nothing, though records may name it as an heir (its share then waits for the
 * sharder's labels).
 */
export async function readSeedForHeirs(
  seed: (signal: AbortSignal) => Promise<Uint8Array>,
  signal: AbortSignal,
  clock: Pick<Clock, "sleep">,
  logger: Logger,
  backoff: Backoff = SEED_RETRY,
): Promise<Uint8Array | undefined> {
  for (let attempt = 0; !signal.aborted; attempt += 1) {
    try {
      return await seed(signal);
    } catch (err) {
      if (signal.aborted) return undefined;
      const retryMs = backoff.delayMs(attempt);
      logger.warn(
        { err, failures: attempt + 1, retryMs },
        "could not read the ring's key: inheriting no dead replica's share until it is read (records may name this replica as an heir; its share waits for the sharder's labels meanwhile)",
      );
      await clock.sleep(retryMs, signal).catch(() => undefined);
    }
  }
  return undefined;
}
