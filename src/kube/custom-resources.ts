/**
 * A custom resource of the operator's own (Deployment, ServiceConnection, ClusterServiceConnection)
 * as the controllers use it: read from the watch cache, written with a status patch or a
 * finalizer patch under the resourceVersion read. One implementation for every kind, and the
 * Deployment kind's adapter with the reconciler's port and its watch's triggers (which change of a
 * resource, its rivals' or its Secrets' enqueues which key) beside it (the connection kinds' are
 * `connections.ts`, their triggers `triggers.ts`; each kind's decode, `object.ts`).
 */
import { type DeploymentResourceStatus, GROUP, KIND, PLURAL, VERSION } from "../crd/schema.ts";
import { STATUS_FIELDS } from "../crd/status-schema.ts";
import { claimOf, olderThan } from "../reconcile/inputs.ts";
import type { ResourcePort, StoredResource } from "../reconcile/ports.ts";
import type { Controller } from "../runtime/controller.ts";
import { isRecord } from "../runtime/json.ts";
import { type ObjectRef, objectKey } from "../runtime/queue-records.ts";
import { type KubeClient, PatchType } from "./client.ts";
import { ConflictError, isNotFound, KubeApiError, raceAsConflict } from "./errors.ts";
import {
  type DeploymentObject,
  decodeCustomResource,
  decodeDeployment,
  itemPath,
  type KubeObject,
  type ResourceType,
  refOf,
  specOrMetaChanged,
} from "./object.ts";
import type { ReflectorHandlers } from "./reflector.ts";
import { WatchedResource, type WatchOptions, type WatchScope } from "./scope.ts";
import type { KubeSecrets } from "./secrets.ts";

/** The field manager of every write the operator makes. */
export const FIELD_MANAGER = "dms-operator";

/** What identifies a kind of custom resource on the API server. */
export interface CustomResourceKind extends ResourceType {
  kind: string;
  /** Cluster-scoped: one cache for the whole cluster, whatever the watched namespaces. */
  clusterScoped?: boolean;
  /** The top-level status fields this version knows: a write never removes another. Unset: all. */
  statusFields?: ReadonlySet<string>;
}

/** Options of {@link CustomResources}. */
export interface CustomResourcesOptions<T> extends WatchOptions {
  scope?: WatchScope;
  /** Secondary indexes of the cache, read with {@link CustomResources.byIndex}. */
  indexers?: Record<string, (obj: T) => readonly string[]>;
}

/**
 * The objects of one custom resource kind in the operator's scope.
 *
 * Contract: cache reads (`get`, `list`, `byIndex`) are the reflectors' last view,
 * which includes this instance's own writes as soon as they are answered, and may lag others';
 * `getLive` reads the server (undefined when gone). Writes resolve the object as written, reject
 * with {@link NotFoundError} when it is gone and with {@link ConflictError} when the write raced
 * another writer (a precondition on the resourceVersion failed: re-read and requeue quietly).
 */
export class CustomResources<
  T extends KubeObject & { spec: unknown; status?: unknown },
  S,
