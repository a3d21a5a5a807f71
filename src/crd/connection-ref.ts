/**
 * How connections are named and keyed: which connection a Deployment resource means by its
 * `spec.connectionRef`, the key the connection controller's queue, the session registry and the
 * claim index share, and how messages name one. Pure, and below every folder that needs it: the
 * reconciler, the Kubernetes adapters and the connection controller all speak of connections
 * without importing each other (the connection's service settings are `connection/settings.ts`).
 */
import {
  CLUSTER_SERVICE_CONNECTION_KIND,
  CONNECTION_KINDS,
  type ConnectionKind,
  SERVICE_CONNECTION_KIND,
} from "../crd/connection-schema.ts";
import { type ObjectRef, objectKey, parseObjectKey } from "../runtime/queue-records.ts";

/** `spec.connectionRef` of a Deployment resource. */
export interface ConnectionRef {
  kind: ConnectionKind;
  name: string;
}

/** The key and `status.connection` of the operator's own connection (its flags and env). */
export const DEFAULT_CONNECTION = "default";

/** A connection object: its kind and where it is (`namespace` is `""` for the cluster kind). */
export interface ConnectionId extends ObjectRef {
  kind: ConnectionKind;
}

/**
 * The connection a resource of `namespace` means by `ref`: a ServiceConnection is always the one
 * of the resource's own namespace (the reference has no namespace, so no other can be named).
 */
export function connectionOf(namespace: string, ref: ConnectionRef | undefined): ConnectionId | undefined {
  if (!ref) return undefined;
  return { kind: ref.kind, namespace: ref.kind === SERVICE_CONNECTION_KIND ? namespace : "", name: ref.name };
}

/**
 * The key of a connection, unique across both kinds and the default: `default`,
 * `ServiceConnection/<namespace>/<name>` or `ClusterServiceConnection/<name>`. The connection
 * controller's queue, the registry and the claim index use it.
 */
export function connectionKey(id: ConnectionId | undefined): string {
  return id ? `${id.kind}/${objectKey(id)}` : DEFAULT_CONNECTION;
}

/** The connection a key names, or undefined for the default (the inverse of {@link connectionKey}). */
export function parseConnectionKey(key: string): ConnectionId | undefined {
  if (key === DEFAULT_CONNECTION) return undefined;
  const slash = key.indexOf("/");
  const kind = key.slice(0, slash) as ConnectionKind;
  if (slash < 0 || !CONNECTION_KINDS.includes(kind)) throw new Error(`not a connection key: ${key}`);
  return { kind, ...parseObjectKey(key.slice(slash + 1)) };
}

/** The {@link ConnectionId} of a connection object (a cluster one has no namespace). */
export function idOf(obj: { metadata: { name: string; namespace?: string | undefined } }): ConnectionId {
  const namespace = obj.metadata.namespace ?? "";
  return {
    kind: namespace ? SERVICE_CONNECTION_KIND : CLUSTER_SERVICE_CONNECTION_KIND,
    namespace,
    name: obj.metadata.name,
  };
}

/** How `status.connection` and messages name a connection: `Kind/name`, or `default`. */
export function connectionLabel(ref: ConnectionRef | undefined): string {
  return ref ? `${ref.kind}/${ref.name}` : DEFAULT_CONNECTION;
}

/** How messages name a connection object, namespace included: `ServiceConnection team-a/prod`. */
export function describeConnection(id: ConnectionId): string {
  return `${id.kind} ${objectKey(id)}`;
}
