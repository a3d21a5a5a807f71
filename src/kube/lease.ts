/**
 * The Kubernetes side of leader election: one `coordination.k8s.io/v1` Lease, read and written
 * for the runtime's elector through its {@link LeasePort}. Optimistic concurrency (a PUT carrying
 * the resourceVersion read) is what makes two candidates unable to both win.
 */

import { isRecord } from "../runtime/json.ts";
import {
  LeaseConflictError,
  type LeasePort,
  type LeaseRecord,
  type LeaseSnapshot,
} from "../runtime/leader.ts";
import type { ObjectRef } from "../runtime/queue-records.ts";
import { type KubeClient, toMicroTime } from "./client.ts";
import { ConflictError, isNotFound } from "./errors.ts";
import { collectionPath, isKubeObject, itemPath, type ResourceType } from "./object.ts";

/** The resource type `leases.coordination.k8s.io`. */
const LEASES: ResourceType = { group: "coordination.k8s.io", version: "v1", plural: "leases" };

/** Reads a Lease object from the wire into the port's snapshot; throws when it is malformed. */
export function leaseSnapshotFrom(raw: unknown): LeaseSnapshot {
  if (!isKubeObject(raw)) throw new Error("the API server returned a Lease without metadata");
  const rawSpec: unknown = (raw as { spec?: unknown }).spec;
  const spec = isRecord(rawSpec) ? rawSpec : {};
  const num = (v: unknown, fallback: number) => (typeof v === "number" && Number.isFinite(v) ? v : fallback);
  const rawAnnotations: unknown = raw.metadata.annotations;
  const annotations: Record<string, string> = {};
  if (isRecord(rawAnnotations))
    for (const [key, value] of Object.entries(rawAnnotations))
      if (typeof value === "string") annotations[key] = value;
  return {
    resourceVersion: raw.metadata.resourceVersion,
    ...(Object.keys(annotations).length > 0 ? { annotations } : {}),
    record: {
      holderIdentity: typeof spec.holderIdentity === "string" ? spec.holderIdentity : "",
      leaseDurationSeconds: num(spec.leaseDurationSeconds, 0),
      acquireTime: parseKubeTime(spec.acquireTime),
      renewTime: parseKubeTime(spec.renewTime),
      leaseTransitions: num(spec.leaseTransitions, 0),
    },
  };
}

/** The Lease `spec` for `record`, with MicroTime timestamps. */
export function leaseSpecOf(record: LeaseRecord): Record<string, unknown> {
  return {
    holderIdentity: record.holderIdentity,
    leaseDurationSeconds: record.leaseDurationSeconds,
    leaseTransitions: record.leaseTransitions,
    ...(record.acquireTime ? { acquireTime: toMicroTime(record.acquireTime) } : {}),
    ...(record.renewTime ? { renewTime: toMicroTime(record.renewTime) } : {}),
  };
}

/**
 * {@link LeasePort} over the Lease `ref` (the operator's namespace and lease name).
 *
 * Contract: as the port's; a 409 from create (AlreadyExists) or update (Conflict) becomes
 * {@link LeaseConflictError}. `update` is a PUT of the whole object: the elector owns this Lease,
 * and the RBAC role grants get/create/update only.
 */
export class KubeLease implements LeasePort {
  readonly #client: KubeClient;
  readonly #ref: ObjectRef;
  readonly #labels: Record<string, string> | undefined;
  readonly #annotations: Record<string, string> | (() => Record<string, string> | undefined) | undefined;

  /**
   * `labels` (a shard Lease's ring label) and `annotations` (a taken shard Lease's ring; a
   * replica's view of the ring, read at each write) are written with every create and update.
   */
  constructor(
    client: KubeClient,
    ref: ObjectRef,
    labels?: Record<string, string>,
    annotations?: Record<string, string> | (() => Record<string, string> | undefined),
  ) {
    this.#client = client;
    this.#ref = ref;
    this.#labels = labels;
    this.#annotations = annotations;
  }

  async get(signal: AbortSignal): Promise<LeaseSnapshot | undefined> {
    try {
      return leaseSnapshotFrom(
        await this.#client.request({ method: "GET", path: this.#itemPath(), signal, urgent: true }),
      );
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  }

  async create(record: LeaseRecord, signal: AbortSignal): Promise<LeaseSnapshot> {
    return this.#write(
      "POST",
      collectionPath(LEASES, this.#ref.namespace),
      this.#object(record, undefined),
      signal,
    );
  }

  async update(record: LeaseRecord, resourceVersion: string, signal: AbortSignal): Promise<LeaseSnapshot> {
    return this.#write("PUT", this.#itemPath(), this.#object(record, resourceVersion), signal);
  }

  async #write(
    method: "POST" | "PUT",
    path: string,
    body: unknown,
    signal: AbortSignal,
  ): Promise<LeaseSnapshot> {
    try {
      return leaseSnapshotFrom(await this.#client.request({ method, path, body, signal, urgent: true }));
    } catch (err) {
      if (err instanceof ConflictError) {
        throw new LeaseConflictError(
          `lease ${this.#ref.namespace}/${this.#ref.name} was written by someone else`,
          {
            cause: err,
          },
        );
      }
      throw err;
    }
  }

  /**
   * Deletes the Lease if it is still at `resourceVersion` (a precondition: a holder that renewed
   * it meanwhile keeps it); resolves false when it changed or is gone.
   */
  async delete(resourceVersion: string, signal: AbortSignal): Promise<boolean> {
    try {
      await this.#client.request({
        method: "DELETE",
        path: this.#itemPath(),
        body: { kind: "DeleteOptions", apiVersion: "v1", preconditions: { resourceVersion } },
        signal,
        urgent: true,
      });
      return true;
    } catch (err) {
      if (err instanceof ConflictError || isNotFound(err)) return false;
      throw err;
    }
  }

  #object(record: LeaseRecord, resourceVersion: string | undefined): unknown {
    const annotations = typeof this.#annotations === "function" ? this.#annotations() : this.#annotations;
    return {
      apiVersion: "coordination.k8s.io/v1",
      kind: "Lease",
      metadata: {
        name: this.#ref.name,
        namespace: this.#ref.namespace,
        ...(resourceVersion !== undefined ? { resourceVersion } : {}),
        ...(this.#labels ? { labels: this.#labels } : {}),
        ...(annotations ? { annotations } : {}),
      },
      spec: leaseSpecOf(record),
    };
  }

  #itemPath(): string {
    return itemPath(LEASES, this.#ref);
  }
}

/** Parses a Time or MicroTime string; `undefined` for a missing or unparsable value. */
export function parseKubeTime(value: unknown): Date | undefined {
  if (typeof value !== "string" || value === "") return undefined;
  const date = new Date(value);
  return Number.isNaN(date.getTime()) ? undefined : date;
}
