/**
 * How the operator reaches the service: one client per connection (the default one of the flags,
 * and one per connection resource), each with its own rate limit, Retry-After pause and listing,
 * and the session (snapshot, listings, revision tracking) kept over each.
 */
import type { Logger } from "pino";
import { ServiceClient } from "../api/client.ts";
import type { ServiceConfig } from "../config.ts";
import { NamespaceAccess } from "../connection/access.ts";
import { ConnectionRegistry, type ConnectionService } from "../connection/registry.ts";
import { DEFAULT_CONNECTION } from "../identity/connection.ts";
import type { KubeDeployments } from "../kube/deployments.ts";
import { CLAIM_INDEX, claimOn } from "../reconcile/claims.ts";
import { ServiceSession } from "../reconcile/session.ts";
import type { Clock } from "../runtime/clock.ts";
import type { RuntimeMetrics } from "../runtime/metrics.ts";
import type { Caches } from "./caches.ts";
import { defaultListingDeadlineMs, type OperatorConfig } from "./operator-config.ts";
import { deploymentsPort } from "./service-adapter.ts";

/** Builds the client of a connection's settings; `connection` names it in the logs. */
export function serviceConnector(
  logger: Logger,
  metrics: RuntimeMetrics,
): (service: ServiceConfig, connection: string) => ConnectionService {
  return (service, connection) => {
    // One retry layer: the controller's per-key backoff, which honours Retry-After through
    // failureOf. Client retries on top held a worker through up to 4 waits of up to 60 s each
    // (past the reconcile timeout on a 429) before the controller even saw the failure.
    const client = new ServiceClient({
      ...service,
      retries: 0,
      // `--retries` in `run`: retries of one page of a listing (the resync's), never of a write.
      pageRetries: service.retries,
      logger: connection === DEFAULT_CONNECTION ? logger : logger.child({ connection }),
      onResponse: metrics.recordServiceCall,
      onUnknownValue: metrics.recordUnknownValue,
      onUnreadable: metrics.recordUnreadable,
    });
    return {
      port: deploymentsPort(client),
      probe: async (signal) => (await client.listProviders({ signal })).length,
    };
  };
}

/**
 * Builds the session of the connection `key` over its port. A connection's snapshot holds only
 * the deployments its resources claim (the claim index: no scan, no string kept per resource):
 * a tenant's listing, however long, costs its pages only.
 */
export function sessionFactory(
  config: Pick<OperatorConfig, "resyncMs" | "revisionTracking">,
  listingDeadlineMs: number,
  deployments: Pick<KubeDeployments, "byIndex">,
  clock: Clock,
  logger: Logger,
): (port: ReturnType<typeof deploymentsPort>, key: string) => ServiceSession {
  return (port, key) =>
    new ServiceSession(port, {
      clock,
      logger,
      listingMaxAgeMs: config.resyncMs,
      listingDeadlineMs,
      wanted: (name) => deployments.byIndex(CLAIM_INDEX, claimOn(key, name)).length > 0,
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
    "service" | "resyncMs" | "revisionTracking" | "listingDeadlineMs" | "defaultConnectionNamespaceSelector"
  >,
  caches: Caches,
  metrics: RuntimeMetrics,
  clock: Clock,
  logger: Logger,
): ConnectionRegistry {
  const { namespaces } = caches;
  const connect = serviceConnector(logger, metrics);
  const listingDeadlineMs = config.listingDeadlineMs ?? defaultListingDeadlineMs(config.resyncMs);
  const newSession = sessionFactory(config, listingDeadlineMs, caches.deployments, clock, logger);
  const selector = config.defaultConnectionNamespaceSelector;
  return new ConnectionRegistry({
    connections: caches.connections,
    defaultSession: newSession(connect(config.service, DEFAULT_CONNECTION).port, DEFAULT_CONNECTION),
    connect,
    session: newSession,
    access: new NamespaceAccess({
      ...(namespaces ? { labels: (name: string) => namespaces.labels(name) } : {}),
      ...(selector ? { defaultSelector: selector } : {}),
    }),
  });
}
