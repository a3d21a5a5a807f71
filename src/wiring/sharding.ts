/**
 * `run --sharded`: every replica holds a Lease of its own in the ring and reconciles only the
 * Deployment resources labelled with its name (its cache is filled by a label-selected watch);
 * the elected leader also runs the sharder, which writes those labels. See docs/guide/sharding.md.
 */

import type { Logger } from "pino";
import { Counter, Gauge } from "prom-client";
import type { KubeClient } from "../kube/client.ts";
import type { KubeDeployments } from "../kube/deployments.ts";
import { KubeApiError } from "../kube/errors.ts";
import {
  KubeShardedResources,
  KubeShardLeases,
  type LeaseObject,
  patchShardLabels,
  type ShardObject,
} from "../kube/shards.ts";
import { CLAIM_INDEX, claimOf } from "../reconcile/claims.ts";
import type { Clock } from "../runtime/clock.ts";
import type { Reconciler } from "../runtime/controller.ts";
import { objectKey, parseObjectKey } from "../runtime/keys.ts";
import { LeaderElector, LeaseConflictError } from "../runtime/leader.ts";
import type { Runnable } from "../runtime/manager.ts";
import type { RuntimeMetrics } from "../runtime/metrics.ts";
import { DRAIN_LABEL, handoverTo, isReplicaName, OWNER_LABEL } from "../sharding/labels.ts";
import { ShardMember } from "../sharding/member.ts";
import { type RingLease, RingMembership, Sharder, ShardLabelsDenied } from "../sharding/sharder.ts";
import { VERSION } from "../version.ts";
import type { OperatorConfig } from "./operator-config.ts";
import type { ClientIdentity } from "./service-connections.ts";
import { requireShardLabelPolicy, watchShardLabelPolicy } from "./shard-label-policy.ts";

/** How often the sharder looks again when nothing changed (Leases expire with time alone). */
const SHARDER_PERIOD_MS = 2_000;
/** A pass for a Lease's expiry runs this long after it (the expiry is `<=`: one tick suffices). */
const EXPIRY_SLACK_MS = 5;
/** Shortest gap between two sharder passes, so a burst of events makes one pass. */
const SHARDER_MIN_GAP_MS = 200;

/** `dms-operator/<version> (<pod name>)`: who sent a service request. */
export function userAgentOf(podName: string): string {
  return `dms-operator/${VERSION} (${podName})`;
}

/** Two label selectors as one (both must match). */
export function joinSelectors(a: string | undefined, b: string): string {
  return a && a.trim() !== "" ? `${a},${b}` : b;
}

/**
 * The users of each connection across the whole cluster, from the sharder's store of every
 * Deployment resource (the leader's only): under `--sharded` a replica's own cache holds its
 * share, so only the leader counts a connection's users and writes its status and finalizer.
 */
export interface ClusterUsers {
  /** True while this replica leads and its store of every resource is synced: it may write. */
  ready(): boolean;
  /** How many resources use the connection `key`. */
  count(key: string): number;
  /** The namespace of each resource using the connection `key`. */
  namespaces(key: string): string[];
  /**
   * Calls `handler` with a connection key when its users changed, and with undefined when
   * {@link ready} became true (every connection is to be counted again). Returns the unsubscribe.
   */
  subscribe(handler: (key: string | undefined) => void): () => void;
}

/** The sharded operator's parts, joined to the rest by `main.ts`. */
export interface Sharding {
  /** Added to the Deployment resources' label selector: this replica's share only. */
  selector: string;
  member: ShardMember;
  /** The share, fence and User-Agent of every service client. */
  clientIdentity: ClientIdentity;
  /** The replica's Lease, the ring's Lease watch, and the sharder (leader-gated). */
  runnables: Runnable[];
  /** Joins the member to this replica's cache once it exists. */
  attach(deployments: KubeDeployments): void;
  guard(reconcile: Reconciler): Reconciler;
  /** Each connection's users, counted by the leader (see {@link ClusterUsers}). */
  users: ClusterUsers;
}

/** Options of {@link sharding}. */
export interface ShardingParts {
  config: Pick<OperatorConfig, "leaderElection" | "namespaces" | "labelSelector" | "shardLabelPolicy">;
  client: KubeClient;
  /** The namespace of the Leases (the leader election's). */
  namespace: string;
  podName: string;
  identity: string;
  metrics: RuntimeMetrics;
  clock: Clock;
  logger: Logger;
}

