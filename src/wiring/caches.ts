/**
 * The operator's watch caches as one set: the informers the manager runs, the promise the
 * controllers' workers wait on, and the readiness check that holds /readyz until they are filled.
 */
import type { Logger } from "pino";
import type { KubeClient } from "../kube/client.ts";
import { KubeConfigMaps } from "../kube/config-maps.ts";
import { KubeConnections } from "../kube/connections.ts";
import { KubeDeployments, type KubeDeploymentsOptions } from "../kube/custom-resources.ts";
import { KubeNamespaces } from "../kube/namespaces.ts";
import { KubeSecrets } from "../kube/secrets.ts";
import type { Clock } from "../runtime/clock.ts";
import type { Runnable } from "../runtime/manager.ts";
import type { HealthCheck } from "../serving/health.ts";
import { connectionIndexers, deploymentIndexers } from "./indexes.ts";
import type { OperatorConfig } from "./operator-config.ts";

/**
 * The watch caches; `namespaces` only when namespace labels are needed (selectors). `configMaps`
 * holds only the ConfigMaps of `spec.export` (label-selected).
 */
export interface Caches {
  deployments: KubeDeployments;
  secrets: KubeSecrets;
  connections: KubeConnections;
  configMaps: KubeConfigMaps;
  namespaces: KubeNamespaces | undefined;
}

/**
 * The caches of `config`'s scope. Namespace selectors need the namespaces' labels:
 * ClusterServiceConnections may carry one, and the default connection may have one. Without
 * either, namespaces are not watched (a namespaced install cannot: namespaces are cluster-scoped).
 * ClusterServiceConnections need cluster-wide list/watch, which an install limited to some
 * namespaces (a Role) does not have.
 */
export function watchCaches(
  config: Pick<
    OperatorConfig,
    "namespaces" | "labelSelector" | "clusterConnections" | "defaultConnectionNamespaceSelector"
  >,
  client: KubeClient,
  clock: Clock,
  logger: Logger,
  /** The Deployment resources' cache (sharded: one that can add an inherited share). */
  makeDeployments: (options: KubeDeploymentsOptions) => KubeDeployments = (o) => new KubeDeployments(o),
): Caches {
  const clusterKind = config.clusterConnections ?? config.namespaces.length === 0;
  const byNamespace = clusterKind || Boolean(config.defaultConnectionNamespaceSelector);
  const { namespaces, labelSelector } = config;
  const scope = {
    ...(namespaces.length > 0 ? { namespaces } : {}),
    ...(labelSelector ? { labelSelector } : {}),
  };
  const indexers = deploymentIndexers(byNamespace);
  return {
    namespaces: byNamespace ? new KubeNamespaces({ client, logger, clock }) : undefined,
    deployments: makeDeployments({ client, scope, logger, clock, indexers }),
    secrets: new KubeSecrets({ client, namespaces, logger, clock }),
    configMaps: new KubeConfigMaps({ client, namespaces, logger, clock }),
    connections: new KubeConnections({
      client,
      namespaces,
      clusterKind,
      logger,
      clock,
      indexers: connectionIndexers,
    }),
  };
}

/** One runnable per informer; they run on every replica, leader or not, to keep /readyz true. */
export function informers(c: Caches): Runnable[] {
  const all: [string, { run(signal: AbortSignal): Promise<unknown> } | undefined][] = [
    ["deployment-informer", c.deployments],
    ["secret-informer", c.secrets],
    ["configmap-informer", c.configMaps],
    ["connection-informer", c.connections],
    ["namespace-informer", c.namespaces],
  ];
  return all.flatMap(([name, cache]) =>
    cache
      ? [{ name, needLeaderElection: false, start: async (signal) => void (await cache.run(signal)) }]
      : [],
  );
}

/**
 * Resolves once every cache is filled: the controllers' workers start after it. Not the
 * ConfigMaps' (`spec.export`): without their permissions everything else must still run, and
 * before it has synced the export step reads the ConfigMap it writes live (one GET).
 */
export function cachesSynced(c: Caches): () => Promise<unknown> {
  return () =>
    Promise.all([c.deployments.synced, c.secrets.synced, c.connections.synced, c.namespaces?.synced]);
}

/**
 * Ready once every cache but the ConfigMaps' has synced (see {@link cachesSynced}). The service's
 * reachability is not the operator's health: an outage there is reported on the resources
 * (ServiceUnavailable, Unauthorized), never by making every replica NotReady.
 */
export function cachesReadiness(c: Caches): HealthCheck {
  return {
    name: "informers",
    check: async () => {
      if (
        !c.deployments.hasSynced() ||
        !c.secrets.hasSynced() ||
        !c.connections.hasSynced() ||
        (c.namespaces && !c.namespaces.hasSynced())
      )
        throw new Error("caches not synced yet");
    },
  };
}
