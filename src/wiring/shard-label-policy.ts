/**
 * The check a `--sharded` replica makes before it joins the ring: the ValidatingAdmissionPolicy
 * that lets nobody but the operator write the shard labels, and its binding, exist. Without them a
 * tenant who may edit its Deployment resources can relabel one from replica X to replica Y while
 * X reconciles it: Y reconciles it from its ADDED event at once, and two replicas write one
 * deployment until the sharder drains it back. See docs/guide/sharding.md, "Label policy".
 */
import type { Logger } from "pino";
import type { KubeClient } from "../kube/client.ts";
import { KubeApiError, NotFoundError } from "../kube/errors.ts";
import type { Clock } from "../runtime/clock.ts";

/** The policy's and its binding's name in manifests/components/sharding. */
export const DEFAULT_SHARD_LABEL_POLICY = "dms-operator-shard-labels";

const API = "/apis/admissionregistration.k8s.io/v1";
/** Between two tries after an answer that says nothing about the policy (a 5xx, no connection). */
const RETRY_MS = 2_000;

/** What the check reads of the binding. */
interface Binding {
  spec?: { policyName?: unknown; validationActions?: unknown };
}

/** The policy or its binding is missing or does not enforce: the replica must not start. */
export class ShardLabelPolicyError extends Error {
  override readonly name = "ShardLabelPolicyError";
}

const FIX =
  "apply manifests/components/sharding's shard-label-policy.yaml (Helm: sharding.labelPolicy=true), or name yours with --shard-label-policy-name; to run without it, accepting that a tenant who may edit its Deployment resources can relabel them and make two replicas write one deployment, set --shard-label-policy=unenforced (Helm: sharding.labelPolicyMode=unenforced)";

/**
 * Reads the policy `name` and its binding once: undefined when both exist and the binding binds
 * the policy with `Deny`, a {@link ShardLabelPolicyError} naming the fix when one is missing, does
 * not bind the policy, or cannot be read (403: RBAC). Rejects on any other failure (5xx, no
 * connection): it says nothing about the policy.
 */
export async function checkShardLabelPolicy(
  client: KubeClient,
  name: string,
  signal: AbortSignal,
): Promise<ShardLabelPolicyError | undefined> {
  const what = `the ValidatingAdmissionPolicy ${JSON.stringify(name)} and its binding`;
  try {
    await client.request({ method: "GET", path: `${API}/validatingadmissionpolicies/${name}`, signal });
    const binding = (await client.request({
      method: "GET",
      path: `${API}/validatingadmissionpolicybindings/${name}`,
      signal,
    })) as Binding;
    const actions = binding.spec?.validationActions;
    if (binding.spec?.policyName !== name || !Array.isArray(actions) || !actions.includes("Deny"))
      return new ShardLabelPolicyError(
        `--sharded: the ValidatingAdmissionPolicyBinding ${JSON.stringify(name)} must bind the policy ${JSON.stringify(name)} with validationActions [Deny] (it has policyName ${JSON.stringify(binding.spec?.policyName)}, validationActions ${JSON.stringify(actions)}): ${FIX}`,
      );
    return undefined;
  } catch (err) {
    if (err instanceof NotFoundError)
      return new ShardLabelPolicyError(`--sharded: ${what} must exist (${err.message}): ${FIX}`);
    if (err instanceof KubeApiError && (err.status === 403 || err.status === 401))
      return new ShardLabelPolicyError(
        `--sharded: the operator may not read ${what} (${err.message}): give its ServiceAccount get on validatingadmissionpolicies and validatingadmissionpolicybindings named ${JSON.stringify(name)} (the ClusterRole dms-operator-sharding of manifests/components/sharding), or ${FIX.slice(FIX.indexOf("to run without"))}`,
      );
    throw err;
  }
}

/**
 * Resolves once {@link checkShardLabelPolicy} finds the policy in place; throws its
 * {@link ShardLabelPolicyError} when it does not. Any other failure is tried again every 2 s
 * until `signal` aborts (then it resolves: the replica is stopping).
 */
export async function requireShardLabelPolicy(
  client: KubeClient,
  name: string,
  signal: AbortSignal,
  clock: Clock,
  logger: Logger,
): Promise<void> {
  for (;;) {
    let missing: ShardLabelPolicyError | undefined;
    try {
      missing = await checkShardLabelPolicy(client, name, signal);
    } catch (err) {
      if (signal.aborted) return;
      logger.warn({ err, policy: name }, "could not read the shard label policy; trying again");
      try {
        await clock.sleep(RETRY_MS, signal);
      } catch {
        return;
      }
      continue;
    }
    if (missing) throw missing;
    logger.info({ policy: name }, "the shard label policy is in place");
    return;
  }
}

/** How often the leader reads the policy again once the ring runs. */
export const POLICY_RECHECK_MS = 60_000;

/**
 * Reads the policy `name` every {@link POLICY_RECHECK_MS} until `signal` aborts (run by the
 * leader only), calling `report(true)` while it is in place and `report(false)` once it was seen
 * missing or not enforcing; logs an error naming the fix when it goes missing and a line when it
 * is back. A running ring is not stopped for it: that would stop every team's work.
 */
export async function watchShardLabelPolicy(
  client: KubeClient,
  name: string,
  signal: AbortSignal,
  clock: Clock,
  logger: Logger,
  report: (enforced: boolean) => void,
): Promise<void> {
  let enforced = true;
  while (!signal.aborted) {
    try {
      await clock.sleep(POLICY_RECHECK_MS, signal);
    } catch {
      return;
    }
    let missing: ShardLabelPolicyError | undefined;
    try {
      missing = await checkShardLabelPolicy(client, name, signal);
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
