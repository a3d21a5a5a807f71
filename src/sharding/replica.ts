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
import type { Runnable } from "../runtime/manager.ts";
import { keyOfMeta, type ObjectRef, parseObjectKey } from "../runtime/queue-lines.ts";
import { ClusterUserCounts, type ClusterUsers } from "./cluster-users.ts";
import { type EarlyListing, Heirs, type InheritPort, readSeedForHeirs, silenceMs } from "./heirs.ts";
import { sameInheritance } from "./inheritance.ts";
import { type LabelPolicyReading, requireLabelPolicy, watchLabelPolicy } from "./label-policy.ts";
import { DRAIN_LABEL, handoverTo, isReplicaName, mayLetGo, OWNER_LABEL } from "./labels.ts";
import { leaseHolder } from "./lease-holder.ts";
import { FENCE_MARGIN_MS, ShardMember, type ShardWriteGrant } from "./member.ts";
import { heldByReplica, RingMembership } from "./membership.ts";
import { shardMetrics } from "./metrics.ts";
import {
  decodeRelease,
  LABELS_UNHEARD_MS,
  podOfIdentity,
  RELEASED_ANNOTATION,
  type Release,
} from "./release.ts";
import { ringShares } from "./ring.ts";
import { encodeMovingBy, followCache, RingMoves, ringOf } from "./ring-moves.ts";
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
    readonly creationTimestamp?: string | undefined;
    readonly labels?: Readonly<Record<string, string>> | undefined;
  };
}

