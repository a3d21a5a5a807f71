import {
  API_VERSION,
  type DeploymentResource,
  type DeploymentResourceStatus,
  GROUP,
  KIND,
  PLURAL,
  VERSION,
} from "../crd/schema.ts";
import { isRecord } from "../json.ts";
import { type KubeClient, PatchType } from "./client.ts";
import { isNotFound } from "./errors.ts";
import { isKubeObject, type KubeObject, type ObjectMeta, type ObjectRef } from "./object.ts";
import { collectionPath, type ReflectorHandlers, type ResourceType } from "./reflector.ts";
import { WatchedResource, type WatchOptions, type WatchScope } from "./scope.ts";

/** A Deployment resource as read from the API server: metadata name and resourceVersion are known. */
export type DeploymentObject = DeploymentResource & KubeObject;

/** The resource type `deployments.dms.dev`. */
export const DEPLOYMENTS: ResourceType = { group: GROUP, version: VERSION, plural: PLURAL };

/** The field manager of every write the operator makes. */
export const FIELD_MANAGER = "dms-operator";

/** The annotation `kubectl apply` keeps the whole applied manifest in (a second copy of the spec). */
export const LAST_APPLIED_ANNOTATION = "kubectl.kubernetes.io/last-applied-configuration";

/**
 * Checks the object metadata and that `spec` is an object. The spec's fields are not re-validated:
 * the API server already checked them against the CRD schema generated from the same TypeBox
 * schema, and skipping an object here would also block its deletion (its finalizer would never go).
 *
 * Drops what the operator never reads and would otherwise hold for every cached resource (as
 * controller-runtime's managed-fields transform does): `metadata.managedFields` and the
 * {@link LAST_APPLIED_ANNOTATION}, together about half of a typical object. Every write the
 * operator makes is a patch, so a dropped field is never written back. The values most resources
 * share (apiVersion, kind, source, tenant, the reasons and messages of settled conditions, the
 * times to the second) are held once rather than once per cached resource (see {@link SHARED}).
 * `raw` is not modified.
 */
export function decodeDeployment(raw: unknown): DeploymentObject | undefined {
  if (!isKubeObject(raw) || !isRecord((raw as { spec?: unknown }).spec)) return undefined;
  const { managedFields: _managedFields, ...metadata } = raw.metadata as ObjectMeta & {
    managedFields?: unknown;
  };
  const annotations = metadata.annotations;
  if (annotations && LAST_APPLIED_ANNOTATION in annotations) {
    const { [LAST_APPLIED_ANNOTATION]: _lastApplied, ...kept } = annotations;
    metadata.annotations = kept;
  }
  const decoded = { ...raw, metadata: sharedFields(metadata, ["creationTimestamp"]) } as DeploymentObject;
  sharedFields(decoded, ["apiVersion", "kind"]);
  decoded.spec = sharedFields({ ...decoded.spec }, ["source"]);
  if (isRecord(decoded.status)) {
    const status = sharedFields({ ...decoded.status }, ["tenantId", "remoteStatus", "latestRevisionStatus"]);
    // Once a rollout is done the active revision is the latest: one string for both.
    if (status.latestRevisionId !== undefined && status.activeRevisionId === status.latestRevisionId)
      status.activeRevisionId = status.latestRevisionId;
    if (Array.isArray(status.conditions))
      status.conditions = status.conditions.map((c) =>
        isRecord(c) ? sharedFields({ ...c }, ["reason", "message", "lastTransitionTime"]) : c,
      );
    decoded.status = status;
  }
  return decoded;
}

/** `obj` with the string values of `fields` taken from {@link SHARED} (in place). */
function sharedFields<T extends object>(obj: T, fields: ReadonlyArray<keyof T & string>): T {
  const record = obj as Record<string, unknown>;
  for (const field of fields) {
    const value = record[field];
    if (typeof value === "string") record[field] = SHARED.of(value);
  }
  return obj;
}

/**
 * One copy of equal strings: JSON.parse makes a new string for every value longer than a few
 * characters, so "the service's deployment matches the spec" was held 10,000 times for 10,000
 * settled resources (with the tenant id, the reason and the apiVersion, ~2.4 MiB of the cache).
 * The table is bounded: once full it starts again, so values met once (an id, a time) never
 * accumulate, and a shared value is back in it at its next decode.
 */
class SharedStrings {
  readonly #table = new Map<string, string>();
  readonly #max: number;

  constructor(max: number) {
    this.#max = max;
  }

  of(value: string): string {
    const known = this.#table.get(value);
    if (known !== undefined) return known;
    if (this.#table.size >= this.#max) this.#table.clear();
    this.#table.set(value, value);
    return value;
  }
}

const SHARED = new SharedStrings(1024);

/** Options of {@link KubeDeployments}. */
export interface KubeDeploymentsOptions extends WatchOptions {
  scope?: WatchScope;
  /** Secondary indexes of the cache, read with {@link KubeDeployments.byIndex}. */
  indexers?: Record<string, (obj: DeploymentObject) => readonly string[]>;
}

/**
 * Deployment resources in the operator's scope.
 *
 * Contract: cache reads (`get`, `list`, `listNamespace`, `byIndex`) are the reflectors' last view,
 * which includes this instance's own writes as soon as they are answered, and may lag others';
 * `getLive` reads the server (undefined when gone). Writes resolve the object as written, reject
 * with {@link NotFoundError} when it is gone and with {@link ConflictError} when the write raced
 * another writer (a precondition on the resourceVersion failed: re-read and requeue quietly).
 */
export class KubeDeployments extends WatchedResource<DeploymentObject> {
  readonly #client: KubeClient;

