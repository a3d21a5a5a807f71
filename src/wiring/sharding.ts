/**
 * `run --sharded` joined to Kubernetes: the ring's Leases, the sharder's store of every resource,
 * the shard label writes and the label policy's check given to `sharding/replica.ts` (the
 * feature), and its parts given to the rest of the operator. See docs/guide/sharding.md.
 */

import { hostname } from "node:os";
import type { Logger } from "pino";
import type { KubeClient } from "../kube/client.ts";
import { KubeDeployments, type KubeDeploymentsOptions } from "../kube/custom-resources.ts";
import { ShareDeployments } from "../kube/inherited-deployments.ts";
import type { DeploymentObject } from "../kube/object.ts";
import {
  handOverLabels,
  KubeShardedResources,
  KubeShardLeases,
  OWNER_LABEL,
  writeShardLabels,
} from "../kube/shards.ts";
import { CLAIM_INDEX, claimOf } from "../reconcile/inputs.ts";
import type { Clock } from "../runtime/clock.ts";
import type { Reconciler } from "../runtime/controller.ts";
import type { Runnable } from "../runtime/manager.ts";
import type { RuntimeMetrics } from "../runtime/metrics.ts";
import type { ClusterUsers } from "../sharding/cluster-users.ts";
import type { ShardMember } from "../sharding/member.ts";
import { scopeOf } from "../sharding/membership.ts";
import { shardedReplica } from "../sharding/replica.ts";
import { VERSION } from "../version.ts";
import type { OperatorConfig } from "./operator-config.ts";
import type { ClientIdentity } from "./service-connections.ts";
import { checkShardLabelPolicy, ownServiceAccount } from "./shard-label-policy.ts";

/** `dms-operator/<version> (<pod name>)`: who sent a service request. */
export function userAgentOf(podName: string): string {
  return `dms-operator/${VERSION} (${podName})`;
}

/** Two label selectors as one (both must match). */
export function joinSelectors(a: string | undefined, b: string): string {
  return a && a.trim() !== "" ? `${a},${b}` : b;
}

/** The sharded operator's parts, joined to the rest by `main.ts`. */
export interface Sharding {
  /** Added to the Deployment resources' label selector: this replica's share only. */
  selector: string;
  member: ShardMember;
  /** The share, fence and User-Agent of every service client. */
  clientIdentity: ClientIdentity;
  /** The leader election's holder as observed (see `ShardedReplica.leaderObserved`). */
  leaderObserved(identity: string | undefined): void;
  /** The replica's Lease, the ring's Lease watch, and the sharder (leader-gated). */
  runnables: Runnable[];
  /** Joins the member to this replica's cache once it exists; `enqueue` queues a key for its reconcile. */
  attach(deployments: KubeDeployments, enqueue: (key: string) => void): void;
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
  /** The ring's key: the install key, read before the replica joins (see `install-key.ts`). */
  ringSeed?: (signal: AbortSignal) => Promise<Uint8Array>;
  clock: Clock;
  logger: Logger;
}

/** Builds the parts; throws when the pod name cannot name a replica. */
export function sharding(p: ShardingParts): Sharding {
  const { config, client, podName, clock } = p;
  const logger = p.logger.child({ component: "sharding", replica: podName });
  const le = config.leaderElection;
  const policy = config.shardLabelPolicy;
  // Whom the binding must exempt: read once (it does not change while the process runs).
  let self: Promise<{ namespace: string; name: string } | undefined> | undefined;
  const labelPolicyCheck = async (signal: AbortSignal) => {
    self ??= ownServiceAccount(client, signal).catch((err: unknown) => {
      self = undefined;
      throw err;
    });
    const serviceAccount = await self;
    return checkShardLabelPolicy(client, policy ?? "", signal, {
      namespaces: config.namespaces,
      ...(serviceAccount ? { serviceAccount } : {}),
    });
  };
  const replica = shardedReplica({
    name: podName,
    identity: p.identity,
    leases: new KubeShardLeases(p.namespace, le.name, { client, logger, clock }),
    store: () =>
      new KubeShardedResources(
        {
          ...(config.namespaces.length > 0 ? { namespaces: config.namespaces } : {}),
          ...(config.labelSelector ? { labelSelector: config.labelSelector } : {}),
        },
        { client, logger, clock },
      ),
    setLabels: (resource, labels, signal) => writeShardLabels(client, resource, labels, signal),
    patchLabels: (ref, rv, labels, signal) => handOverLabels(client, ref, rv, labels, signal),
    leaderElection: le,
    ...(policy === undefined
      ? {}
      : {
          labelPolicy: { name: policy, check: (signal) => labelPolicyCheck(signal) },
        }),
    ...(p.ringSeed ? { ringSeed: p.ringSeed } : {}),
    scope: scopeOf(config.namespaces, config.labelSelector),
    registry: p.metrics.registry,
    clock,
    logger,
  });
  return {
    selector: replica.selector,
    member: replica.member,
    clientIdentity: {
      userAgent: userAgentOf(podName),
      qpsShare: replica.qpsShare,
      writeGate: replica.writeGate,
    },
    leaderObserved: replica.leaderObserved,
    runnables: replica.runnables,
    attach: (deployments, enqueue) =>
      replica.attach(
        deployments,
        (ref) => {
          const obj = deployments.get(ref);
          return obj ? claimOf(obj) : undefined;
        },
        // The replica's cache holds Deployment resources: what it hands back is one.
        (obj) => deployments.byIndex(CLAIM_INDEX, claimOf(obj as DeploymentObject)),
        deployments instanceof ShareDeployments
          ? (owner, mine, signal, listed) => deployments.inherit(owner, mine, signal, listed)
          : undefined,
        deployments instanceof ShareDeployments
          ? (owner, signal) => void deployments.prefetch(owner, signal)
          : undefined,
        enqueue,
      ),
    guard: replica.guard,
    users: replica.users,
  };
}

