/**
 * The ring's membership as one process sees it, from the replicas' Leases: read as client-go's
 * leader election reads one Lease, by this process's clock only.
 */
import { createHash } from "node:crypto";
import type { Logger } from "pino";
import type { LeaseRecord } from "../runtime/leader.ts";
import type { Inheritance } from "./inheritance.ts";
import { isReplicaName, SHARDER_HOLDER_PREFIX } from "./labels.ts";
import type { Release } from "./release.ts";
import { SHARDER_REPLICA_SHARE } from "./ring.ts";

/** A replica's Lease as the sharder reads it. */
export interface RingLease {
  name: string;
  resourceVersion: string;
  record: LeaseRecord;
  /** The ring its share moves by, written by the sharder that took it (see `inheritance.ts`). */
  inheritance?: Inheritance | undefined;
  /** The ring its replica moves its own resources by, written with each renewal (see `moving-by.ts`). */
  movingBy?: Inheritance | undefined;
  /** The share its replica released to a joined replica, written with each renewal (see `release.ts`). */
  released?: Release | undefined;
  /** What its replica's ring depends on, written with each renewal (see {@link ringFingerprint}). */
  fingerprint?: string | undefined;
}

/** On each replica's own Lease, written with every renewal: its {@link ringFingerprint}. */
export const FINGERPRINT_ANNOTATION = "sharding.dms.dev/ring-fingerprint";

/**
 * How the ring places resources: rendezvous hashing by claim with the sharder's replica's share
 * (`ring.ts`). A version that places them otherwise changes it, so that its replicas and those of
 * the version before, side by side in a rollout, never judge one ring two ways.
 */
const RING_RULE = `rendezvous-sha256 by claim, sharder share ${SHARDER_REPLICA_SHARE}`;

/**
 * What a replica's ring depends on, as 16 hex digits: the ring's key (the install key), the
 * replica's scope (`--namespaces`, `--label-selector`, as {@link scopeOf} writes them) and how
 * the ring places resources ({@link RING_RULE}). Two replicas that differ in the key or the rule
 * would place resources differently, or one would be given resources its label-selected watch
 * never shows (another scope). A sha256 of them, cut short: the key cannot be read back from it.
 */
export function ringFingerprint(seed: Uint8Array | undefined, scope: string): string {
  const hash = createHash("sha256").update(`dms-operator ring fingerprint\0${RING_RULE}\0`);
  const length = Buffer.alloc(4);
  length.writeUInt32BE(seed?.length ?? 0);
  hash.update(length);
  if (seed !== undefined) hash.update(seed);
  return hash.update(scope).digest("hex").slice(0, 16);
}

/** Logged, once per replica, where a live replica's Lease shows another {@link ringFingerprint}. */
export const STRANGER =
  "a live replica of the ring runs with another install key, --namespaces or --label-selector, or a version that places resources otherwise (its Lease's ring fingerprint differs): the ring places nothing on it here, and each side drains to its own; give every replica the same settings";

/** A replica's scope as {@link ringFingerprint} reads it: its namespaces (sorted; none: all) and its label selector. */
export function scopeOf(namespaces: readonly string[], labelSelector: string | undefined): string {
  return `${[...new Set(namespaces)].sort().join(",")}\0${labelSelector?.trim() ?? ""}`;
}

/** What changes with each renewal, release or take of a Lease: its record, as one string. */
export const recordKey = (r: LeaseRecord) =>
  `${r.holderIdentity}|${r.renewTime?.getTime() ?? ""}|${r.leaseDurationSeconds}|${r.leaseTransitions}`;

/**
 * Whether `lease` was released as a replica's elector releases it (see `expired`): no holder, a
 * duration of a second, and acquired and renewed at the same moment (the release's). A holder
 * cleared and a duration cut short by hand leave the times of the last renewal, after the acquiring.
 */
export function released(lease: Pick<RingLease, "record">): boolean {
  const r = lease.record;
  return (
    r.holderIdentity === "" &&
    r.leaseDurationSeconds <= 1 &&
    r.renewTime !== undefined &&
    r.renewTime.getTime() === r.acquireTime?.getTime()
  );
}

/** Whether a sharder holds `lease` (it took it once released or expired). */
export function takenBySharder(lease: Pick<RingLease, "record">): boolean {
  return lease.record.holderIdentity.startsWith(SHARDER_HOLDER_PREFIX);
}

/** Whether `lease` is held by a replica: not released, not taken by a sharder. */
export function heldByReplica(lease: Pick<RingLease, "record">): boolean {
  return lease.record.holderIdentity !== "" && !takenBySharder(lease);
}

/**
 * Which replicas are live, from their Leases, by this process's clock: a Lease held by a replica
 * (not released, not taken by a sharder) whose record changed less than its duration ago. A
 * Lease first seen counts as changed then (client-go's rule: a newcomer never declares anyone
 * dead before watching them for a whole duration).
 *
 * Every replica keeps one, fed by its Lease watch from the start ({@link seen} on each event), not
 * only the leader: a replica that becomes the leader inherits what it watched, so a replica that
 * stopped renewing is called gone a duration after its last renewal was SEEN by this process,
 * however recently this process began to lead. Times are this process's only: clocks of other
 * machines are never read, so skew between them is harmless.
 */
