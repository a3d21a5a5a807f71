/**
 * The operator's triggers joined: each handler of `kube/triggers.ts` and the Deployment resources'
 * own (`subscribeTriggers`, `kube/custom-resources.ts`) on its watch cache, through
 * the cache's indexes (`indexes.ts`), to the Deployment or the connection controller.
 */
import { type KubeDeployments, subscribeTriggers } from "../kube/custom-resources.ts";
import { refOf } from "../kube/object.ts";
import {
  subscribeConnectionTriggers,
  subscribeExportTriggers,
  subscribeNamespaceTriggers,
} from "../kube/triggers.ts";
import type { Controller } from "../runtime/controller.ts";
import { objectKey } from "../runtime/queue-records.ts";
import type { Caches } from "./caches.ts";
import {
  CLAIM_INDEX,
  CONNECTION_INDEX,
  CONNECTION_SECRET_INDEX,
  NAMESPACE_INDEX,
  SECRET_INDEX,
} from "./indexes.ts";

/**
 * Every trigger of the operator on `caches`: the Deployment resources' own, the connections',
 * and the namespaces' when they are watched.
 */
export function subscribeAll(
  caches: Caches,
  deploymentController: Pick<Controller, "enqueue" | "enqueueAll" | "forget">,
  connectionController: Pick<Controller, "enqueue" | "forget">,
): void {
  const { deployments, secrets, namespaces } = caches;
  subscribeTriggers(deployments, secrets, deploymentController, CLAIM_INDEX, SECRET_INDEX);
  subscribeExportTriggers(caches.configMaps, deploymentController);
  subscribeConnectionTriggers({
    deployments,
    connections: caches.connections,
    secrets,
    connectionController,
    secretIndex: CONNECTION_SECRET_INDEX,
  });
  if (namespaces)
    subscribeNamespaceTriggers(namespaces, deployments, {
      namespaceIndex: NAMESPACE_INDEX,
      claimIndex: CLAIM_INDEX,
      deploymentController,
      connectionController,
    });
}

/**
 * The function that enqueues the resources using a connection (by the deployments' cache index
 * by connection key): called when the connection became usable or unusable.
 */
export function connectionUsersEnqueuer(
  deployments: Pick<KubeDeployments, "byIndex">,
  deploymentController: Pick<Controller, "enqueue">,
): (key: string) => void {
  return (key) => {
    for (const o of deployments.byIndex(CONNECTION_INDEX, key))
      deploymentController.enqueue(objectKey(refOf(o)));
  };
}
