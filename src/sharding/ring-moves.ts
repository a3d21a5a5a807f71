/**
 * Moves by the ring, made by the owner. When the ring changes while every replica stays live (a
 * replica joins, the leader changes), each owner can tell by itself which of its resources the
 * ring now places elsewhere: it hands each one over (one label write, under a resourceVersion
 * precondition, once no reconcile of it runs), and the sharder writes no drain label first. A
 * move costs one write instead of two.
 *
 * Owners and the sharder agree through the replicas' own Leases: each replica writes on its Lease,
 * with every renewal, the ring it sees (`moving-by.ts`: the live members and the leader's replica,
 * whose share is smaller). An owner moves by a ring only while its own view and the leader's
 * Lease show that same ring, so it never hands a resource to a replica the sharder does not know;
 * the sharder leaves the move to an owner whose Lease shows the ring the sharder places by (or
 * whose view it changed less than a Lease duration ago), and writes the drain label as before for
 * any other (a replica of an older version, one that lags). A claim with rivals in the owner's
 * cache is left to the sharder's drain, which moves rivals together, oldest first. The owner's
 * cache reaches its moves through `follow-cache.ts`.
 *
 * Never two writers: the owner stops taking work for a resource it moves, waits for the reconcile
 * in flight and for its unanswered writes, then writes the new owner's label; the new owner
 * reconciles it once its watch shows that label. A hand-over whose answer did not say it failed
 * keeps the resource stopped while the owner's cache still shows the version it was written
 * against, whatever the ring does meanwhile.
 *
 * Never a younger rival alone: the sharder places a new resource by where the resources of its
 * claim are, as it last read them, and a label write it sent before it knew of the ring's change
 * may land after the owner handed the claim's older resource over; and a drain the sharder lifts
 * when the ring comes back may leave here a rival whose older one was let go already. So a
 * resource handed over or let go is remembered from the moment its write is sent, for
 * {@link HANDED_CLAIM_MS}: a younger resource of its claim here is held meanwhile, not reconciled,
 * until the older one is back here or the time is up (a rival's reconcile started while the write
 * was in flight would otherwise find itself alone and take the name). The sharder moves it to the
 * claim's replica meanwhile, as any rival (a drain without a name: let go, then placed after the
 * older one), or brings the older one back.
 */
import { type Inheritance, sameInheritance } from "./inheritance.ts";
import { joinedOne, type Release, ReleasedClaims } from "./release.ts";
import { ownerOf, ringShares } from "./ring.ts";

/**
 * How long a claim handed over is remembered (see the module comment): longer than a label write
 * the sharder sent before it saw the ring change can take to land (the API server's own request
 * timeout is a minute).
 */
export const HANDED_CLAIM_MS = 90_000;

/** What {@link RingMoves} reads of the replica's cache. */
export interface RingMovesCache {
  /** The keys of the resources labelled for this replica (its own share; not an inherited one). */
  ownKeys(): Iterable<string>;
  /** The claim of the cached resource `key`; undefined when it is not cached (or not its own). */
  claimOf(key: string): string | undefined;
  /** Whether the cached resource `key` carries the drain label (it follows that, not the ring). */
  drained(key: string): boolean;
  /** When the cached resource `key` was created, in whole seconds (`createdSeconds`): rivals hold a name oldest first. */
  created(key: string): number;
  /** Whether another cached resource claims what `key` claims. */
  hasRivals(key: string): boolean;
  /**
   * The keys of the cached resources labelled for another replica, reconciled here for it (a dead
   * replica's share inherited, or a live one's released to this replica).
   */
  othersKeys(): Iterable<string>;
  /** The claim of the cached resource `key`, whichever replica it is labelled for; undefined when not cached. */
  anyClaimOf(key: string): string | undefined;
}

/** Options of {@link RingMoves}. */
export interface RingMovesOptions {
  /** This replica's name. */
  self: string;
  /** The ring's key (the install key); undefined: unkeyed (tests). */
  seed(): Uint8Array | undefined;
  /** This process's clock, in milliseconds. */
  now(): number;
  /** Called for each key that starts or stops moving (the member acknowledges it when idle). */
  changed(key: string): void;
  /**
   * Called for each key that stops moving when the ring or a release changes (a move called off,
   * a release ended): its reconciles were turned away meanwhile, so it is queued again.
   */
  resumed?(key: string): void;
  /**
   * The process holding the Lease of the replica `replica` (undefined: none does, or a sharder):
   * a join's share is released to it whole (`release.ts`). None: every move is a hand-over.
   */
  identityOf?(replica: string): string | undefined;
}

