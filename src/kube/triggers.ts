/**
 * Which changes of the watched objects enqueue which reconciles: a Deployment resource's own
 * changes (not the operator's status writes), a deleted resource's rivals for its service name,
 * the resources reading a Secret that changed, and the resources of a namespace whose labels
 * changed (a namespace selector may now allow or refuse them), and the resource whose exported
 * ConfigMap another hand changed or deleted. The indexes named are the cache's
 * (see `KubeDeploymentsOptions.indexers`), so no trigger scans the cache.
 *
 * The watches' event handlers, beside the reflector whose events they read: each is given the
 * cache, the index names and the queue it feeds (a controller's `enqueue` and `forget`), and
 * knows of the controllers only their keys (an object's, a claim's, a connection's). Which cache,
 * which index and which controller each one joins is composition: `wiring/triggers.ts`.
 */

import { connectionKey, DEFAULT_CONNECTION, idOf } from "../crd/conventions.ts";
import { FINALIZER, KIND } from "../crd/schema.ts";
import { claimOf, connectionKeyOf, olderThan } from "../reconcile/inputs.ts";
import type { Controller } from "../runtime/controller.ts";
import { objectKey } from "../runtime/queue-records.ts";
import { OWNER_LABEL } from "../sharding/labels.ts";
import { isOwnGroup, type KubeConfigMaps } from "./config-maps.ts";
import type { ConnectionObject, KubeConnections } from "./connections.ts";
import type { KubeDeployments } from "./custom-resources.ts";
import type { KubeNamespaces } from "./namespaces.ts";
import { type DeploymentObject, type KubeObject, refOf } from "./object.ts";
import type { KubeSecrets } from "./secrets.ts";

/**
 * An exported ConfigMap deleted, or changed by another hand (its data, label or controller),
 * enqueues the resource that controls it, which writes it back (`reconcile/export.ts`).
 */
export function subscribeExportTriggers(
  configMaps: Pick<KubeConfigMaps, "onOwnerChange">,
  controller: Pick<Controller, "enqueue">,
): void {
  configMaps.onOwnerChange((owner) => {
    // A Deployment of dms.dev only: an apps/v1 Deployment of the same name is another object.
    if (owner.kind === KIND && isOwnGroup(owner.apiVersion)) controller.enqueue(objectKey(owner));
  });
}

/** Enqueues reconciles on the changes that matter: not on the operator's own status writes. */
export function subscribeTriggers(
  deployments: Pick<KubeDeployments, "subscribe" | "byIndex">,
  secrets: Pick<KubeSecrets, "onChange">,
  controller: Pick<Controller, "enqueue" | "enqueueAll" | "forget">,
  claimIndex: string,
  secretIndex: string,
): void {
  const keyOf = (o: DeploymentObject) => objectKey(refOf(o));
  // Only the younger rivals: a resource's claim is judged against the older ones alone, so an add
  // or delete can change it only for those it outranks. Another namespace's churn of names on a
  // shared connection (a creationTimestamp cannot be set back) never reconciles the older holder.
  const rivalsOf = (o: DeploymentObject) => {
    const key = keyOf(o);
    for (const rival of deployments.byIndex(claimIndex, claimOf(o)))
      if (keyOf(rival) !== key && olderThan(o, rival)) controller.enqueue(keyOf(rival));
  };
  deployments.subscribe({
    // The cache's own key string: the queue's record of the key then holds no copy of its own.
    onAdd: (o, key = keyOf(o)) => {
      // A settled resource (a start's list, a share moved or inherited) waits as a resync, behind
      // every edit: one edit among 11,600 resources a failover hands over is not reconciled last.
      if (settled(o)) controller.enqueueAll([key], 0);
      else controller.enqueue(key);
      // A resource that took the name when it had no rival may lose it to this one (created in
      // the same second, and first by name): it is judged again, and stalls on the conflict.
      rivalsOf(o);
    },
    onUpdate: (old, o) => {
      if (specOrMetaChanged(old, o)) controller.enqueue(keyOf(o));
    },
    onDelete: (o) => {
      controller.forget(keyOf(o));
      // A resource that lost a name conflict to this one may now take the name.
      rivalsOf(o);
    },
  });
  secrets.onChange((ref) => {
    for (const o of deployments.byIndex(secretIndex, objectKey(ref))) controller.enqueue(keyOf(o));
  });
}

/**
 * Whether the operator has applied a resource's generation already (`status.observedGeneration`
 * is its `metadata.generation`) and nobody asked to delete it: what is left of its reconcile is
 * to look, not to carry out an edit. Enqueued on its add, such a resource waits in the work
 * queue's resync line (`WorkQueue`: fresh work first), a resource edited or new in its fresh one.
 */
export function settled(o: DeploymentObject): boolean {
  const { generation, deletionTimestamp } = o.metadata;
  return (
    generation !== undefined && o.status?.observedGeneration === generation && deletionTimestamp === undefined
  );
}

/**
 * True when an update is more than a status write: spec, annotations, labels (but the shard owner
 * label), finalizers, deletion.
 * The operator's own finalizer being added is not: the reconcile that adds it goes on to act, and
 * another one at once would only repeat it (a refused create sent twice).
 */
