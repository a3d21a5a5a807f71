/**
 * An admission policy shipped in manifests/, applied by a cluster test: renamed for the test and
 * bound to its namespace alone, since the test API server is shared with the other test files.
 */

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