/** Builds the parts; throws when the pod name cannot name a replica. */
export function sharding(p: ShardingParts): Sharding {
  const { config, client, podName, clock } = p;
  const logger = p.logger.child({ component: "sharding", replica: podName });
  if (!isReplicaName(podName))
    throw new Error(
      `--sharded: the replica name ${JSON.stringify(podName)} (POD_NAME, else the host name) must be a DNS label of at most 63 lower-case characters: it names the replica's Lease and is written as the ${OWNER_LABEL} label`,
    );
  const le = config.leaderElection;
  const leases = new KubeShardLeases(p.namespace, le.name, { client, logger, clock });
  const toRing = (l: LeaseObject): RingLease => ({
    name: l.metadata.name,
    resourceVersion: l.metadata.resourceVersion,
    record: l.record,
  });
  const ringLeases = (): RingLease[] => leases.list().map(toRing);
  // Fed by the Lease watch on every replica from the start, so that a replica that becomes the
  // leader knows since when each Lease has gone unrenewed (see RingMembership).
  const membership = new RingMembership();
  leases.subscribe({
    onAdd: (l) => membership.seen(toRing(l), clock.now()),
    onUpdate: (_old, l) => membership.seen(toRing(l), clock.now()),
    onDelete: (l) => membership.forget(l.metadata.name),
  });
  const liveCount = () => Math.max(1, membership.live(ringLeases(), clock.now()).length);
  let deployments: KubeDeployments | undefined;
  const acknowledged = new Counter({
    name: "dms_shard_drains_acknowledged_total",
    help: "Drains this replica acknowledged (resources it let go for another replica)",
    registers: [p.metrics.registry],
  });
  const member = new ShardMember({
    name: podName,
    leaseDurationMs: le.leaseDurationMs,
    owned: (key) => {
      const obj = deployments?.get(parseObjectKey(key));
      if (!obj || obj.metadata.labels?.[OWNER_LABEL] !== podName) return undefined;
      return { drain: obj.metadata.labels?.[DRAIN_LABEL] !== undefined };
    },
    acknowledge: async (key, signal) => {
      const obj = deployments?.get(parseObjectKey(key));
      if (!obj || !deployments) return true;
      const outcome = await patchShardLabels(
        client,
        parseObjectKey(key),
        obj.metadata.resourceVersion,
        {
          [OWNER_LABEL]: handoverTo(
            obj.metadata.labels?.[DRAIN_LABEL],
            podName,
            // Other resources here claiming the same name: rivals move together, by the sharder.
            deployments.byIndex(CLAIM_INDEX, claimOf(obj)).length - 1,
          ),
          [DRAIN_LABEL]: null,
        },
        signal,
      );
      return outcome !== "conflict";
    },
    clock,
    logger,
    onAcknowledged: () => acknowledged.inc(),
  });
  new Gauge({
    name: "dms_shard_resources",
    help: "Deployment resources this replica owns (its share of the ring)",
    labelNames: ["replica"],
    registers: [p.metrics.registry],
    collect() {
      this.set({ replica: podName }, deployments?.size ?? 0);
    },
  });
  new Gauge({
    name: "dms_shard_ring_members",
    help: "Replicas whose Lease is live, as this replica sees the ring",
    registers: [p.metrics.registry],
    collect() {
      this.set(membership.live(ringLeases(), clock.now()).length);
    },
  });
  new Gauge({
    name: "dms_shard_lease_held",
    help: "1 while this replica holds its shard Lease and may write to the service",
    labelNames: ["replica"],
    registers: [p.metrics.registry],
    collect() {
      this.set({ replica: podName }, member.mayWrite() ? 1 : 0);
    },
  });
  const owners = new Gauge({
    name: "dms_sharder_resources",
    help: "Deployment resources per owner label, as the sharder (the leader) last counted them",
    labelNames: ["owner"],
    registers: [p.metrics.registry],
  });

  const holder: Runnable = {
    name: "shard-lease",
    needLeaderElection: false,
    start: async (signal, halt) => {
      // No Lease (no share) before the policy is known to keep tenants off the labels: without
      // it the replica exits, naming the fix.
      if (config.shardLabelPolicy !== undefined)
        await requireShardLabelPolicy(client, config.shardLabelPolicy, signal, clock, logger);
      const elector = new LeaderElector({
        lease: leases.lease(podName),
        identity: p.identity,
        leaseDurationMs: le.leaseDurationMs,
        renewDeadlineMs: le.renewDeadlineMs,
        retryPeriodMs: le.retryPeriodMs,
        clock,
        logger,
        onRenewed: (startedAt) => member.renewed(startedAt),
      });
      const outcome = await elector.run(signal, async (holding) => {
        logger.info("holding the shard Lease: in the ring");
        holding.addEventListener("abort", () => member.released(), { once: true });
        await untilAborted(AbortSignal.any([signal, holding]));
        // Let the reconciles in flight end (or be halted), then write nothing more: the Lease
        // is released after this, and the sharder moves the resources at once.
        await member.stop(AbortSignal.any([halt, holding]));
        member.released();
        // A write that got no answer may still run at the service: the Lease is released only
        // once it cannot, renewed meanwhile (halted too; killed first, the Lease expires).
        await member.settled(holding);
      });
      member.released();
      if (outcome === "lost")
        throw new Error(
          "the shard Lease was lost (not renewed within --renew-deadline): stopping so that the replica restarts with an empty cache",
        );
    },
  };

  // The leader's store of every resource, while it leads (see ClusterUsers).
  let store: KubeShardedResources | undefined;
  const usersHandlers = new Set<(key: string | undefined) => void>();
  const usersChanged = (key: string | undefined) => {
    for (const handler of usersHandlers) handler(key);
  };
  const users: ClusterUsers = {
    ready: () => store?.hasSynced() ?? false,
    count: (key) => store?.usersOf(key).length ?? 0,
    namespaces: (key) => (store?.usersOf(key) ?? []).map((o) => o.metadata.namespace ?? ""),
    subscribe: (handler) => {
      usersHandlers.add(handler);
      return () => usersHandlers.delete(handler);
    },
  };

  const sharderRunnable: Runnable = {
    name: "sharder",
    needLeaderElection: true,
    start: async (signal) => {
      const resources = new KubeShardedResources(
        {
          ...(config.namespaces.length > 0 ? { namespaces: config.namespaces } : {}),
          ...(config.labelSelector ? { labelSelector: config.labelSelector } : {}),
        },
        { client, logger, clock },
      );
      store = resources;
      const watching = resources.run(signal);
      const sharder = new Sharder({
        identity: p.identity,
        self: podName,
        leaseDurationMs: le.leaseDurationMs,
        holdMarginMs: Math.max(le.leaseDurationMs - le.renewDeadlineMs, 1_000),
        membership,
        clock,
        logger,
        ports: {
          leases: ringLeases,
          resources: () => resources.values(),
          subscribe: ({ updated, deleted }) => resources.subscribe({ onUpdate: updated, onDelete: deleted }),
          setLabels: async (r, labels, s) => {
            const ref = { namespace: r.metadata.namespace ?? "", name: r.metadata.name };
            try {
              return (
                (await patchShardLabels(client, ref, r.metadata.resourceVersion, labels, s)) === "written"
              );
            } catch (err) {
              // A ValidatingAdmissionPolicy that does not name this ServiceAccount denies with 403,
              // as RBAC does: reported once per pass by the sharder.
              if (err instanceof KubeApiError && err.status === 403)
                throw new ShardLabelsDenied(err.message, /ValidatingAdmissionPolicy/.test(err.message), {
                  cause: err,
                });
              throw err;
            }
          },
          writeLease: async (name, rv, record, s) => {
            const lease = leases.lease(name);
            try {
              const written =
                rv === undefined ? await lease.create(record, s) : await lease.update(record, rv, s);
              return written.resourceVersion;
            } catch (err) {
              if (err instanceof LeaseConflictError) return undefined;
              throw err;
            }
          },
          deleteLease: (name, rv, s) => leases.lease(name).delete(rv, s),
        },
        onPass: (_live, counts) => {
          owners.reset();
          for (const [owner, n] of counts) owners.set({ owner }, n);
        },
      });
      // A change seen during a pass makes the next one start without waiting for the period.
      let dirty = false;
      let wake: () => void = () => {};
      const poke = () => {
        dirty = true;
        wake();
      };
      const onAbort = () => wake();
      signal.addEventListener("abort", onAbort, { once: true });
      const unsubscribe = [
        // A pass for what it decides on: a resource added or gone, its shard labels or its claim
        // changed; not a status write (most updates), which changes none of them.
        resources.subscribe({
          onAdd: (o) => {
            poke();
            usersChanged(o.connection);
          },
          onUpdate: (old, o) => {
            if (shardInputsChanged(old, o)) poke();
            if (old.connection !== o.connection) {
              usersChanged(old.connection);
              usersChanged(o.connection);
            }
          },
          onDelete: (o) => {
            poke();
            usersChanged(o.connection);
          },
        }),
        // A renewal changes nothing the sharder decides on; a new holder does (expiry is the period's).
        leases.subscribe({
          onAdd: poke,
          onDelete: poke,
          onUpdate: (old, lease) => {
            if (old.record.holderIdentity !== lease.record.holderIdentity) poke();
          },
        }),
      ];
      try {
        await Promise.race([Promise.all([resources.synced, leases.synced]), untilAborted(signal)]);
        if (resources.hasSynced()) usersChanged(undefined);
        logger.info("sharder started");
        while (!signal.aborted) {
          try {
            const report = await sharder.pass(signal);
            // A write that lost a race to an update the sharder does not wake for: again soon. So
            // with writes left for later, while writes go through (denied ones wait a period).
            if (report.lost > 0 || (report.later > 0 && report.assigned + report.drained > 0)) dirty = true;
            if (report.assigned + report.drained + report.held.length + report.deleted.length > 0)
              logger.info({ ...report, live: report.live.length }, "sharder pass");
          } catch (err) {
            if (!signal.aborted) logger.warn({ err }, "sharder pass failed; trying again");
          }
          await sleepQuietly(clock, SHARDER_MIN_GAP_MS, signal);
          if (!dirty && !signal.aborted)
            await new Promise<void>((resolve) => {
              // At the period, or as soon as a Lease not renewed by then expires (a dead
              // member's resources move at that moment, not up to a period later).
              const now = clock.now();
              const expiry = sharder.nextExpiry(now);
              const wait =
                expiry === undefined
                  ? SHARDER_PERIOD_MS
                  : Math.min(SHARDER_PERIOD_MS, expiry - now + EXPIRY_SLACK_MS);
              const cancel = clock.setTimer(wait, () => resolve());
              wake = () => {
                cancel();
                resolve();
              };
            });
          wake = () => {};
          dirty = false;
        }
      } finally {
        sharder.close();
        if (store === resources) store = undefined;
        signal.removeEventListener("abort", onAbort);
        for (const u of unsubscribe) u();
        await watching;
      }
    },
  };

  return {
    selector: `${OWNER_LABEL}=${podName}`,
    member,
    clientIdentity: {
      userAgent: userAgentOf(podName),
      qpsShare: () => 1 / liveCount(),
      writeGate: () =>
        member.mayWrite()
          ? member.grant()
          : {
              refuse:
                "this replica's shard Lease is not current (--sharded): the write was held back so that no two replicas write one deployment",
            },
    },
    runnables: [
      holder,
      // Read again by the leader every minute while the ring runs (nothing when unenforced).
      ...(config.shardLabelPolicy === undefined ? [] : [policyCheck(p, logger, config.shardLabelPolicy)]),
      {
        name: "shard-lease-informer",
        needLeaderElection: false,
        start: async (signal) => void (await leases.run(signal)),
      },
      sharderRunnable,
    ],
    attach(d) {
      deployments = d;
      const changed = (obj: { metadata: { namespace?: string; name: string } }) =>
        member.changed(objectKey({ namespace: obj.metadata.namespace ?? "", name: obj.metadata.name }));
      d.subscribe({ onAdd: changed, onUpdate: (_old, obj) => changed(obj) });
    },
    guard: (reconcile) => member.guard(reconcile),
    users,
  };
}

