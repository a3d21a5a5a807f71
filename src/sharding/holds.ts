/**
 * A sharder's pass, phase four: the Leases it holds. A replica that stopped renewing has its Lease
 * taken (under a resourceVersion precondition) before its resources move, so that it cannot come
 * back and write while they do; the hold is renewed while resources still name the replica, and
 * the Lease deleted once none does.
 */
import type { Logger } from "pino";
import type { Clock } from "../runtime/clock.ts";
import type { LeaseRecord } from "../runtime/leader.ts";
import type { MemberState } from "./assignment.ts";
import type { Inheritance } from "./inheritance.ts";
import { isReplicaName } from "./labels.ts";
import type { RingLease, RingMembership } from "./membership.ts";
import { releasedRecord } from "./release.ts";

/**
 * A Lease the sharder holds: when its last write of it began, the resourceVersion that write was
 * based on (undefined: created) and the one it produced. The Lease watch may not show the write
 * yet: a cached Lease at either version is this hold.
 */
export interface Hold {
  since: number;
  basedOn: string | undefined;
  rv: string;
  /** The ring written on the Lease (written again with each renewal). */
  inheritance?: Inheritance | undefined;
  /**
   * When this sharder created the Lease (none was there), kept over its renewals: a Lease deleted
   * by hand may have been a live replica's, which writes until a Lease duration after its last
   * renewal, unseen. Undefined: the Lease was there when taken.
   */
  created?: number | undefined;
}

/** How long a hold lasts: the Lease's duration, less a margin (≥ a Kubernetes request). */
export interface HoldTiming {
  leaseDurationMs: number;
  holdMarginMs: number;
}

/** Whether the cached `lease` is `hold`'s write, or the version it was based on (a watch lagging). */
export function isHold(hold: Hold, lease: RingLease | undefined): boolean {
  if (!lease) return hold.basedOn === undefined;
  return lease.resourceVersion === hold.rv || lease.resourceVersion === hold.basedOn;
}

/** Whether moves off the replica may still be made under `hold` at `now` (it stops a margin early). */
export function holdLasts(hold: Hold, now: number, timing: HoldTiming): boolean {
  return now + timing.holdMarginMs < hold.since + timing.leaseDurationMs;
}

/**
 * A member's state for the sharder: held (its Lease is held, and the hold lasts), live (it renews
 * its Lease), else down. A name no replica can bear (not a Lease name and a label value) is held:
 * there is nothing to wait for. A Lease the sharder created counts as live for a Lease duration
 * (its resources are drained, not moved): a replica whose Lease was deleted by hand may still be
 * writing by its last renewal.
 */
export function memberState(
  member: string,
  lease: RingLease | undefined,
  hold: Hold | undefined,
  ring: Pick<RingMembership, "isLive">,
  now: number,
  timing: HoldTiming,
): MemberState {
  if (!isReplicaName(member)) return "held";
  if (!lease) return "down";
  if (hold && isHold(hold, lease)) {
    if (hold.created !== undefined && now < hold.created + timing.leaseDurationMs) return "live";
    return holdLasts(hold, now, timing) ? "held" : "down";
  }
  return ring.isLive(lease, now) ? "live" : "down";
}

/**
 * The Leases that no resource names and nobody renews (a replica gone for good), not held yet:
 * to be taken, then deleted.
 */
export function abandoned(
  leases: Iterable<RingLease>,
  owners: ReadonlyMap<string, number>,
  live: readonly string[],
  held: (name: string) => boolean,
  ring: Pick<RingMembership, "expired">,
  now: number,
): string[] {
  const names: string[] = [];
  for (const lease of leases) {
    const name = lease.name;
    if (!owners.has(name) && !live.includes(name) && !held(name) && ring.expired(lease, now))
      names.push(name);
  }
  return names;
}

/** What becomes of one hold: let go (someone else wrote the Lease), the Lease deleted, renewed, or kept. */
export type HoldStep = "forget" | "delete" | "renew" | "keep";

/**
 * The step for `hold` of a Lease that `owned` resources name: deleted once none does while the
 * hold lasts; renewed once half the margin went by since its last write.
 */
export function holdStep(
  hold: Hold,
  lease: RingLease | undefined,
  owned: number,
  now: number,
  timing: HoldTiming,
): HoldStep {
  if (!isHold(hold, lease)) return "forget";
  if (owned === 0 && lease !== undefined && holdLasts(hold, now, timing)) return "delete";
  return now - hold.since > timing.holdMarginMs / 2 ? "renew" : "keep";
}

