/**
 * In-memory implementations of the reconciler's ports (`src/reconcile/ports.ts`), faithful where
 * the reconciler's correctness depends on them:
 *
 * - {@link MemoryResources} keeps resources like the API server: every write bumps the
 *   resourceVersion, a write carrying another resourceVersion is refused with a conflict, and an
 *   object being deleted goes away with its last finalizer. A test can make reads return an older
 *   copy ({@link MemoryResources.lag}), as a watch cache behind the server does.
 * - {@link SimulatedService} is the simulator's own store (the rules of the service: ids, unique
 *   names, revisions, deletion delays, listing lag) called in process, with the API client's
 *   errors, and counts the calls per method.
 * - {@link RecordedEvents} and {@link MemorySecrets} record and answer.
 * - {@link MemoryConfigMaps} keeps ConfigMaps like the API server (uids, versions, conflicts) and
 *   answers `cached` as the operator's label-selected watch does.
 */
import { RebuildRouteMissingError } from "../../src/api/client.ts";
import { kindOfStatus, ServiceError } from "../../src/api/errors.ts";
import { RedeployRouteMissingError } from "../../src/api/redeploy.ts";
import {
  type LogPage,
  type LogQuery,
  LogsRouteMissingError,
  readLogPage,
} from "../../src/api/revision-logs.ts";
import type { Deployment, Revision } from "../../src/api/wire.ts";
import type { CreateDeploymentBody } from "../../src/api/wire-requests.ts";
import { DEFAULT_CONNECTION } from "../../src/crd/conventions.ts";
import { EXPORT_LABEL, EXPORT_LABEL_VALUE, exportDigest } from "../../src/reconcile/export.ts";
import { claimOf, claimOn } from "../../src/reconcile/inputs.ts";
import type {
  ConfigMapsPort,
  ConfigMapView,
  ConfigMapWrite,
  DeploymentsPort,
  EventNote,
  EventsPort,
  Listing,
  LiveConfigMap,
  OwnerReference,
  ResourcePort,
  ResourceRef,
  SecretKeysRead,
  SecretRead,
  SecretsPort,
  StoredResource,
} from "../../src/reconcile/ports.ts";
import {
  ServiceSession,
  type ServiceSessionOptions,
  type Sessions,
} from "../../src/reconcile/service/session.ts";
import { objectKey, parseObjectKey } from "../../src/runtime/queue-records.ts";
import { ServiceError as SimulatorError } from "../../src/simulator/errors.ts";
import { parseLogsQuery } from "../../src/simulator/logs.ts";
import { parseListQuery } from "../../src/simulator/query.ts";
import type { Timing } from "../../src/simulator/record.ts";
import { DEFAULT_TENANT_ID, DEFAULT_TIMING } from "../../src/simulator/server.ts";
import { SimulatorStore } from "../../src/simulator/store.ts";

/** The API server's answer to a write under a resourceVersion that is no longer current. */
export class ResourceConflict extends Error {
  override readonly name = "ResourceConflict";
}

/** The API server's answer to a write to an object that does not exist. */
export class ResourceNotFound extends Error {
  override readonly name = "ResourceNotFound";
}

const keyOf = (ref: ResourceRef | StoredResource) =>
  "metadata" in ref
    ? objectKey({ namespace: ref.metadata.namespace ?? "", name: ref.metadata.name })
    : objectKey(ref);

/** Writes a {@link MemoryResources} received, by method. */
export interface ResourceWrites {
  patchStatus: number;
  addFinalizer: number;
  removeFinalizer: number;
}

/** Deployment resources as the API server keeps them, read through a cache the test can hold back. */
export class MemoryResources implements ResourcePort {
  readonly #stored = new Map<string, StoredResource>();
  /** Copies `get` answers instead of the stored object: a watch cache lagging behind. */
  readonly #cached = new Map<string, StoredResource>();
  readonly #now: () => number;
  #version = 0;
  readonly writes: ResourceWrites = { patchStatus: 0, addFinalizer: 0, removeFinalizer: 0 };
  /** The signal of every write, in order (to tell which window a write ran under). */
  readonly signals: AbortSignal[] = [];
  /** While true, writes never answer: they reject with their signal's reason once it aborts. */
  hung = false;

  constructor(now: () => number) {
    this.#now = now;
  }