/** The leader's check, every minute, that the shard label policy is still in place, and its gauge. */
function policyCheck(p: ShardingParts, logger: Logger, name: string): Runnable {
  const gauge = new Gauge({
    name: "dms_shard_label_policy_enforced",
    help: "1 while the shard label policy was in place at the leader's last check (every minute), 0 once it was found missing or not enforcing",
    registers: [p.metrics.registry],
  });
  return {
    name: "shard-label-policy-check",
    needLeaderElection: true,
    start: async (signal) => {
      gauge.set(1);
      await watchShardLabelPolicy(p.client, name, signal, p.clock, logger, (ok) => gauge.set(ok ? 1 : 0));
    },
  };
}

/** Whether an update changed what the sharder decides on: the shard labels or the claim. */
export function shardInputsChanged(old: ShardObject, now: ShardObject): boolean {
  return (
    old.claim !== now.claim ||
    old.owner !== now.owner ||
    old.drain !== now.drain ||
    old.drainTo !== now.drainTo ||
    old.uid !== now.uid
  );
}

function untilAborted(signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.resolve();
  return new Promise((resolve) => signal.addEventListener("abort", () => resolve(), { once: true }));
}

async function sleepQuietly(clock: Clock, ms: number, signal: AbortSignal): Promise<void> {
  try {
    await clock.sleep(ms, signal);
  } catch {
    // stopped
  }
}
