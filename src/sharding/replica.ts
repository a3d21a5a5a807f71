/**
 * `run --sharded`: every replica holds a Lease of its own in the ring and reconciles only the
 * Deployment resources labelled with its name (its cache is filled by a label-selected watch);
 * the elected leader also runs the sharder, which writes those labels. See docs/guide/sharding.md.
 * Kubernetes is reached through the ports given (the adapters are joined in `wiring/sharding.ts`).
 * Its member and moves are `replica-handoff.ts`'s; its parts' types `replica-parts.ts`'s.
 */
import { untilAborted } from "../runtime/clock.ts";
import { ClusterUserCounts } from "./cluster-users.ts";
import { followCache } from "./follow-cache.ts";
import { type EarlyListing, Heirs, type InheritPort, readSeedForHeirs, silenceMs } from "./heirs.ts";
import { requireLabelPolicy, watchLabelPolicy } from "./label-policy.ts";
import { isReplicaName, OWNER_LABEL } from "./labels.ts";
import { leaseHolder } from "./lease-holder.ts";
import { RingMembership } from "./membership.ts";
import { shardMetrics } from "./metrics.ts";
import { decodeRelease, podOfIdentity, RELEASED_ANNOTATION } from "./release.ts";
import { replicaHandOffs } from "./replica-handoff.ts";
import {
  budgetShare,
  type CachedResource,
  type ReplicaCache,
  type ShardedReplica,
  type ShardedReplicaOptions,
} from "./replica-parts.ts";
import { ringLease, type ShardRecord, sharderRunnable } from "./sharder-loop.ts";

export {
  budgetShare,
  type CachedResource,
  type LabelWriteResult,
  type ReplicaCache,
  type ShardedReplica,
  type ShardedReplicaOptions,
} from "./replica-parts.ts";

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
  let enqueue: ((key: string) => void) | undefined;
  const { member, moves, view, announce, agree } = replicaHandOffs({
    name,
    leases,
    leaseDurationMs: le.leaseDurationMs,
    patchLabels: o.patchLabels,
    live,
    leader: () => leader,
    keyed: o.ringSeed !== undefined,
    ringKey: () => ringKey,
    cache: () => cache,
    claimants: () => claimants,
    enqueue: () => enqueue,
    acknowledged: () => metrics.acknowledged(),
    clock,
    logger,
  });
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
          announce,
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
