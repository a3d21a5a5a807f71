/**
 * `plan`'s check of deletion protection: the Deployment resources of the cluster with
 * `spec.deletionProtection: true` that the files no longer hold. A GitOps tool that syncs the
 * files with pruning (Argo CD's prune, Flux's `prune: true`, `kubectl apply --prune`) would try to
 * delete each, and the API server would refuse it (the ValidatingAdmissionPolicy
 * dms-operator-deletion-protection) until `spec.deletionProtection` is cleared first: the sync
 * fails, or the resource was renamed by mistake. Pure: plan.ts reads the cluster.
 *
 * Which resources of the cluster the files stand for is not written in the files: a tool marks
 * what it applied (labels or annotations) on the objects, not in Git. The rule: when the live
 * copies of the files' resources carry a tool's mark ({@link gitopsMark}), the resources with one
 * of those marks, in whatever namespace (another owner's resources are not pruned by this sync; a
 * file dropped with its namespace's last resource is still that owner's); else every resource of
 * the namespaces the files' resources go to. plan.ts lists the namespaces, and the marks that are
 * labels across the cluster; a mark that is an annotation cannot be selected by a list.
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
  /** The GitOps tool's mark of what applied it ({@link gitopsMark}), if any. */
  owner?: string;
  /** A label selector for the resources of the same mark, when the mark is labels. */
  selector?: string;
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

/** A GitOps tool's mark: who applied the object, and a label selector for its other objects. */
export interface GitopsMark {
  owner: string;
  /** Absent when the mark is an annotation (Argo CD's tracking id, Helm's release): a list cannot select it. */
  selector?: string;
}

/** A label value the API server accepts, so that it can go into a selector as it is. */
const LABEL_VALUE = /^(?:[A-Za-z0-9](?:[A-Za-z0-9._-]{0,61}[A-Za-z0-9])?)?$/;

/**
 * What applied `meta`'s object, as the GitOps tools mark it, or undefined: a Flux Kustomization
 * or HelmRelease (their name and namespace labels), an Argo CD Application (the annotation
 * `argocd.argoproj.io/tracking-id`, else its default tracking label `app.kubernetes.io/instance`),
 * a Helm release (`meta.helm.sh/release-*`), a kubectl ApplySet (`applyset.kubernetes.io/part-of`).
 * Each value is cut to {@link MAX_MARK} characters and made one printable line (whoever may
 * label the resource writes it, and the warning prints it).
 */
export function gitopsMark(meta: Marked): GitopsMark | undefined {
  const mark = (value: string | undefined) =>
    typeof value === "string" && value !== "" ? printableLine(value.slice(0, MAX_MARK)) : undefined;
  const label = (key: string) => mark(meta.labels?.[key]);
  const annotation = (key: string) => mark(meta.annotations?.[key]);
  // The labels as they are, when each is a valid label value (the API server checked them).
  const selecting = (keys: readonly string[]) => {
    const pairs = keys.flatMap((key) => {
      const value = meta.labels?.[key];
      return typeof value === "string" && value !== "" ? [[key, value] as const] : [];
    });
    return pairs.every(([, value]) => LABEL_VALUE.test(value))
      ? { selector: pairs.map(([key, value]) => `${key}=${value}`).join(",") }
      : {};
  };
  for (const kind of ["kustomize", "helm"] as const) {
    const name = label(`${kind}.toolkit.fluxcd.io/name`);
    if (name) {
      const ns = label(`${kind}.toolkit.fluxcd.io/namespace`) ?? "";
      const owner = `Flux ${kind === "kustomize" ? "Kustomization" : "HelmRelease"} ${ns}/${name}`;
      return {
        owner,
        ...selecting([`${kind}.toolkit.fluxcd.io/name`, `${kind}.toolkit.fluxcd.io/namespace`]),
      };
    }
  }
  const tracking = annotation("argocd.argoproj.io/tracking-id");
  if (tracking) return { owner: `Argo CD Application ${tracking.split(":")[0]}` };
  const instance = label("app.kubernetes.io/instance");
  if (instance)
    return { owner: `app.kubernetes.io/instance=${instance}`, ...selecting(["app.kubernetes.io/instance"]) };
  const release = annotation("meta.helm.sh/release-name");
  if (release)
    return { owner: `Helm release ${annotation("meta.helm.sh/release-namespace") ?? ""}/${release}` };
  const applySet = label("applyset.kubernetes.io/part-of");
  if (applySet) return { owner: `ApplySet ${applySet}`, ...selecting(["applyset.kubernetes.io/part-of"]) };
  return undefined;
}

const keyOf = (r: { namespace: string; name: string }) => `${r.namespace}/${r.name}`;

/** The marks the live copies of the files' resources (`planned`) carry, one per owner. */
export function filesMarks(
  planned: readonly { namespace: string; name: string }[],
  live: readonly LiveMarks[],
): GitopsMark[] {
  const inFiles = new Set(planned.map(keyOf));
  const marks = new Map<string, GitopsMark>();
  for (const l of live)
    if (l.owner && inFiles.has(keyOf(l)) && !marks.has(l.owner))
      marks.set(l.owner, { owner: l.owner, ...(l.selector ? { selector: l.selector } : {}) });
  return [...marks.values()];
}

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
  const owners = new Set(filesMarks(planned, live).map((m) => m.owner));
  return live
    .filter((l) => l.protected && !inFiles.has(keyOf(l)))
    .filter((l) =>
      owners.size === 0 ? namespaces.has(l.namespace) : l.owner !== undefined && owners.has(l.owner),
    )
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
