/**
 * How the operator reaches the service: one client per connection (the default one of the flags,
 * and one per connection resource), each with its own rate limit, Retry-After pause and listing,
 * and the session (snapshot, listings, revision tracking) kept over each.
 */
import type { Logger } from "pino";
import type { AddressPolicy } from "../api/address-policy.ts";
import { ignoredNoProxyEntries, PROXY_VARIABLES } from "../api/agent.ts";
import { ServiceClient, type ServiceClientOptions } from "../api/client.ts";
import type { ServiceConfig } from "../config.ts";
import { NamespaceAccess } from "../connection/access.ts";
import {
  DEFAULT_MAX_CONNECTIONS_PER_NAMESPACE,
  NamespaceBound,
  NamespaceOrder,
} from "../connection/namespace-bound.ts";
import { ConnectionRegistry, type ConnectionService } from "../connection/registry.ts";
import { DEFAULT_CONNECTION, shareOwnerOf } from "../crd/conventions.ts";
import type { KubeDeployments } from "../kube/custom-resources.ts";
import { CLAIM_INDEX, claimOn } from "../reconcile/inputs.ts";
import type { StoredResource } from "../reconcile/ports.ts";
import { deploymentsPort } from "../reconcile/service/deployments-port.ts";
import { ServiceSession } from "../reconcile/service/session.ts";
import type { Clock } from "../runtime/clock.ts";
import type { RuntimeMetrics } from "../runtime/metrics.ts";
import type { Caches } from "./caches.ts";
import { defaultListingDeadlineMs, type OperatorConfig } from "./operator-config.ts";
import { shareIds, shareUnrecorded } from "./resync-passes.ts";

/**
 * What every client of this process sends and obeys: its `User-Agent`, and for a sharded replica
 * its part of each connection's rate limit and its write fence (see `ServiceClientOptions`).
 */
export type ClientIdentity = Pick<ServiceClientOptions, "userAgent" | "qpsShare" | "writeGate">;

/** Builds the client of a connection's settings; `connection` names it in the logs. */
export function serviceConnector(
  logger: Logger,
  metrics: RuntimeMetrics,
  addressPolicy: AddressPolicy = "allow-private",
  identity: ClientIdentity = {},
): (service: ServiceConfig, connection: string) => ConnectionService {
  return (service, connection) => {
    // Its odd values spend its tenant's share of the series; they go with its client.
    const unknownValues = metrics.unknownValues.counter(connection, shareOwnerOf(connection));
    // One retry layer: the controller's per-key backoff, which honours Retry-After through
    // failureOf. Client retries on top held a worker through up to 4 waits of up to 60 s each
    // (past the reconcile timeout on a 429) before the controller even saw the failure.
    const client = new ServiceClient({
      ...service,
      ...identity,
      retries: 0,
      // Every client of the operator: a connection's base URL is a tenant's to choose.
      addressPolicy,
      // Its answers in flight hold at most its tenant's share of the process's answer memory.
      responseMemoryOwner: shareOwnerOf(connection),
      // `--retries` in `run`: retries of one page of a listing (the resync's), never of a write.
      pageRetries: service.retries,
      logger: connection === DEFAULT_CONNECTION ? logger : logger.child({ connection }),
      onResponse: metrics.recordServiceCall,
      onUnknownValue: unknownValues.record,
      onUnreadable: metrics.recordUnreadable,
    });
    return {
      port: deploymentsPort(client),
      probe: async (signal) => (await client.listProviders({ signal })).length,
      close: (why) => {
        client.close(why);
        unknownValues.forget();
      },
    };
  };
}

/**
 * Builds the session of the connection `key` over its port. A connection's snapshot holds only
 * the deployments its resources claim (the claim index: no scan, no string kept per resource):
 * a tenant's listing, however long, costs its pages only. With `share` (a sharded replica), it
 * reads only the deployments of the replica's resources, by id.
 */
export function sessionFactory(
  config: Pick<OperatorConfig, "resyncMs" | "revisionTracking">,
  listingDeadlineMs: number,
  deployments: Pick<KubeDeployments, "byIndex">,
  clock: Clock,
  logger: Logger,
  share?: {
    ids: (key: string) => () => Iterable<string>;
    unrecorded: (key: string) => () => readonly string[];
  },
): (port: ReturnType<typeof deploymentsPort>, key: string) => ServiceSession {
  return (port, key) =>
    new ServiceSession(port, {
      clock,
      logger,
      listingMaxAgeMs: config.resyncMs,
      listingDeadlineMs,
      wanted: (name) => deployments.byIndex(CLAIM_INDEX, claimOn(key, name)).length > 0,
      ...(share ? { share: share.ids(key), unrecorded: share.unrecorded(key) } : {}),
      revisionTracking: config.revisionTracking,
    });
}