  /** Creates `obj` as `kubectl apply` would: a uid, resourceVersion, generation 1, creationTimestamp. */
  create(obj: Omit<StoredResource, "metadata"> & { metadata: Partial<StoredResource["metadata"]> }) {
    const name = obj.metadata.name ?? "";
    const stored: StoredResource = structuredClone({
      apiVersion: "dms.dev/v1alpha1",
      kind: "Deployment",
      ...obj,
      metadata: {
        namespace: "default",
        uid: `uid-${name}`,
        generation: 1,
        creationTimestamp: new Date(this.#now()).toISOString().replace(/\.\d{3}Z$/, "Z"),
        ...obj.metadata,
        name,
        resourceVersion: this.#nextVersion(),
      },
    });
    this.#stored.set(keyOf(stored), stored);
    return structuredClone(stored);
  }

  /** A user's edit: `change` mutates a copy; a changed spec bumps the generation. */
  edit(ref: ResourceRef, change: (obj: StoredResource) => void): StoredResource {
    const before = this.#require(keyOf(ref));
    const after = structuredClone(before);
    change(after);
    if (JSON.stringify(after.spec) !== JSON.stringify(before.spec))
      after.metadata.generation = (before.metadata.generation ?? 0) + 1;
    return this.#store(after);
  }

  /** `kubectl delete`: sets deletionTimestamp, or removes the object at once without finalizers. */
  delete(ref: ResourceRef): void {
    this.edit(ref, (obj) => {
      obj.metadata.deletionTimestamp = new Date(this.#now()).toISOString();
    });
  }

  /** The object as the API server has it now (not the cache's copy). */
  stored(ref: ResourceRef): StoredResource | undefined {
    const obj = this.#stored.get(keyOf(ref));
    return obj && structuredClone(obj);
  }

  /** From now on `get` answers `copy` for its key (the watch cache has not seen later writes). */
  lag(copy: StoredResource): void {
    this.#cached.set(keyOf(copy), structuredClone(copy));
  }

  /** The cache catches up: `get` answers the stored object again. */
  catchUp(): void {
    this.#cached.clear();
  }

  get(ref: ResourceRef): StoredResource | undefined {
    const key = keyOf(ref);
    const obj = this.#cached.get(key) ?? this.#stored.get(key);
    return obj && structuredClone(obj);
  }

  claimants(claim: string): StoredResource[] {
    return [...this.#stored.keys()].flatMap((key) => {
      const obj = this.get(parseObjectKey(key));
      return obj && claimOf(obj) === claim ? [obj] : [];
    });
  }

  async patchStatus(obj: StoredResource, status: StoredResource["status"], signal: AbortSignal) {
    await this.#write("patchStatus", signal);
    const current = this.#current(obj);
    return this.#store({ ...current, status: structuredClone(status ?? {}) });
  }

  async addFinalizer(obj: StoredResource, finalizer: string, signal: AbortSignal) {
    if ((obj.metadata.finalizers ?? []).includes(finalizer)) return obj;
    await this.#write("addFinalizer", signal);
    const current = this.#current(obj);
    const finalizers = [...(current.metadata.finalizers ?? []), finalizer];
    return this.#store({ ...current, metadata: { ...current.metadata, finalizers } });
  }

  async removeFinalizer(obj: StoredResource, finalizer: string, signal: AbortSignal) {
    if (!(obj.metadata.finalizers ?? []).includes(finalizer)) return obj;
    await this.#write("removeFinalizer", signal);
    const current = this.#current(obj);
    const finalizers = (current.metadata.finalizers ?? []).filter((f) => f !== finalizer);
    return this.#store({ ...current, metadata: { ...current.metadata, finalizers } });
  }

  isConflict(error: unknown): boolean {
    return error instanceof ResourceConflict;
  }

  async #write(method: keyof ResourceWrites, signal: AbortSignal): Promise<void> {
    this.signals.push(signal);
    if (signal.aborted) throw signal.reason;
    if (this.hung) await hangUntil(signal);
    this.writes[method] += 1;
  }

