/**
 * Which changes of the watched objects enqueue which reconciles, but a Deployment resource's own
 * (`subscribeTriggers`, beside its adapter in `custom-resources.ts`): a connection's own changes
 * (not the operator's status writes), its Secret's, and a resource starting or ceasing to use it;
 * the resources of a namespace whose labels changed (a namespace selector may now allow or refuse
 * them); and the resource whose exported ConfigMap another hand changed or deleted. The indexes
 * named are the cache's (see `KubeDeploymentsOptions.indexers`), so no trigger scans the cache.
 *
 * The watches' event handlers, beside the reflector whose events they read: each is given the
 * cache, the index names and the queue it feeds (a controller's `enqueue` and `forget`), and
 * knows of the controllers only their keys (an object's, a claim's, a connection's). Which cache,
 * which index and which controller each one joins is composition: `wiring/triggers.ts`.
 */

import { connectionKey, DEFAULT_CONNECTION, idOf } from "../crd/conventions.ts";
import { KIND } from "../crd/schema.ts";
import { claimOf, connectionKeyOf } from "../reconcile/inputs.ts";
import type { Controller } from "../runtime/controller.ts";
import { objectKey } from "../runtime/queue-records.ts";
import { isOwnGroup, type KubeConfigMaps } from "./config-maps.ts";
import type { ConnectionObject, KubeConnections } from "./connections.ts";
import type { KubeDeployments } from "./custom-resources.ts";
import type { KubeNamespaces } from "./namespaces.ts";
import { type DeploymentObject, refOf, specOrMetaChanged } from "./object.ts";
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
