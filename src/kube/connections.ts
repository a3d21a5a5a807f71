/**
 * The connection resources (`serviceconnections.dms.dev`, `clusterserviceconnections.dms.dev`):
 * the custom resource adapter of `custom-resources.ts` for each kind, and the two seen as one by
 * connection key (see `crd/conventions.ts`).
 */

import {
  CLUSTER_SERVICE_CONNECTION_KIND,
  CLUSTER_SERVICE_CONNECTION_PLURAL,
  CONNECTION_STATUS_FIELDS,
  type ConnectionSpec,
  type ConnectionStatus,
  SERVICE_CONNECTION_KIND,
  SERVICE_CONNECTION_PLURAL,
} from "../crd/connection-schema.ts";
import type { ConnectionId } from "../crd/conventions.ts";
import { GROUP, VERSION } from "../crd/schema.ts";
import type { KubeClient } from "./client.ts";
import { type CustomResourceKind, CustomResources } from "./custom-resources.ts";
import { type KubeObject, refOf } from "./object.ts";
import type { ReflectorHandlers } from "./reflector.ts";
import type { WatchOptions } from "./scope.ts";

/** A connection object of either kind as read from the API server. */
export type ConnectionObject = KubeObject & { spec: ConnectionSpec; status?: ConnectionStatus };

export const SERVICE_CONNECTIONS: CustomResourceKind = {
  group: GROUP,
  version: VERSION,
  plural: SERVICE_CONNECTION_PLURAL,
  kind: SERVICE_CONNECTION_KIND,
  statusFields: CONNECTION_STATUS_FIELDS,
};

export const CLUSTER_SERVICE_CONNECTIONS: CustomResourceKind = {
  group: GROUP,
  version: VERSION,
  plural: CLUSTER_SERVICE_CONNECTION_PLURAL,
  kind: CLUSTER_SERVICE_CONNECTION_KIND,
  clusterScoped: true,
  statusFields: CONNECTION_STATUS_FIELDS,
};

/** One kind's objects. */
export type ConnectionResources = CustomResources<ConnectionObject, ConnectionStatus>;

/** Options of {@link KubeConnections}. */
export interface KubeConnectionsOptions extends WatchOptions {
  client: KubeClient;
  /** Watched namespaces of ServiceConnections; empty means all. */
  namespaces: readonly string[];
  /**
   * Watch ClusterServiceConnections too. Needs cluster-wide list/watch: an install limited to
   * some namespaces (a Role) has none, and its resources cannot use the cluster kind.
   */
  clusterKind: boolean;
  /** Secondary indexes of both kinds' caches. */
  indexers?: Record<string, (obj: ConnectionObject) => readonly string[]>;
}

/** Both connection kinds, addressed by {@link ConnectionId}. */
export class KubeConnections {
  readonly namespaced: ConnectionResources;
  readonly cluster: ConnectionResources | undefined;

  constructor(options: KubeConnectionsOptions) {
    const { namespaces, clusterKind, indexers, ...rest } = options;
    const watch = { ...rest, ...(indexers ? { indexers } : {}) };
    this.namespaced = new CustomResources(SERVICE_CONNECTIONS, { ...watch, scope: { namespaces } });
    this.cluster = clusterKind ? new CustomResources(CLUSTER_SERVICE_CONNECTIONS, watch) : undefined;
  }

  /** The adapter of `kind`, or undefined when that kind is not watched. */
  of(kind: ConnectionId["kind"]): ConnectionResources | undefined {
    return kind === SERVICE_CONNECTION_KIND ? this.namespaced : this.cluster;
  }

  /** The cached connection `id`. */
  get(id: ConnectionId): ConnectionObject | undefined {
    return this.of(id.kind)?.get(id);
  }

  /** The cached connections of both kinds under `value` of the index `index`. */
  byIndex(index: string, value: string): ConnectionObject[] {
    return this.all.flatMap((r) => r.byIndex(index, value));
  }

  /** Adds cache-change handlers to both kinds. */
  subscribe(handlers: ReflectorHandlers<ConnectionObject>): void {
    for (const r of this.all) r.subscribe(handlers);
  }

  /** True when connections of `kind` are watched (the cluster kind only by a cluster-wide install). */
  watches(kind: ConnectionId["kind"]): boolean {
    return this.of(kind) !== undefined;
  }

  /** Sets the status of exactly `obj`'s version (see `CustomResources.patchStatus`). */
  patchStatus(
    obj: ConnectionObject,
    status: ConnectionStatus,
    signal: AbortSignal,
  ): Promise<ConnectionObject> {
    return this.#watching(obj).patchStatus(refOf(obj), status, signal, obj.metadata.resourceVersion);
  }

  addFinalizer(obj: ConnectionObject, finalizer: string, signal: AbortSignal): Promise<ConnectionObject> {
    return this.#watching(obj).addFinalizer(obj, finalizer, signal);
  }

  removeFinalizer(obj: ConnectionObject, finalizer: string, signal: AbortSignal): Promise<ConnectionObject> {
    return this.#watching(obj).removeFinalizer(obj, finalizer, signal);
  }

  #watching(obj: ConnectionObject): ConnectionResources {
    const resources = obj.metadata.namespace ? this.namespaced : this.cluster;
    if (!resources) throw new Error(`${obj.metadata.name}: ClusterServiceConnections are not watched`);
    return resources;
  }

  /** Every watched adapter. */
  get all(): ConnectionResources[] {
    return this.cluster ? [this.namespaced, this.cluster] : [this.namespaced];
  }

  /** Resolves when every watched kind has been listed once. */
  get synced(): Promise<void> {
    return Promise.all(this.all.map((r) => r.synced)).then(() => undefined);
  }

  hasSynced(): boolean {
    return this.all.every((r) => r.hasSynced());
  }

  async run(signal: AbortSignal): Promise<void> {
    await Promise.all(this.all.map((r) => r.run(signal)));
  }
}
