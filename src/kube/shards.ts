/**
 * The Kubernetes side of sharding: the replicas' Leases of one ring (watched by every replica),
 * a lean record of every Deployment resource in scope (watched by the sharder alone), and the one
 * write sharding makes on a resource: a merge patch of the shard labels under a resourceVersion
 * precondition, so a write based on a stale reading fails instead of overwriting a newer one.
 */

import { type ConnectionRef, DEFAULT_CONNECTION } from "../crd/conventions.ts";
import { type Claimant, claimOn, connectionKeyOf } from "../reconcile/inputs.ts";
import { Interner, isRecord } from "../runtime/json.ts";
import type { LeaseRecord } from "../runtime/leader.ts";
import type { ObjectRef } from "../runtime/queue-records.ts";
import {
  decodeInheritance,
  encodeInheritance,
  INHERITANCE_ANNOTATION,
  type Inheritance,
} from "../sharding/inheritance.ts";
import { DRAIN_LABEL, drainTarget, OWNER_LABEL, RING_LABEL } from "../sharding/labels.ts";
import { FINGERPRINT_ANNOTATION } from "../sharding/membership.ts";
import { decodeMovingBy, encodeMovingBy, MOVING_BY_ANNOTATION } from "../sharding/moving-by.ts";
import { createdSeconds } from "../sharding/pass.ts";
import { ShardLabelsDenied } from "../sharding/pass-write.ts";
import {
  decodeHolding,
  decodeRelease,
  encodeHolding,
  encodeRelease,
  HOLDING_ANNOTATION,
  RELEASED_ANNOTATION,
  type Release,
} from "../sharding/release.ts";
import type { RingChoice } from "../sharding/ring-choices.ts";
import type { KubeClient } from "./client.ts";
import { DEPLOYMENTS } from "./custom-resources.ts";
import { ConflictError, isNotFound, KubeApiError } from "./errors.ts";
import { KubeLease, leaseSnapshotFrom } from "./lease.ts";
import { isKubeObject, itemPath, type KubeObject, labelValue, type ResourceType } from "./object.ts";
import type { ReflectorHandlers } from "./reflector.ts";
import { WatchedResource, type WatchOptions, type WatchScope } from "./scope.ts";

/** The shard labels of a Deployment resource, for readers outside sharding (the CLI's `status`). */
export { DRAIN_LABEL, OWNER_LABEL } from "../sharding/labels.ts";

/** The resource type `leases.coordination.k8s.io`. */
export const LEASES: ResourceType = { group: "coordination.k8s.io", version: "v1", plural: "leases" };

/**
 * A Lease of the ring: its name, resourceVersion and spec, the ring a taken one carries, and the
 * ring its replica moves its resources by (`moving-by.ts`).
 */
export interface LeaseObject extends KubeObject {
  record: LeaseRecord;
  inheritance?: Inheritance | undefined;
  movingBy?: Inheritance | undefined;
  released?: Release | undefined;
  /** A joined replica's own: the replicas whose released share it has listed (`release.ts`). */
  holding?: readonly string[] | undefined;
  /** A replica's own: what its ring depends on (`membership.ts`, `ringFingerprint`). */
  fingerprint?: string | undefined;
}

/** A ring Lease from the wire; its rings (`inheritance.ts`, `moving-by.ts`) read from its annotations. */
export function decodeLease(raw: unknown): LeaseObject | undefined {
  if (!isKubeObject(raw)) return undefined;
  const { name, namespace, resourceVersion, annotations } = raw.metadata;
  const annotation = (key: string) => {
    const value = isRecord(annotations) ? annotations[key] : undefined;
    return typeof value === "string" ? value : undefined;
  };
  const inheritance = decodeInheritance(annotation(INHERITANCE_ANNOTATION));
  const movingBy = decodeMovingBy(annotation(MOVING_BY_ANNOTATION));
  const released = decodeRelease(annotation(RELEASED_ANNOTATION));
  const holding = decodeHolding(annotation(HOLDING_ANNOTATION));
  const fingerprint = annotation(FINGERPRINT_ANNOTATION);
  return {
    metadata: { name, resourceVersion, ...(namespace ? { namespace } : {}) },
    record: leaseSnapshotFrom(raw).record,
    ...(inheritance ? { inheritance } : {}),
    ...(movingBy ? { movingBy } : {}),
    ...(released ? { released } : {}),
    ...(holding ? { holding } : {}),
    ...(fingerprint ? { fingerprint } : {}),
  };
}

