/**
 * The parts of a sharded replica (`replica.ts`) as the rest of the operator sees them: what it is
 * given, what it gives back, and its share of each connection's request budget.
 */
import type { Logger } from "pino";
import type { Registry } from "prom-client";
import type { Clock } from "../runtime/clock.ts";
import type { Reconciler } from "../runtime/controller.ts";
import type { Runnable } from "../runtime/manager.ts";
import type { ObjectRef } from "../runtime/queue-records.ts";
import type { ClusterUsers } from "./cluster-users.ts";
import type { EarlyListing, InheritPort } from "./heirs.ts";
import type { LabelPolicyReading } from "./label-policy.ts";
import type { ShardMember, ShardWriteGrant } from "./member.ts";
import { ringShares } from "./ring.ts";
import type { RingLeases, ShardRecord, ShardStore, WatchHandlers } from "./sharder-loop.ts";

/** A resource of this replica's own cache, as its member reads it. */
export interface CachedResource {
  readonly metadata: {
    readonly namespace?: string | undefined;
    readonly name: string;
    readonly resourceVersion: string;
    readonly creationTimestamp?: string | undefined;
    readonly labels?: Readonly<Record<string, string>> | undefined;
  };
}

/** This replica's cache of its share of the resources. */
export interface ReplicaCache {
  get(ref: ObjectRef): CachedResource | undefined;
  /** Whether `ref` is between two of the cache's watches (`kube/transit.ts`): back soon, maybe. */
  inTransit?(ref: ObjectRef): boolean;
  list(): readonly CachedResource[];
  readonly size: number;
  subscribe(handlers: WatchHandlers<CachedResource>): unknown;
}

/**
 * How a label write ended: written, lost a race (the object changed), the object is gone, or the
 * API server refused it (an admission policy, a validation: known not written).
 */
export type LabelWriteResult = "written" | "conflict" | "gone" | "refused";

/** Options of {@link shardedReplica}. */
export interface ShardedReplicaOptions<R extends ShardRecord> {
  /** This replica's name (its pod's): its Lease's name and its owner label value. */
  name: string;
  /** This process's identity (a Lease's holder). */
  identity: string;
  leases: RingLeases;
  /** A new store of every resource in scope, for the sharder's leadership term. */
  store(): ShardStore<R>;
  /** The sharder's label write (see {@link SharderRunOptions.setLabels}). */
  setLabels(resource: R, labels: Record<string, string | null>, signal: AbortSignal): Promise<boolean>;
  /** Merge-patches the shard labels of `ref` if it is still at `resourceVersion`. */
  patchLabels(
    ref: ObjectRef,
    resourceVersion: string,
    labels: Record<string, string | null>,
    signal: AbortSignal,
  ): Promise<LabelWriteResult>;
  leaderElection: { leaseDurationMs: number; renewDeadlineMs: number; retryPeriodMs: number };
  /** The shard label policy, read before joining and by the leader; none when it is not required. */
  labelPolicy?: LabelPolicyReading;
  /**
   * The ring's key (the install key), read before the replica joins and before the sharder
   * starts: every replica must hash with the same one. None: an unkeyed ring (tests).
   */
  ringSeed?: (signal: AbortSignal) => Promise<Uint8Array>;
  /** What it watches (`scopeOf`): with the key, its Lease's ring fingerprint. */
  scope?: string;
  registry: Registry;
  clock: Clock;
  logger: Logger;
}

/** A sharded replica's parts, joined to the rest of the operator by the wiring. */
export interface ShardedReplica {
  /** Added to the Deployment resources' label selector: this replica's share only. */
  selector: string;
  member: ShardMember;
  /** This replica's share of each connection's request budget: see {@link budgetShare}. */
  qpsShare(): number;
  /**
   * The leader election's holder as this process last saw it (its identity, `<pod name>_<suffix>`;
   * undefined: none known): the leader's replica runs the sharder and has a smaller share.
   */
  leaderObserved(identity: string | undefined): void;
  /** Asked before each service write: a grant while the Lease is held, else a refusal. */
  writeGate(): ShardWriteGrant | { refuse: string };
  /** The replica's Lease, the policy's check (leader), the ring's Lease watch, and the sharder (leader). */
  runnables: Runnable[];
  /**
   * Joins the member to this replica's cache once it exists; `claimOf` gives what the cached
   * resource `ref` claims, `claimants` the cached resources claiming what a resource claims
   * (itself included, when cached; it may be one just deleted).
   * `inherit`, when the cache can, adds to it the resources of the dead replica `owner` whose claim
   * `mine` accepts (a second watch, until `signal` aborts): see `inheritance.ts`.
   */
  attach(
    cache: ReplicaCache,
    claimOf: (ref: ObjectRef) => string | undefined,
    claimants: (obj: CachedResource) => readonly CachedResource[],
    inherit?: InheritPort,
    /** Lists a silent replica's resources ahead of a take, for `inherit` to adopt (see `EarlyListing`). */
    listEarly?: EarlyListing["list"],
    /** Queues `key` for its reconcile: a resource this replica stopped reconciling, to reconcile again. */
    enqueue?: (key: string) => void,
  ): void;
  guard(reconcile: Reconciler): Reconciler;
  /** Each connection's users, counted by the leader (see {@link ClusterUsers}). */
  users: ClusterUsers;
}

/**
 * The part of each connection's request budget the replica `self` takes: its ring weight over the
 * sum of the members' (`live`, and itself if it does not see itself live yet), the leader's
 * replica weighing `SHARDER_REPLICA_SHARE` (ring.ts) while it is live (it holds that share of the
 * resources, so its creates and reads are that much fewer) and the others 1; an even split when
 * no live member is known to lead. Equal parts left the leader's replica done with its creates
 * first, its part of the budget unused while the others still created theirs.
 *
 * Every replica that sees one live leader takes its weight over the same total, so the parts add
 * up to 1; a replica that knows of no leader takes 1/members, less than a member's part while
 * one leads; only a replica that still sees a leader that let go of its leadership, while that
 * replica takes the even split, holds a little more than its part, until it sees the next one.
 */
export function budgetShare(self: string, live: readonly string[], leader: string | undefined): number {
  const members = live.includes(self) ? live : [...live, self];
  const shares = ringShares(members, leader);
  if (shares === undefined) return 1 / members.length;
  let total = 0;
  for (const member of members) total += shares(member);
  return shares(self) / total;
}