export class RingMembership {
  /** When each Lease's record last changed, by this process's clock, and whether a replica held it. */
  readonly #observed = new Map<string, { key: string; at: number; member: boolean }>();
  #joinedAt: number | undefined;
  readonly #scope: string | undefined;
  readonly #logger: Pick<Logger, "warn"> | undefined;
  readonly #minDurationMs: number;
  /** This process's {@link ringFingerprint}, once its key is read (none: every Lease counts). */
  #fingerprint: string | undefined;
  /** The live replicas logged as strangers, with the fingerprint logged. */
  readonly #strangers = new Map<string, string>();

  /**
   * `scope` is this replica's ({@link scopeOf}): once {@link keyed}, a Lease showing another
   * fingerprint is no member of its ring (its replica is still live: its Lease is never taken);
   * each such live replica is logged once ({@link STRANGER}). `minDurationMs`, this process's
   * `--lease-duration`: no Lease expires sooner after it last changed, whatever it says.
   */
  constructor(scope?: string, logger?: Pick<Logger, "warn">, minDurationMs = 0) {
    this.#scope = scope;
    this.#logger = logger;
    this.#minDurationMs = minDurationMs;
  }

  /** The ring's key was read: this process's fingerprint is known from now on. Returns `seed`. */
  readonly keyed = (seed: Uint8Array): Uint8Array => {
    if (this.#scope !== undefined) this.#fingerprint = ringFingerprint(seed, this.#scope);
    return seed;
  };

  /** This process's {@link ringFingerprint}, written on its Lease; undefined until {@link keyed}. */
  get fingerprint(): string | undefined {
    return this.#fingerprint;
  }

  /** The Lease `lease` was seen (an event of the watch, or a reading) at `now`. */
  seen(lease: RingLease, now: number): void {
    const key = recordKey(lease.record);
    const seen = this.#observed.get(lease.name);
    if (seen && seen.key === key) return;
    const member = isReplicaName(lease.name) && heldByReplica(lease);
    if (member && !seen?.member) this.#joinedAt = now;
    this.#observed.set(lease.name, { key, at: now, member });
  }

  /**
   * When this process last saw a member join: a replica's Lease it had not seen held by that
   * replica (new, or held again after it was released or taken). Undefined before any.
   */
  get joinedAt(): number | undefined {
    return this.#joinedAt;
  }

  /** Notes which records changed since the last call (and forgets Leases gone); returns `leases`. */
  observe(leases: readonly RingLease[], now: number): readonly RingLease[] {
    const names = new Set<string>();
    for (const lease of leases) {
      names.add(lease.name);
      this.seen(lease, now);
    }
    for (const name of this.#observed.keys()) if (!names.has(name)) this.#observed.delete(name);
    return leases;
  }

  /**
   * Not changed for its duration, by our clock, or released. A release is what a replica writes
   * once its writes settled: no holder, a duration of a second, acquired and renewed then
   * (`LeaderElector`'s). A holder cleared by hand (`kubectl edit`), a duration cut short, or both,
   * is not one: the replica writes until its own duration from its last renewal, so such a Lease
   * expires like any other, and never sooner than {@link minDurationMs} after it last changed.
   */
  expired(lease: RingLease, now: number): boolean {
    if (released(lease)) return true;
    return this.#expiresAt(lease, now) <= now;
  }

  #expiresAt(lease: RingLease, now: number): number {
    const at = this.#observed.get(lease.name)?.at ?? now;
    return at + Math.max(lease.record.leaseDurationSeconds * 1000, this.#minDurationMs);
  }

  /**
   * The earliest time after `now` at which one of `leases` (held, not yet expired) would expire
   * if it is not renewed first; undefined when none would.
   */
  nextExpiry(leases: readonly RingLease[], now: number): number | undefined {
    let next: number | undefined;
    for (const lease of leases) {
      if (released(lease)) continue;
      const at = this.#expiresAt(lease, now);
      if (at > now && (next === undefined || at < next)) next = at;
    }
    return next;
  }

  isLive(lease: RingLease, now: number): boolean {
    return isReplicaName(lease.name) && heldByReplica(lease) && !this.expired(lease, now);
  }

  /**
   * The live members among `leases` (observed first), sorted: a live replica whose Lease shows
   * another fingerprint than this process's is none (a Lease without one, of an earlier version,
   * counts). Whoever leads, its ring places nothing on a replica that differs from it; the
   * resources such a replica holds are drained from it as from any replica the ring does not choose.
   */
  live(leases: readonly RingLease[], now: number): string[] {
    const own = this.#fingerprint;
    return this.observe(leases, now)
      .filter((l) => this.isLive(l, now) && (own === undefined || this.#sameRing(l, own)))
      .map((l) => l.name)
      .sort();
  }

  #sameRing(lease: RingLease, own: string): boolean {
    const theirs = lease.fingerprint;
    if (theirs === undefined || theirs === own) {
      this.#strangers.delete(lease.name);
      return true;
    }
    if (this.#strangers.get(lease.name) !== theirs) {
      this.#strangers.set(lease.name, theirs);
      this.#logger?.warn({ member: lease.name, fingerprint: theirs, own }, STRANGER);
    }
    return false;
  }

  forget(name: string): void {
    this.#observed.delete(name);
    this.#strangers.delete(name);
  }
}
