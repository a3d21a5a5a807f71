/**
 * The service deployment of a Deployment resource, as the commands that take one (`logs`,
 * `revisions`) find it: the resource read live from the cluster, reached through its own
 * connection (`spec.connectionRef`, or the default one from the service flags), and its
 * deployment found as the operator finds it.
 *
 * `status.deploymentId` is a record, not an authority: anyone who may write the status
 * subresource can point it at another team's deployment. It counts only when it is a uuid and
 * the deployment it names, on the resource's own connection, carries the resource's service
 * name; otherwise the deployment is looked up by that name, unless the operator reports that the
 * resource owns none: the loser of a name conflict (`NameConflict`), or a resource its connection
 * refuses (`ConnectionNotAllowed`), whose name on a shared connection is another team's.
 */
import type { ServiceClient } from "../api/client.ts";
import { type Deployment, isUuid } from "../api/wire.ts";
import { ConnectionReadError } from "../connection/read.ts";
import { type ConnectionId, connectionOf, describeConnection } from "../crd/conventions.ts";
import type { DeploymentResource } from "../crd/schema.ts";
import { KubeDeployments } from "../kube/custom-resources.ts";
import { claimedName } from "../reconcile/inputs.ts";
import { CONDITION, REASON } from "../reconcile/reasons.ts";
import {
  type CommandCluster,
  type ConnectionClients,
  commandConnectionClients,
  connectionFlag,
} from "./connections.ts";
import { type CliContext, type ConnectionFlags, UsageError } from "./context.ts";
import { resourceNotFoundError } from "./plugin-cluster.ts";
import { resourceCluster } from "./resource-cluster.ts";
import { serviceClientFrom } from "./service-client.ts";

/** A service deployment and the client of the connection it was found through. */
export interface FoundDeployment {
  client: ServiceClient;
  deployment: Deployment;
  /** The Deployment resource it was found for (read from the cluster). */
  resource?: Pick<DeploymentResource, "spec" | "status">;
}

/**
 * The client and service deployment `<resource>` names in a command that takes one (`logs`,
 * `revisions`): with the cluster {@link resourceCluster} finds, the Deployment resource of `-n`
 * (else the kubeconfig context's namespace) as {@link resourceDeployment} finds it, or with
 * `--connection` the deployment `byKey` finds on that connection; without a cluster, the
 * deployment `byKey` finds on the service of the flags and environment.
 */
export async function commandTarget(
  resource: string,
  flags: ConnectionFlags & { namespace?: string; verbose?: boolean },
  ctx: CliContext,
  userAgent: string,
  byKey: (client: ServiceClient, key: string, signal: AbortSignal) => Promise<Deployment>,
): Promise<FoundDeployment> {
  const kube = resourceCluster(flags, ctx.env, userAgent);
  const ref = connectionFlag(flags, kube !== undefined);
  if (!kube) {
    const client = serviceClientFrom(flags, ctx);
    return { client, deployment: await byKey(client, resource, ctx.stopSignal) };
  }
  const namespace = flags.namespace ?? kube.namespace ?? "default";
  const clients = commandConnectionClients(kube, flags, ctx);
  if (!ref) return resourceDeployment(kube, clients, namespace, resource, flags, ctx);
  const id = connectionOf(namespace, ref);
  const client = await connectionClient(clients, id, `--connection ${flags.connection}`, ctx.stopSignal);
  return { client, deployment: await byKey(client, resource, ctx.stopSignal) };
}

/**
 * The Deployment resource `name` of `namespace`, read live through `kube`, and its service
 * deployment through its own connection (see the module comment). Throws naming the resource
 * when it does not exist, when its connection cannot be used, or when the service has no single
 * deployment of its name.
 */
