/**
 * The narrow ports the reconciler talks to. Adapters at the edge implement them: the service
 * client through `deploymentsPort` (`src/reconcile/service/deployments-port.ts`, with the session
 * built over it) and the Kubernetes adapters each beside its own (`src/kube/custom-resources.ts`,
 * `secrets.ts`, `events.ts`), wired in `src/main.ts` and `src/wiring/`.
 * Nothing here imports an HTTP or Kubernetes client, so the reconciler is tested against the
 * real adapters or small in-memory ones alike.
 */

import type { LogPage, LogQuery } from "../api/revision-logs.ts";
import type { DeploymentResource, DeploymentResourceStatus } from "../crd/schema.ts";
import type { ObjectRef } from "../runtime/queue-records.ts";
import type {
  CreateDeploymentBody,
  Deployment,
  ForgeRepo,
  PatchDeploymentBody,
  Revision,
  UnreadableDeployment,
} from "./service-types.ts";

/**
 * Reads of single deployments, as a resource's lookup needs them (`observe.ts`, the reconciler's
 * deletion). Every call of these ports honours its AbortSignal.
 */
export interface DeploymentLookups {
  /** The deployment with this id, or undefined when the service has none. */
  getById(id: string, signal: AbortSignal): Promise<Deployment | undefined>;
  /**
   * Deployments whose name is exactly `name` (listing with `name_contains`, then exact match): at
   * most two, which is enough to say the name is ambiguous.
   */
  findByName(name: string, signal: AbortSignal): Promise<Listing>;
}

/** Reads of many deployments at once, as the snapshot of a connection (`service/snapshot.ts`) makes them. */
export interface DeploymentListings {
  /** The deployments with these ids (at most 100) in one call; ids the service lacks are absent. */
  getByIds(ids: readonly string[], signal: AbortSignal): Promise<Deployment[]>;
  /**
   * Every deployment of the tenant, all pages, each handed to `each` as its page is read, and each
   * item that could not be read to `skipped`: a caller keeping something smaller never holds the
   * whole listing (a tenant's server may answer with any number of items).
   */
  listAll(
    signal: AbortSignal,
    each: (deployment: Deployment) => void,
    skipped: (item: UnreadableDeployment) => void,
  ): Promise<void>;
}

/** The writes: only the reconciler makes them. */
export interface DeploymentWrites {
  create(body: CreateDeploymentBody, signal: AbortSignal): Promise<Deployment>;
  patch(id: string, body: PatchDeploymentBody, signal: AbortSignal): Promise<Deployment>;
  /**
   * Requests deletion; resolves when the service accepted it or the deployment is already gone.
   * `options.deleteTracingProject`: delete the deployment's tracing project with it, so that its
   * name can be created again (`spec.deleteTracingProject`).
   */
  delete(id: string, signal: AbortSignal, options?: { deleteTracingProject?: boolean }): Promise<void>;
}

/** The forge repositories an integration reaches (`RepoListings` in repo-listings.ts). */
export interface ForgeRepos {
  listRepos(integrationId: string, signal: AbortSignal): Promise<ForgeRepo[]>;
}

/** A deployment's revisions, as the revision tracking reads them (`revisions.ts`). */
export interface RevisionReads {
  /**
   * A revision of a deployment; undefined when the service has no such revision. Rejects with
   * `RevisionsRouteMissingError` (api/errors.ts) when the service has no revisions route.
   */
  getRevision(deploymentId: string, revisionId: string, signal: AbortSignal): Promise<Revision | undefined>;
}

/** A revision's logs, as the failure evidence reads them (`revision-log-reader.ts`). */
export interface RevisionLogReads {
  /**
   * One page of a revision's build or deploy log; undefined when the service has no such
   * revision. Rejects with `LogsRouteMissingError` (api/revision-logs.ts) when the service has no
   * logs route.
   */
  getRevisionLogs(
    deploymentId: string,
    revisionId: string,
    query: LogQuery,
    signal: AbortSignal,
  ): Promise<LogPage | undefined>;
}

/**
 * Redeploying an earlier revision instead of building the same one again (revision-reuse.ts),
 * and the one read that finds the candidates.
 */