> extends WatchedResource<T> {
  readonly #client: KubeClient;
  readonly #type: CustomResourceKind;
  readonly #decodeRaw: (raw: unknown) => T | undefined;
  /** Bare 422s in a row by object (`namespace/name`), until a write of it is answered. */
  readonly #refusals = new Map<string, number>();

  /** `decode` may do more than {@link decodeCustomResource} (which it should call first). */
  constructor(
    type: CustomResourceKind,
    options: CustomResourcesOptions<T>,
    decode: (raw: unknown) => T | undefined = decodeCustomResource<T>,
  ) {
    const scope = options.scope ?? {};
    super(type.clusterScoped ? undefined : scope.namespaces, options, {
      resource: type,
      decode,
      ...(scope.labelSelector ? { labelSelector: scope.labelSelector } : {}),
      ...(options.indexers ? { indexers: options.indexers } : {}),
    });
    this.#client = options.client;
    this.#type = type;
    this.#decodeRaw = decode;
  }

  /** Adds cache-change handlers; returns the function that removes them. */
  subscribe(handlers: ReflectorHandlers<T>): () => void {
    return this.cache.subscribe(handlers);
  }

  /** The cached object, if seen. */
  get(ref: ObjectRef): T | undefined {
    return this.cache.get(ref.namespace, ref.name);
  }

  /** Every cached object. */
  list(): T[] {
    return this.cache.list();
  }

  /** The cached objects under `value` of the index `index` (see {@link CustomResourcesOptions.indexers}). */
  byIndex(index: string, value: string): T[] {
    return this.cache.byIndex(index, value);
  }

  /** The cache keys (`namespace/name`) under `value` of `index`, without reading the objects. */
  keysByIndex(index: string, value: string): string[] {
    return this.cache.keysByIndex(index, value);
  }

  /** The cache keys of the cached objects for which `test` holds. */
  keysWhere(test: (obj: T) => boolean): string[] {
    return this.cache.keysWhere(test);
  }

  /** The number of cached objects. */
  get size(): number {
    return this.cache.size;
  }

  /** GETs the object from the API server; `undefined` when it does not exist. */
  async getLive(ref: ObjectRef, signal: AbortSignal): Promise<T | undefined> {
    try {
      return this.#decode(await this.#client.request({ method: "GET", path: this.#itemPath(ref), signal }));
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  }

  /**
   * Sets `status` through the status subresource with server-side apply (field manager
   * `dms-operator`, forced): the status becomes exactly `status` as far as the operator's fields
   * go, so a field left out is removed, which a merge patch would silently keep. The spec and
   * `metadata.generation` are untouched. With `resourceVersion`, the write applies only to exactly
   * that version of the object (409, {@link ConflictError}, otherwise): a status computed from a
   * stale read can never land.
   *
   * A status written by someone else (a merge patch, `kubectl edit --subresource=status`, a
   * restore tool) is co-owned by that writer, and an apply removes only what the operator owns
   * alone. So what the status holds beyond `status` ({@link statusResidue}: a condition type or a
   * known top-level field `status` lacks) is removed with a JSON Patch under the resourceVersion:
   * after the apply, when its answer shows such a residue (a stale condition or record), and
   * before applying once more when the apply was refused as invalid (a condition left partial by
   * the removal of the fields the operator owned alone). A status written only by the operator
   * has no residue: one request. A field outside the kind's `statusFields` (a newer release's,
   * which the operator may own alone) stays when `status` carries it as read.
   */
  async patchStatus(ref: ObjectRef, status: S, signal: AbortSignal, resourceVersion?: string): Promise<T> {
    let written: T;
    try {
      written = await this.#applyStatus(ref, status, signal, resourceVersion);
    } catch (err) {
      if (!(err instanceof KubeApiError) || err.status !== 422) throw err;
      const live = await this.getLive(ref, signal);
      const residue = live && statusResidue(live.status, status, this.#type.statusFields);
      if (!live || !residue?.length) throw err;
      const cleaned = await this.#jsonPatch(live, residue, signal, "/status", resourceVersion).catch(
        raceAsConflict(this.#refusals, objectKey(refOf(live))),
      );
      written = await this.#applyStatus(
        ref,
        status,
        signal,
        resourceVersion && cleaned.metadata.resourceVersion,
      );
    }
    const residue = statusResidue(written.status, status, this.#type.statusFields);
    if (residue.length === 0) return written;
    try {
      return await this.#jsonPatch(written, residue, signal, "/status");
    } catch (err) {
      // Written meanwhile by someone else (or the removal refused): the status applied stands; its
      // next write removes the rest.
      if (err instanceof ConflictError || (err instanceof KubeApiError && err.status === 422)) return written;
      throw err;
    }
  }

  async #applyStatus(ref: ObjectRef, status: S, signal: AbortSignal, resourceVersion?: string): Promise<T> {
    const body = {
      apiVersion: `${this.#type.group}/${this.#type.version}`,
      kind: this.#type.kind,
      metadata: {
        name: ref.name,
        ...(ref.namespace ? { namespace: ref.namespace } : {}),
        ...(resourceVersion ? { resourceVersion } : {}),
      },
      status,
    };
    return this.#written(
      await this.#client.request({
        method: "PATCH",
        path: `${this.#itemPath(ref)}/status`,
        query: { fieldManager: FIELD_MANAGER, force: true },
        contentType: PatchType.Apply,
        body,
        signal,
      }),
    );
  }

  /**
   * Adds `finalizer` unless `obj` already has it, appending to the list `obj` showed.
   * The JSON Patch also replaces `metadata.resourceVersion` with `obj`'s, which makes the API server
   * apply it only to exactly that version: a finalizer another controller added meanwhile can never
   * be dropped, and the race surfaces as a {@link ConflictError}: a 409, or the 422 of a patch
   * that no longer applies to the list as it is now (the API server applies a JSON Patch before it
   * checks the resourceVersion; `obj`'s list was emptied meanwhile).
   */
  async addFinalizer(obj: T, finalizer: string, signal: AbortSignal): Promise<T> {
    const current = obj.metadata.finalizers ?? [];
    if (current.includes(finalizer)) return obj;
    const add =
      current.length === 0
        ? { op: "add", path: "/metadata/finalizers", value: [finalizer] }
        : { op: "add", path: "/metadata/finalizers/-", value: finalizer };
    return this.#jsonPatch(obj, [add], signal).catch(raceAsConflict(this.#refusals, objectKey(refOf(obj))));
  }

  /**
   * Removes `finalizer` if `obj` has it, by its index in `obj`'s list, under the same
   * resourceVersion precondition as {@link addFinalizer}: only that entry goes, or a
   * {@link ConflictError} (a 422 when the list shrank past the index meanwhile).
   */
  async removeFinalizer(obj: T, finalizer: string, signal: AbortSignal): Promise<T> {
    const index = (obj.metadata.finalizers ?? []).indexOf(finalizer);
    if (index < 0) return obj;
    return this.#jsonPatch(obj, [{ op: "remove", path: `/metadata/finalizers/${index}` }], signal).catch(
      raceAsConflict(this.#refusals, objectKey(refOf(obj))),
    );
  }

  /** A JSON Patch of `obj` (of its `subresource` if given), applied only to `resourceVersion` (default: `obj`'s). */
  async #jsonPatch(
    obj: T,
    ops: unknown[],
    signal: AbortSignal,
    subresource = "",
    resourceVersion = obj.metadata.resourceVersion,
  ): Promise<T> {
    const ref = { namespace: obj.metadata.namespace ?? "", name: obj.metadata.name };
    const precondition = { op: "replace", path: "/metadata/resourceVersion", value: resourceVersion };
    return this.#written(
      await this.#client.request({
        method: "PATCH",
        path: `${this.#itemPath(ref)}${subresource}`,
        query: { fieldManager: FIELD_MANAGER },
        contentType: PatchType.Json,
        body: [precondition, ...ops],
        signal,
      }),
    );
  }

  /** Decodes a write's answer and caches it, so this instance's next read sees its own write. */
  #written(raw: unknown): T {
    const obj = this.#decode(raw);
    this.#refusals.delete(objectKey(refOf(obj)));
    this.cache.observeWrite(obj);
    return obj;
  }

  #decode(raw: unknown): T {
    const obj = this.#decodeRaw(raw);
    if (!obj) throw new Error(`the API server returned a ${this.#type.kind} without metadata or spec`);
    return obj;
  }

  #itemPath(ref: ObjectRef): string {
    return itemPath(this.#type, this.#type.clusterScoped ? { name: ref.name } : ref);
  }
}