/**
 * The registry of the connections' clients and sessions: the default one of `config.service`,
 * and one per connection resource once its check finds it usable; who may use which by the
 * namespaces' labels when they are watched.
 */
export function connectionRegistry(
  config: Pick<
    OperatorConfig,
    | "service"
    | "resyncMs"
    | "revisionTracking"
    | "listingDeadlineMs"
    | "defaultConnectionNamespaceSelector"
    | "connectionAddressPolicy"
    | "maxConnectionsPerNamespace"
    | "sharded"
  >,
  caches: Caches,
  metrics: RuntimeMetrics,
  clock: Clock,
  logger: Logger,
  identity: ClientIdentity = {},
): ConnectionRegistry {
  const { namespaces } = caches;
  warnOfOpenSettings(config, logger);
  const connect = serviceConnector(logger, metrics, config.connectionAddressPolicy, identity);
  const listingDeadlineMs = config.listingDeadlineMs ?? defaultListingDeadlineMs(config.resyncMs);
  // Sharded, each replica reads its own resources' deployments only (the registry, built below,
  // says which resources their connection refuses).
  const refuses = (o: StoredResource) => registry.refuses(o);
  const share = config.sharded
    ? { ids: shareIds(caches.deployments, refuses), unrecorded: shareUnrecorded(caches.deployments, refuses) }
    : undefined;
  const newSession = sessionFactory(config, listingDeadlineMs, caches.deployments, clock, logger, share);
  const selector = config.defaultConnectionNamespaceSelector;
  // Subscribed before the connection controller's triggers: a connection is in its namespace's
  // order before its reconcile asks for its place.
  const order = new NamespaceOrder();
  const namespaced = caches.connections.namespaced;
  for (const c of namespaced.list()) order.upsert(c);
  namespaced.subscribe({
    onAdd: (c) => order.upsert(c),
    onUpdate: (_old, c) => order.upsert(c),
    onDelete: (c) => order.remove(c),
  });
  const registry = new ConnectionRegistry({
    connections: caches.connections,
    defaultSession: newSession(connect(config.service, DEFAULT_CONNECTION).port, DEFAULT_CONNECTION),
    connect,
    session: newSession,
    access: new NamespaceAccess({
      ...(namespaces ? { labels: (name: string) => namespaces.labels(name) } : {}),
      ...(selector ? { defaultSelector: selector } : {}),
    }),
    bound: new NamespaceBound(
      config.maxConnectionsPerNamespace ?? DEFAULT_MAX_CONNECTIONS_PER_NAMESPACE,
      order,
    ),
  });
  return registry;
}

/**
 * Says at start what the settings leave open without saying so: a default connection every
 * watched namespace may use (no `--default-connection-namespace-selector`), and the `NO_PROXY`
 * entries Node ignores (a CIDR: the calls to those hosts would go through the proxy).
 */
export function warnOfOpenSettings(
  config: Pick<OperatorConfig, "service" | "defaultConnectionNamespaceSelector">,
  logger: Logger,
): void {
  if (!config.defaultConnectionNamespaceSelector)
    logger.warn(
      { baseUrl: config.service.baseUrl },
      "the default connection (the operator's own --base-url and API key) serves every watched namespace: a Deployment resource without spec.connectionRef uses it from any namespace; set --default-connection-namespace-selector (e.g. dms.dev/tenant=platform) to the namespaces meant to use it",
    );
  const proxyEnv = config.service.proxyEnv;
  // Node's agents read no_proxy first, as they do the proxies' variables.
  const variable = proxyEnv?.no_proxy !== undefined ? "no_proxy" : "NO_PROXY";
  const noProxy = proxyEnv?.[variable];
  const proxied = PROXY_VARIABLES.some((name) => !/no_proxy/i.test(name) && proxyEnv?.[name] !== undefined);
  if (noProxy === undefined || !proxied) return;
  for (const { entry, fix } of ignoredNoProxyEntries(noProxy))
    logger.warn(
      { variable, entry },
      `${variable} entry ${JSON.stringify(entry)} is ignored by Node: calls to those hosts go through the proxy; ${fix}`,
    );
}