  constructor(options: KubeDeploymentsOptions) {
    const scope = options.scope ?? {};
    super(scope.namespaces, options, {
      resource: DEPLOYMENTS,
      decode: decodeDeployment,
      ...(scope.labelSelector ? { labelSelector: scope.labelSelector } : {}),
      ...(options.indexers ? { indexers: options.indexers } : {}),
    });
    this.#client = options.client;
  }

  /** Adds cache-change handlers; returns the function that removes them. */
  subscribe(handlers: ReflectorHandlers<DeploymentObject>): () => void {
    return this.cache.subscribe(handlers);
  }

  /** The cached object, if seen. */
  get(ref: ObjectRef): DeploymentObject | undefined {
    return this.cache.get(ref.namespace, ref.name);
  }

  /** Every cached object. */
  list(): DeploymentObject[] {
    return this.cache.list();
  }

  /** The cached objects of one namespace. */
  listNamespace(namespace: string): DeploymentObject[] {
    return this.cache.listNamespace(namespace);
  }

  /** The cached objects under `value` of the index `index` (see {@link KubeDeploymentsOptions.indexers}). */
  byIndex(index: string, value: string): DeploymentObject[] {
    return this.cache.byIndex(index, value);
  }

  /** The number of cached objects. */
  get size(): number {
    return this.cache.size;
  }

  /** GETs the object from the API server; `undefined` when it does not exist. */
  async getLive(ref: ObjectRef, signal: AbortSignal): Promise<DeploymentObject | undefined> {
    try {
      return this.#decode(await this.#client.request({ method: "GET", path: itemPath(ref), signal }));
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
   */
  async patchStatus(
    ref: ObjectRef,
    status: DeploymentResourceStatus,
    signal: AbortSignal,
    resourceVersion?: string,
  ): Promise<DeploymentObject> {
    const body = {
      apiVersion: API_VERSION,
      kind: KIND,
      metadata: { name: ref.name, namespace: ref.namespace, ...(resourceVersion ? { resourceVersion } : {}) },
      status,
    };
    return this.#written(
      await this.#client.request({
        method: "PATCH",
        path: `${itemPath(ref)}/status`,
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
   * be dropped, and the race surfaces as a 409 ({@link ConflictError}). (A JSON Patch `test` op
   * would also guard the list, but its failure is an indistinguishable 422 "Invalid".)
   */
  async addFinalizer(
    obj: DeploymentObject,
    finalizer: string,
    signal: AbortSignal,
  ): Promise<DeploymentObject> {
    const current = obj.metadata.finalizers ?? [];
    if (current.includes(finalizer)) return obj;
    const add =
      current.length === 0
        ? { op: "add", path: "/metadata/finalizers", value: [finalizer] }
        : { op: "add", path: "/metadata/finalizers/-", value: finalizer };
    return this.#jsonPatch(obj, [add], signal);
  }

  /**
   * Removes `finalizer` if `obj` has it, by its index in `obj`'s list, under the same
   * resourceVersion precondition as {@link addFinalizer}: only that entry goes, or 409.
   */
  async removeFinalizer(
    obj: DeploymentObject,
    finalizer: string,
    signal: AbortSignal,
  ): Promise<DeploymentObject> {
    const index = (obj.metadata.finalizers ?? []).indexOf(finalizer);
    if (index < 0) return obj;
    return this.#jsonPatch(obj, [{ op: "remove", path: `/metadata/finalizers/${index}` }], signal);
  }

  async #jsonPatch(obj: DeploymentObject, ops: unknown[], signal: AbortSignal): Promise<DeploymentObject> {
    const ref = { namespace: obj.metadata.namespace ?? "", name: obj.metadata.name };
    const precondition = {
      op: "replace",
      path: "/metadata/resourceVersion",
      value: obj.metadata.resourceVersion,
    };
    return this.#written(
      await this.#client.request({
        method: "PATCH",
        path: itemPath(ref),
        query: { fieldManager: FIELD_MANAGER },
        contentType: PatchType.Json,
        body: [precondition, ...ops],
        signal,
      }),
    );
  }

  /** Decodes a write's answer and caches it, so this instance's next read sees its own write. */
  #written(raw: unknown): DeploymentObject {
    const obj = this.#decode(raw);
    this.cache.observeWrite(obj);
    return obj;
  }

  #decode(raw: unknown): DeploymentObject {
    const obj = decodeDeployment(raw);
    if (!obj) throw new Error("the API server returned a Deployment resource without metadata or spec");
    return obj;
  }
}

function itemPath(ref: ObjectRef): string {
  return `${collectionPath(DEPLOYMENTS, ref.namespace)}/${encodeURIComponent(ref.name)}`;
}
