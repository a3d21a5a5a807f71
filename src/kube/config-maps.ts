/**
 * The ConfigMaps of `spec.export` (`reconcile/export.ts`): a metadata-only watch of the ConfigMaps
 * carrying the export label (never every ConfigMap of the cluster, never their data), each kept
 * only while a `dms.dev` Deployment is its controller, as its identity, version and controller;
 * reads and writes of one ConfigMap for the export step.
 *
 * Bounded whatever a tenant puts in a ConfigMap: the watch asks for metadata only (like the
 * Secrets'), so a page of 50 labelled ConfigMaps of 1 MiB each weighs their metadata, not 50 MiB,
 * and a ConfigMap is cached as a few strings (its controller's kind, name and uid). Whether its
 * data is still what the operator wrote is known by version: the adapter remembers, per
 * ConfigMap, the resourceVersion and digest of its own last write or read; a cached version that
 * differs costs one GET (one ConfigMap, at most the API server's object limit of about 1.5 MiB).
 *
 * Without the permission to list ConfigMaps (a 403), the export is unavailable: logged once, each
 * export fails with its own condition, and nothing else waits on this watch (it does not gate the
 * start of the workers nor /readyz).
 */
import type { Logger } from "pino";
import {
  EXPORT_LABEL,
  EXPORT_LABEL_VALUE,
  EXPORT_UNAVAILABLE_RETRY_MS,
  exportDigest,
} from "../reconcile/export.ts";
import type { ConfigMapsPort, ConfigMapView, LiveConfigMap, OwnerReference } from "../reconcile/ports.ts";
import { type Clock, systemClock } from "../runtime/clock.ts";
import { isRecord } from "../runtime/json.ts";
import { type ObjectRef, objectKey } from "../runtime/queue-records.ts";
import type { KubeClient } from "./client.ts";
import { ConflictError, isNotFound, KubeApiError } from "./errors.ts";
import {
  collectionPath,
  isKubeObject,
  itemPath,
  type KubeObject,
  labelValue,
  type ResourceType,
} from "./object.ts";
import { WatchedResource, type WatchOptions } from "./scope.ts";
import { METADATA_LIST_ACCEPT, METADATA_WATCH_ACCEPT } from "./secrets.ts";

/** The core resource type `configmaps`. */
export const CONFIG_MAPS: ResourceType = { group: "", version: "v1", plural: "configmaps" };

/** The API group of the controllers whose ConfigMaps are kept (`dms.dev`). */
const OWNER_GROUP = "dms.dev";
/** The kind of those controllers. */
const OWNER_KIND = "Deployment";

/** What the cache keeps of an exported ConfigMap. */
export interface CachedConfigMap extends KubeObject {
  metadata: { namespace: string; name: string; resourceVersion: string };
  view: ConfigMapView;
}

/** Longest controller name or kind kept: a Kubernetes name is at most 253 characters. */
const MAX_OWNER_FIELD = 253;

/** Why exports fail without the ConfigMap permissions, and how to fix it. */
export const CONFIG_MAPS_FORBIDDEN =
  "the operator may not list ConfigMaps (HTTP 403): spec.export needs get, list, watch, create, update and delete on configmaps in the resources' namespaces (the ClusterRole dms-operator of manifests/rbac grants them); exports fail until it has them, everything else works";

/** How often the permission is asked again while it is refused (as often as an export retries). */
export const FORBIDDEN_RECHECK_MS = EXPORT_UNAVAILABLE_RETRY_MS;

/** Whether `apiVersion` is of the `dms.dev` group (any version). */
export function isOwnGroup(apiVersion: string): boolean {
  return apiVersion.split("/")[0] === OWNER_GROUP;
}

/**
 * The view of a ConfigMap as the API server gave it (see {@link ConfigMapView}); its digest only
 * when it has data (a metadata-only answer has none).
 */