export interface RevisionRedeploys {
  /**
   * The first page of the deployment's revisions, newest first, in one call (items that cannot be
   * read left out). Rejects with `RevisionsRouteMissingError` (api/errors.ts) when the service has
   * no revision listing.
   */
  recentRevisions(deploymentId: string, signal: AbortSignal): Promise<Revision[]>;
  /**
   * Redeploys `revisionId`; the deployment answered, or undefined when the service says it has no
   * such deployment or revision. Rejects with `RedeployRouteMissingError` (api/redeploy.ts) when
   * the service has no redeploy route.
   */
  redeploy(deploymentId: string, revisionId: string, signal: AbortSignal): Promise<Deployment | undefined>;
}

/** A new revision of a deployment's current configuration: the rebuild route. */
export interface RevisionRebuilds {
  /**
   * Creates one revision of the deployment's current configuration (a build of a tracked
   * branch's head); the revision answered, or undefined when the service says it has no such
   * deployment. Rejects with `RebuildRouteMissingError` (api/client.ts) when the service has no
   * rebuild route. Never repeated by the caller after a lost answer (it may have been built).
   */
  createRevision(deploymentId: string, signal: AbortSignal): Promise<Revision | undefined>;
}

/** Ids a call with room asks besides its callers' (see `service/deployments-port.ts`), and where their answers go. */
export interface ReadAhead {
  /** At most `room` ids worth asking now, none of `asked`. */
  ids(room: number, asked: ReadonlySet<string>): string[];
  /** A deployment read ahead. */
  found(deployment: Deployment): void;
}

/**
 * The service as one connection reaches it: every capability above. The adapter
 * (`deploymentsPort`, `src/reconcile/service/deployments-port.ts`) implements it and the composition root
 * hands it to a connection's session, which gives each consumer only the capabilities it uses.
 */
export interface DeploymentsPort
  extends DeploymentLookups,
    DeploymentListings,
    DeploymentWrites,
    ForgeRepos,
    RevisionReads,
    RevisionLogReads,
    RevisionRedeploys,
    RevisionRebuilds {
  /**
   * Lookups by id with room in their call read these ahead (`service/deployments-port.ts`); the
   * session of a sharded replica gives its snapshot's (`RemoteSnapshot.readAhead`).
   */
  readAheadFrom?(ahead: ReadAhead | undefined): void;
}

/**
 * What a listing answered: the deployments read, and the items it skipped because they could not
 * be understood (one odd item never stops a listing; see `UnreadableDeployment`).
 */
export interface Listing {
  deployments: Deployment[];
  unreadable: UnreadableDeployment[];
}

/** Namespace and name of a resource. */
export type ResourceRef = ObjectRef;

/**
 * A Deployment resource as read from the API server: the schema's metadata, with the name and
 * resourceVersion the server always sets.
 */
export type StoredResource = DeploymentResource & {
  metadata: NonNullable<DeploymentResource["metadata"]> & { name: string; resourceVersion: string };
};

/**
 * The Deployment resources. Reads come from the watch cache (which holds this instance's own
 * writes as soon as they are answered) and may lag other writers; every write carries the
 * resourceVersion of the object it was computed from, so a write from a stale read never lands:
 * it rejects with an error for which {@link ResourcePort.isConflict} is true, and the reconciler
 * requeues quietly to read again. This is what makes a create safe: its intent is recorded by
 * such a write before the POST.
 */
export interface ResourcePort {
  /** The object as the watch cache has it; undefined when it does not exist. */
  get(ref: ResourceRef): StoredResource | undefined;
  /** The resources making the claim `claim` (`claimOf` in inputs.ts; an index of the cache: no scan). */
  claimants(claim: string): StoredResource[];
  /** Sets the status of exactly `obj`'s version (conflict when the object changed since). */
  patchStatus(
    obj: StoredResource,
    status: DeploymentResourceStatus,
    signal: AbortSignal,
  ): Promise<StoredResource>;
  addFinalizer(obj: StoredResource, finalizer: string, signal: AbortSignal): Promise<StoredResource>;
  removeFinalizer(obj: StoredResource, finalizer: string, signal: AbortSignal): Promise<StoredResource>;
  isConflict(error: unknown): boolean;
}

/** The outcome of reading one key of a Secret in the resource's own namespace. */
export type SecretRead =
  | { kind: "found"; value: string }
  | { kind: "missing-secret" }
  | { kind: "missing-key" };

