/**
 * The check a `--sharded` replica makes before it joins the ring: the ValidatingAdmissionPolicy
 * that lets nobody but the operator write the shard labels, and its binding, exist. Without them a
 * tenant who may edit its Deployment resources can relabel one from replica X to replica Y while
 * X reconciles it: Y reconciles it from its ADDED event at once, and two replicas write one
 * deployment until the sharder drains it back. See docs/guide/sharding.md, "Label policy". Here,
 * the reading of the two objects; what a replica does with it is `sharding/label-policy.ts`'s.
 */
import type { KubeClient } from "../kube/client.ts";
import { KubeApiError, NotFoundError } from "../kube/errors.ts";

/** The policy's and its binding's name in manifests/components/sharding. */
export const DEFAULT_SHARD_LABEL_POLICY = "dms-operator-shard-labels";

const API = "/apis/admissionregistration.k8s.io/v1";

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