/**
 * How this replica takes part: unsharded, the leader alone reconciles and polls every resource;
 * `--sharded`, every replica its share (see {@link sharding}), the leader running the sharder.
 */
export interface ReplicaRole {
  /** The caches' settings: sharded, the Deployment resources of this replica's share only. */
  scope<C extends Pick<OperatorConfig, "labelSelector">>(config: C): C;
  /** The User-Agent (and sharded, the share and fence) of every service client. */
  clientIdentity: ClientIdentity;
  /** True when only the leader reconciles (unsharded). */
  leaderOnly: boolean;
  /** The reconcile as this replica runs it (sharded: only while it may). */
  guard(reconcile: Reconciler): Reconciler;
  /**
   * Joins the replica to its cache of Deployment resources once it exists; `enqueue` queues a
   * key for its reconcile (sharded: a resource this replica stopped reconciling, taken up again).
   */
  attach(deployments: KubeDeployments, enqueue: (key: string) => void): void;
  /** Sharded: each connection's users, counted by the leader. */
  users?: ClusterUsers;
  /** `runnable` as it runs here: sharded, on every replica (each for its share); else as it is. */
  ownShare(runnable: Runnable): Runnable;
  /** The cache of Deployment resources (sharded: one that can add an inherited share). */
  deployments(options: KubeDeploymentsOptions): KubeDeployments;
  /** Sharding's own runnables: none unsharded. */
  runnables: Runnable[];
  /** Told the leader election's holder as this process sees it (sharded: the request budget's parts). */
  leaderObserved(identity: string | undefined): void;
}

/** The {@link ReplicaRole} `config` asks for; `kubeNamespace` is the kubeconfig's namespace. */
export function replicaRole(
  config: ShardingParts["config"] & Pick<OperatorConfig, "sharded" | "podName">,
  kubeNamespace: string | undefined,
  parts: Omit<ShardingParts, "config" | "namespace" | "podName">,
): ReplicaRole {
  const podName = config.podName ?? hostname();
  if (!config.sharded)
    return {
      scope: (c) => c,
      clientIdentity: { userAgent: userAgentOf(podName) },
      leaderOnly: true,
      guard: (reconcile) => reconcile,
      attach: () => {},
      ownShare: (runnable) => runnable,
      deployments: (options) => new KubeDeployments(options),
      runnables: [],
      leaderObserved: () => {},
    };
  const namespace = config.leaderElection.namespace ?? kubeNamespace ?? "default";
  const shards = sharding({ ...parts, config, namespace, podName });
  return {
    scope: (c) => ({ ...c, labelSelector: joinSelectors(c.labelSelector, shards.selector) }),
    clientIdentity: shards.clientIdentity,
    leaderOnly: false,
    guard: shards.guard,
    attach: shards.attach,
    users: shards.users,
    ownShare: (runnable) => ({
      name: runnable.name,
      needLeaderElection: false,
      start: (s, h) => runnable.start(s, h),
    }),
    deployments: (options) =>
      new ShareDeployments({
        ...options,
        inheritedSelector: (owner) => joinSelectors(config.labelSelector, `${OWNER_LABEL}=${owner}`),
      }),
    runnables: shards.runnables,
    leaderObserved: shards.leaderObserved,
  };
}
