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
  ClusterServiceConnectionSpecSchema,
  type ConnectionKind,
  type ConnectionSpec,
  ServiceConnectionSpecSchema,
} from "../crd/connection-schema.ts";
import { type ConnectionId, describeConnection } from "../crd/conventions.ts";
import type { KubeClient } from "../kube/client.ts";
import {
  CLUSTER_SERVICE_CONNECTIONS,
  type ConnectionObject,
  SERVICE_CONNECTIONS,
} from "../kube/connections.ts";
import { type CustomResourceKind, CustomResources } from "../kube/custom-resources.ts";
import { isNotFound, KubeApiError } from "../kube/errors.ts";
import type { KubeSecrets } from "../kube/secrets.ts";
import { isRecord } from "../runtime/json.ts";
import { apiKeyFrom, apiKeySecretOf, caBundleFrom, caSecretOf, connectionSpecProblems } from "./settings.ts";

/**
 * A connection as read: its spec, the API key of its Secret (trimmed, never empty), and the PEM
 * certificates of its CA Secret when `spec.caSecretRef` names one (checked as a CA bundle).
 */
export interface ReadConnection {
  id: ConnectionId;
  spec: ConnectionSpec;
  apiKey: string;
  caBundle?: string;
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

/**
 * Reads connection `id` and its API key.
 *
 * Contract: resolves only with a spec the CRD's schema accepts and a non-empty key (surrounding
 * whitespace removed: a key written with `echo` ends in a newline), and the CA Secret's PEM
 * certificates when the spec names one. Rejects with a {@link ConnectionReadError} when the
 * object is missing (or its CRD is not installed), reading it or its Secrets is forbidden, its
 * spec is invalid, the Secret or key is missing or empty, or the CA Secret does not hold PEM
 * certificates;
 * with the transport's error on any other failure. Never puts the key in a message.
 */
export async function readConnection(
  ports: ConnectionReadPorts,
  id: ConnectionId,
  signal: AbortSignal,
): Promise<ReadConnection> {
  const what = describeConnection(id);
  const type =
    id.kind === CLUSTER_SERVICE_CONNECTION_KIND ? CLUSTER_SERVICE_CONNECTIONS : SERVICE_CONNECTIONS;
  let found: ConnectionObject | undefined;
  try {
    found = await new CustomResources<ConnectionObject, unknown>(type, { client: ports.client }).getLive(
      id,
      signal,
    );
  } catch (error) {
    throw forbidden(error, `get ${type.plural}.${type.group}`) ?? error;
  }
  if (!found) {
    if (!(await servesType(ports.client, type, signal)))
      throw new ConnectionReadError(
        `the cluster does not know ${id.kind} (the CRD ${type.plural}.${type.group} is not installed): install the operator's CRDs (crds/) first`,
      );
    const where = type.clusterScoped ? "" : ` -n ${id.namespace}`;
    throw new ConnectionReadError(
      `${what} not found: check the name with kubectl get ${type.plural}${where}`,
    );
  }
  const spec = specOf(id.kind, found.spec, what);
  const secret = apiKeySecretOf(id, spec);
  const source = `Secret ${secret.namespace}/${secret.name}, named by ${what} (spec.apiKeySecretRef)`;
  let key: Awaited<ReturnType<KubeSecrets["getSecretValue"]>>;
  try {
    key = await ports.secrets.getSecretValue(secret, secret.key, signal);
  } catch (error) {
    throw forbidden(error, "get secrets") ?? error;
  }
  const read = apiKeyFrom(key.kind === "found" ? { kind: "found", value: key.value } : key, secret);
  if (!read.ok) throw new ConnectionReadError(`${source}, ${read.problem}`);
  const { apiKey } = read;
  const caSecret = caSecretOf(id, spec);
  if (!caSecret) return { id, spec, apiKey };
  let ca: Awaited<ReturnType<KubeSecrets["getSecretValue"]>>;
  try {
    ca = await ports.secrets.getSecretValue(caSecret, caSecret.key, signal);
  } catch (error) {
    throw forbidden(error, "get secrets") ?? error;
  }
  const bundle = caBundleFrom(ca.kind === "found" ? { kind: "found", value: ca.value } : ca, caSecret);
  if (!bundle.ok)
    throw new ConnectionReadError(
      `Secret ${caSecret.namespace}/${caSecret.name}, named by ${what} (spec.caSecretRef), ${bundle.problem}`,
    );
  return { id, spec, apiKey, caBundle: bundle.caBundle };
}

/**
 * The spec of a connection object, checked against its kind's schema: the cluster's CRD may be
 * older than this command, and a spec it let through must not become a wrong request.
 */
function specOf(kind: ConnectionKind, spec: unknown, what: string): ConnectionSpec {
  const schema =
    kind === CLUSTER_SERVICE_CONNECTION_KIND
      ? ClusterServiceConnectionSpecSchema
      : ServiceConnectionSpecSchema;
  const first = Value.Errors(schema, spec).First();
  if (first)
    throw new ConnectionReadError(
      `${what} has an invalid spec (spec${first.path.replaceAll("/", ".")}: ${first.message}): fix the object; the operator's CRD would refuse it`,
    );
  // The CRD's CEL rules, which a schema check does not run (an older CRD did not have them).
  const [problem] = connectionSpecProblems(spec as ConnectionSpec);
  if (problem) throw new ConnectionReadError(`${what} has an invalid spec: ${problem}`);
  return spec as ConnectionSpec;
}

/** Whether the API server serves `type` (the discovery document of its group version lists it). */
export async function servesType(
  client: KubeClient,
  type: CustomResourceKind,
  signal: AbortSignal,
): Promise<boolean> {
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