/**
 * The outcome of reading some keys of one Secret: the values of those it has (a key it lacks is
 * absent from `values`), or that the Secret does not exist.
 */
export type SecretKeysRead =
  | { kind: "found"; values: ReadonlyMap<string, string> }
  | { kind: "missing-secret" };

/** Kubernetes Secrets, read live at reconcile time (values are never cached). */
export interface SecretsPort {
  read(namespace: string, name: string, key: string, signal: AbortSignal): Promise<SecretRead>;
  /**
   * The values of `keys` of one Secret, from one read of it: a resource referencing a Secret in
   * many entries costs one request, whatever the number of keys.
   */
  readKeys(
    namespace: string,
    name: string,
    keys: readonly string[],
    signal: AbortSignal,
  ): Promise<SecretKeysRead>;
  /**
   * The Secret's resourceVersion as the metadata watch last saw it, undefined when it has not
   * seen it: whether a value read before may have changed, without reading it.
   */
  version(namespace: string, name: string): string | undefined;
}

/** A Kubernetes Event about a resource. `note` must never hold a secret value. */
export interface EventNote {
  type: "Normal" | "Warning";
  reason: string;
  action: string;
  note: string;
}

/** Records Events; never throws (failures are the adapter's to log). */
export interface EventsPort {
  record(obj: StoredResource, event: EventNote): void;
}

/** A `metadata.ownerReferences[]` entry. */
export interface OwnerReference {
  apiVersion: string;
  kind: string;
  name: string;
  uid: string;
  controller?: boolean;
  blockOwnerDeletion?: boolean;
}

/**
 * What the export knows of a ConfigMap (`export.ts`): its identity and version, its controller
 * (the ownerReference with `controller: true`), whether it carries the export label, and the
 * digest of its data (`exportDigest`) when known, never the data itself: the cache of a ConfigMap
 * weighs the same whatever it holds. A cached view has a digest only at the version of the
 * operator's own last write or read; a live read always has one.
 */
export interface ConfigMapView {
  uid: string;
  resourceVersion: string;
  controller?: Pick<OwnerReference, "apiVersion" | "kind" | "name" | "uid"> | undefined;
  labelled: boolean;
  digest?: string;
}

/** A ConfigMap as read live: its view, and the object itself for a replace that keeps the rest. */
export interface LiveConfigMap extends ConfigMapView {
  digest: string;
  object: unknown;
}

/** The ConfigMap the export writes: its data, the export label and the owner's reference. */
export interface ConfigMapWrite {
  namespace: string;
  name: string;
  owner: OwnerReference;
  data: Record<string, string>;
}

/**
 * The ConfigMaps of `spec.export`. Only those carrying the export label are watched (a cache of
 * their views); any other is read live, and only when the content to export changed or a name
 * is taken. Writes carry the version read, so a write from a stale read never lands.
 */
export interface ConfigMapsPort {
  /** The labelled ConfigMap as the watch cache has it; undefined when not seen (or not labelled). */
  cached(ref: ResourceRef): ConfigMapView | undefined;
  /** One GET; undefined when it does not exist. */
  read(ref: ResourceRef, signal: AbortSignal): Promise<LiveConfigMap | undefined>;
  /** Creates it; rejects with an error for which `isConflict` is true when the name is taken. */
  create(write: ConfigMapWrite, signal: AbortSignal): Promise<void>;
  /**
   * Replaces `live` (exactly its resourceVersion) with `write`'s data, label and ownerReference,
   * keeping its other labels, annotations and owners.
   */
  replace(live: LiveConfigMap, write: ConfigMapWrite, signal: AbortSignal): Promise<void>;
  /** Deletes exactly that uid at that resourceVersion; resolves when it is gone already. */
  delete(ref: ResourceRef, precondition: ConfigMapView, signal: AbortSignal): Promise<void>;
  /** A 409: the name is taken (create), or the object changed since it was read. */
  isConflict(error: unknown): boolean;
  /** A 422 the API server will give every write of that ConfigMap (immutable, or a key in binaryData). */
  isInvalid?(error: unknown): boolean;
  /** A 403: the operator's ServiceAccount may not do that to ConfigMaps. */
  isForbidden?(error: unknown): boolean;
  /** Why no export can work (the ConfigMap permissions are missing), or undefined. */
  unavailable?(): string | undefined;
}
