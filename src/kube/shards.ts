/**
 * The Kubernetes side of sharding: the replicas' Leases of one ring (watched by every replica),
 * the metadata of every Deployment resource in scope (watched by the sharder alone), and the one
 * write sharding makes on a resource: a merge patch of the shard labels under a resourceVersion
 * precondition, so a write based on a stale reading fails instead of overwriting a newer one.
 */
import type { LeaseRecord } from "../runtime/leader.ts";
import { RING_LABEL } from "../sharding/labels.ts";
import type { KubeClient } from "./client.ts";
import { DEPLOYMENTS } from "./deployments.ts";
import { ConflictError, isNotFound } from "./errors.ts";
import { KubeLease, leaseSnapshotFrom } from "./lease.ts";
import { isKubeObject, type KubeObject, keptMetadata, type ObjectRef } from "./object.ts";
import type { ReflectorHandlers, ResourceType } from "./reflector.ts";
import { collectionPath } from "./reflector.ts";
import { WatchedResource, type WatchOptions, type WatchScope } from "./scope.ts";
import { METADATA_LIST_ACCEPT, METADATA_WATCH_ACCEPT } from "./secrets.ts";

/** The shard labels of a Deployment resource, for readers outside sharding (the CLI's `status`). */
export { DRAIN_LABEL, OWNER_LABEL } from "../sharding/labels.ts";

/** The resource type `leases.coordination.k8s.io`. */
export const LEASES: ResourceType = { group: "coordination.k8s.io", version: "v1", plural: "leases" };

/** A Lease of the ring: its name, resourceVersion and spec. */
export interface LeaseObject extends KubeObject {
  record: LeaseRecord;
}

function decodeLease(raw: unknown): LeaseObject | undefined {
  if (!isKubeObject(raw)) return undefined;
  const { name, namespace, resourceVersion } = raw.metadata;
  return {
    metadata: { name, resourceVersion, ...(namespace ? { namespace } : {}) },
    record: leaseSnapshotFrom(raw).record,
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

  /** The Lease `name` of this ring, to read and write (created with the ring label). */
  lease(name: string): KubeLease {
    return new KubeLease(this.#client, { namespace: this.namespace, name }, { [RING_LABEL]: this.ring });
  }
}

/** What the sharder keeps of a Deployment resource: identity, version and the shard labels. */
function decodeShardMeta(raw: unknown): KubeObject | undefined {
  if (!isKubeObject(raw)) return undefined;
  const { name, namespace, uid, resourceVersion, labels } = keptMetadata(raw.metadata);
  return {
    metadata: {
      name,
      resourceVersion,
      ...(namespace ? { namespace } : {}),
      ...(uid ? { uid } : {}),
      ...(labels ? { labels } : {}),
    },
  };
}

/**
 * The metadata of every Deployment resource in `scope` (a metadata-only watch: no spec, no
 * status, no other label or annotation is kept), for the sharder.
 */
export class KubeShardedResources extends WatchedResource<KubeObject> {
  constructor(scope: WatchScope, options: WatchOptions) {
    super(scope.namespaces, options, {
      resource: DEPLOYMENTS,
      ...(scope.labelSelector ? { labelSelector: scope.labelSelector } : {}),
      accept: { list: METADATA_LIST_ACCEPT, watch: METADATA_WATCH_ACCEPT },
      decode: decodeShardMeta,
    });
  }

  list(): KubeObject[] {
    return this.cache.list();
  }

  get size(): number {
    return this.cache.size;
  }

  subscribe(handlers: ReflectorHandlers<KubeObject>): () => void {
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
      path: `${collectionPath(DEPLOYMENTS, ref.namespace)}/${encodeURIComponent(ref.name)}`,
      contentType: "application/merge-patch+json",
      body: { metadata: { resourceVersion, labels } },
      signal,
    });
    return "written";
  } catch (err) {
    if (err instanceof ConflictError) return "conflict";
    if (isNotFound(err)) return "gone";
    throw err;
  }
}
