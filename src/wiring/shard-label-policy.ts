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
 * Resolves once the policy `name` and a binding of the same name that binds it with `Deny` exist;
 * throws a {@link ShardLabelPolicyError} naming the fix when one is missing, does not bind the
 * policy, or cannot be read (403: RBAC). Any other failure (5xx, no connection) is tried again
 * every 2 s until `signal` aborts (then it resolves: the replica is stopping).
 */
export async function requireShardLabelPolicy(
  client: KubeClient,
  name: string,
  signal: AbortSignal,
  clock: Clock,
  logger: Logger,
): Promise<void> {
  const what = `the ValidatingAdmissionPolicy ${JSON.stringify(name)} and its binding`;
  for (;;) {
    try {
      await client.request({ method: "GET", path: `${API}/validatingadmissionpolicies/${name}`, signal });
      const binding = (await client.request({
        method: "GET",
        path: `${API}/validatingadmissionpolicybindings/${name}`,
        signal,
      })) as Binding;
      const actions = binding.spec?.validationActions;
      if (binding.spec?.policyName !== name || !Array.isArray(actions) || !actions.includes("Deny"))
        throw new ShardLabelPolicyError(
          `--sharded: the ValidatingAdmissionPolicyBinding ${JSON.stringify(name)} must bind the policy ${JSON.stringify(name)} with validationActions [Deny] (it has policyName ${JSON.stringify(binding.spec?.policyName)}, validationActions ${JSON.stringify(actions)}): ${FIX}`,
        );
      logger.info({ policy: name }, "the shard label policy is in place");
      return;
    } catch (err) {
      if (err instanceof ShardLabelPolicyError) throw err;
      if (signal.aborted) return;
      if (err instanceof NotFoundError)
        throw new ShardLabelPolicyError(`--sharded: ${what} must exist (${err.message}): ${FIX}`);
      if (err instanceof KubeApiError && (err.status === 403 || err.status === 401))
        throw new ShardLabelPolicyError(
          `--sharded: the operator may not read ${what} (${err.message}): give its ServiceAccount get on validatingadmissionpolicies and validatingadmissionpolicybindings named ${JSON.stringify(name)} (the ClusterRole dms-operator-sharding of manifests/components/sharding), or ${FIX.slice(FIX.indexOf("to run without"))}`,
        );
      logger.warn({ err, policy: name }, `could not read ${what}; trying again`);
      try {
        await clock.sleep(RETRY_MS, signal);
      } catch {
        return;
      }
    }
  }
}