/** The Leases labelled `sharding.dms.dev/ring=<ring>` in `namespace`: one per replica. */
export class KubeShardLeases extends WatchedResource<LeaseObject> {
  readonly namespace: string;
  readonly ring: string;
  readonly #client: KubeClient;

  constructor(namespace: string, ring: string, options: WatchOptions) {
    super([namespace], options, {
      resource: LEASES,
      labelSelector: `${RING_LABEL}=${ring}`,
      decode: decodeLease,
    });
    this.namespace = namespace;
    this.ring = ring;
    this.#client = options.client;
  }

  /** Every Lease of the ring seen. */
  list(): LeaseObject[] {
    return this.cache.list();
  }

  /** The Lease `name`, if seen. */
  get(name: string): LeaseObject | undefined {
    return this.cache.get(this.namespace, name);
  }

  subscribe(handlers: ReflectorHandlers<LeaseObject>): () => void {
    return this.cache.subscribe(handlers);
  }

  /**
   * The Lease `name` of this ring, to read and write (created with the ring label; with
   * `inheritance`, written on it as its annotation; with `movingBy`, the replica's own Lease,
   * the ring it returns written with each write, the release `released` returns, and the
   * replicas whose released share `holding` says is listed here, and its ring's `fingerprint`).
   */
  lease(
    name: string,
    inheritance?: Inheritance,
    movingBy?: () => Inheritance | undefined,
    released?: () => Release | undefined,
    holding?: () => Iterable<string>,
    fingerprint?: () => string | undefined,
  ): KubeLease {
    const annotations = inheritance
      ? { [INHERITANCE_ANNOTATION]: encodeInheritance(inheritance) }
      : movingBy
        ? () => {
            const ring = movingBy();
            const release = released?.();
            const held = holding ? encodeHolding(holding()) : undefined;
            const fp = fingerprint?.();
            if (!ring && !release && !held && !fp) return undefined;
            return {
              ...(fp ? { [FINGERPRINT_ANNOTATION]: fp } : {}),
              ...(ring ? { [MOVING_BY_ANNOTATION]: encodeMovingBy(ring) } : {}),
              ...(release ? { [RELEASED_ANNOTATION]: encodeRelease(release) } : {}),
              ...(held ? { [HOLDING_ANNOTATION]: held } : {}),
            };
          }
        : undefined;
    return new KubeLease(
      this.#client,
      { namespace: this.namespace, name },
      { [RING_LABEL]: this.ring },
      annotations,
    );
  }
}

/**
 * What the sharder keeps of a Deployment resource: identity and version, the shard labels, what
 * it claims (its service name on its connection, `claimOf`: the ring places resources by it, so
 * two rivals for one name always share a replica) and the key of its connection (counted per
 * connection, by an index, for the connections' status and finalizer). One flat record of one
 * shape (every field always set), its own `metadata` (name, namespace and resourceVersion are its
 * fields): the leader keeps one per resource of the whole cluster, ~370 bytes with its cache entry.
 */