/** The sharder's writes of the replicas' Leases (the Kubernetes adapters implement them). */
export interface LeaseWrites {
  /**
   * Writes `record` on the Lease `name`, with `inheritance` (see `inheritance.ts`) when given:
   * creates it when `resourceVersion` is undefined, else updates it if still at that version.
   * Resolves the new resourceVersion, undefined when it lost the race.
   */
  writeLease(
    name: string,
    resourceVersion: string | undefined,
    record: LeaseRecord,
    inheritance: Inheritance | undefined,
    signal: AbortSignal,
  ): Promise<string | undefined>;
  /** Deletes the Lease `name` if still at `resourceVersion`. */
  deleteLease(name: string, resourceVersion: string, signal: AbortSignal): Promise<boolean>;
}

/** Options of {@link LeaseHolds}. */
export interface LeaseHoldsOptions extends HoldTiming {
  /** The holder identity written on a held Lease: `sharder/<identity>`. */
  holder: string;
  ring: RingMembership;
  ports: LeaseWrites;
  clock: Clock;
  logger: Logger;
}

/** The Leases one sharder holds. See the module comment. */
export class LeaseHolds {
  readonly #o: LeaseHoldsOptions;
  readonly #holds = new Map<string, Hold>();

  constructor(options: LeaseHoldsOptions) {
    this.#o = options;
  }

  has(name: string): boolean {
    return this.#holds.has(name);
  }

  /** `member`'s state at `now`, its Lease being `lease` (see {@link memberState}). */
  state(member: string, lease: RingLease | undefined, now: number): MemberState {
    return memberState(member, lease, this.#holds.get(member), this.#o.ring, now, this.#o);
  }

  /**
   * Takes (or renews the hold of) the Lease `name`: only when absent, released, expired or ours.
   * The Lease carries `ring` as its inheritance (the ring its replica's share moves by), unless it
   * carries one already: a record once written stays the same until the Lease is deleted (the
   * survivors may be reconciling by it), whoever holds the Lease after. A Lease whose replica was
   * releasing a joined share gets the ring that gives that share to the same heir (`release.ts`).
   */
  async take(
    name: string,
    lease: RingLease | undefined,
    signal: AbortSignal,
    ring?: Inheritance,
  ): Promise<boolean> {
    if (!isReplicaName(name)) return false;
    const now = this.#o.clock.now();
    const ours = lease?.record.holderIdentity === this.#o.holder;
    if (lease && !ours && !this.#o.ring.expired(lease, now)) return false;
    const record = this.#record(lease, ours, new Date(now));
    const released = lease?.released;
    const inheritance =
      lease?.inheritance ?? (released ? releasedRecord(name, released.ring) : undefined) ?? ring;
    let rv: string | undefined;
    try {
      rv = await this.#o.ports.writeLease(name, lease?.resourceVersion, record, inheritance, signal);
    } catch (err) {
      this.#o.logger.warn({ err, lease: name }, "could not take a replica's Lease");
      return false;
    }
    if (rv === undefined) return false;
    if (!ours) this.#o.logger.info({ lease: name }, "took the Lease of a replica that stopped renewing it");
    const created = lease === undefined ? now : ours ? this.#holds.get(name)?.created : undefined;
    this.#holds.set(name, { since: now, basedOn: lease?.resourceVersion, rv, inheritance, created });
    return true;
  }

  /**
   * Each hold's step (see {@link holdStep}), at the time it is made, `owners` counting the resources
   * that name each replica. Resolves the Leases deleted.
   */
  async settle(
    leases: ReadonlyMap<string, RingLease>,
    owners: ReadonlyMap<string, number>,
    signal: AbortSignal,
  ): Promise<string[]> {
    const deleted: string[] = [];
    for (const [name, hold] of [...this.#holds]) {
      const lease = leases.get(name);
      switch (holdStep(hold, lease, owners.get(name) ?? 0, this.#o.clock.now(), this.#o)) {
        case "forget":
          this.#holds.delete(name);
          break;
        case "delete":
          if (await this.#o.ports.deleteLease(name, hold.rv, signal)) {
            deleted.push(name);
            this.#holds.delete(name);
            this.#o.ring.forget(name);
          }
          break;
        case "renew": {
          const record = this.#record(lease, true, new Date(hold.since));
          const { inheritance } = hold;
          await this.take(name, { name, resourceVersion: hold.rv, record, inheritance }, signal);
          break;
        }
        case "keep":
          break;
      }
    }
    return deleted;
  }

  #record(lease: RingLease | undefined, ours: boolean, at: Date): LeaseRecord {
    return {
      holderIdentity: this.#o.holder,
      leaseDurationSeconds: Math.ceil(this.#o.leaseDurationMs / 1000),
      acquireTime: ours ? (lease?.record.acquireTime ?? at) : at,
      renewTime: at,
      leaseTransitions: (lease?.record.leaseTransitions ?? 0) + (ours ? 0 : 1),
    };
  }
}
