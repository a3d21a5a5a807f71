/**
 * Leader election over a coordination.k8s.io Lease, with client-go's semantics, written against
 * the small {@link LeasePort} so this file knows nothing about the Kubernetes client
 * (`src/kube/` implements the port).
 */

/**
 * The fields of a Lease's `spec` that leader election reads and writes.
 * `holderIdentity` is `""` when nobody holds the lease (after a release).
 */
export interface LeaseRecord {
  holderIdentity: string;
  leaseDurationSeconds: number;
  /** When the current holder acquired it; undefined on a lease never held. */
  acquireTime: Date | undefined;
  /** Last renewal by the current holder; undefined on a lease never held. */
  renewTime: Date | undefined;
  leaseTransitions: number;
}

/** A Lease as read from the API server: its record and the object's `metadata.resourceVersion`. */
export interface LeaseSnapshot {
  record: LeaseRecord;
  resourceVersion: string;
}

/**
 * Thrown by a {@link LeasePort} when the write lost a race: `create` of a lease that already
 * exists (HTTP 409 AlreadyExists) or `update` with a stale resourceVersion (HTTP 409 Conflict).
 * It means someone else wrote the lease; the elector re-reads and tries again on its next tick.
 */
export class LeaseConflictError extends Error {
  override readonly name = "LeaseConflictError";
}

/**
 * Access to ONE Lease object (its namespace and name are fixed when the adapter is built).
 *
 * Contract:
 * - `get` resolves `undefined` when the lease does not exist (404), the snapshot otherwise.
 * - `create` creates it with `record`; throws {@link LeaseConflictError} when it already exists.
 * - `update` replaces the spec with `record` only if the object is still at `resourceVersion`
 *   (optimistic concurrency, a PUT with metadata.resourceVersion); throws
 *   {@link LeaseConflictError} on a 409 conflict.
 * - Every call honours `signal` (rejects when it aborts). Any other failure rejects with an Error.
 * - Times are whole `Date`s; the adapter maps them to/from the Lease's MicroTime strings.
 */
export interface LeasePort {
  get(signal: AbortSignal): Promise<LeaseSnapshot | undefined>;
  create(record: LeaseRecord, signal: AbortSignal): Promise<LeaseSnapshot>;
  update(record: LeaseRecord, resourceVersion: string, signal: AbortSignal): Promise<LeaseSnapshot>;
}