export function viewOf(raw: KubeObject & { data?: unknown }): ConfigMapView {
  const owners = (raw.metadata as { ownerReferences?: unknown }).ownerReferences;
  const controller = Array.isArray(owners)
    ? owners.find((o: unknown) => isRecord(o) && o.controller === true)
    : undefined;
  const view: ConfigMapView = {
    uid: raw.metadata.uid ?? "",
    resourceVersion: raw.metadata.resourceVersion,
    labelled: labelValue(raw.metadata.labels, EXPORT_LABEL) === EXPORT_LABEL_VALUE,
  };
  if ("data" in raw || "binaryData" in raw)
    view.digest = exportDigest(isRecord(raw.data) ? raw.data : undefined);
  if (isRecord(controller))
    view.controller = {
      apiVersion: String(controller.apiVersion ?? "").slice(0, MAX_OWNER_FIELD),
      kind: String(controller.kind ?? "").slice(0, MAX_OWNER_FIELD),
      name: String(controller.name ?? "").slice(0, MAX_OWNER_FIELD),
      uid: String(controller.uid ?? "").slice(0, MAX_OWNER_FIELD),
    };
  return view;
}

/**
 * Keeps identity, version and the view of a ConfigMap a `dms.dev` Deployment controls; `null`
 * (not kept, quietly) for any other labelled ConfigMap: the export step reads such a name live.
 */
export function decodeConfigMap(raw: unknown): CachedConfigMap | undefined | null {
  if (!isKubeObject(raw)) return undefined;
  const { namespace, name, resourceVersion } = raw.metadata;
  const view = viewOf(raw);
  delete view.digest;
  const owner = view.controller;
  if (!owner || owner.kind !== OWNER_KIND || !isOwnGroup(owner.apiVersion)) return null;
  return { metadata: { namespace: namespace ?? "", name, resourceVersion }, view };
}

/** Options of {@link KubeConfigMaps}. */
export interface KubeConfigMapsOptions extends WatchOptions {
  /** Namespaces to watch; empty or absent means all. */
  namespaces?: readonly string[];
}

/** The resourceVersion and data digest of the operator's own last write or read of one ConfigMap. */
interface OwnWrite {
  resourceVersion: string;
  digest: string;
}

/** The exported ConfigMaps: the label-selected metadata watch, and the export step's port. */
export class KubeConfigMaps extends WatchedResource<CachedConfigMap> implements ConfigMapsPort {
  readonly #client: KubeClient;
  readonly #namespaces: readonly string[];
  readonly #clock: Clock;
  readonly #logger: Logger | undefined;
  /** By `namespace/name`: one entry per kept ConfigMap this process wrote or read (dropped when it goes). */
  readonly #written = new Map<string, OwnWrite>();
  #forbidden: string | undefined;

  constructor(options: KubeConfigMapsOptions) {
    super(options.namespaces, options, {
      resource: CONFIG_MAPS,
      decode: decodeConfigMap,
      labelSelector: `${EXPORT_LABEL}=${EXPORT_LABEL_VALUE}`,
      accept: { list: METADATA_LIST_ACCEPT, watch: METADATA_WATCH_ACCEPT },
    });
    this.#client = options.client;
    this.#namespaces = options.namespaces && options.namespaces.length > 0 ? options.namespaces : [""];
    this.#clock = options.clock ?? systemClock;
    this.#logger = options.logger;
    this.cache.subscribe({
      onDelete: (c) => {
        this.#written.delete(objectKey(c.metadata));
      },
    });
  }

  /**
   * Asks for one labelled ConfigMap of each watched namespace first: on a 403, logs once that
   * exports fail and why, marks the export unavailable ({@link unavailable}), and asks again every
   * {@link FORBIDDEN_RECHECK_MS} (quietly) until allowed; then lists and watches until `signal`
   * aborts. Other failures are the reflector's to retry.
   */
  override async run(signal: AbortSignal): Promise<void> {
    while (!signal.aborted && (await this.#refused(signal))) {
      if (this.#forbidden === undefined) this.#logger?.error(CONFIG_MAPS_FORBIDDEN);
      this.#forbidden = CONFIG_MAPS_FORBIDDEN;
      try {
        await this.#clock.sleep(FORBIDDEN_RECHECK_MS, signal);
      } catch {
        return;
      }
    }
    if (this.#forbidden !== undefined) this.#logger?.info("ConfigMaps may now be listed: exports resume");
    this.#forbidden = undefined;
    return super.run(signal);
  }

  /** Why the export cannot work at all (the ConfigMap permissions are missing), or undefined. */
  unavailable(): string | undefined {
    return this.#forbidden;
  }

  async #refused(signal: AbortSignal): Promise<boolean> {
    for (const namespace of this.#namespaces) {
      try {
        await this.#client.request({
          method: "GET",
          path: collectionPath(CONFIG_MAPS, namespace || undefined),
          query: { limit: 1, labelSelector: `${EXPORT_LABEL}=${EXPORT_LABEL_VALUE}` },
          accept: METADATA_LIST_ACCEPT,
          signal,
        });
      } catch (error) {
        if (error instanceof KubeApiError && error.status === 403) return true;
        // Anything else (the API server restarting) is the reflector's to retry.
      }
    }
    return false;
  }

