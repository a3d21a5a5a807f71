/**
 * A replica's place in the ring: its own Lease, held by leader election's rules. While it holds
 * it, the replica may write (its member's fence counts from each renewal); when it stops, it lets
 * the reconciles in flight end and its unanswered writes settle before the Lease is released.
 */
import type { Logger } from "pino";
import type { Clock } from "../runtime/clock.ts";
import { untilAborted } from "../runtime/clock.ts";
import { LeaderElector, LeaseConflictError, type LeasePort, type LeaseSnapshot } from "../runtime/leader.ts";
import type { Runnable } from "../runtime/manager.ts";
import { SHARDER_HOLDER_PREFIX } from "./labels.ts";
import type { ShardMember } from "./member.ts";

/** Options of {@link leaseHolder}. */
export interface LeaseHolderOptions {
  /** The replica's Lease. */
  lease: LeasePort;
  identity: string;
  leaseDurationMs: number;
  renewDeadlineMs: number;
  retryPeriodMs: number;
  member: ShardMember;
  /** Each reading of the Lease before the replica first holds it (a release to take over: `release.ts`). */
  read?(lease: LeaseSnapshot): void;
  /**
   * Resolves once the replica may join (the shard label policy is in place); rejects, naming the
   * fix, when it may not. None: it joins at once.
   */
  beforeJoining?(signal: AbortSignal): Promise<void>;
  clock: Clock;
  logger: Logger;
}

/** The runnable `shard-lease`, run by every replica (see the module comment). */
export function leaseHolder(o: LeaseHolderOptions): Runnable {
  const { member, logger } = o;
  return {
    name: "shard-lease",
    needLeaderElection: false,
    start: async (signal, halt) => {
      // No Lease (no share) before the policy is known to keep tenants off the labels: without
      // it the replica exits, naming the fix.
      await o.beforeJoining?.(signal);
      const elector = new LeaderElector({
        lease: ownLease(o.lease, o.leaseDurationMs, o.clock, o.read),
        identity: o.identity,
        leaseDurationMs: o.leaseDurationMs,
        renewDeadlineMs: o.renewDeadlineMs,
        retryPeriodMs: o.retryPeriodMs,
        clock: o.clock,
        logger,
        onRenewed: (startedAt) => member.renewed(startedAt),
      });
      const outcome = await elector.run(signal, async (holding) => {
        logger.info("holding the shard Lease: in the ring");
        holding.addEventListener("abort", () => member.released(), { once: true });
        // Nothing to wait for but the end of the term (a promise that never settles).
        await untilAborted(new Promise<never>(() => {}), AbortSignal.any([signal, holding]));
        // Let the reconciles in flight end (or be halted), then write nothing more: the Lease
        // is released after this, and the sharder moves the resources at once.
        await member.stop(AbortSignal.any([halt, holding]));
        member.released();
        // A write that got no answer may still run at the service: the Lease is released only
        // once it cannot, renewed meanwhile (halted too; killed first, the Lease expires).
        await member.settled(holding);
      });
      member.released();
      if (outcome === "lost")
        throw new Error(
          "the shard Lease was lost (not renewed within --renew-deadline): stopping so that the replica restarts with an empty cache",
        );
    },
  };
}

/**
 * The replica's own Lease as its elector writes it: never taken back from a sharder's hold (while a
 * sharder holds it, the survivors may be reconciling its share by the ring written on it; only a
 * sharder lets it go, by deleting it once no resource names the replica), and, once such a hold
 * was seen, created again only a Lease duration after it was found gone, so that a survivor whose
 * watch is late has stopped reconciling by that ring. Each refusal is a conflict the elector tries
 * again after its retry period. Both are decided on what this port read: an update is refused at
 * the very resourceVersion a read showed held by a sharder (the API server's precondition does
 * the rest).
 */
export function ownLease(
  port: LeasePort,
  leaseDurationMs: number,
  clock: Clock,
  read?: (lease: LeaseSnapshot) => void,
): LeasePort {
  let sharderHeld: string | undefined;
  let sharderSeen = false;
  let goneSince: number | undefined;
  return {
    get: async (signal) => {
      const snapshot = await port.get(signal);
      if (snapshot !== undefined) read?.(snapshot);
      if (snapshot === undefined) {
        if (sharderSeen) goneSince ??= clock.now();
      } else if (snapshot.record.holderIdentity.startsWith(SHARDER_HOLDER_PREFIX)) {
        sharderHeld = snapshot.resourceVersion;
        sharderSeen = true;
        goneSince = undefined;
      }
      return snapshot;
    },
    create: async (record, signal) => {
      if (sharderSeen && (goneSince === undefined || clock.now() < goneSince + leaseDurationMs))
        throw new LeaseConflictError(
          "the replica's Lease was let go by a sharder a moment ago: rejoining later",
        );
      const created = await port.create(record, signal);
      sharderSeen = false;
      goneSince = undefined;
      return created;
    },
    update: (record, resourceVersion, signal) => {
      if (resourceVersion === sharderHeld)
        return Promise.reject(
          new LeaseConflictError("the replica's Lease is held by a sharder: waiting until it is deleted"),
        );
      return port.update(record, resourceVersion, signal);
    },
  };
}