export async function resourceDeployment(
  kube: CommandCluster,
  clients: ConnectionClients,
  namespace: string,
  name: string,
  flags: ConnectionFlags & { verbose?: boolean },
  ctx: CliContext,
): Promise<FoundDeployment> {
  const signal = ctx.stopSignal;
  // A 403 here is the user's own access to the resource (those of its connection name theirs).
  const obj = await new KubeDeployments({ client: kube.client })
    .getLive({ namespace, name }, signal)
    .catch((error: unknown) => {
      throw kube.client.explainForbidden(error, signal);
    });
  if (!obj)
    throw await resourceNotFoundError(
      kube,
      new Error(
        `Deployment resource ${namespace}/${name} not found: check with kubectl get dmsd -n ${namespace} (or give -n)`,
      ),
      signal,
    );
  const id = connectionOf(namespace, obj.spec.connectionRef);
  const what = `Deployment ${namespace}/${name}`;
  const ownsNone = ownsNoDeployment(obj);
  if (ownsNone) throw new Error(`${what} owns no deployment on the service: ${ownsNone}`);
  const client = id
    ? await connectionClient(clients, id, `${what}'s spec.connectionRef`, signal)
    : defaultClient(flags, ctx, what);
  const serviceName = claimedName({ ...obj, metadata: { ...obj.metadata, name } });
  const recorded = obj.status?.deploymentId;
  if (recorded && isUuid(recorded)) {
    const found = await client.getDeployment(recorded, { signal });
    if (found?.name === serviceName) return { client, deployment: found, resource: obj };
  }
  return { client, deployment: await deploymentNamed(client, serviceName, signal, what), resource: obj };
}

/**
 * Why the operator reports that `obj` owns no deployment (its `Synced` reason, and no recorded
 * one), whatever deployment of its name the service has; undefined otherwise.
 */
function ownsNoDeployment(obj: Pick<DeploymentResource, "status">): string | undefined {
  if (obj.status?.deploymentId) return undefined;
  const synced = obj.status?.conditions?.find((c) => c.type === CONDITION.Synced);
  if (synced?.status !== "False") return undefined;
  if (synced.reason === REASON.NameConflict)
    return `another resource holds its service name on its connection (NameConflict: ${synced.message})`;
  if (synced.reason === REASON.ConnectionNotAllowed)
    return `its namespace may not use its connection (ConnectionNotAllowed: ${synced.message})`;
  return undefined;
}

/**
 * The client of connection `id`; a connection that cannot be used throws a
 * `ConnectionReadError` whose message starts with `label` and the connection.
 */
export async function connectionClient(
  clients: ConnectionClients,
  id: ConnectionId | undefined,
  label: string,
  signal: AbortSignal,
): Promise<ServiceClient> {
  if (!id) throw new Error(`${label}: no connection`);
  try {
    return await clients.client(id, signal);
  } catch (error) {
    if (!(error instanceof ConnectionReadError)) throw error;
    throw new ConnectionReadError(`${label} (${describeConnection(id)}): ${error.message}`, { cause: error });
  }
}

/** The default connection's client, or a {@link UsageError} saying why `what` needs it. */
function defaultClient(
  flags: ConnectionFlags & { verbose?: boolean },
  ctx: CliContext,
  what: string,
): ServiceClient {
  try {
    return serviceClientFrom(flags, ctx);
  } catch (error) {
    if (!(error instanceof UsageError)) throw error;
    throw new UsageError([
      ...error.lines,
      `${what} has no spec.connectionRef: it uses the default connection, whose settings are given by the flags above`,
    ]);
  }
}

/**
 * The one deployment named exactly `name` (a listing with `name_contains`, then an exact match);
 * throws when there is none or more than one. `what` names whose service name it is, in messages.
 */
export async function deploymentNamed(
  client: ServiceClient,
  name: string,
  signal: AbortSignal,
  what?: string,
): Promise<Deployment> {
  const all = await client.listAllDeployments({ name_contains: name }, { signal });
  const exact = all.filter((d) => d.name === name);
  const [only] = exact;
  if (only && exact.length === 1) return only;
  if (exact.length > 1) {
    // By a resource, an id cannot be given instead: the resource's name is what was asked for.
    const fix = what === undefined ? "give the id instead" : `cannot tell which one is ${what}'s`;
    throw new Error(
      `the service at ${client.baseUrl} has ${exact.length} deployments named "${name}" (${exact.map((d) => d.id).join(", ")}): ${fix}`,
    );
  }
  const of = what === undefined ? "" : ` (the service name of ${what})`;
  throw new Error(`the service at ${client.baseUrl} has no deployment named "${name}"${of}`);
}
