/**
 * `run --sharded`: every replica holds a Lease of its own in the ring and reconciles only the
 * Deployment resources labelled with its name (its cache is filled by a label-selected watch);
 * the elected leader also runs the sharder, which writes those labels. See docs/guide/sharding.md.
 * Kubernetes is reached through the ports given (the adapters are joined in `wiring/sharding.ts`).
 */
import type { Logger } from "pino";
import type { Registry } from "prom-client";
import type { Clock } from "../runtime/clock.ts";
import { untilAborted } from "../runtime/clock.ts";
import type { Reconciler } from "../runtime/controller.ts";
import type { LeasePort } from "../runtime/leader.ts";
import type { Runnable } from "../runtime/manager.ts";
import { type ObjectRef, objectKey, parseObjectKey } from "../runtime/queue-lines.ts";
import { ClusterUserCounts, type ClusterUsers } from "./cluster-users.ts";
import { Heirs, readSeedForHeirs } from "./heirs.ts";
import type { Inheritance } from "./inheritance.ts";
import { type LabelPolicyReading, requireLabelPolicy, watchLabelPolicy } from "./label-policy.ts";
import { DRAIN_LABEL, handoverTo, isReplicaName, OWNER_LABEL } from "./labels.ts";
import { leaseHolder } from "./lease-holder.ts";
import { ShardMember, type ShardWriteGrant } from "./member.ts";
import { RingMembership } from "./membership.ts";
import { shardMetrics } from "./metrics.ts";
import { ringShares } from "./ring.ts";
import { RingFollower } from "./ring-follow.ts";
import {
  type RingLeases,
  ringLease,
  type ShardRecord,
  type ShardStore,
  sharderRunnable,
  type WatchHandlers,
} from "./sharder-loop.ts";

/** A resource of this replica's own cache, as its member reads it. */
export interface CachedResource {
  readonly metadata: {
    readonly namespace?: string | undefined;
    readonly name: string;
    readonly resourceVersion: string;
    readonly labels?: Readonly<Record<string, string>> | undefined;
  };
}

/** This replica's cache of its share of the resources. */
export interface ReplicaCache {
  get(ref: ObjectRef): CachedResource | undefined;
  /** Every cached resource (read when the ring followed changes). */
  list(): Iterable<CachedResource>;
  readonly size: number;
  subscribe(handlers: WatchHandlers<CachedResource>): unknown;
}

/** Adds a dead replica's resources that the ring on its Lease gives this replica to its cache. */
export type InheritPort = (
  owner: string,
  mine: (claim: string) => boolean,
  signal: AbortSignal,
) => Promise<void>;

/** How a label write ended: written, lost a race (the object changed), or the object is gone. */
export type LabelWriteResult = "written" | "conflict" | "gone";

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
   * Joins the member to this replica's cache once it exists; `claimants` counts the cached
   * resources claiming what the resource `ref` claims (itself included). `inherit`, when the cache
   * can, adds to it the resources of the dead replica `owner` whose claim `mine` accepts (a second
   * watch, until `signal` aborts): see `inheritance.ts`. `claimOf` is the claim of the cached
   * resource `ref` (the ring places it by it): without it, nothing is handed over by the ring
   * followed (`ring-follow.ts`), only by drains.
   */
  attach(
    cache: ReplicaCache,
    claimants: (ref: ObjectRef) => number,
    inherit?: InheritPort,
    claimOf?: (ref: ObjectRef) => string | undefined,
  ): void;
  guard(reconcile: Reconciler): Reconciler;
  /** Each connection's users, counted by the leader (see {@link ClusterUsers}). */
  users: ClusterUsers;
}