/** A JSON Pointer token: `~` and `/` escaped. */
const pointer = (key: string) => key.replaceAll("~", "~0").replaceAll("/", "~1");

/**
 * The JSON Patch removals that leave of `live` (a status as stored) only what `desired` (the
 * status the operator applies) has: each top-level field of `known` (default: any) `desired`
 * lacks, and each condition of a type `desired` lacks (by index, last first, so that every index
 * holds as the ops apply). Keys and condition types only, never values: O(fields + conditions).
 * Empty when `live` holds nothing more, which is the case of every status only the operator
 * wrote. The status schema defaults no field (a defaulted one would come back after each removal).
 */
export function statusResidue(live: unknown, desired: unknown, known?: ReadonlySet<string>) {
  if (!isRecord(live)) return [];
  const want = isRecord(desired) ? desired : {};
  const ops: { op: "remove"; path: string }[] = [];
  for (const key of Object.keys(live))
    if (want[key] === undefined && (known?.has(key) ?? true))
      ops.push({ op: "remove", path: `/status/${pointer(key)}` });
  const conditions = live.conditions;
  if (want.conditions === undefined || !Array.isArray(conditions)) return ops;
  const types = new Set<unknown>();
  if (Array.isArray(want.conditions)) for (const c of want.conditions) if (isRecord(c)) types.add(c.type);
  for (let i = conditions.length - 1; i >= 0; i--) {
    const c: unknown = conditions[i];
    if (!isRecord(c) || !types.has(c.type)) ops.push({ op: "remove", path: `/status/conditions/${i}` });
  }
  return ops;
}