/** This replica's cache of its share of the resources. */
export interface ReplicaCache {
  get(ref: ObjectRef): CachedResource | undefined;
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
  const membership = new RingMembership(o.scope, logger, le.leaseDurationMs);
  leases.subscribe({
    onAdd: (l) => membership.seen(ringLease(l), clock.now()),
    onUpdate: (_old, l) => membership.seen(ringLease(l), clock.now()),
    onDelete: (l) => membership.forget(l.metadata.name),
  });
  const live = () => membership.live(leases.list().map(ringLease), clock.now());
  const liveMembers = () => live().length;
  let leader: string | undefined;
  /** The ring's key once read (before joining); moves by the ring wait for it. */
  let ringKey: Uint8Array | undefined;
  let cache: ReplicaCache | undefined;
  let claimants: ((obj: CachedResource) => readonly CachedResource[]) | undefined;
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
      const labels = obj.metadata.labels;
      if (labels?.[OWNER_LABEL] !== name) return { drain: false };
      if (labels[DRAIN_LABEL] !== undefined || moves.stopped(key, obj.metadata.resourceVersion))
        return { drain: true };
      // A younger rival of a claim handed over a moment ago waits (see `ring-moves.ts`).
      const holdMs = moves.heldMs(key);
      return holdMs > 0 ? { drain: false, holdMs } : { drain: false };
    },
    acknowledge: async (key, signal) => {
      const ref = parseObjectKey(key);
      const obj = cache?.get(ref);
      if (!obj || !claimants) return true;
      /**
       * Writes `labels` against the cached version, its claim's younger resources here held
       * meanwhile (see `ring-moves.ts`); true once written or the resource is gone, false when it
       * changed (tried again). Refused (known not written) rejects, said by the member's retry.
       */
      const handOver = async (labels: Record<string, string | null>): Promise<boolean> => {
        const rv = obj.metadata.resourceVersion;
        moves.handing(key, rv);
        const outcome = await o.patchLabels(ref, rv, labels, signal);
        if (outcome === "written") metrics.acknowledged();
        else if (outcome === "conflict" || outcome === "refused") moves.notHanded(key);
        if (outcome === "refused")
          throw new Error(`the API server refused the shard labels ${JSON.stringify(labels)} of ${key}`);
        return outcome !== "conflict";
      };
      const rivals = claimants(obj).filter((r) => keyOfMeta(r) !== key);
      const drain = obj.metadata.labels?.[DRAIN_LABEL];
      const released = moves.releasedTo(key);
      if (released !== undefined) {
        // Released whole to a joined replica (`release.ts`): labelled for it, rivals and drains
        // alike, once the release is quiet (the joined replica may be reconciling it already) and
        // the joined replica has listed it (the labels would share the API server with that list).
        if (!mayLabel(released.release, released.quietAt)) return false;
        return handOver({ [OWNER_LABEL]: released.release.heir, [DRAIN_LABEL]: null });
      }
      if (drain === undefined) {
        // A move by the ring (`ring-moves.ts`), to its choice; a claim with rivals is left to
        // the sharder's drain, and a resource the ring keeps here now is reconciled again.
        const to = moves.target(key);
        if (to === undefined || rivals.length > 0) {
          moves.refresh(key);
          return true;
        }
        return handOver({ [OWNER_LABEL]: to });
      }
      // Tried again shortly while a rival here may still be reconciled (see `mayLetGo`).
      if (!mayLetGo(rivals, name, (r) => member.reconciling(keyOfMeta(r)))) return false;
      const labels = {
        // Other resources here claiming the same name: rivals move together, by the sharder.
        [OWNER_LABEL]: handoverTo(drain, name, rivals.length),
        [DRAIN_LABEL]: null,
      };
      // Its claim's other resources here wait while it is away (see `ring-moves.ts`): a drain
      // lifted by a ring that came back would leave a younger rival alone here.
      return handOver(labels);
    },
    clock,
    logger,
  });
  const leaseOf = (replica: string) => leases.list().find((l) => l.metadata.name === replica);
  /** The process holding the Lease of `replica` (not released, not a sharder's). */
  const holderOf = (replica: string) => {
    const lease = leaseOf(replica);
    const holder = lease?.record.holderIdentity;
    return lease && heldByReplica(lease) && holder && podOfIdentity(holder) === replica ? holder : undefined;
  };
  const moves = new RingMoves({
    self: name,
    seed: () => ringKey,
    now: () => clock.now(),
    changed: (key) => member.changed(key),
    // A move or a release called off: nothing else queues the resource it had turned away.
    resumed: (key) => enqueue?.(key),
    identityOf: holderOf,
  });
  let enqueue: ((key: string) => void) | undefined;
  /** Since when the Lease of the heir of this replica's release has been gone (see `releaseGoes`). */
  let heirGoneSince: number | undefined;
  /**
   * Whether this replica's release can no longer be taken up: its heir's Lease is held by another
   * process, released or taken by a sharder (its process cannot write now), or gone for a Lease
   * duration. The share is then reconciled here again.
   */
  const releaseGoes = (release: Release): boolean => {
    const lease = leaseOf(release.heir);
    if (lease !== undefined) {
      heirGoneSince = undefined;
      return lease.record.holderIdentity !== release.identity;
    }
    heirGoneSince ??= clock.now();
    return clock.now() - heirGoneSince >= le.leaseDurationMs;
  };
  /**
   * Whether the labels of `release`, quiet since `quietAt`, may be written: once its heir's Lease,
   * held by the process released to, names this replica among the shares it has listed, or
   * {@link LABELS_UNHEARD_MS} after it became quiet.
   */
  const mayLabel = (release: Release, quietAt: number | undefined): boolean => {
    if (quietAt === undefined) return false;
    const lease = leaseOf(release.heir);
    const listed =
      lease?.record.holderIdentity === release.identity && lease.holding?.includes(name) === true;
    return listed || clock.now() - quietAt >= LABELS_UNHEARD_MS;
  };
  /** Whether no reconcile or write of `key` may still run (a released resource, before its release is written). */
  const quiet = (key: string) =>
    !member.reconciling(key) && member.mayRunUntil(key) + FENCE_MARGIN_MS <= clock.now();
  /**
   * The ring this replica moves its own resources by: its view, while the leader's Lease shows the
   * same and the ring's key is read (see `ring-moves.ts`). Looked at again on every Lease event
   * (each member renews every retry period) and when the leader changes.
   */
  const view = () => ringOf(live(), leader);
  const agree = () => {
    const release = moves.release;
    if (release !== undefined && releaseGoes(release)) {
      logger.info(
        { to: release.heir },
        "the replica this replica's joined share was released to cannot take it up: reconciling it here again",
      );
      heirGoneSince = undefined;
      moves.end();
    }
    if (seed !== undefined && ringKey === undefined) return moves.agree(undefined);
    const own = view();
    const shown =
      leader === undefined ? undefined : leases.list().find((l) => l.metadata.name === leader)?.movingBy;
    const before = moves.ring;
    const releasing = moves.release;
    moves.agree(shown !== undefined && sameInheritance(shown, own) ? own : undefined);
    if (releasing === undefined && moves.release !== undefined)
      logger.info(
        { to: moves.release.heir, ring: encodeMovingBy(moves.release.ring) },
        "a replica joined: releasing the share the ring gives it whole, its labels written in the background",
      );
    if (moves.ring !== undefined && !sameInheritance(before, moves.ring) && moves.moving > 0)
      logger.info(
        { ring: encodeMovingBy(moves.ring), moving: moves.moving },
        "the ring places some of this replica's resources elsewhere: handing them over",
      );
  };
  leases.subscribe({ onAdd: agree, onUpdate: agree, onDelete: agree });
  const users = new ClusterUserCounts();
  let inherit: InheritPort | undefined;
  /** The inherited watches while they run: a joined replica's Lease names the released shares listed. */
  let heirs: Heirs | undefined;
  let listEarly: EarlyListing["list"] | undefined;
  let seedRead: Uint8Array | undefined;
  const policy = o.labelPolicy;
  const read = o.ringSeed;
  const seed = read && ((signal: AbortSignal) => read(signal).then(membership.keyed));
  // Before joining: the key (read by every replica alike), then the label policy.
  const beforeJoining =
    policy || seed
      ? async (signal: AbortSignal) => {
          try {
            ringKey = await seed?.(signal);
            agree();
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
      agree();
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
        // Each renewal shows the ring this replica sees: the sharder leaves it its moves.
        // And, joined, the shares released to it that it has listed: their owners label them then.
        lease: leases.lease(
          name,
          undefined,
          view,
          () => moves.announce(quiet),
          () => heirs?.holding() ?? [],
          () => membership.fingerprint,
        ),
        identity: o.identity,
        ...le,
        member,
        // Restarted while releasing a joined replica's share: the release goes on from its Lease.
        read: (lease) => {
          if (member.holding) return;
          const release = decodeRelease(lease.annotations?.[RELEASED_ANNOTATION]);
          const holder = lease.record.holderIdentity;
          if (release === undefined || (holder !== "" && podOfIdentity(holder) !== name)) return;
          logger.info(
            { to: release.heir },
            "this replica's Lease shows a share released to a joined replica: taking the release over",
          );
          moves.adopt(release);
        },
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
        // The shares inherited from dead replicas, by the ring the sharder wrote on their Leases.
        name: "shard-inheritance",
        needLeaderElection: false,
        start: async (signal: AbortSignal) => {
          const port = inherit;
          if (port === undefined) return;
          seedRead = seed ? await readSeedForHeirs(seed, signal, clock, logger) : undefined;
          if (signal.aborted) return;
          const early = listEarly && {
            list: listEarly,
            silenceMs: silenceMs(le.leaseDurationMs, le.retryPeriodMs),
            clock,
          };
          const running = new Heirs({
            self: name,
            seed: () => seedRead,
            inherit: port,
            early,
            identity: o.identity,
            logger,
          });
          heirs = running;
          const update = (l: Parameters<typeof ringLease>[0]) =>
            running.update(l.metadata.name, ringLease(l), signal);
          const unsubscribe = leases.subscribe({
            onAdd: update,
            onUpdate: (_old, l) => update(l),
            onDelete: (l) => running.update(l.metadata.name, undefined, signal),
          });
          for (const l of leases.list()) update(l);
          try {
            await untilAborted(new Promise<never>(() => {}), signal);
          } finally {
            unsubscribe();
            running.close();
            if (heirs === running) heirs = undefined;
          }
        },
      },
      {
        name: "shard-lease-informer",
        needLeaderElection: false,
        start: async (s) => void (await leases.run(s)),
      },
      sharderRunnable({
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
        onPass: (_live, counts) => metrics.owners(counts),
        ...(seed ? { ringSeed: seed } : {}),
        clock,
        logger,
      }),
    ],
    attach(c, claimOf, count, inheritPort, listEarlyPort, enqueuePort) {
      cache = c;
      enqueue = enqueuePort;
      claimants = count;
      inherit = inheritPort;
      listEarly = listEarlyPort;
      followCache(moves, {
        self: name,
        cache: c,
        claimOf,
        claimants: count,
        changed: (key) => member.changed(key),
      });
      agree();
    },
    guard: (reconcile) => member.guard(reconcile),
    users,
  };
}
