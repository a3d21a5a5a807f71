/**
 * `--sharded` operators run as separate processes against the test API server, for the sharding
 * cluster tests: one ring, short Leases, each replica its own `POD_NAME` and log.
 */
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { OperatorProcess, operatorEnv } from "../../scripts/demo/operator-process.ts";
import { readInstallKey } from "../../src/kube/install-key.ts";
import type { DeploymentObject } from "../../src/kube/object.ts";
import { claimOf } from "../../src/reconcile/inputs.ts";
import { OWNER_LABEL, RING_LABEL } from "../../src/sharding/labels.ts";
import { ownerOf, ringShares } from "../../src/sharding/ring.ts";
import type { RunningSimulator, SimulatorOptions } from "../../src/simulator/server.ts";
import { freshNamespace, testKubeconfigPath, waitFor } from "./cluster.ts";
import { startTestSimulator, TEST_API_KEY } from "./operator.ts";
import { type ClusterUser, hasCondition } from "./resources.ts";

/** A replica started by {@link ShardedRing.start}. */
export interface Replica {
  name: string;
  process: OperatorProcess;
}

/** Options of {@link ShardedRing}. */
export interface ShardedRingOptions {
  namespace: string;
  /** The leader election id: the ring's name. */
  ring: string;
  leaseMs: number;
  renewDeadline: string;
  retryPeriod: string;
  /** The default connection's simulator and the file holding its key. */
  baseUrl: string;
  apiKeyFile: string;
  /** Where the logs and the watchdogs' directories go. */
  work: string;
  /** Replica names are `<prefix>-<serial>`. */
  prefix: string;
}

/** The replicas of one ring: started, killed -9 or stopped, and which one leads. */
export class ShardedRing {
  readonly replicas = new Map<string, Replica>();
  readonly #o: ShardedRingOptions;
  #serial = 0;

  constructor(options: ShardedRingOptions) {
    this.#o = options;
  }

  /** Starts a replica; `args` come after the ring's own (a later flag wins). */
  start(args: readonly string[] = []): Replica {
    const o = this.#o;
    const name = `${o.prefix}-${this.#serial++}`;
    const process = OperatorProcess.start({
      args: [
        "--sharded",
        // The ring runs without the label policy (its check is test/integration/sharding-label-policy.test.ts).
        "--shard-label-policy=unenforced",
        `--kubeconfig=${testKubeconfigPath()}`,
        `--namespaces=${o.namespace}`,
        `--leader-election-namespace=${o.namespace}`,
        `--leader-election-id=${o.ring}`,
        `--lease-duration=${o.leaseMs / 1000}s`,
        `--renew-deadline=${o.renewDeadline}`,
        `--retry-period=${o.retryPeriod}`,
        "--timeout-ms=3000",
        "--reconcile-timeout=20s",
        "--poll-interval=1s",
        "--create-grace=5s",
        "--resync-period=10m",
        "--concurrency=4",
        "--metrics-bind-address=0",
        "--health-probe-bind-address=0",
        "--log-level=info",
        ...args,
      ],
      logPath: join(o.work, `${name}.log`),
      workDir: join(o.work, `${name}-work`),
      env: operatorEnv({
        POD_NAME: name,
        POD_NAMESPACE: o.namespace,
        DMS_BASE_URL: o.baseUrl,
        DMS_API_KEY_FILE: o.apiKeyFile,
        DMS_DEFAULT_CONNECTION_NAMESPACE_SELECTOR: "",
      }),
    });
    const replica = { name, process };
    this.replicas.set(name, replica);
    return replica;
  }