  /**
   * Calls `listener` with the owning resource of each exported ConfigMap that goes, or whose
   * data, label or controller changes (what the operator restores), or that appears once the
   * cache is listed and is not the operator's own create: its export label put back by hand, as
   * an `ExportConflict` asks. What a start lists is no change (the start reconciles every
   * resource). Returns the unsubscribe.
   */
  onOwnerChange(listener: (owner: ObjectRef & { apiVersion: string; kind: string }) => void): () => void {
    const notify = (c: CachedConfigMap) => {
      const owner = c.view.controller;
      if (owner)
        listener({
          namespace: c.metadata.namespace,
          name: owner.name,
          apiVersion: owner.apiVersion,
          kind: owner.kind,
        });
    };
    // Any change bumps the version; the operator's own write (or read: the reconcile that read
    // it acts on it) is the version it remembers.
    const own = (c: CachedConfigMap) =>
      this.#written.get(objectKey(c.metadata))?.resourceVersion === c.view.resourceVersion;
    return this.cache.subscribe({
      onAdd: (c) => {
        if (this.cache.hasSynced() && !own(c)) notify(c);
      },
      onUpdate: (old, c) => {
        if (old.view.resourceVersion !== c.view.resourceVersion && !own(c)) notify(old);
      },
      onDelete: notify,
    });
  }

  /**
   * The cached view; its digest is that of the operator's own last write or read when the cached
   * version is that one's (otherwise none: the data may have changed, the export step reads it).
   */
  cached(ref: ObjectRef): ConfigMapView | undefined {
    const view = this.cache.get(ref.namespace, ref.name)?.view;
    if (!view) return undefined;
    const own = this.#written.get(objectKey(ref));
    return own?.resourceVersion === view.resourceVersion ? { ...view, digest: own.digest } : view;
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
    const view = viewOf(raw);
    const digest = view.digest ?? exportDigest(undefined);
    // What one the watch keeps holds at this version is known now: while the watch shows that
    // version, the export step needs no read (after a restart, not one per reconcile for ever).
    if (view.labelled && decodeConfigMap(raw))
      this.#written.set(objectKey(ref), { resourceVersion: view.resourceVersion, digest });
    return { ...view, digest, object: raw };
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
    this.#observe(await this.#client.request({ method: "POST", path, body, signal }), write.data);
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
    this.#observe(
      await this.#client.request({ method: "PUT", path: this.#path(write), body, signal }),
      write.data,
    );
  }

  async delete(ref: ObjectRef, precondition: ConfigMapView, signal: AbortSignal): Promise<void> {
    const { uid, resourceVersion } = precondition;
    this.#written.delete(objectKey(ref));
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

  isInvalid(error: unknown): boolean {
    return error instanceof KubeApiError && error.status === 422;
  }

  isForbidden(error: unknown): boolean {
    return error instanceof KubeApiError && error.status === 403;
  }

  #path(ref: ObjectRef): string {
    return itemPath(CONFIG_MAPS, ref);
  }

  /**
   * A write's answer: its version remembered with the digest of what was written, and into the
   * cache at once (the watch's event then finds nothing changed).
   */
  #observe(answer: unknown, data: Readonly<Record<string, string>>): void {
    if (!isKubeObject(answer)) return;
    this.#written.set(objectKey({ namespace: answer.metadata.namespace ?? "", name: answer.metadata.name }), {
      resourceVersion: answer.metadata.resourceVersion,
      digest: exportDigest(data),
    });
    const decoded = decodeConfigMap(answer);
    if (decoded) this.cache.observeWrite(decoded);
  }
}
