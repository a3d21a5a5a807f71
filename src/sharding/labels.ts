/**
 * The names sharding writes on Kubernetes objects. The owner label is what each replica's
 * Deployment resource watch selects on (the API server filters, no replica caches another's
 * resources); the drain label asks the owner to let go; the ring label marks the replicas' Leases.
 */

/** The replica that owns a Deployment resource: its pod name (a label value, ≤ 63 characters). */
export const OWNER_LABEL = "shard.dms.dev/owner";

/** Set by the sharder on a resource that must move: its owner stops and removes both labels. */
export const DRAIN_LABEL = "shard.dms.dev/drain";

/** On every replica's Lease: the ring it belongs to (the leader election Lease's name). */
export const RING_LABEL = "sharding.dms.dev/ring";

/** The holder the sharder writes on a Lease it took from a replica that stopped renewing it. */
export const SHARDER_HOLDER_PREFIX = "sharder/";

/** Label values: at most 63 characters, alphanumeric at both ends, `-`, `_` and `.` inside. */
const LABEL_VALUE = /^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$/;

/** Lease names: DNS subdomains, lower case (a pod name always is one). */
const LEASE_NAME = /^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/;

/** True when `name` can be a replica: a valid label value and a valid Lease name. */
export function isReplicaName(name: string): boolean {
  return name !== "" && LABEL_VALUE.test(name) && LEASE_NAME.test(name);
}
