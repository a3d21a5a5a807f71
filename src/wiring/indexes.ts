/**
 * The watch caches' secondary indexes: every lookup the operator makes by something other than
 * an object's key (its claim, its Secrets, its connection, its namespace, a rollout to poll) goes
 * through one of these, so no trigger, pass or count scans the cache.
 */
import { secretsOf } from "../connection/settings.ts";
import { idOf } from "../crd/conventions.ts";
import type { ConnectionObject } from "../kube/connections.ts";
import type { DeploymentObject } from "../kube/object.ts";
import { POLL_INDEX, pollIndexer } from "../reconcile/conclude.ts";
import {
  CLAIM_INDEX,
  CONNECTION_INDEX,
  claimIndexer,
  connectionIndexer,
  SECRET_INDEX,
  secretIndexer,
} from "../reconcile/inputs.ts";
import { objectKey } from "../runtime/queue-records.ts";

// Each indexer lives with what it reads; the indexes are joined here.
export { CLAIM_INDEX, CONNECTION_INDEX, POLL_INDEX, pollIndexer, SECRET_INDEX };

/** The cache index of Deployment resources by namespace (kept only when namespaces are watched). */
export const NAMESPACE_INDEX = "namespace";
/** The cache index of connections by the Secrets they read, API key and CA (`namespace/name`). */
export const CONNECTION_SECRET_INDEX = "apiKeySecret";

/** An index of a watch cache: the values an object is found under. */
type Indexer<T> = (obj: T) => readonly string[];

/**
 * The Deployment resources' indexes; by namespace only when `byNamespace` (the namespaces are
 * watched, so a change of their labels has resources to enqueue).
 */
export function deploymentIndexers(byNamespace: boolean): Record<string, Indexer<DeploymentObject>> {
  return {
    [CLAIM_INDEX]: claimIndexer,
    [SECRET_INDEX]: secretIndexer,
    [POLL_INDEX]: pollIndexer,
    ...(byNamespace ? { [NAMESPACE_INDEX]: (o: DeploymentObject) => [o.metadata.namespace ?? ""] } : {}),
    [CONNECTION_INDEX]: connectionIndexer,
  };
}

/** The connections' index: its API key's Secret and its CA's, so a change of either reaches it. */
export const connectionIndexers: Record<string, Indexer<ConnectionObject>> = {
  [CONNECTION_SECRET_INDEX]: (c) => secretsOf(idOf(c), c.spec).map(objectKey),
};