/** The resource type `deployments.dms.dev`. */
export const DEPLOYMENTS: CustomResourceKind = {
  group: GROUP,
  version: VERSION,
  plural: PLURAL,
  kind: KIND,
  statusFields: STATUS_FIELDS,
};

/** Options of {@link KubeDeployments}. */
export type KubeDeploymentsOptions = CustomResourcesOptions<DeploymentObject>;

/** Deployment resources in the operator's scope (see {@link CustomResources} for the contract). */
export class KubeDeployments extends CustomResources<DeploymentObject, DeploymentResourceStatus> {
  constructor(options: KubeDeploymentsOptions) {
    super(DEPLOYMENTS, options, decodeDeployment);
  }
}

/** Enqueues reconciles on the changes that matter: not on the operator's own status writes. */
export function subscribeTriggers(
  deployments: Pick<KubeDeployments, "subscribe" | "byIndex">,
  secrets: Pick<KubeSecrets, "onChange">,
  controller: Pick<Controller, "enqueue" | "enqueueAll" | "forget">,
  claimIndex: string,
  secretIndex: string,
): void {
  const keyOf = (o: DeploymentObject) => objectKey(refOf(o));
  // Only the younger rivals: a resource's claim is judged against the older ones alone, so an add
  // or delete can change it only for those it outranks. Another namespace's churn of names on a
  // shared connection (a creationTimestamp cannot be set back) never reconciles the older holder.
  const rivalsOf = (o: DeploymentObject) => {
    const key = keyOf(o);
    for (const rival of deployments.byIndex(claimIndex, claimOf(o)))
      if (keyOf(rival) !== key && olderThan(o, rival)) controller.enqueue(keyOf(rival));
  };
  deployments.subscribe({
    // The cache's own key string: the queue's record of the key then holds no copy of its own.
    onAdd: (o, key = keyOf(o)) => {
      // A settled resource (a start's list, a share moved or inherited) waits as a resync, behind
      // every edit: one edit among 11,600 resources a failover hands over is not reconciled last.
      if (settled(o)) controller.enqueueAll([key], 0);
      else controller.enqueue(key);
      // A resource that took the name when it had no rival may lose it to this one (created in
      // the same second, and first by name): it is judged again, and stalls on the conflict.
      rivalsOf(o);
    },
    onUpdate: (old, o) => {
      if (specOrMetaChanged(old, o)) controller.enqueue(keyOf(o));
    },
    onDelete: (o) => {
      controller.forget(keyOf(o));
      // A resource that lost a name conflict to this one may now take the name.
      rivalsOf(o);
    },
  });
  secrets.onChange((ref) => {
    for (const o of deployments.byIndex(secretIndex, objectKey(ref))) controller.enqueue(keyOf(o));
  });
}

/**
 * Whether the operator has applied a resource's generation already (`status.observedGeneration`
 * is its `metadata.generation`) and nobody asked to delete it: what is left of its reconcile is
 * to look, not to carry out an edit. Enqueued on its add, such a resource waits in the work
 * queue's resync line (`WorkQueue`: fresh work first), a resource edited or new in its fresh one.
 */
export function settled(o: DeploymentObject): boolean {
  const { generation, deletionTimestamp } = o.metadata;
  return (
    generation !== undefined && o.status?.observedGeneration === generation && deletionTimestamp === undefined
  );
}

/**
 * Deployment resources: reads from the watch cache, claims from its index `claimIndex`, writes to
 * the API server under the resourceVersion read; 409s are conflicts.
 */
export function resourcePort(deployments: KubeDeployments, claimIndex: string): ResourcePort {
  return {
    get: (ref) => deployments.get(ref),
    claimants: (name) => deployments.byIndex(claimIndex, name),
    patchStatus: (obj, status, signal) =>
      deployments.patchStatus(refOf(obj), status, signal, obj.metadata.resourceVersion),
    addFinalizer: (obj, finalizer, signal) => deployments.addFinalizer(asObject(obj), finalizer, signal),
    removeFinalizer: (obj, finalizer, signal) =>
      deployments.removeFinalizer(asObject(obj), finalizer, signal),
    isConflict: (error) => error instanceof ConflictError,
  };
}

function asObject(obj: StoredResource) {
  return { ...obj, metadata: { ...obj.metadata } };
}
