/**
 * Sharding's metrics: a replica's share, the ring it sees, its Lease and its drains; the leader's
 * count per owner label; and, with the shard label policy required, whether it is in place.
 */
import { Counter, Gauge, type Registry } from "prom-client";

/** What the gauges read when scraped. */
export interface ShardGaugeSources {
  /** The resources in this replica's cache (its share). */
  owned(): number;
  /** The live members of the ring, as this replica sees it. */
  ringMembers(): number;
  /** Whether this replica holds its shard Lease and may write to the service. */
  mayWrite(): boolean;
}

/** The metrics a sharded replica updates (the others are read when scraped). */
export interface ShardMetrics {
  /** A resource this replica let go for another: a drain acknowledged, or a hand-over by the ring. */
  acknowledged(): void;
  /** The sharder's last count of resources per owner label. */
  owners(counts: ReadonlyMap<string, number>): void;
  /** Whether the shard label policy was in place at the leader's last check (when required). */
  policyEnforced(enforced: boolean): void;
}

/**
 * Owners the leader's count names by a series of their own, the most resources first; the rest
 * are summed under {@link OTHER_OWNERS}. Without the label policy a tenant may write any owner
 * label, and each name would be a series.
 */
export const OWNER_SERIES = 64;

/** The series of the owners past {@link OWNER_SERIES}: no replica's name (not a DNS subdomain). */
export const OTHER_OWNERS = "_other";

/** Registers the metrics of the replica `replica` on `registry`. */
export function shardMetrics(
  registry: Registry,
  replica: string,
  read: ShardGaugeSources,
  policyRequired: boolean,
): ShardMetrics {
  const registers = [registry];
  const acknowledged = new Counter({
    name: "dms_shard_drains_acknowledged_total",
    help: "Resources this replica let go for another replica: drains acknowledged and hand-overs by the ring (label writes made)",
    registers,
  });
  new Gauge({
    name: "dms_shard_resources",
    help: "Deployment resources this replica owns (its share of the ring)",
    labelNames: ["replica"],
    registers,
    collect() {
      this.set({ replica }, read.owned());
    },
  });
  new Gauge({
    name: "dms_shard_ring_members",
    help: "Replicas whose Lease is live, as this replica sees the ring",
    registers,
    collect() {
      this.set(read.ringMembers());
    },
  });
  new Gauge({
    name: "dms_shard_lease_held",
    help: "1 while this replica holds its shard Lease and may write to the service",
    labelNames: ["replica"],
    registers,
    collect() {
      this.set({ replica }, read.mayWrite() ? 1 : 0);
    },
  });
  const owners = new Gauge({
    name: "dms_sharder_resources",
    help: "Deployment resources per owner label, as the sharder (the leader) last counted them",
    labelNames: ["owner"],
    registers,
  });
  const policy = policyRequired
    ? new Gauge({
        name: "dms_shard_label_policy_enforced",
        help: "1 while the shard label policy was in place at the leader's last check (every minute), 0 once it was found missing or not enforcing",
        registers,
      })
    : undefined;
  return {
    acknowledged: () => acknowledged.inc(),
    owners: (counts) => {
      owners.reset();
      const most = [...counts].sort((a, b) => b[1] - a[1]);
      let other = 0;
      for (const [i, [owner, n]] of most.entries()) {
        if (i < OWNER_SERIES) owners.set({ owner }, n);
        else other += n;
      }
      if (other > 0) owners.set({ owner: OTHER_OWNERS }, other);
    },
    policyEnforced: (enforced) => policy?.set(enforced ? 1 : 0),
  };
}