export function specOrMetaChanged(old: KubeObject, o: KubeObject): boolean {
  const a = old.metadata;
  const b = o.metadata;
  return (
    a.generation !== b.generation ||
    a.deletionTimestamp !== b.deletionTimestamp ||
    JSON.stringify(a.annotations ?? {}) !== JSON.stringify(b.annotations ?? {}) ||
    !sameLabelsButOwner(a.labels, b.labels) ||
    (JSON.stringify(a.finalizers ?? []) !== JSON.stringify(b.finalizers ?? []) &&
      !onlyOursAdded(a.finalizers ?? [], b.finalizers ?? []))
  );
}

/**
 * Whether two label sets are the same but for the shard owner label: a resource relabelled for
 * the replica that holds it (a moved or inherited one, reconciled already while it came) is not
 * reconciled again for its label alone. The drain label still counts (its lifting resumes it).
 */
function sameLabelsButOwner(
  a: Readonly<Record<string, string>> | undefined,
  b: Readonly<Record<string, string>> | undefined,
): boolean {
  // Every status write's event comes here: the common case compares as before, no copy made.
  if (JSON.stringify(a ?? {}) === JSON.stringify(b ?? {})) return true;
  if (a?.[OWNER_LABEL] === b?.[OWNER_LABEL]) return false;
  const without = (labels: Readonly<Record<string, string>> | undefined) => {
    const { [OWNER_LABEL]: _owner, ...rest } = labels ?? {};
    return JSON.stringify(rest);
  };
  return without(a) === without(b);
}

/** Whether `after` is `before` with the operator's finalizer added and nothing else changed. */
function onlyOursAdded(before: readonly string[], after: readonly string[]): boolean {
  if (before.includes(FINALIZER) || after.length !== before.length + 1) return false;
  return JSON.stringify(after.filter((f) => f !== FINALIZER)) === JSON.stringify(before);
}

/** What {@link subscribeConnectionTriggers} connects. */
export interface ConnectionTriggers {
  deployments: KubeDeployments;
  connections: KubeConnections;
  secrets: KubeSecrets;
  connectionController: Pick<Controller, "enqueue" | "forget">;
  /** The connections' cache index by the Secret (`namespace/name`) holding their key. */
  secretIndex: string;
}

/**
 * Enqueues connection reconciles on the changes that matter to them (their spec or metadata,
 * their Secret, and a resource starting or ceasing to use them, which they count).
 */
export function subscribeConnectionTriggers(t: ConnectionTriggers): void {
  const keyOfConnection = (c: ConnectionObject) => connectionKey(idOf(c));
  t.connections.subscribe({
    onAdd: (c) => t.connectionController.enqueue(keyOfConnection(c)),
    onUpdate: (old, c) => {
      if (specOrMetaChanged(old, c)) t.connectionController.enqueue(keyOfConnection(c));
    },
    onDelete: (c) => t.connectionController.enqueue(keyOfConnection(c)),
  });
  const counted = (o: DeploymentObject) => {
    const key = connectionKeyOf(o);
    if (key !== DEFAULT_CONNECTION) t.connectionController.enqueue(key);
  };
  t.deployments.subscribe({ onAdd: counted, onDelete: counted });
  t.secrets.onChange((ref) => {
    for (const c of t.connections.byIndex(t.secretIndex, objectKey(ref)))
      t.connectionController.enqueue(keyOfConnection(c));
  });
}

/** What {@link subscribeNamespaceTriggers} connects. */
export interface NamespaceTriggers {
  /** The deployments' cache index by namespace. */
  namespaceIndex: string;
  /** The deployments' cache index by claim (see `reconcile/inputs.ts`). */
  claimIndex: string;
  deploymentController: Pick<Controller, "enqueue">;
  connectionController: Pick<Controller, "enqueue">;
}

/**
 * When a namespace's labels change (or it appears or goes), enqueues its Deployment resources,
 * whose connection's namespace selector may now decide otherwise, their rivals for their service
 * names elsewhere (a refused resource holds no name), and the ClusterServiceConnections they use,
 * which count the resources they refuse. Through the cache's indexes: a label change costs the
 * resources of that namespace and their rivals, never a scan.
 */
export function subscribeNamespaceTriggers(
  namespaces: KubeNamespaces,
  deployments: KubeDeployments,
  t: NamespaceTriggers,
): void {
  const keyOf = (o: DeploymentObject) => objectKey(refOf(o));
  namespaces.onLabelsChange((namespace) => {
    const counted = new Set<string>();
    for (const o of deployments.byIndex(t.namespaceIndex, namespace)) {
      t.deploymentController.enqueue(keyOf(o));
      for (const rival of deployments.byIndex(t.claimIndex, claimOf(o)))
        if (rival.metadata.namespace !== namespace) t.deploymentController.enqueue(keyOf(rival));
      const key = connectionKeyOf(o);
      if (key === DEFAULT_CONNECTION || counted.has(key)) continue;
      counted.add(key);
      t.connectionController.enqueue(key);
    }
  });
}