  /** The stored object `obj` was read from, or a conflict when it changed since (409). */
  #current(obj: StoredResource): StoredResource {
    const current = this.#require(keyOf(obj));
    if (current.metadata.resourceVersion !== obj.metadata.resourceVersion) {
      throw new ResourceConflict(
        `the object has been modified (resourceVersion ${obj.metadata.resourceVersion}, now ${current.metadata.resourceVersion})`,
      );
    }
    return current;
  }

  #require(key: string): StoredResource {
    const current = this.#stored.get(key);
    if (!current) throw new ResourceNotFound(`${key} not found`);
    return current;
  }

  /** Stores `obj` under a new resourceVersion; an object being deleted without finalizers goes. */
  #store(obj: StoredResource): StoredResource {
    const next = structuredClone(obj);
    next.metadata.resourceVersion = this.#nextVersion();
    const key = keyOf(next);
    if (next.metadata.deletionTimestamp && (next.metadata.finalizers ?? []).length === 0) {
      this.#stored.delete(key);
      this.#cached.delete(key);
    } else this.#stored.set(key, next);
    return structuredClone(next);
  }

  #nextVersion(): string {
    this.#version += 1;
    return String(this.#version);
  }
}

/** A call that never answers: rejects with `signal`'s reason once it aborts. */
function hangUntil(signal: AbortSignal): Promise<never> {
  return new Promise<never>((_, reject) => {
    signal.addEventListener("abort", () => reject(signal.reason), { once: true });
  });
}

/** An Event recorded about a resource. */
export interface RecordedEvent extends EventNote {
  key: string;
}

/** Records every Event, in order. */
export class RecordedEvents implements EventsPort {
  readonly all: RecordedEvent[] = [];

  record(obj: StoredResource, event: EventNote): void {
    this.all.push({ key: keyOf(obj), ...event });
  }

  /** `Type/Reason` of every event, in order. */
  reasons(): string[] {
    return this.all.map((e) => `${e.type}/${e.reason}`);
  }
}

/** Kubernetes Secrets by `namespace/name`, each a map of key to value. */
export class MemorySecrets implements SecretsPort {
  readonly #secrets = new Map<string, Record<string, string>>();
  readonly #versions = new Map<string, string>();
  #writes = 0;
  /** Every read of a Secret, as `namespace/name/key` (the keys of one read joined by commas), in order. */
  readonly reads: string[] = [];
  /** Reads that fail with this error (as a forbidden GET would), by namespace/name. */
  readonly failing = new Map<string, Error>();

  set(namespace: string, name: string, data: Record<string, string>): void {
    this.#secrets.set(objectKey({ namespace, name }), { ...data });
    this.#versions.set(objectKey({ namespace, name }), String(++this.#writes));
  }

  /** `kubectl delete secret` (or its namespace's deletion). */
  remove(namespace: string, name: string): void {
    this.#secrets.delete(objectKey({ namespace, name }));
    this.#versions.delete(objectKey({ namespace, name }));
  }

  version(namespace: string, name: string): string | undefined {
    return this.#versions.get(objectKey({ namespace, name }));
  }

  async read(namespace: string, name: string, key: string): Promise<SecretRead> {
    this.reads.push(`${namespace}/${name}/${key}`);
    const failure = this.failing.get(objectKey({ namespace, name }));
    if (failure) throw failure;
    const data = this.#secrets.get(objectKey({ namespace, name }));
    if (!data) return { kind: "missing-secret" };
    const value = data[key];
    return value === undefined ? { kind: "missing-key" } : { kind: "found", value };
  }

  /** One read of the Secret, recorded as `namespace/name/key1,key2`. */
  async readKeys(namespace: string, name: string, keys: readonly string[]): Promise<SecretKeysRead> {
    this.reads.push(`${namespace}/${name}/${keys.join(",")}`);
    const failure = this.failing.get(objectKey({ namespace, name }));
    if (failure) throw failure;
    const data = this.#secrets.get(objectKey({ namespace, name }));
    if (!data) return { kind: "missing-secret" };
    const values = new Map<string, string>();
    for (const key of keys) if (Object.hasOwn(data, key)) values.set(key, data[key] ?? "");
    return { kind: "found", values };
  }
}

/** A write the API server refuses whatever the version (a 422: an immutable ConfigMap). */
export class InvalidConfigMapWrite extends Error {}

/** A write the export policy refuses (manifests/rbac/export-configmap-policy.yaml), as a 403 is. */
export class ForbiddenConfigMapWrite extends Error {}

/** A ConfigMap as {@link MemoryConfigMaps} stores it. */
export interface MemoryConfigMap {
  uid: string;
  resourceVersion: string;
  labels: Record<string, string>;
  annotations?: Record<string, string>;
  ownerReferences: OwnerReference[];
  data: Record<string, string>;
}

