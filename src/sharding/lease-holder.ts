/**
 * A replica's place in the ring: its own Lease, held by leader election's rules. While it holds
 * it, the replica may write (its member's fence counts from each renewal); when it stops, it lets
 * the reconciles in flight end and its unanswered writes settle before the Lease is released.
 */
import type { Logger } from "pino";
import { untilAborted } from "../runtime/abort.ts";
import type { Clock } from "../runtime/clock.ts";
import { LeaderElector, type LeasePort } from "../runtime/leader.ts";
import type { Runnable } from "../runtime/manager.ts";
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
        lease: o.lease,
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
