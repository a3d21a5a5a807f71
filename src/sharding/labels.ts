/**
 * The names sharding writes on Kubernetes objects. The owner label is what each replica's
 * Deployment resource watch selects on (the API server filters, no replica caches another's
 * resources); the drain label asks the owner to let go; the ring label marks the replicas' Leases.
 */

/** The replica that owns a Deployment resource: its pod name (a label value, ≤ 63 characters). */
export const OWNER_LABEL = "shard.dms.dev/owner";

/**
 * Set by the sharder on a resource that must move: its owner stops, then writes the replica the
 * value names as the owner (a hand-over), or removes the owner label when the value is
 * {@link DRAIN_ANY}; the drain label is removed in the same write.
 */
export const DRAIN_LABEL = "shard.dms.dev/drain";

/**
 * The drain label's value that names no next owner: the owner only lets go. The sharder writes it
 * for a resource whose claim has rivals (they move together, by the sharder, once all are let go).
 */
export const DRAIN_ANY = "true";

/** On every replica's Lease: the ring it belongs to (the leader election Lease's name). */
export const RING_LABEL = "sharding.dms.dev/ring";

/** The holder the sharder writes on a Lease it took from a replica that stopped renewing it. */
export const SHARDER_HOLDER_PREFIX = "sharder/";

/** Label values: at most 63 characters, alphanumeric at both ends, `-`, `_` and `.` inside. */
const LABEL_VALUE = /^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$/;

/**
 * Lease names: DNS-1123 subdomains (the API server's rule: lower case labels of letters, digits
 * and `-`, alphanumeric at both ends, joined by single dots; a pod name always is one). `x..0` is
 * a label value but no Lease's name: taking its Lease would fail at every pass.
 */
const LEASE_NAME = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

/** True when `name` can be a replica: a valid label value and a valid Lease name. */
export function isReplicaName(name: string): boolean {
  return name !== "" && name.length <= 63 && LABEL_VALUE.test(name) && LEASE_NAME.test(name);
}

/** The replica a drain label's value names; undefined for {@link DRAIN_ANY} or a value no replica bears. */
export function drainTarget(drain: string | undefined): string | undefined {
  return drain !== undefined && drain !== DRAIN_ANY && isReplicaName(drain) ? drain : undefined;
}

/**
 * The owner label a replica (`self`) writes when it lets go of a resource whose drain label is
 * `drain`: the replica the value names (a hand-over: the resource moves in that one write), or
 * none (the label removed) when it names no other replica ({@link DRAIN_ANY}, or a value that
 * cannot be a replica's name) or when `rivals` other resources this replica owns claim the same
 * name (a claim changed since the drain was written, which the CRD's rules forbid): rivals are
 * moved together by the sharder, once all are let go.
 */
export function handoverTo(drain: string | undefined, self: string, rivals = 0): string | null {
  const to = drainTarget(drain);
  return to !== undefined && to !== self && rivals === 0 ? to : null;
}

/** What {@link mayLetGo} reads of a resource: its labels. */
export interface Labelled {
  readonly metadata: { readonly labels?: Readonly<Record<string, string>> | undefined };
}

/**
 * Whether a replica (`self`) may let go of a drained resource whose rivals here (other resources
 * in its cache claiming the same name) are `rivals`: only once none of them may still be
 * reconciled here (each labelled for `self` with a drain label, no reconcile of it running).
 * Else a rival left behind, younger, would find itself alone here and take the name. The sharder
 * drains every rival of a claim that moves, so the wait ends.
 */
export function mayLetGo<R extends Labelled>(
  rivals: readonly R[],
  self: string,
  reconciling: (rival: R) => boolean,
): boolean {
  return rivals.every(
    (r) =>
      r.metadata.labels?.[OWNER_LABEL] === self &&
      r.metadata.labels?.[DRAIN_LABEL] !== undefined &&
      !reconciling(r),
  );
}