/** One replica's moves by the ring (see the module comment). */
export class RingMoves {
  readonly #o: RingMovesOptions;
  #cache: RingMovesCache | undefined;
  /** The ring the owner moves by: its own view, while the leader's Lease shows the same. */
  #ring: Inheritance | undefined;
  /** The last ring moved by (a join is told from it). */
  #last: Inheritance | undefined;
  /**
   * The share released to a joined replica (`release.ts`), what it gives the heir, and since when
   * it is quiet (none of it may run here; undefined: not yet).
   */
  #release: { release: Release; claims: ReleasedClaims; quietAt: number | undefined } | undefined;
  /** The keys to hand over, each with its next owner. */
  #targets = new Map<string, string>();
  /** Keys handed over or let go (or tried without a failure answered): the resourceVersion written against, and the claim. */
  readonly #handed = new Map<string, { rv: string; claim: string | undefined }>();
  /**
   * Claims some resource of which was handed over or let go here: each such resource, when, and
   * how old it is (see {@link HANDED_CLAIM_MS}); claims in the order they were last let go.
   */
  readonly #handedClaims = new Map<string, Map<string, { at: number; created: number }>>();

  constructor(options: RingMovesOptions) {
    this.#o = options;
  }

  attach(cache: RingMovesCache): void {
    this.#cache = cache;
    this.#retarget();
  }

  /** The ring moved by now; undefined while none is agreed. */
  get ring(): Inheritance | undefined {
    return this.#ring;
  }

  /** Resources to hand over now. */
  get moving(): number {
    return this.#targets.size;
  }

