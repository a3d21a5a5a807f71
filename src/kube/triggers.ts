/**
 * Which changes of the watched objects enqueue which reconciles: a Deployment resource's own
 * changes (not the operator's status writes), a deleted resource's rivals for its service name,
 * and the resources reading a Secret that changed. The indexes named are the cache's (see
 * `KubeDeploymentsOptions.indexers`), so no trigger scans the cache.
 */
import { claimOf } from "../reconcile/claims.ts";
import type { Controller } from "../runtime/controller.ts";
import type { DeploymentObject, KubeDeployments } from "./deployments.ts";
import { objectKey, refOf } from "./object.ts";
import type { KubeSecrets } from "./secrets.ts";

/** Enqueues reconciles on the changes that matter: not on the operator's own status writes. */
export function subscribeTriggers(
  deployments: KubeDeployments,
  secrets: KubeSecrets,
  controller: Pick<Controller, "enqueue" | "forget">,
  claimIndex: string,
  secretIndex: string,
): void {
  const keyOf = (o: DeploymentObject) => objectKey(refOf(o));
  deployments.subscribe({
    onAdd: (o) => controller.enqueue(keyOf(o)),
    onUpdate: (old, o) => {
      if (specOrMetaChanged(old, o)) controller.enqueue(keyOf(o));
    },
    onDelete: (o) => {
      controller.forget(keyOf(o));
      // A resource that lost a name conflict to this one may now take the name.
      for (const rival of deployments.byIndex(claimIndex, claimOf(o))) controller.enqueue(keyOf(rival));
    },
  });
  secrets.onChange((ref) => {
    for (const o of deployments.byIndex(secretIndex, objectKey(ref))) controller.enqueue(keyOf(o));
  });
}

/** True when an update is more than a status write: spec, annotations, labels, finalizers, deletion. */
function specOrMetaChanged(old: DeploymentObject, o: DeploymentObject): boolean {
  const a = old.metadata;
  const b = o.metadata;
  return (
    a.generation !== b.generation ||
    a.deletionTimestamp !== b.deletionTimestamp ||
    JSON.stringify(a.annotations ?? {}) !== JSON.stringify(b.annotations ?? {}) ||
    JSON.stringify(a.labels ?? {}) !== JSON.stringify(b.labels ?? {}) ||
    JSON.stringify(a.finalizers ?? []) !== JSON.stringify(b.finalizers ?? [])
  );
}