export class ShardObject implements KubeObject {
  readonly name: string;
  readonly namespace: string | undefined;
  readonly resourceVersion: string;
  /** `metadata.uid`; "" when the API server sent none (such a record is never placed). */
  readonly uid: string;
  /** The owner label's value; undefined when absent or empty. */
  readonly owner: string | undefined;
  /** Whether the drain label is set (whatever its value). */
  readonly drain: boolean;
  /** The replica the drain label names, if it names one (`drainTarget`). */
  readonly drainTo: string | undefined;
  readonly claim: string;
  readonly connection: string;
  /** When it was created, in whole seconds since the epoch (`createdSeconds`): rivals move oldest first. */
  readonly created: number;
  /** The sharder's note of the ring's choice (`ShardedResource.ringChoice`): none when decoded. */
  ringChoice: RingChoice | undefined = undefined;

  constructor(fields: Omit<ShardObject, "metadata" | "ringChoice">) {
    this.name = fields.name;
    this.namespace = fields.namespace;
    this.resourceVersion = fields.resourceVersion;
    this.uid = fields.uid;
    this.owner = fields.owner;
    this.drain = fields.drain;
    this.drainTo = fields.drainTo;
    this.claim = fields.claim;
    this.connection = fields.connection;
    this.created = fields.created;
  }

  /** The record itself: a second object per resource would cost the leader 1.4 MiB at 30,000. */
  get metadata(): { name: string; namespace?: string; resourceVersion: string; uid: string } {
    return this;
  }
}

/** The name of the sharder's store's index by connection key. */
export const SHARD_CONNECTION_INDEX = "connection";

/** The sharder's store's index: by connection key (the default connection's are not indexed). */
export const SHARD_INDEXERS: Record<string, (o: ShardObject) => readonly string[]> = {
  [SHARD_CONNECTION_INDEX]: (o) => (o.connection === DEFAULT_CONNECTION ? [] : [o.connection]),
};

/** Namespaces, connection keys and owner label values: shared by many resources, held once. */
const SHARD_STRINGS = new Interner(1024);

/**
 * A Deployment resource from the wire as the sharder keeps it (see {@link ShardObject}): a few
 * hundred bytes whatever the size of its spec and status. Read tolerantly: a spec without a
 * usable `name` claims `metadata.name`, one without a usable `connectionRef` the default
 * connection, as the reconciler reads them (`reconcile/inputs.ts`). Both are bounded by the CRD
 * (253 characters each) and immutable once set (its validation rules).
 */
export function decodeShardObject(raw: unknown): ShardObject | undefined {
  if (!isKubeObject(raw)) return undefined;
  const { name, namespace, uid, resourceVersion, labels, creationTimestamp } = raw.metadata;
  const rawSpec = (raw as { spec?: unknown }).spec;
  const spec = isRecord(rawSpec) ? rawSpec : {};
  const ref = isRecord(spec.connectionRef) ? spec.connectionRef : undefined;
  const connectionRef =
    ref && typeof ref.kind === "string" && typeof ref.name === "string"
      ? ({ kind: ref.kind, name: ref.name } as ConnectionRef)
      : undefined;
  const specName = typeof spec.name === "string" && spec.name !== name ? spec.name : undefined;
  const ns = typeof namespace === "string" ? SHARD_STRINGS.of(namespace) : undefined;
  const claimant = {
    metadata: { name, ...(ns ? { namespace: ns } : {}) },
    spec: { name: specName, connectionRef },
  };
  const connection = SHARD_STRINGS.of(connectionKeyOf(claimant as Claimant));
  const owner = labelValue(labels, OWNER_LABEL);
  const drain = labelValue(labels, DRAIN_LABEL);
  const drainTo = drainTarget(drain);
  return new ShardObject({
    name,
    namespace: ns,
    resourceVersion,
    uid: typeof uid === "string" ? uid : "",
    // The owner label's value is one of a few replicas' names: held once.
    owner: owner ? SHARD_STRINGS.of(owner) : undefined,
    drain: drain !== undefined,
    drainTo: drainTo ? SHARD_STRINGS.of(drainTo) : undefined,
    // On the default connection the claim is the name itself: no string of its own.
    claim: claimOn(connection, specName ?? name),
    connection,
    created: createdSeconds(creationTimestamp),
  });
}