  /**
   * The ring this replica's view and the leader's Lease agree on (undefined: they do not). A new
   * ring is applied to every resource of the share, once; the keys that start or stop moving are
   * reported to {@link RingMovesOptions.changed}.
   */
  agree(ring: Inheritance | undefined): void {
    if (sameInheritance(ring, this.#ring)) return;
    const joined = this.#release === undefined ? joinedOne(this.#last, ring) : undefined;
    this.#ring = ring;
    if (ring !== undefined) this.#last = ring;
    if (ring !== undefined && joined !== undefined && joined !== this.#o.self) this.#begin(joined, ring);
    this.#retarget();
  }

  /** Every resource of the share looked at again: the keys that start or stop moving are reported. */
  #retarget(): void {
    const before = this.#targets;
    this.#targets = new Map();
    const cache = this.#cache;
    if (cache !== undefined && (this.#ring !== undefined || this.#release !== undefined))
      for (const key of cache.ownKeys()) {
        const to = this.#choose(key, this.#ring, cache);
        if (to !== undefined) this.#targets.set(key, to);
      }
    for (const [key, to] of this.#targets) if (before.get(key) !== to) this.#o.changed(key);
    for (const key of before.keys())
      if (!this.#targets.has(key)) {
        this.#o.changed(key);
        this.#o.resumed?.(key);
      }
  }

  /**
   * A join's share released to `heir` (see `release.ts`), unless a hand-over is in transit or a
   * younger rival of a claim it would release is held here (its older resource left by a
   * hand-over: the heir must judge the whole claim, so the share moves by hand-overs instead).
   */
  #begin(heir: string, ring: Inheritance): void {
    const identity = this.#o.identityOf?.(heir);
    const cache = this.#cache;
    if (identity === undefined || cache === undefined || this.#handed.size > 0) return;
    const release = { heir, identity, ring };
    const claims = new ReleasedClaims(release, this.#o.seed);
    for (const key of cache.ownKeys()) {
      const claim = cache.claimOf(key);
      if (claim !== undefined && claims.gives(key, claim) && this.heldMs(key) > 0) return;
    }
    this.#release = { release, claims, quietAt: undefined };
  }

  /** The share released now (see `release.ts`), whether or not it is quiet yet. */
  get release(): Release | undefined {
    return this.#release?.release;
  }

  /**
   * Takes over the release this replica's Lease carried when the process started (it restarted
   * while releasing): its share is quiet (the process that released it ended), and stays stopped.
   */
  adopt(release: Release): void {
    if (this.#release !== undefined) return;
    this.#release = { release, claims: new ReleasedClaims(release, this.#o.seed), quietAt: this.#o.now() };
    this.#retarget();
  }

  /** The release can no longer be taken up (its heir's process cannot write): the share is reconciled here again. */
  end(): void {
    if (this.#release === undefined) return;
    // What it parked for another replica is reconciled here again: nothing else queues it.
    const parked = [...(this.#cache?.othersKeys() ?? [])].filter((key) => this.passesOn(key));
    this.#release = undefined;
    this.#retarget();
    for (const key of parked) this.#o.resumed?.(key);
  }

  /**
   * The release to write on this replica's Lease now, if any: once every released resource here is
   * `quiet` (no reconcile of it runs, none of its writes may still run at the service), and for as
   * long as one is labelled for this replica. Released here are also the resources reconciled
   * for another replica that the release's ring gives its heir ({@link passesOn}): they join this
   * replica's share by another's label write, and the heir reconciles each one the moment it does.
   * The release ends here once none of either is left. `busy` are the keys with a reconcile running or a
   * write that may still run: one the cache does not show (between two watches, or just deleted)
   * may be one of them, and is waited for too.
   */
  announce(quiet: (key: string) => boolean, busy: Iterable<string> = []): Release | undefined {
    const r = this.#release;
    const cache = this.#cache;
    if (r === undefined || cache === undefined) return r?.quietAt !== undefined ? r.release : undefined;
    let left = false;
    for (const key of cache.ownKeys()) {
      if (!this.#released(key, r.claims, cache)) continue;
      left = true;
      // Quiet already: one left here is enough to know.
      if (r.quietAt !== undefined) break;
      if (!quiet(key)) return undefined;
    }
    if (!left && r.quietAt !== undefined) {
      // Not while one reconciled here for another replica is left: its label for this one brings
      // it into the share, and the heir reconciles it by this release the moment that lands.
      for (const key of cache.othersKeys()) if (this.passesOn(key)) return r.release;
      this.#release = undefined;
      return undefined;
    }
    if (r.quietAt === undefined) {
      for (const key of cache.othersKeys()) if (this.passesOn(key) && !quiet(key)) return undefined;
      for (const key of busy) if (cache.anyClaimOf(key) === undefined) return undefined;
      r.quietAt = this.#o.now();
      // Their hand-overs (the labels, in the background) may be written from now on.
      for (const key of cache.ownKeys()) if (this.#released(key, r.claims, cache)) this.#o.changed(key);
    }
    return r.release;
  }

  /**
   * The release `key` is part of, and since when it is quiet (none: not yet; its label is written
   * only once it is, and the heir has listed it, `replica.ts`).
   */
  releasedTo(key: string): { release: Release; quietAt: number | undefined } | undefined {
    const r = this.#release;
    const cache = this.#cache;
    if (r === undefined || cache === undefined || !this.#released(key, r.claims, cache)) return undefined;
    return { release: r.release, quietAt: r.quietAt };
  }

  /**
   * Whether the cached resource `key`, labelled for another replica and reconciled here for it,
   * is one this replica's release gives its heir: not reconciled here while the release lasts (see
   * {@link announce}).
   */
  passesOn(key: string): boolean {
    const claims = this.#release?.claims;
    const claim = claims === undefined ? undefined : this.#cache?.anyClaimOf(key);
    return claims !== undefined && claim !== undefined && claims.gives(key, claim);
  }

  #released(key: string, claims: ReleasedClaims, cache: RingMovesCache): boolean {
    const claim = cache.claimOf(key);
    return claim !== undefined && claims.gives(key, claim);
  }

  /** The cached resource `key` was added or changed (its claim, its rivals, its labels). */
  refresh(key: string): void {
    const cache = this.#cache;
    // The resource handed over is back here (it left the cache, and came again): its claim is
    // judged here whole again, nothing of it held.
    const claim = this.#handedClaims.size > 0 ? cache?.claimOf(key) : undefined;
    if (claim !== undefined && !this.#handed.has(key)) this.#unremember(claim, key);
    const to = cache !== undefined ? this.#choose(key, this.#ring, cache) : undefined;
    if (to === undefined) this.#targets.delete(key);
    else this.#targets.set(key, to);
  }

  /** The resource `key` left the cache (one handed over: its label changed). */
  forget(key: string): void {
    this.#targets.delete(key);
    this.#handed.delete(key);
    this.#release?.claims.forget(key);
  }

  /** The next owner of `key` by the ring; undefined when it stays here. */
  target(key: string): string | undefined {
    return this.#targets.get(key);
  }

  /**
   * Whether `key`, cached at `resourceVersion`, is not to be reconciled here: the ring moves it,
   * or a hand-over was written against that very version (the cache has not shown its outcome).
   */
  stopped(key: string, resourceVersion: string): boolean {
    if (this.#targets.has(key)) return true;
    const handed = this.#handed.get(key);
    if (handed === undefined) return false;
    if (handed.rv === resourceVersion) return true;
    this.#handed.delete(key);
    return false;
  }

  /**
   * A hand-over of `key` (by the ring, or a drain's), or its letting go, is about to be written
   * against `resourceVersion`: from now on the younger resources of its claim here are held (see
   * {@link heldMs}), whether or not the write's answer has come yet.
   */
  handing(key: string, resourceVersion: string): void {
    const cache = this.#cache;
    const claim = cache?.claimOf(key);
    this.#handed.set(key, { rv: resourceVersion, claim });
    if (cache === undefined || claim === undefined) return;
    const now = this.#o.now();
    this.#prune(now);
    const gone = this.#handedClaims.get(claim) ?? new Map<string, { at: number; created: number }>();
    this.#handedClaims.delete(claim);
    this.#handedClaims.set(claim, gone);
    gone.set(key, { at: now, created: cache.created(key) });
  }

  /** The hand-over of `key` lost a race (the resource changed): it was not written. */
  notHanded(key: string): void {
    const claim = this.#handed.get(key)?.claim;
    this.#handed.delete(key);
    if (claim !== undefined) this.#unremember(claim, key);
  }

  /**
   * How long `key` is held here, not reconciled (0: it is not): while an older resource of its
   * claim is being handed over or let go, or was a moment ago, and is not back (see the module
   * comment). None was here when a ring's hand-over began: a claim with rivals here is not moved by
   * it.
   */
  heldMs(key: string): number {
    if (this.#handedClaims.size === 0) return 0;
    const now = this.#o.now();
    this.#prune(now);
    const cache = this.#cache;
    const claim = this.#handedClaims.size === 0 ? undefined : cache?.claimOf(key);
    const gone = claim === undefined ? undefined : this.#handedClaims.get(claim);
    if (cache === undefined || claim === undefined || gone === undefined) return 0;
    const created = cache.created(key);
    let held = 0;
    for (const [other, e] of gone) {
      const left = e.at + HANDED_CLAIM_MS - now;
      if (left <= 0) gone.delete(other);
      else if (other !== key && (e.created < created || (e.created === created && other < key)))
        held = Math.max(held, left);
    }
    if (gone.size === 0) this.#handedClaims.delete(claim);
    return held;
  }

  /** Forgets the claims whose resources were all let go longer ago than {@link HANDED_CLAIM_MS}. */
  #prune(now: number): void {
    // Claims let go longest ago first: the map's order is the order they were last let go.
    for (const [claim, gone] of this.#handedClaims) {
      let newest = Number.NEGATIVE_INFINITY;
      for (const e of gone.values()) newest = Math.max(newest, e.at);
      if (now - newest < HANDED_CLAIM_MS) return;
      this.#handedClaims.delete(claim);
    }
  }

  #unremember(claim: string, key: string): void {
    const gone = this.#handedClaims.get(claim);
    if (!gone?.delete(key)) return;
    if (gone.size === 0) this.#handedClaims.delete(claim);
  }

  #choose(key: string, ring: Inheritance | undefined, cache: RingMovesCache): string | undefined {
    // Released: to its heir only, whatever the ring does meanwhile (the heir may be reconciling it).
    const release = this.#release;
    if (release !== undefined && this.#released(key, release.claims, cache)) return release.release.heir;
    const claim = cache.claimOf(key);
    if (claim === undefined || ring === undefined || cache.drained(key)) return undefined;
    const to = ownerOf(claim, ring.members, ringShares(ring.members, ring.leader), this.#o.seed());
    // A held rival is moved by the sharder, with the rest of its claim.
    if (to === undefined || to === this.#o.self || cache.hasRivals(key) || this.heldMs(key) > 0)
      return undefined;
    return to;
  }
}
