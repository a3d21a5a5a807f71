/**
 * The shard label policy, as a sharded replica requires it: the ValidatingAdmissionPolicy that
 * lets nobody but the operator write the shard labels must be in place before a replica joins the
 * ring, and the leader reads it again every minute while the ring runs. How it is read is the
 * caller's (`wiring/shard-label-policy.ts`): here, what the answers make the replica do.
 */
import type { Logger } from "pino";
import type { Clock } from "../runtime/clock.ts";

/** Between two tries after an answer that says nothing about the policy (a 5xx, no connection). */
const RETRY_MS = 2_000;

/** How often the leader reads the policy again once the ring runs. */
export const POLICY_RECHECK_MS = 60_000;

/** One reading of the policy: its name, and the check the replica makes of it. */
export interface LabelPolicyReading {
  /** The policy's (and its binding's) name. */
  name: string;
  /**
   * Reads it once: undefined when it is in place, an Error whose message names the fix when it is
   * missing or does not enforce. Rejects when the answer says nothing about it (5xx, no connection).
   */
  check(signal: AbortSignal): Promise<Error | undefined>;
}

/**
 * Resolves once the policy is found in place; throws the Error naming the fix when it is not.
 * Any other failure is tried again every 2 s until `signal` aborts (then it resolves: the
 * replica is stopping).
 */
export async function requireLabelPolicy(
  policy: LabelPolicyReading,
  signal: AbortSignal,
  clock: Clock,
  logger: Logger,
): Promise<void> {
  for (;;) {
    let missing: Error | undefined;
    try {
      missing = await policy.check(signal);
    } catch (err) {
      if (signal.aborted) return;
      logger.warn({ err, policy: policy.name }, "could not read the shard label policy; trying again");
      try {
        await clock.sleep(RETRY_MS, signal);
      } catch {
        return;
      }
      continue;
    }
    if (missing) throw missing;
    logger.info({ policy: policy.name }, "the shard label policy is in place");
    return;
  }
}

/**
 * Reads the policy every {@link POLICY_RECHECK_MS} until `signal` aborts (run by the leader only),
 * calling `report(true)` while it is in place and `report(false)` once it was seen missing or not
 * enforcing; logs an error naming the fix when it goes missing and a line when it is back. A
 * running ring is not stopped for it: that would stop every team's work.
 */
export async function watchLabelPolicy(
  policy: LabelPolicyReading,
  signal: AbortSignal,
  clock: Clock,
  logger: Logger,
  report: (enforced: boolean) => void,
): Promise<void> {
  const { name } = policy;
  let enforced = true;
  while (!signal.aborted) {
    try {
      await clock.sleep(POLICY_RECHECK_MS, signal);
    } catch {
      return;
    }
    let missing: Error | undefined;
    try {
      missing = await policy.check(signal);
    } catch (err) {
      if (!signal.aborted) logger.warn({ err, policy: name }, "could not read the shard label policy");
      continue;
    }
    if (missing && enforced)
      logger.error(
        { policy: name },
        `${missing.message.replace(/^--sharded: /, "the shard label policy is gone while the ring runs: ")} (tenants who may edit their Deployment resources can now relabel them)`,
      );
    else if (!missing && !enforced) logger.info({ policy: name }, "the shard label policy is in place again");
    enforced = missing === undefined;
    report(enforced);
  }
}
