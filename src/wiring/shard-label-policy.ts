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
  spec?: { policyName?: unknown; validationActions?: unknown; matchResources?: unknown; paramRef?: unknown };
}

/** The label Kubernetes sets on every namespace to its name (immutable). */
const NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name";

/** What the binding must cover and whom it must exempt. */
export interface BindingExpectation {
  /** The namespaces the operator watches (`--namespaces`); empty or absent: all. */
  namespaces?: readonly string[];
  /** The operator's own ServiceAccount, when it runs as one: the binding's `paramRef` must name it. */
  serviceAccount?: { namespace: string; name: string };
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null;
const emptyList = (v: unknown) => v === undefined || v === null || (Array.isArray(v) && v.length === 0);
/** A label selector that selects everything: absent, or no labels and no expressions. */
const selectsAll = (v: unknown) =>
  v === undefined ||
  v === null ||
  (isObject(v) &&
    (v.matchLabels === undefined || (isObject(v.matchLabels) && Object.keys(v.matchLabels).length === 0)) &&
    emptyList(v.matchExpressions));

/** The namespaces a selector names by their name label alone, or undefined when it does otherwise. */
function namesSelected(selector: Record<string, unknown>): string[] | undefined {
  const labels = isObject(selector.matchLabels) ? Object.entries(selector.matchLabels) : [];
  const expressions = Array.isArray(selector.matchExpressions) ? selector.matchExpressions : [];
  if (labels.length === 1 && expressions.length === 0) {
    const [key, value] = labels[0] ?? [];
    return key === NAMESPACE_NAME_LABEL && typeof value === "string" ? [value] : undefined;
  }
  const [only] = expressions;
  if (labels.length > 0 || expressions.length !== 1 || !isObject(only)) return undefined;
  if (only.key !== NAMESPACE_NAME_LABEL || only.operator !== "In" || !Array.isArray(only.values))
    return undefined;
  return only.values.filter((v): v is string => typeof v === "string");
}

/**
 * What is wrong with the binding's `matchResources` and `paramRef` for `expected`, or undefined.
 * `matchResources` may not narrow the policy (object selector, resource rules, exclusions), and
 * its namespace selector selects every namespace, or, when the operator watches some only, names
 * each of them by `kubernetes.io/metadata.name`. `paramRef` names one ServiceAccount (no
 * selector), the operator's when it is known, and denies when it is missing.
 */
export function bindingProblem(
  spec: NonNullable<Binding["spec"]>,
  expected: BindingExpectation,
): string | undefined {
  const match = spec.matchResources;
  if (match !== undefined && match !== null) {
    if (!isObject(match)) return "matchResources must be an object";
    if (!selectsAll(match.objectSelector)) return "matchResources.objectSelector must select every object";
    if (!emptyList(match.resourceRules) || !emptyList(match.excludeResourceRules))
      return "matchResources must have no resourceRules and no excludeResourceRules (the policy's own matchConstraints say what it covers)";
    const selector = match.namespaceSelector;
    if (!selectsAll(selector)) {
      const named = isObject(selector) ? namesSelected(selector) : undefined;
      const watched = expected.namespaces ?? [];
      const missing = watched.filter((n) => !named?.includes(n));
      if (watched.length === 0 || named === undefined || missing.length > 0)
        return `matchResources.namespaceSelector must select every namespace the operator watches (${watched.length === 0 ? "all of them" : watched.join(", ")}), or only name them by ${NAMESPACE_NAME_LABEL}`;
    }
  }
  const ref = spec.paramRef;
  if (!isObject(ref) || typeof ref.name !== "string" || ref.name === "" || typeof ref.namespace !== "string")
    return "paramRef must name the operator's ServiceAccount (name and namespace)";
  if (ref.selector !== undefined && ref.selector !== null)
    return "paramRef must name one ServiceAccount, not a selector";
  if (ref.parameterNotFoundAction !== "Deny")
    return "paramRef.parameterNotFoundAction must be Deny (a missing ServiceAccount must not let every write through)";
  const self = expected.serviceAccount;
  if (self && (ref.name !== self.name || ref.namespace !== self.namespace))
    return `paramRef must name the operator's ServiceAccount ${self.namespace}/${self.name} (it names ${ref.namespace}/${ref.name})`;
  return undefined;
}

/** The policy or its binding is missing or does not enforce: the replica must not start. */
export class ShardLabelPolicyError extends Error {
  override readonly name = "ShardLabelPolicyError";
}

const FIX =
  "apply manifests/components/sharding's shard-label-policy.yaml (Helm: sharding.labelPolicy=true), or name yours with --shard-label-policy-name; to run without it, accepting that a tenant who may edit its Deployment resources can relabel them and make two replicas write one deployment, set --shard-label-policy=unenforced (Helm: sharding.labelPolicyMode=unenforced)";

/**
 * Reads the policy `name` and its binding once: undefined when both exist and the binding binds
 * the policy with `Deny` over what the operator watches, exempting the operator alone
 * ({@link bindingProblem}), a {@link ShardLabelPolicyError} naming the fix when one is missing,
 * does not bind the policy so, or cannot be read (403: RBAC). Rejects on any other failure (5xx, no
 * connection): it says nothing about the policy.
 */
export async function checkShardLabelPolicy(
  client: KubeClient,
  name: string,
  signal: AbortSignal,
  expected: BindingExpectation = {},
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
    const problem = bindingProblem(binding.spec, expected);
    if (problem !== undefined)
      return new ShardLabelPolicyError(
        `--sharded: the ValidatingAdmissionPolicyBinding ${JSON.stringify(name)} does not cover what the operator watches or does not exempt the operator alone: ${problem} (it has matchResources ${JSON.stringify(binding.spec.matchResources ?? null)}, paramRef ${JSON.stringify(binding.spec.paramRef ?? null)}): ${FIX}`,
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
 * The ServiceAccount the operator runs as, from a SelfSubjectReview (any authenticated user may
 * make one): undefined when it runs as another kind of user (a kubeconfig's) or the review is
 * refused. Rejects on other failures.
 */
export async function ownServiceAccount(
  client: KubeClient,
  signal: AbortSignal,
): Promise<{ namespace: string; name: string } | undefined> {
  let review: { status?: { userInfo?: { username?: unknown } } };
  try {
    review = (await client.request({
      method: "POST",
      path: "/apis/authentication.k8s.io/v1/selfsubjectreviews",
      body: { apiVersion: "authentication.k8s.io/v1", kind: "SelfSubjectReview" },
      signal,
    })) as typeof review;
  } catch (err) {
    if (err instanceof KubeApiError && [401, 403, 404].includes(err.status)) return undefined;
    throw err;
  }
  const username = review.status?.userInfo?.username;
  const parts = typeof username === "string" ? username.split(":") : [];
  if (parts.length !== 4 || parts[0] !== "system" || parts[1] !== "serviceaccount") return undefined;
  return { namespace: parts[2] ?? "", name: parts[3] ?? "" };
}