/** ConfigMaps by `namespace/name`, written under resourceVersion and uid preconditions. */
export class MemoryConfigMaps implements ConfigMapsPort {
  readonly #stored = new Map<string, MemoryConfigMap>();
  #version = 0;
  /** Every call, as `method namespace/name`, in order (`cached` not counted). */
  readonly calls: string[] = [];
  /** While true, `cached` answers nothing: the watch has not seen the last writes. */
  lagging = false;
  /** Calls that fail with this error (as a forbidden request would), by method. */
  readonly failing = new Map<"read" | "create" | "replace" | "delete", Error>();
  /**
   * While true, the export policy is in force: a replace or a delete of a ConfigMap without the
   * label is forbidden (manifests/rbac/export-configmap-policy.yaml).
   */
  policy = false;

  /** Stores a ConfigMap as another hand would: a user's, or another resource's. */
  put(ref: ResourceRef, cm: Partial<MemoryConfigMap>): MemoryConfigMap {
    const stored: MemoryConfigMap = {
      uid: `cm-uid-${ref.name}-${this.#version + 1}`,
      labels: {},
      ownerReferences: [],
      data: {},
      ...cm,
      resourceVersion: this.#next(),
    };
    this.#stored.set(objectKey(ref), structuredClone(stored));
    return stored;
  }

  get(ref: ResourceRef): MemoryConfigMap | undefined {
    const cm = this.#stored.get(objectKey(ref));
    return cm && structuredClone(cm);
  }

  /** `kubectl delete configmap`. */
  remove(ref: ResourceRef): void {
    this.#stored.delete(objectKey(ref));
  }

  cached(ref: ResourceRef): ConfigMapView | undefined {
    const cm = this.#stored.get(objectKey(ref));
    if (this.lagging || !cm || cm.labels[EXPORT_LABEL] !== EXPORT_LABEL_VALUE) return undefined;
    return viewOfMemory(cm);
  }

  async read(ref: ResourceRef): Promise<LiveConfigMap | undefined> {
    this.#call("read", ref);
    const cm = this.#stored.get(objectKey(ref));
    return cm && { ...viewOfMemory(cm), object: structuredClone(cm) };
  }

  async create(write: ConfigMapWrite): Promise<void> {
    this.#call("create", write);
    if (this.#stored.has(objectKey(write))) throw new ResourceConflict(`configmap ${write.name} exists`);
    this.put(write, {
      labels: { [EXPORT_LABEL]: EXPORT_LABEL_VALUE },
      ownerReferences: [write.owner],
      data: { ...write.data },
    });
  }

  async replace(live: LiveConfigMap, write: ConfigMapWrite): Promise<void> {
    this.#call("replace", write);
    const cm = this.#stored.get(objectKey(write));
    if (!cm) throw new ResourceNotFound(`configmap ${write.name}`);
    if (cm.resourceVersion !== live.resourceVersion) throw new ResourceConflict(`configmap ${write.name}`);
    if (this.policy && cm.labels[EXPORT_LABEL] !== EXPORT_LABEL_VALUE)
      throw new ForbiddenConfigMapWrite(`PUT configmaps/${write.name}: HTTP 403 Forbidden`);
    const others = cm.ownerReferences.filter((o) => o.uid !== write.owner.uid);
    cm.labels = { ...cm.labels, [EXPORT_LABEL]: EXPORT_LABEL_VALUE };
    cm.ownerReferences = [...others, write.owner];
    cm.data = { ...write.data };
    cm.resourceVersion = this.#next();
  }

  async delete(ref: ResourceRef, precondition: ConfigMapView): Promise<void> {
    this.#call("delete", ref);
    const cm = this.#stored.get(objectKey(ref));
    if (!cm) return;
    if (cm.uid !== precondition.uid || cm.resourceVersion !== precondition.resourceVersion)
      throw new ResourceConflict(`configmap ${ref.name}`);
    if (this.policy && cm.labels[EXPORT_LABEL] !== EXPORT_LABEL_VALUE)
      throw new ForbiddenConfigMapWrite(`DELETE configmaps/${ref.name}: HTTP 403 Forbidden`);
    this.#stored.delete(objectKey(ref));
  }

  isConflict(error: unknown): boolean {
    return error instanceof ResourceConflict;
  }

  /** Why no export can work (as after a 403 listing ConfigMaps); undefined when they can. */
  refusal: string | undefined;

  unavailable(): string | undefined {
    return this.refusal;
  }

  isInvalid(error: unknown): boolean {
    return error instanceof InvalidConfigMapWrite;
  }

  isForbidden(error: unknown): boolean {
    return error instanceof ForbiddenConfigMapWrite;
  }

  #call(method: "read" | "create" | "replace" | "delete", ref: ResourceRef): void {
    this.calls.push(`${method} ${objectKey(ref)}`);
    const failure = this.failing.get(method);
    if (failure) throw failure;
  }

