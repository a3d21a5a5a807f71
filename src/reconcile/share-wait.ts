/**
 * The status of a resource whose reconcile waits for its connection's share of the operator's
 * workers (`--max-reconciles-per-connection`): written from outside a reconcile, by the report of
 * the waiting resources (connection/access.ts), and replaced by its reconcile's own status
 * when its turn comes. Pure.
 */
import { putConditions } from "../crd/conventions.ts";
import type { DeploymentResourceStatus } from "../crd/schema.ts";
import { CONDITION, CONDITION_TYPES, REASON } from "./reasons.ts";

/** Whether `status` says the resource waits for its connection's share already. */
export function saysWaitingForShare(status: DeploymentResourceStatus): boolean {
  return (status.conditions ?? []).some(
    (c) => c.type === CONDITION.Synced && c.reason === REASON.WaitingForConnectionShare,
  );
}

/**
 * `status` with `Synced=False` and `Reconciling=True`, reason `WaitingForConnectionShare` and
 * `message`; every other field and condition as it was, but a condition of a type this release
 * does not set (another release's), which goes as in the reconcile's own status write.
 */
export function waitingForShare(
  status: DeploymentResourceStatus,
  generation: number,
  message: string,
  now: Date,
): DeploymentResourceStatus {
  const reason = REASON.WaitingForConnectionShare;
  const conditions = putConditions(
    (status.conditions ?? []).filter((c) => CONDITION_TYPES.has(c.type)),
    [
      { type: CONDITION.Synced, value: { status: "False", reason, message } },
      { type: CONDITION.Reconciling, value: { status: "True", reason, message } },
    ],
    { now, observedGeneration: status.observedGeneration ?? generation },
  );
  return { ...status, conditions };
}