  /**
   * SIGKILL to the replica's process group: no release, no last write. A replica that already
   * exited (one that could not renew its Lease in time stops, as it should, on a loaded machine)
   * is as good as killed for what follows: said on the test's output, with the end of its log.
   */
  kill9(r: Replica): void {
    try {
      process.kill(-r.process.pid, "SIGKILL");
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "ESRCH") throw error;
      console.log(`${r.name} had already exited before its kill; its log ends:\n${r.process.logTail(20)}`);
    }
    this.replicas.delete(r.name);
  }

  async stop(r: Replica): Promise<void> {
    this.replicas.delete(r.name);
    await r.process.stop(15_000);
  }

  async stopAll(): Promise<void> {
    await Promise.all([...this.replicas.values()].map((r) => r.process.stop(2_000)));
  }

  /** The running replicas' names, sorted. */
  live(): string[] {
    return [...this.replicas.keys()].sort();
  }

  /**
   * The replica holding the leader election Lease (the sharder), from its holder identity
   * (`<pod name>_<suffix>`); undefined when none of the running replicas holds it.
   */
  async leader(user: ClusterUser): Promise<Replica | undefined> {
    const lease = (await user.client.request({
      method: "GET",
      path: `/apis/coordination.k8s.io/v1/namespaces/${this.#o.namespace}/leases/${this.#o.ring}`,
    })) as { spec?: { holderIdentity?: string } };
    const holder = lease.spec?.holderIdentity ?? "";
    return this.replicas.get(holder.slice(0, holder.lastIndexOf("_")));
  }

  /**
   * The replica the sharder labels for a claim now: the ring over the running replicas, the
   * leader's share made smaller ({@link ringShares}).
   */
  async placement(user: ClusterUser): Promise<(claim: string) => string | undefined> {
    const live = this.live();
    const shares = ringShares(live, (await this.leader(user))?.name);
    const seed = await this.#seed(user);
    return (claim) => ownerOf(claim, live, shares, seed);
  }

  /**
   * The replica the sharder labels for a claim whichever running replica leads; undefined for a
   * claim whose replica depends on the leader (its share is smaller, {@link ringShares}). A test
   * that needs claims spread over the replicas picks them with this, so a change of leader while
   * it runs does not gather them on one.
   */
  async placementUnderAnyLeader(user: ClusterUser): Promise<(claim: string) => string | undefined> {
    const live = this.live();
    const seed = await this.#seed(user);
    return (claim) => {
      const owners = new Set(live.map((leader) => ownerOf(claim, live, ringShares(live, leader), seed)));
      return owners.size === 1 ? [...owners][0] : undefined;
    };
  }

  /** The ring's key: the install key of the ring's namespace, as every replica reads it. */
  #seed(user: ClusterUser): Promise<Uint8Array> {
    return readInstallKey(user.client, this.#o.namespace, AbortSignal.timeout(10_000));
  }

  /**
   * The replicas whose own Lease of the ring is held by them (the members the sharder hashes
   * over), sorted.
   */
  async members(user: ClusterUser): Promise<string[]> {
    const leases = (await user.client.request({
      method: "GET",
      path: `/apis/coordination.k8s.io/v1/namespaces/${this.#o.namespace}/leases`,
      query: { labelSelector: `${RING_LABEL}=${this.#o.ring}` },
    })) as { items: Array<{ metadata: { name: string }; spec?: { holderIdentity?: string } }> };
    return leases.items
      .filter(
        (l) => this.replicas.has(l.metadata.name) && l.spec?.holderIdentity?.startsWith(l.metadata.name),
      )
      .map((l) => l.metadata.name)
      .sort();
  }

  /** Waits until every running replica is a member of the ring. */
  async untilMembers(user: ClusterUser): Promise<void> {
    const live = this.live().join(",");
    await waitFor(async () => ((await this.members(user)).join(",") === live ? true : undefined), {
      timeoutMs: 60_000,
      intervalMs: 250,
      description: `every replica (${live}) a member of the ring`,
    });
  }

  /** Every Deployment resource of the namespace (those `labelSelector` selects, when given). */
  async list(user: ClusterUser, labelSelector?: string): Promise<DeploymentObject[]> {
    const query = labelSelector === undefined ? "" : `?labelSelector=${encodeURIComponent(labelSelector)}`;
    const list = (await user.client.request({
      method: "GET",
      path: `/apis/dms.dev/v1alpha1/namespaces/${this.#o.namespace}/deployments${query}`,
    })) as { items: DeploymentObject[] };
    return list.items;
  }
}