  #next(): string {
    this.#version += 1;
    return String(this.#version);
  }
}

function viewOfMemory(cm: MemoryConfigMap): ConfigMapView & { digest: string } {
  const controller = cm.ownerReferences.find((o) => o.controller);
  return {
    uid: cm.uid,
    resourceVersion: cm.resourceVersion,
    labelled: cm.labels[EXPORT_LABEL] === EXPORT_LABEL_VALUE,
    digest: exportDigest(cm.data),
    ...(controller
      ? {
          controller: {
            apiVersion: controller.apiVersion,
            kind: controller.kind,
            name: controller.name,
            uid: controller.uid,
          },
        }
      : {}),
  };
}

/** The {@link DeploymentsPort} methods that call the service, for counting calls. */
export type ServiceMethod = Exclude<keyof DeploymentsPort, "readAheadFrom">;

const DEPLOYMENTS = "/v2/deployments";
const DEPLOYMENT = "/v2/deployments/{deployment_id}";
const HTTP: Record<ServiceMethod, [method: string, route: string]> = {
  getById: ["GET", DEPLOYMENTS],
  getByIds: ["GET", DEPLOYMENTS],
  findByName: ["GET", DEPLOYMENTS],
  listAll: ["GET", DEPLOYMENTS],
  create: ["POST", DEPLOYMENTS],
  patch: ["PATCH", DEPLOYMENT],
  delete: ["DELETE", DEPLOYMENT],
  listRepos: ["GET", "/v1/integrations/forge/github/{integration_id}/repos"],
  getRevision: ["GET", "/v2/deployments/{deployment_id}/revisions/{revision_id}"],
  getRevisionLogs: ["GET", "/v2/deployments/{deployment_id}/revisions/{revision_id}/logs"],
  recentRevisions: ["GET", "/v2/deployments/{deployment_id}/revisions"],
  redeploy: ["POST", "/v2/deployments/{deployment_id}/revisions/{revision_id}/redeploy"],
  createRevision: ["POST", "/v2/deployments/{deployment_id}/revisions"],
};

/** Options of {@link SimulatedService}. */
export interface SimulatedServiceOptions {
  now: () => number;
  timing?: Timing;
}

/** How a call that the test makes fail fails. */
export interface InjectedFailure {
  status: number;
  detail?: string;
  retryAfterSeconds?: number;
  /** A write whose answer was lost (a timeout): it may have been applied. */
  maybeApplied?: boolean;
}

/**
 * The service behind {@link DeploymentsPort}: the simulator's store, called in process. Reads go
 * through its listing (with `deployment_ids` or `name_contains`, a hundred per page, as the
 * client asks), so {@link SimulatedService.lagMs} hides new deployments from them as the real
 * service's listing can; failures are the API client's {@link ServiceError}s.
 */
export class SimulatedService implements DeploymentsPort {
  readonly store: SimulatorStore;
  /** Calls per method. */
  readonly calls: Record<ServiceMethod, number> = {
    getById: 0,
    getByIds: 0,
    findByName: 0,
    listAll: 0,
    create: 0,
    patch: 0,
    delete: 0,
    listRepos: 0,
    getRevision: 0,
    getRevisionLogs: 0,
    recentRevisions: 0,
    redeploy: 0,
    createRevision: 0,
  };
  /** Deployments younger than this are missing from listings (the listing lags behind creates). */
  lagMs = 0;
  readonly #failures = new Map<ServiceMethod, InjectedFailure>();
  readonly #held = new Set<ServiceMethod>();

  constructor(options: SimulatedServiceOptions) {
    this.store = new SimulatorStore({
      tenantId: DEFAULT_TENANT_ID,
      timing: options.timing ?? DEFAULT_TIMING,
      secretsMode: "masked",
      now: options.now,
    });
  }

