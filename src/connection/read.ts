/**
 * Reading one connection from the cluster, as the `plan` and `import` commands do with
 * `--connection` (and `plan` for each resource's `spec.connectionRef`): the object, then the API
 * key from the Secret it names. One GET each, nothing cached or watched. Every way it can be
 * missing is a {@link ConnectionReadError} whose one line names the object and the fix; a failure
 * to reach the cluster rejects as the transport's error.
 */
import { Value } from "@sinclair/typebox/value";
import {
  CLUSTER_SERVICE_CONNECTION_KIND,
  CLUSTER_SERVICE_CONNECTION_PLURAL,
  ClusterServiceConnectionSpecSchema,
  type ConnectionKind,
  type ConnectionSpec,
  SERVICE_CONNECTION_PLURAL,
  ServiceConnectionSpecSchema,
} from "../crd/connection-schema.ts";
import { GROUP, VERSION } from "../crd/schema.ts";
import { isRecord } from "../json.ts";
import type { KubeClient } from "../kube/client.ts";
import { isNotFound, KubeApiError } from "../kube/errors.ts";
import { collectionPath, type ResourceType } from "../kube/reflector.ts";
import type { KubeSecrets } from "../kube/secrets.ts";
import { apiKeySecretOf, type ConnectionId, describeConnection } from "./settings.ts";

/** The resource type of each connection kind. */
export const CONNECTION_TYPES: Record<ConnectionKind, ResourceType> = {
  ServiceConnection: { group: GROUP, version: VERSION, plural: SERVICE_CONNECTION_PLURAL },
  ClusterServiceConnection: { group: GROUP, version: VERSION, plural: CLUSTER_SERVICE_CONNECTION_PLURAL },
};

/** A connection as read: its spec and the API key of its Secret (trimmed, never empty). */
export interface ReadConnection {
  id: ConnectionId;
  spec: ConnectionSpec;
  apiKey: string;
}

/** The connection or its Secret cannot be used as it is; the message says what to fix. */
export class ConnectionReadError extends Error {
  override readonly name = "ConnectionReadError";
}

/** What {@link readConnection} reads through. */
export interface ConnectionReadPorts {
  client: KubeClient;
  secrets: Pick<KubeSecrets, "getSecretValue">;
}

/** The path of a connection object on the API server. */
export function connectionPath(id: ConnectionId): string {
  const namespace = id.kind === CLUSTER_SERVICE_CONNECTION_KIND ? undefined : id.namespace;
  return `${collectionPath(CONNECTION_TYPES[id.kind], namespace)}/${encodeURIComponent(id.name)}`;
}

/**
 * Reads connection `id` and its API key.
 *
 * Contract: resolves only with a spec the CRD's schema accepts and a non-empty key (surrounding
 * whitespace removed: a key written with `echo` ends in a newline). Rejects with a
 * {@link ConnectionReadError} when the object is missing (or its CRD is not installed), reading
 * it or its Secret is forbidden, its spec is invalid, or the Secret or key is missing or empty;
 * with the transport's error on any other failure. Never puts the key in a message.
 */
export async function readConnection(
  ports: ConnectionReadPorts,
  id: ConnectionId,
  signal: AbortSignal,
): Promise<ReadConnection> {
  const what = describeConnection(id);
  const type = CONNECTION_TYPES[id.kind];
  let raw: unknown;
  try {
    raw = await ports.client.request({ method: "GET", path: connectionPath(id), signal });
  } catch (error) {
    if (isNotFound(error)) {
      if (!(await servesType(ports.client, type, signal)))
        throw new ConnectionReadError(
          `the cluster does not know ${id.kind} (the CRD ${type.plural}.${GROUP} is not installed): install the operator's CRDs (crds/) first`,
        );
      const where = id.kind === CLUSTER_SERVICE_CONNECTION_KIND ? "" : ` -n ${id.namespace}`;
      throw new ConnectionReadError(
        `${what} not found: check the name with kubectl get ${type.plural}${where}`,
      );
    }
    throw forbidden(error, `get ${type.plural}.${GROUP}`) ?? error;
  }
  const spec = specOf(id.kind, raw, what);
  const secret = apiKeySecretOf(id, spec);
  const source = `Secret ${secret.namespace}/${secret.name}, named by ${what} (spec.apiKeySecretRef)`;
  let found: Awaited<ReturnType<KubeSecrets["getSecretValue"]>>;
  try {
    found = await ports.secrets.getSecretValue(secret, secret.key, signal);
  } catch (error) {
    throw forbidden(error, "get secrets") ?? error;
  }
  if (found.kind === "missing-secret")
    throw new ConnectionReadError(
      `${source}, not found: create it with the API key under key ${secret.key}, e.g. kubectl create secret generic ${secret.name} -n ${secret.namespace} --from-literal=${secret.key}=<key>`,
    );
  if (found.kind === "missing-key")
    throw new ConnectionReadError(
      `${source}, has no key ${secret.key}: add the API key under that key, or point spec.apiKeySecretRef.key at the key that holds it`,
    );
  const apiKey = found.value.trim();
  if (apiKey === "")
    throw new ConnectionReadError(`${source}: key ${secret.key} is empty; put the API key in it`);
  return { id, spec, apiKey };
}

/** The spec of a connection object, checked against its kind's schema. */
function specOf(kind: ConnectionKind, raw: unknown, what: string): ConnectionSpec {
  const spec = isRecord(raw) ? raw.spec : undefined;
  const schema =
    kind === CLUSTER_SERVICE_CONNECTION_KIND
      ? ClusterServiceConnectionSpecSchema
      : ServiceConnectionSpecSchema;
  const first = Value.Errors(schema, spec).First();
  if (first)
    throw new ConnectionReadError(
      `${what} has an invalid spec (spec${first.path.replaceAll("/", ".")}: ${first.message}): fix the object; the operator's CRD would refuse it`,
    );
  return spec as ConnectionSpec;
}

/** Whether the API server serves `type` (the discovery document of its group version lists it). */
async function servesType(client: KubeClient, type: ResourceType, signal: AbortSignal): Promise<boolean> {
  try {
    const doc = await client.request({ method: "GET", path: `/apis/${type.group}/${type.version}`, signal });
    const resources = isRecord(doc) && Array.isArray(doc.resources) ? doc.resources : [];
    return resources.some((r) => isRecord(r) && r.name === type.plural);
  } catch (error) {
    if (isNotFound(error)) return false;
    throw error;
  }
}

/** A 403 as a {@link ConnectionReadError} naming the permission `verb` to ask for. */
function forbidden(error: unknown, verb: string): ConnectionReadError | undefined {
  if (!(error instanceof KubeApiError) || error.status !== 403) return undefined;
  return new ConnectionReadError(
    `${error.message}: the kubeconfig's user needs ${verb}; use a context that has it (--context)`,
  );
}