/** The replica (pod) name of a leader election identity `<pod name>_<suffix>`. */
export function podOfIdentity(identity: string): string {
  const cut = identity.lastIndexOf("_");
  return cut < 0 ? identity : identity.slice(0, cut);
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

/** Builds the parts; throws when `name` cannot name a replica. */
export function shardedReplica<R extends ShardRecord>(o: ShardedReplicaOptions<R>): ShardedReplica {
  const { name, leases, clock, logger } = o;
  if (!isReplicaName(name))
    throw new Error(
      `--sharded: the replica name ${JSON.stringify(name)} (POD_NAME, else the host name) must be a DNS label of at most 63 lower-case characters: it names the replica's Lease and is written as the ${OWNER_LABEL} label`,
    );
  const le = o.leaderElection;
  // Fed by the Lease watch on every replica from the start, so that a replica that becomes the
  // leader knows since when each Lease has gone unrenewed (see RingMembership).
  const membership = new RingMembership();
  leases.subscribe({
    onAdd: (l) => membership.seen(ringLease(l), clock.now()),
    onUpdate: (_old, l) => membership.seen(ringLease(l), clock.now()),
    onDelete: (l) => membership.forget(l.metadata.name),
  });
  const live = () => membership.live(leases.list().map(ringLease), clock.now());
  const liveMembers = () => live().length;
  let leader: string | undefined;
  let cache: ReplicaCache | undefined;
  let claimants: ((ref: ObjectRef) => number) | undefined;
  let claimOf: ((ref: ObjectRef) => string | undefined) | undefined;
  let seedRead: Uint8Array | undefined;
  const seed = o.ringSeed;
  const follower = new RingFollower({
    self: name,
    seed: () => seedRead,
    seedKnown: () => seed === undefined || seedRead !== undefined,
  });
  /** The ring of this replica's sharder's last pass, while it runs one. */
  let sharderRing: Inheritance | undefined;
  /**
   * The resources (keys) labelled for this replica that the ring followed gives another live
   * member, and to whom: found once per ring (and live members) and per resource added, so that a
   * steady ring hashes nothing per reconcile and remembers nothing per resource.
   */
  const handovers = new Map<string, string>();
  /**
   * The hand-overs by the ring that may have been written: the version each was sent against and
   * to whom, and whether an answer said it was written or lost (`settled`; else only errors came
   * back: it may have been written all the same). Unlike a drain, nothing on the resource says it
   * is let go, and the ring may change back meanwhile: the resource stays let go, at that version
   * in the cache, whatever the ring says, until the cache shows another version (the write
   * landed, or another one did, which this one's precondition then fails against). Sent again,
   * the same, until an answer comes.
   */
  const committed = new Map<string, { rv: string; to: string; settled: boolean }>();
  /** The hand-over of `key` committed at the version cached (`obj`), if any; forgotten once that moved. */
  const committedAt = (key: string, obj: CachedResource) => {
    const c = committed.get(key);
    if (c !== undefined && c.rv !== obj.metadata.resourceVersion) committed.delete(key);
    return c?.rv === obj.metadata.resourceVersion ? c : undefined;
  };
  const consider = (obj: CachedResource) => {
    const ref = { namespace: obj.metadata.namespace ?? "", name: obj.metadata.name };
    const key = objectKey(ref);
    const claim = obj.metadata.labels?.[OWNER_LABEL] === name ? claimOf?.(ref) : undefined;
    const to = claim === undefined ? undefined : follower.handoverTo(claim);
    if (to === undefined) handovers.delete(key);
    else handovers.set(key, to);
  };
  /**
   * The replica the followed ring gives the resource `key` (cached as `obj`) to, when this replica
   * is to hand it over unasked: labelled for it, no drain label, no rival here (rivals move
   * together, by the sharder's drains).
   */
  const ringHandover = (key: string, obj: CachedResource): string | undefined => {
    const to = handovers.get(key);
    const labels = obj.metadata.labels;
    if (to === undefined || labels?.[OWNER_LABEL] !== name || labels[DRAIN_LABEL] !== undefined)
      return undefined;
    return claimants?.(parseObjectKey(key)) === 1 ? to : undefined;
  };
  const metrics = shardMetrics(
    o.registry,
    name,
    { owned: () => cache?.size ?? 0, ringMembers: liveMembers, mayWrite: () => member.mayWrite() },
    o.labelPolicy !== undefined,
  );
  const member: ShardMember = new ShardMember({
    name,
    leaseDurationMs: le.leaseDurationMs,
    owned: (key) => {
      const obj = cache?.get(parseObjectKey(key));
      if (!obj) return undefined;
      // Labelled for another replica: inherited from a dead one (only those are in the cache),
      // whose drain label nobody answers (the sharder labels the resource for this replica).
      if (obj.metadata.labels?.[OWNER_LABEL] !== name) return { drain: false };
      // A drain label, a hand-over by the ring that may have been written, or the ring followed
      // gives it to another live member (`ring-follow.ts`).
      if (obj.metadata.labels?.[DRAIN_LABEL] !== undefined) return { drain: true };
      const byRing = committedAt(key, obj) !== undefined || ringHandover(key, obj) !== undefined;
      return byRing ? { drain: true, recheck: true } : { drain: false };
    },
    acknowledge: async (key, signal) => {
      const ref = parseObjectKey(key);
      const obj = cache?.get(ref);
      if (!obj || !claimants) return true;
      const rv = obj.metadata.resourceVersion;
      const sent = committedAt(key, obj);
      // Answered already: the cache is to show what became of it.
      if (sent?.settled) return true;
      const drain = obj.metadata.labels?.[DRAIN_LABEL];
      // Handed over by the ring followed: to whom it gives the resource now (kept when none), or
      // to whom a write that may have landed gave it.
      const to = sent?.to ?? (drain === undefined ? ringHandover(key, obj) : undefined);
      if (drain === undefined && to === undefined) return true;
      const labels = {
        // Other resources here claiming the same name: rivals move together, by the sharder.
        [OWNER_LABEL]: to ?? handoverTo(drain, name, claimants(ref) - 1),
        [DRAIN_LABEL]: null,
      };
      const handover = to === undefined ? undefined : { rv, to, settled: false };
      if (handover !== undefined) committed.set(key, handover);
      const outcome = await o.patchLabels(ref, rv, labels, signal);
      if (handover !== undefined) handover.settled = true;
      return outcome !== "conflict";
    },
    clock,
    logger,
    onAcknowledged: () => metrics.acknowledged(),
  });
  /**
   * Follows the ring the sharder places by: its own sharder's on the leader's replica, else the
   * one the leader's Lease says it follows; every cached resource is looked at again when that
   * ring or the live members changed (those the ring gives another member are handed over).
   */
  const refollow = () => {
    const ring =
      leader === name
        ? sharderRing
        : leader === undefined
          ? undefined
          : leases.list().find((l) => l.metadata.name === leader)?.follows;
    if (!follower.follow(ring, live()) || !cache) return;
    handovers.clear();
    for (const obj of cache.list()) consider(obj);
    for (const key of handovers.keys()) member.changed(key);
  };
  // The replica's own Lease, written with the ring it follows (its acknowledgement of that ring).
  const ownPort: LeasePort = {
    get: (signal) => leases.lease(name).get(signal),
    create: (record, signal) => leases.lease(name, undefined, follower.followed).create(record, signal),
    update: (record, rv, signal) =>
      leases.lease(name, undefined, follower.followed).update(record, rv, signal),
  };
  const users = new ClusterUserCounts();
  let inherit: InheritPort | undefined;
  const policy = o.labelPolicy;
  // Before joining: the key (read by every replica alike), then the label policy.
  const beforeJoining =
    policy || seed
      ? async (signal: AbortSignal) => {
          try {
            await seed?.(signal);
          } catch (err) {
            if (signal.aborted) return;
            throw err;
          }
          if (policy) await requireLabelPolicy(policy, signal, clock, logger);
        }
      : undefined;
  return {
    selector: `${OWNER_LABEL}=${name}`,
    member,
    qpsShare: () => budgetShare(name, live(), leader),
    leaderObserved: (identity) => {
      leader = identity === undefined || identity === "" ? undefined : podOfIdentity(identity);
      refollow();
    },
    writeGate: () =>
      member.mayWrite()
        ? member.grant()
        : {
            refuse:
              "this replica's shard Lease is not current (--sharded): the write was held back so that no two replicas write one deployment",
          },
    runnables: [
      leaseHolder({
        lease: ownPort,
        identity: o.identity,
        ...le,
        member,
        ...(beforeJoining ? { beforeJoining } : {}),
        clock,
        logger,
      }),
      // Read again by the leader every minute while the ring runs (nothing when unenforced).
      ...(policy === undefined
        ? []
        : [
            {
              name: "shard-label-policy-check",
              needLeaderElection: true,
              start: async (signal: AbortSignal) => {
                metrics.policyEnforced(true);
                await watchLabelPolicy(policy, signal, clock, logger, metrics.policyEnforced);
              },
            },
          ]),
      {
        // The shares inherited from dead replicas, by the ring the sharder wrote on their Leases;
        // and the ring followed (`ring-follow.ts`), both once the ring's key is read.
        name: "shard-inheritance",
        needLeaderElection: false,
        start: async (signal: AbortSignal) => {
          seedRead = seed ? await readSeedForHeirs(seed, signal, clock, logger) : undefined;
          if (signal.aborted) return;
          // The ring followed, again at each Lease event (a ring published, a member joined).
          const unfollow = leases.subscribe({ onAdd: refollow, onUpdate: refollow, onDelete: refollow });
          refollow();
          const port = inherit;
          if (port === undefined) {
            try {
              await untilAborted(new Promise<never>(() => {}), signal);
            } finally {
              unfollow();
            }
            return;
          }
          const heirs = new Heirs({ self: name, seed: () => seedRead, inherit: port, logger });
          const update = (l: Parameters<typeof ringLease>[0]) =>
            heirs.update(l.metadata.name, ringLease(l), signal);
          const unsubscribe = leases.subscribe({
            onAdd: update,
            onUpdate: (_old, l) => update(l),
            onDelete: (l) => heirs.update(l.metadata.name, undefined, signal),
          });
          for (const l of leases.list()) update(l);
          try {
            await untilAborted(new Promise<never>(() => {}), signal);
          } finally {
            unsubscribe();
            unfollow();
            heirs.close();
          }
        },
      },
      {
        name: "shard-lease-informer",
        needLeaderElection: false,
        start: async (s) => void (await leases.run(s)),
      },
      followingSharder(
        {
          store: o.store,
          leases,
          membership,
          setLabels: o.setLabels,
          users,
          identity: o.identity,
          self: name,
          leaseDurationMs: le.leaseDurationMs,
          renewDeadlineMs: le.renewDeadlineMs,
          retryPeriodMs: le.retryPeriodMs,
          onPass: (live, counts) => {
            metrics.owners(counts);
            // The ring this replica follows (and publishes on its Lease) is its sharder's.
            sharderRing = { members: [...live], leader: name };
            refollow();
          },
          ...(seed ? { ringSeed: seed } : {}),
          clock,
          logger,
        },
        () => {
          sharderRing = undefined;
          refollow();
        },
      ),
    ],
    attach(c, count, inheritPort, claim) {
      cache = c;
      claimants = count;
      inherit = inheritPort;
      claimOf = claim;
      const changed = (obj: CachedResource) =>
        member.changed(objectKey({ namespace: obj.metadata.namespace ?? "", name: obj.metadata.name }));
      c.subscribe({
        onAdd: (obj) => {
          consider(obj);
          changed(obj);
        },
        onUpdate: (old, obj) => {
          // Its claim is immutable (the CRD's rules): only a new owner label changes its handover.
          if (old.metadata.labels?.[OWNER_LABEL] !== obj.metadata.labels?.[OWNER_LABEL]) consider(obj);
          changed(obj);
        },
        onDelete: (obj) => {
          const key = objectKey({ namespace: obj.metadata.namespace ?? "", name: obj.metadata.name });
          handovers.delete(key);
          committed.delete(key);
        },
      });
    },
    guard: (reconcile) => member.guard(reconcile),
    users,
  };
}

/** The sharder's runnable, calling `ended` when a leadership term's sharder stops. */
function followingSharder<R extends ShardRecord>(
  o: Parameters<typeof sharderRunnable<R>>[0],
  ended: () => void,
): Runnable {
  const runnable = sharderRunnable(o);
  return {
    ...runnable,
    start: async (signal, halt) => {
      try {
        await runnable.start(signal, halt);
      } finally {
        ended();
      }
    },
  };
}
