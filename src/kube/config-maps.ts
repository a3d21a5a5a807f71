/**
 * The ConfigMaps of `spec.export` (`reconcile/export.ts`): a watch of the ConfigMaps carrying the
 * export label only (never every ConfigMap of the cluster), each cached as its identity, its
 * controller, whether it is labelled and the digest of its data; reads and writes of one
 * ConfigMap for the export step.
 *
 * Bounded whatever a tenant puts in a ConfigMap: a labelled ConfigMap of 1 MiB is cached as the
 * same few strings as one of 100 bytes (its data as a sha256, its owners as its controller's kind,
 * name and uid), so labelling ConfigMaps costs the operator at most a small record each.
 */
import { isRecord } from "../json.ts";
import { EXPORT_LABEL, EXPORT_LABEL_VALUE, exportDigest } from "../reconcile/export.ts";
import type { ConfigMapsPort, ConfigMapView, LiveConfigMap, OwnerReference } from "../reconcile/ports.ts";
import type { KubeClient } from "./client.ts";
import { ConflictError, isNotFound } from "./errors.ts";
import { isKubeObject, type KubeObject, labelValue, type ObjectRef } from "./object.ts";
import { collectionPath, type ResourceType } from "./reflector.ts";
import { WatchedResource, type WatchOptions } from "./scope.ts";

/** The core resource type `configmaps`. */
export const CONFIG_MAPS: ResourceType = { group: "", version: "v1", plural: "configmaps" };

/** What the cache keeps of an exported ConfigMap. */
export interface CachedConfigMap extends KubeObject {
  metadata: { namespace: string; name: string; resourceVersion: string };
  view: ConfigMapView;
}

/** Longest controller name or kind kept: a Kubernetes name is at most 253 characters. */
const MAX_OWNER_FIELD = 253;

/** The view of a ConfigMap as the API server gave it (see {@link ConfigMapView}). */
export function viewOf(raw: KubeObject & { data?: unknown }): ConfigMapView {
  const owners = (raw.metadata as { ownerReferences?: unknown }).ownerReferences;
  const controller = Array.isArray(owners)
    ? owners.find((o: unknown) => isRecord(o) && o.controller === true)
    : undefined;
  const view: ConfigMapView = {
    uid: raw.metadata.uid ?? "",
    resourceVersion: raw.metadata.resourceVersion,
    labelled: labelValue(raw.metadata.labels, EXPORT_LABEL) === EXPORT_LABEL_VALUE,
    digest: exportDigest(isRecord(raw.data) ? raw.data : undefined),
  };
  if (isRecord(controller))
    view.controller = {
      kind: String(controller.kind ?? "").slice(0, MAX_OWNER_FIELD),
      name: String(controller.name ?? "").slice(0, MAX_OWNER_FIELD),
      uid: String(controller.uid ?? "").slice(0, MAX_OWNER_FIELD),
    };
  return view;
}

/** Keeps identity, version and the view; nothing else of the ConfigMap. */
export function decodeConfigMap(raw: unknown): CachedConfigMap | undefined {
  if (!isKubeObject(raw)) return undefined;
  const { namespace, name, resourceVersion } = raw.metadata;
  return { metadata: { namespace: namespace ?? "", name, resourceVersion }, view: viewOf(raw) };
}

/** Options of {@link KubeConfigMaps}. */
export interface KubeConfigMapsOptions extends WatchOptions {
  /** Namespaces to watch; empty or absent means all. */
  namespaces?: readonly string[];
}

/** The exported ConfigMaps: the label-selected watch, and the export step's port. */
export class KubeConfigMaps extends WatchedResource<CachedConfigMap> implements ConfigMapsPort {
  readonly #client: KubeClient;

  constructor(options: KubeConfigMapsOptions) {
    super(options.namespaces, options, {
      resource: CONFIG_MAPS,
      decode: decodeConfigMap,
      labelSelector: `${EXPORT_LABEL}=${EXPORT_LABEL_VALUE}`,
    });
    this.#client = options.client;
  }