  /** Every call so far, summed over the methods. */
  get total(): number {
    return Object.values(this.calls).reduce((a, b) => a + b, 0);
  }

  /** Sets every call count back to zero. */
  resetCalls(): void {
    for (const method of Object.keys(this.calls) as ServiceMethod[]) this.calls[method] = 0;
  }

  /** The next call of `method` fails as the service would answer it. */
  failNext(method: ServiceMethod, failure: InjectedFailure): void {
    this.#failures.set(method, failure);
  }

  /** Calls of `method` never answer; they reject with their signal's reason once it aborts. */
  hold(method: ServiceMethod): void {
    this.#held.add(method);
  }

  /** Calls of `method` made from now on answer again (those held still hang). */
  release(method: ServiceMethod): void {
    this.#held.delete(method);
  }

  /** A deployment created on the service directly (by someone else, or an earlier run). */
  seed(body: CreateDeploymentBody): Deployment {
    return this.store.create(body);
  }

  getById(id: string, signal: AbortSignal): Promise<Deployment | undefined> {
    return this.#call("getById", signal, () => this.#list(`deployment_ids=${id}`).find((d) => d.id === id));
  }

  getByIds(ids: readonly string[], signal: AbortSignal): Promise<Deployment[]> {
    return this.#call("getByIds", signal, () => this.#list(`deployment_ids=${ids.join(",")}`));
  }

