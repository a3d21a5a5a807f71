/**
 * `plan`'s check of deletion protection: the Deployment resources of the cluster with
 * `spec.deletionProtection: true` that the files no longer hold. A GitOps tool that syncs the
 * files with pruning (Argo CD's prune, Flux's `prune: true`, `kubectl apply --prune`) would try to
 * delete each, and the API server would refuse it (the ValidatingAdmissionPolicy
 * dms-operator-deletion-protection) until `spec.deletionProtection` is cleared first: the sync
 * fails, or the resource was renamed by mistake. Pure: plan.ts reads the cluster.
 *
 * Which resources of the cluster the files stand for is not written in the files: a tool marks
 * what it applied (labels or annotations) on the objects, not in Git. The rule: the namespaces the
 * files' resources go to; there, when the live copies of the files' resources carry a tool's mark
 * ({@link gitopsOwner}), only the resources with one of those marks (another owner's resources are
 * not pruned by this sync), else every resource of those namespaces.
 */

import { printableLine } from "../api/printable.ts";

/** The longest mark value kept: a label value is ≤ 63 characters, an annotation may be 256 KiB. */
const MAX_MARK = 253;

/** What plan reads of a live Deployment resource for this check. */
export interface LiveMarks {
  namespace: string;
  name: string;
  /** `spec.deletionProtection` is `true`. */
  protected: boolean;
  /** The GitOps tool's mark of what applied it ({@link gitopsOwner}), if any. */
  owner?: string;
}

/** A protected resource of the cluster that the files no longer hold. */
export interface ProtectedRemoval {
  namespace: string;
  name: string;
  /** The mark it shares with the files' resources, when the match was made by one. */
  owner?: string;
  /** One line saying what a prune would do and how to let it. */
  message: string;
}

/** The labels and annotations of an object, as the API server returns them. */
interface Marked {
  labels?: Record<string, string> | undefined;
  annotations?: Record<string, string> | undefined;
}

/**
 * What applied `meta`'s object, as the GitOps tools mark it, or undefined: a Flux Kustomization
 * or HelmRelease (their name and namespace labels), an Argo CD Application (the annotation
 * `argocd.argoproj.io/tracking-id`, else its default tracking label `app.kubernetes.io/instance`),
 * a Helm release (`meta.helm.sh/release-*`), a kubectl ApplySet (`applyset.kubernetes.io/part-of`).
 * Each value is cut to {@link MAX_MARK} characters and made one printable line (whoever may
 * label the resource writes it, and the warning prints it).
 */
export function gitopsOwner(meta: Marked): string | undefined {
  const mark = (value: string | undefined) =>
    typeof value === "string" && value !== "" ? printableLine(value.slice(0, MAX_MARK)) : undefined;
  const label = (key: string) => mark(meta.labels?.[key]);
  const annotation = (key: string) => mark(meta.annotations?.[key]);
  for (const kind of ["kustomize", "helm"] as const) {
    const name = label(`${kind}.toolkit.fluxcd.io/name`);
    if (name) {
      const ns = label(`${kind}.toolkit.fluxcd.io/namespace`) ?? "";
      return `Flux ${kind === "kustomize" ? "Kustomization" : "HelmRelease"} ${ns}/${name}`;
    }
  }
  const tracking = annotation("argocd.argoproj.io/tracking-id");
  if (tracking) return `Argo CD Application ${tracking.split(":")[0]}`;
  const instance = label("app.kubernetes.io/instance");
  if (instance) return `app.kubernetes.io/instance=${instance}`;
  const release = annotation("meta.helm.sh/release-name");
  if (release) return `Helm release ${annotation("meta.helm.sh/release-namespace") ?? ""}/${release}`;
  const applySet = label("applyset.kubernetes.io/part-of");
  if (applySet) return `ApplySet ${applySet}`;
  return undefined;
}

const keyOf = (r: { namespace: string; name: string }) => `${r.namespace}/${r.name}`;

/**
 * The protected resources of `live` that a prune of the files' resources (`planned`, as namespace
 * and `metadata.name`) would delete, by the module comment's rule, sorted by namespace and name.
 */
export function protectedRemovals(
  planned: readonly { namespace: string; name: string }[],
  live: readonly LiveMarks[],
): ProtectedRemoval[] {
  const inFiles = new Set(planned.map(keyOf));
  const namespaces = new Set(planned.map((p) => p.namespace));
  const owners = new Set(live.flatMap((l) => (inFiles.has(keyOf(l)) && l.owner ? [l.owner] : [])));
  return live
    .filter((l) => l.protected && namespaces.has(l.namespace) && !inFiles.has(keyOf(l)))
    .filter((l) => owners.size === 0 || (l.owner !== undefined && owners.has(l.owner)))
    .sort((a, b) => (keyOf(a) < keyOf(b) ? -1 : keyOf(a) > keyOf(b) ? 1 : 0))
    .map((l) => {
      const shared = owners.size > 0 ? l.owner : undefined;
      const whose = shared
        ? `applied by the same ${shared} as the files' resources`
        : "in a namespace of the files' resources";
      const message = `${l.namespace}/${l.name} has spec.deletionProtection: true and is no longer in the files (${whose}): a GitOps sync that prunes would delete it, and the API server refuses the delete until spec.deletionProtection is cleared first (kubectl patch dmsd ${l.name} -n ${l.namespace} --type merge -p '{"spec":{"deletionProtection":false}}'); if it was renamed or moved by mistake, keep it in the files`;
      return { namespace: l.namespace, name: l.name, ...(shared ? { owner: shared } : {}), message };
    });
}
