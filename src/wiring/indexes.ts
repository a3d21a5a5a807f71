/**
 * The watch caches' secondary indexes: every lookup the operator makes by something other than
 * an object's key (its claim, its Secrets, its connection, its namespace, a rollout to poll) goes
 * through one of these, so no trigger, pass or count scans the cache.
 */
import { secretsOf } from "../connection/settings.ts";
import type { ConnectionObject } from "../kube/connections.ts";
import type { DeploymentObject } from "../kube/deployments.ts";
import { objectKey } from "../kube/object.ts";
import { DEFAULT_CONNECTION, idOf } from "../naming/connection.ts";
import { CLAIM_INDEX, claimIndexer, connectionKeyOf } from "../reconcile/claims.ts";
import { SECRET_INDEX, secretIndexer } from "../reconcile/inputs.ts";
import type { StoredResource } from "../reconcile/ports.ts";
import { CONDITION } from "../reconcile/status/status.ts";

export { CLAIM_INDEX, SECRET_INDEX };

/** The cache index of resources whose deployment is being polled (see {@link pollIndexer}). */
export const POLL_INDEX = "polled";

/**
 * A resource is polled while its deployment is settling after a successful write (creating,
 * rolling out): Reconciling and Synced both True, and its deployment id known; and while a
 * create of its own is not yet listed (the intent is cleared once a read shows it). A failing
 * one is not: its retries follow the controller's backoff.
 */
export function pollIndexer(obj: StoredResource): string[] {
  const status = obj.status;
  if (!status?.deploymentId) return [];
  if (status.createRequestedAt) return [POLL_INDEX];
  const isTrue = (type: string) =>
    (status.conditions ?? []).some((c) => c.type === type && c.status === "True");
  return isTrue(CONDITION.Reconciling) && isTrue(CONDITION.Synced) ? [POLL_INDEX] : [];
}

/** The cache index of Deployment resources by the key of the connection they use. */
export const CONNECTION_INDEX = "connection";
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
    // Resources of the default connection are not indexed: it is never counted or re-checked.
    [CONNECTION_INDEX]: (o) => {
      const key = connectionKeyOf(o);
      return key === DEFAULT_CONNECTION ? [] : [key];
    },
  };
}

/** The connections' index: its API key's Secret and its CA's, so a change of either reaches it. */
export const connectionIndexers: Record<string, Indexer<ConnectionObject>> = {
  [CONNECTION_SECRET_INDEX]: (c) => secretsOf(idOf(c), c.spec).map(objectKey),
};