  findByName(name: string, signal: AbortSignal): Promise<Listing> {
    return this.#call("findByName", signal, () => ({
      deployments: this.#list(`name_contains=${encodeURIComponent(name)}`).filter((d) => d.name === name),
      unreadable: [],
    }));
  }

  listAll(signal: AbortSignal, each: (deployment: Deployment) => void): Promise<void> {
    return this.#call("listAll", signal, () => {
      for (const deployment of this.#list("")) each(deployment);
    });
  }

  getRevision(deploymentId: string, revisionId: string, signal: AbortSignal): Promise<Revision | undefined> {
    return this.#call("getRevision", signal, () => this.store.revision(deploymentId, revisionId));
  }

  /** Whether the service has the logs route: without it, a call fails as such a service answers. */
  logsRoute = true;

  getRevisionLogs(
    deploymentId: string,
    revisionId: string,
    query: LogQuery,
    signal: AbortSignal,
  ): Promise<LogPage | undefined> {
    return this.#call("getRevisionLogs", signal, () => {
      if (!this.logsRoute)
        throw new LogsRouteMissingError(
          serviceError("GET", HTTP.getRevisionLogs[1], { status: 404, detail: "Not Found" }),
        );
      const search = new URLSearchParams({
        type: query.type,
        ...(query.order ? { order: query.order } : {}),
        ...(query.limit ? { limit: String(query.limit) } : {}),
        ...(query.offset ? { offset: query.offset } : {}),
      });
      return readLogPage(
        this.store.revisionLogs(deploymentId, revisionId, parseLogsQuery(search.toString())),
      );
    });
  }

  /** How the redeploy route behaves (see the simulator's `redeployRoute`), or that it is missing. */
  redeployRoute: "new-revision" | "switch-active" | "missing" = "new-revision";

  recentRevisions(deploymentId: string, signal: AbortSignal): Promise<Revision[]> {
    return this.#call(
      "recentRevisions",
      signal,
      () => this.store.revisionPage(deploymentId, 100, 0).resources,
    );
  }

  redeploy(deploymentId: string, revisionId: string, signal: AbortSignal): Promise<Deployment | undefined> {
    return this.#call("redeploy", signal, () => {
      if (this.redeployRoute === "missing")
        throw new RedeployRouteMissingError(
          serviceError("POST", HTTP.redeploy[1], { status: 404, detail: "Not Found" }),
        );
      try {
        return this.store.redeploy(deploymentId, revisionId, this.redeployRoute);
      } catch (error) {
        // The client's answer to a 404 naming what is missing (not the bare one of a missing route).
        if (error instanceof SimulatorError && error.status === 404) return undefined;
        throw error;
      }
    });
  }

  /** Whether the service has the rebuild route: without it, a call fails as such a service answers. */
  rebuildRoute = true;

  createRevision(deploymentId: string, signal: AbortSignal): Promise<Revision | undefined> {
    return this.#call("createRevision", signal, () => {
      if (!this.rebuildRoute)
        throw new RebuildRouteMissingError(
          serviceError("POST", HTTP.createRevision[1], { status: 405, detail: "Method Not Allowed" }),
        );
      try {
        return this.store.createRevision(deploymentId);
      } catch (error) {
        if (error instanceof SimulatorError && error.status === 404) return undefined;
        throw error;
      }
    });
  }

  create(body: CreateDeploymentBody, signal: AbortSignal): Promise<Deployment> {
    return this.#call("create", signal, () => this.store.create(structuredClone(body)));
  }

  /** The body of the last PATCH sent (answered or not). */
  lastPatchBody: Parameters<DeploymentsPort["patch"]>[1] | undefined;

  patch(id: string, body: Parameters<DeploymentsPort["patch"]>[1], signal: AbortSignal) {
    this.lastPatchBody = structuredClone(body);
    return this.#call("patch", signal, () => this.store.patch(id, structuredClone(body)));
  }

  /** The options of the last DELETE sent (answered or not). */
  lastDeleteOptions: { deleteTracingProject?: boolean } | undefined;

  delete(id: string, signal: AbortSignal, options?: { deleteTracingProject?: boolean }): Promise<void> {
    this.lastDeleteOptions = { ...options };
    return this.#call("delete", signal, () => {
      // DELETE of a deployment already gone is success (the port's contract).
      if (this.store.get(id)) this.store.delete(id, options);
    });
  }

  listRepos(integrationId: string, signal: AbortSignal) {
    return this.#call("listRepos", signal, () => this.store.repos(integrationId) ?? []);
  }

  /** Every page of the listing for `query`, a hundred per page, through the simulator's listing. */
  #list(query: string): Deployment[] {
    const all: Deployment[] = [];
    const faults = { lagMs: this.lagMs, pageCap: undefined, repeatOffset: false };
    for (let offset = 0; ; ) {
      const search = `${query}${query ? "&" : ""}limit=100&offset=${offset}`;
      const page = JSON.parse(this.store.listPageJson(parseListQuery(search), faults)) as {
        resources: Deployment[];
        offset: number;
      };
      all.push(...page.resources);
      if (page.resources.length < 100) return all;
      offset = page.offset;
    }
  }

  async #call<T>(method: ServiceMethod, signal: AbortSignal, answer: () => T): Promise<T> {
    this.calls[method] += 1;
    if (signal.aborted) throw signal.reason;
    if (this.#held.has(method)) return hangUntil(signal);
    const [verb, route] = HTTP[method];
    const failure = this.#failures.get(method);
    if (failure) {
      this.#failures.delete(method);
      throw serviceError(verb, route, failure);
    }
    try {
      return answer();
    } catch (error) {
      if (!(error instanceof SimulatorError)) throw error;
      throw serviceError(verb, route, { status: error.status, detail: error.message });
    }
  }
}

/** The client's error for an answer with `failure.status`, as its transport builds it. */
export function serviceError(method: string, route: string, failure: InjectedFailure): ServiceError {
  const kind = kindOfStatus(failure.status);
  return new ServiceError({
    kind,
    method,
    route,
    status: failure.status,
    detail: failure.detail ?? `HTTP ${failure.status}`,
    retryable: kind === "rate_limited" || kind === "unavailable",
    maybeApplied: failure.maybeApplied ?? false,
    ...(failure.retryAfterSeconds === undefined ? {} : { retryAfterSeconds: failure.retryAfterSeconds }),
  });
}

/**
 * The default connection's session over `service`, as the operator wires it for `resources`:
 * its listings answer for a minute and hold only the names the resources claim; `options` adds to
 * or replaces that (a listing deadline, a share).
 */
export function claimingSession(
  service: DeploymentsPort,
  resources: MemoryResources,
  options: Pick<ServiceSessionOptions, "clock" | "logger"> & Partial<ServiceSessionOptions>,
): ServiceSession {
  return new ServiceSession(service, {
    listingMaxAgeMs: 60_000,
    wanted: (name) => resources.claimants(claimOn(DEFAULT_CONNECTION, name)).length > 0,
    ...options,
  });
}

/** Every resource through one session: a reconciler with only the default connection. */
export function oneSession(session: ServiceSession): Sessions {
  return { lookup: () => ({ kind: "ready", session }) };
}