/**
 * Every Deployment resource in `scope` as the sharder keeps it ({@link decodeShardObject}),
 * indexed by connection ({@link SHARD_CONNECTION_INDEX}).
 */
export class KubeShardedResources extends WatchedResource<ShardObject> {
  constructor(scope: WatchScope, options: WatchOptions) {
    super(scope.namespaces, options, {
      resource: DEPLOYMENTS,
      ...(scope.labelSelector ? { labelSelector: scope.labelSelector } : {}),
      decode: decodeShardObject,
      indexers: SHARD_INDEXERS,
    });
  }

  list(): ShardObject[] {
    return this.cache.list();
  }

  /** Every record, read in place: for a synchronous walk (see `values` in reflector.ts). */
  values(): Iterable<ShardObject> {
    return this.cache.values();
  }

  get size(): number {
    return this.cache.size;
  }

  /** The resources using the connection `key` (none for the default connection). */
  usersOf(key: string): ShardObject[] {
    return this.cache.byIndex(SHARD_CONNECTION_INDEX, key);
  }

  subscribe(handlers: ReflectorHandlers<ShardObject>): () => void {
    return this.cache.subscribe(handlers);
  }
}

/** How a label write ended: written, lost a race (the object changed), or the object is gone. */
export type LabelWrite = "written" | "conflict" | "gone";

/**
 * Sets (a string) or removes (null) shard labels of the Deployment resource `ref`, only if it is
 * still at `resourceVersion`: a JSON merge patch whose metadata carries the resourceVersion, which
 * the API server checks like an update's.
 */
export async function patchShardLabels(
  client: KubeClient,
  ref: ObjectRef,
  resourceVersion: string,
  labels: Record<string, string | null>,
  signal: AbortSignal,
): Promise<LabelWrite> {
  try {
    await client.request({
      method: "PATCH",
      path: itemPath(DEPLOYMENTS, ref),
      contentType: "application/merge-patch+json",
      body: { metadata: { resourceVersion, labels } },
      signal,
      discardAnswer: true,
    });
    return "written";
  } catch (err) {
    if (err instanceof ConflictError) return "conflict";
    if (isNotFound(err)) return "gone";
    throw err;
  }
}

/**
 * A replica's hand-over write: {@link patchShardLabels}, and "refused" when the API server
 * answered that it will not make it (a 4xx other than a conflict, a missing object, a timeout or
 * a throttle: an admission policy, a validation), so the hand-over is known not written. Any other
 * failure rejects: the write may have been made.
 */
export async function handOverLabels(
  client: KubeClient,
  ref: ObjectRef,
  resourceVersion: string,
  labels: Record<string, string | null>,
  signal: AbortSignal,
): Promise<LabelWrite | "refused"> {
  try {
    return await patchShardLabels(client, ref, resourceVersion, labels, signal);
  } catch (err) {
    if (
      err instanceof KubeApiError &&
      err.status >= 400 &&
      err.status < 500 &&
      err.status !== 408 &&
      err.status !== 429
    )
      return "refused";
    throw err;
  }
}

/**
 * The sharder's label write: {@link patchShardLabels} of the record `resource`, true when written.
 * A 403 rejects with {@link ShardLabelsDenied}, which the sharder reports once per pass: a
 * ValidatingAdmissionPolicy that does not name this ServiceAccount denies with it, as RBAC does.
 */
export async function writeShardLabels(
  client: KubeClient,
  resource: ShardObject,
  labels: Record<string, string | null>,
  signal: AbortSignal,
): Promise<boolean> {
  const ref = { namespace: resource.metadata.namespace ?? "", name: resource.metadata.name };
  try {
    return (
      (await patchShardLabels(client, ref, resource.metadata.resourceVersion, labels, signal)) === "written"
    );
  } catch (err) {
    if (err instanceof KubeApiError && err.status === 403)
      throw new ShardLabelsDenied(err.message, /ValidatingAdmissionPolicy/.test(err.message), { cause: err });
    throw err;
  }
}