  /**
   * Calls `listener` with the owning resource of each exported ConfigMap that goes, or whose
   * data, label or controller changes (what the operator restores); a ConfigMap appearing is
   * the operator's own create. Returns the unsubscribe.
   */
  onOwnerChange(listener: (owner: ObjectRef & { kind: string }) => void): () => void {
    const notify = (c: CachedConfigMap) => {
      const owner = c.view.controller;
      if (owner) listener({ namespace: c.metadata.namespace, name: owner.name, kind: owner.kind });
    };
    const changed = (a: ConfigMapView, b: ConfigMapView) =>
      a.digest !== b.digest || a.labelled !== b.labelled || a.controller?.uid !== b.controller?.uid;
    return this.cache.subscribe({
      onUpdate: (old, c) => {
        if (changed(old.view, c.view)) notify(old);
      },
      onDelete: notify,
    });
  }

  cached(ref: ObjectRef): ConfigMapView | undefined {
    return this.cache.get(ref.namespace, ref.name)?.view;
  }

  async read(ref: ObjectRef, signal: AbortSignal): Promise<LiveConfigMap | undefined> {
    let raw: unknown;
    try {
      raw = await this.#client.request({ method: "GET", path: this.#path(ref), signal });
    } catch (error) {
      if (isNotFound(error)) return undefined;
      throw error;
    }
    if (!isKubeObject(raw)) throw new Error(`GET ${this.#path(ref)}: the answer is not a ConfigMap`);
    return { ...viewOf(raw), object: raw };
  }

  async create(write: Parameters<ConfigMapsPort["create"]>[0], signal: AbortSignal): Promise<void> {
    const body = {
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: {
        name: write.name,
        namespace: write.namespace,
        labels: { [EXPORT_LABEL]: EXPORT_LABEL_VALUE },
        ownerReferences: [write.owner],
      },
      data: write.data,
    };
    const path = collectionPath(CONFIG_MAPS, write.namespace);
    this.#observe(await this.#client.request({ method: "POST", path, body, signal }));
  }

  async replace(
    live: LiveConfigMap,
    write: Parameters<ConfigMapsPort["replace"]>[1],
    signal: AbortSignal,
  ): Promise<void> {
    const object = live.object as KubeObject & { metadata: { ownerReferences?: OwnerReference[] } };
    const others = (object.metadata.ownerReferences ?? []).filter((o) => o.uid !== write.owner.uid);
    // The version read stays in the body: the API server refuses the write if it changed since.
    const body = {
      ...object,
      metadata: {
        ...object.metadata,
        labels: { ...object.metadata.labels, [EXPORT_LABEL]: EXPORT_LABEL_VALUE },
        ownerReferences: [...others, write.owner],
      },
      data: write.data,
    };
    this.#observe(await this.#client.request({ method: "PUT", path: this.#path(write), body, signal }));
  }

  async delete(ref: ObjectRef, precondition: ConfigMapView, signal: AbortSignal): Promise<void> {
    const { uid, resourceVersion } = precondition;
    try {
      await this.#client.request({
        method: "DELETE",
        path: this.#path(ref),
        body: { kind: "DeleteOptions", apiVersion: "v1", preconditions: { uid, resourceVersion } },
        signal,
        discardAnswer: true,
      });
    } catch (error) {
      if (!isNotFound(error)) throw error;
    }
  }

  isConflict(error: unknown): boolean {
    return error instanceof ConflictError;
  }

  #path(ref: ObjectRef): string {
    return `${collectionPath(CONFIG_MAPS, ref.namespace)}/${encodeURIComponent(ref.name)}`;
  }

  /** A write's answer, into the cache at once (the watch's event then finds nothing changed). */
  #observe(answer: unknown): void {
    const decoded = decodeConfigMap(answer);
    if (decoded) this.cache.observeWrite(decoded);
  }
}
