/**
 * An admission policy shipped in manifests/, applied by a cluster test: renamed for the test and
 * bound to its namespace alone, since the test API server is shared with the other test files;
 * and one a test writes to refuse some updates ({@link refuseDeploymentUpdates}).
 */
import { waitFor } from "./cluster.ts";
import type { ClusterUser } from "./resources.ts";

/** The fields of a rendered policy or binding that {@link policyForNamespace} reads and renames. */
export interface PolicyManifest {
  kind: string;
  metadata: { name: string; namespace?: string };
  spec?: Record<string, unknown>;
}

/**
 * `policy` and `binding` as the objects to apply: both named `name` (no namespace: they are
 * cluster-scoped), the binding naming the renamed policy and matching only `namespace`.
 */
export function policyForNamespace(
  policy: PolicyManifest,
  binding: PolicyManifest,
  name: string,
  namespace: string,
): PolicyManifest[] {
  return [
    { ...policy, metadata: { name } },
    {
      ...binding,
      metadata: { name },
      spec: {
        ...binding.spec,
        policyName: name,
        matchResources: {
          namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": namespace } },
        },
      },
    },
  ];
}

/**
 * A ValidatingAdmissionPolicy named `name` (and its binding) refusing each UPDATE of a Deployment
 * resource in `namespace` whose new object fails `allowed` (CEL over `object`), saying `message`.
 * Resolves once in effect: the API server refuses a dry run of `probe` (a merge patch of the
 * resource `probe.name` that the policy refuses). `remove` deletes the policy and its binding.
 */
export async function refuseDeploymentUpdates(
  user: ClusterUser,
  o: {
    name: string;
    namespace: string;
    allowed: string;
    message: string;
    probe: { name: string; body: unknown };
  },
): Promise<{ remove(): Promise<void> }> {
  const policy = {
    apiVersion: "admissionregistration.k8s.io/v1",
    kind: "ValidatingAdmissionPolicy",
    metadata: { name: o.name },
    spec: {
      failurePolicy: "Fail",
      matchConstraints: {
        resourceRules: [
          { apiGroups: ["dms.dev"], apiVersions: ["*"], operations: ["UPDATE"], resources: ["deployments"] },
        ],
      },
      validations: [{ expression: o.allowed, message: o.message }],
    },
  };
  const binding = {
    apiVersion: "admissionregistration.k8s.io/v1",
    kind: "ValidatingAdmissionPolicyBinding",
    metadata: { name: o.name },
    spec: { validationActions: ["Deny"] },
  };
  const [p, b] = policyForNamespace(policy, binding, o.name, o.namespace);
  const base = "/apis/admissionregistration.k8s.io/v1";
  // Each with the apiVersion it was given (policyForNamespace keeps every field it does not rename).
  await user.client.request({ method: "POST", path: `${base}/validatingadmissionpolicies`, body: p });
  await user.client.request({ method: "POST", path: `${base}/validatingadmissionpolicybindings`, body: b });
  await waitFor(
    async () => {
      try {
        await user.client.request({
          method: "PATCH",
          path: `/apis/dms.dev/v1alpha1/namespaces/${o.namespace}/deployments/${o.probe.name}?dryRun=All`,
          contentType: "application/merge-patch+json",
          body: o.probe.body,
        });
        return undefined;
      } catch (err) {
        return String(err).includes(o.message) ? true : undefined;
      }
    },
    { timeoutMs: 30_000, intervalMs: 500, description: `the admission policy ${o.name} in effect` },
  );
  return {
    remove: async () => {
      for (const kind of ["validatingadmissionpolicybindings", "validatingadmissionpolicies"])
        await user.client
          .request({ method: "DELETE", path: `${base}/${kind}/${o.name}` })
          .catch(() => undefined);
    },
  };
}