/** A ring of {@link startSmallRing} and its simulator. */
export interface SmallRing {
  ring: ShardedRing;
  /** The default connection's simulator. */
  sim: RunningSimulator;
  /** Stops every replica and the simulator. */
  close(): Promise<void>;
}

/**
 * A ring with 6 s Leases (4 s renew deadline, 1 s retry) against a simulator of its own for the
 * default connection, whose key is written in `work`; no replica started yet.
 */
export async function startSmallRing(
  o: {
    namespace: string;
    ring: string;
    prefix: string;
    work: string;
  },
  simulatorOptions: SimulatorOptions = {},
): Promise<SmallRing> {
  const sim = await startTestSimulator(simulatorOptions);
  const apiKeyFile = join(o.work, "api-key");
  await writeFile(apiKeyFile, `${TEST_API_KEY}\n`, { mode: 0o600 });
  const ring = new ShardedRing({
    ...o,
    leaseMs: 6_000,
    renewDeadline: "4s",
    retryPeriod: "1s",
    baseUrl: sim.url,
    apiKeyFile,
  });
  return {
    ring,
    sim,
    close: async () => {
      await ring.stopAll();
      await sim.close();
    },
  };
}

/** A fresh namespace, a simulator as the default connection, and a ring of `--sharded` replicas. */
export interface ShardedWorld {
  namespace: string;
  simulator: RunningSimulator;
  ring: ShardedRing;
  /** Stops the replicas and the simulator and removes the work directory. */
  stop(): Promise<void>;
}

/**
 * Starts a {@link ShardedWorld} with `replicas` replicas, a {@link startSmallRing} in a fresh
 * namespace: the ring `dms-<prefix>` and replica names `<prefix>-<serial>`. With `KEEP_WORK=1`
 * in the environment, `stop` leaves the work directory (the replicas' logs) in place.
 */
export async function shardedWorld(
  prefix: string,
  replicas: number,
  simulatorOptions: SimulatorOptions = {},
): Promise<ShardedWorld> {
  const namespace = await freshNamespace(prefix);
  const work = await mkdtemp(join(tmpdir(), `${prefix}-`));
  const small = await startSmallRing({ namespace, ring: `dms-${prefix}`, prefix, work }, simulatorOptions);
  for (let i = 0; i < replicas; i++) small.ring.start();
  return {
    namespace,
    simulator: small.sim,
    ring: small.ring,
    stop: async () => {
      await small.close();
      if (!process.env.KEEP_WORK) await rm(work, { recursive: true, force: true });
    },
  };
}

/**
 * Waits until the namespace's `count` resources are all Ready with the image `imageOf` gives each
 * (by name), each owned by a replica `owned` accepts (its owner label, its claim); the timeout
 * names `what` and up to five resources not settled yet.
 */
export async function untilSettled(
  r: ShardedRing,
  user: ClusterUser,
  o: {
    what: string;
    count: number;
    imageOf: (name: string) => string;
    owned: (owner: string | undefined, claim: string) => boolean;
    timeoutMs?: number;
  },
): Promise<void> {
  let unsettled = "no listing yet";
  await waitFor(
    async () => {
      const items = await r.list(user);
      const pending = items.filter(
        (d) =>
          !(
            o.owned(d.metadata.labels?.[OWNER_LABEL], claimOf(d)) &&
            d.status?.observedGeneration === d.metadata.generation &&
            hasCondition(d, "Ready", "True") &&
            d.spec.sourceRevisionConfig?.imageUri === o.imageOf(d.metadata.name)
          ),
      );
      unsettled = pending
        .slice(0, 5)
        .map((d) => `${d.metadata.name}@${d.metadata.labels?.[OWNER_LABEL]}`)
        .join(", ");
      return items.length === o.count && pending.length === 0 ? true : undefined;
    },
    {
      timeoutMs: o.timeoutMs ?? 120_000,
      intervalMs: 500,
      description: () => `${o.what}: every resource settled (not yet: ${unsettled})`,
    },
  );
}
