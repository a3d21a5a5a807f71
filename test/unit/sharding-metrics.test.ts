// Sharding's metrics: the leader's count per owner label names at most OWNER_SERIES owners, the
// most resources first, and sums the rest, so that owner labels a tenant writes (without the label
// policy) cannot grow /metrics without bound.
import { Registry } from "prom-client";
import { describe, expect, it } from "vitest";
import { OTHER_OWNERS, OWNER_SERIES, shardMetrics } from "../../src/sharding/metrics.ts";

const sources = { owned: () => 0, ringMembers: () => 1, mayWrite: () => true };

async function ownerSeries(registry: Registry): Promise<Map<string, number>> {
  const metric = (await registry.getMetricsAsJSON()).find((m) => m.name === "dms_sharder_resources");
  return new Map((metric?.values ?? []).map((v) => [String(v.labels.owner), v.value]));
}

describe("dms_sharder_resources", () => {
  it("names the owners with the most resources, at most OWNER_SERIES, and sums the rest under one series", async () => {
    const registry = new Registry();
    const metrics = shardMetrics(registry, "replica-0", sources, false);
    const counts = new Map<string, number>([
      ["replica-0", 5_000],
      ["replica-1", 4_000],
    ]);
    for (let i = 0; i < 1_000; i++) counts.set(`x-${i}`, 1);
    metrics.owners(counts);
    const series = await ownerSeries(registry);
    expect(series.size).toBe(OWNER_SERIES + 1);
    expect(series.get("replica-0")).toBe(5_000);
    expect(series.get("replica-1")).toBe(4_000);
    expect(series.get(OTHER_OWNERS)).toBe(1_000 - (OWNER_SERIES - 2));
    expect([...series.values()].reduce((a, b) => a + b, 0)).toBe(10_000);
  });

  it("has no summed series while every owner has its own, and forgets owners no longer counted", async () => {
    const registry = new Registry();
    const metrics = shardMetrics(registry, "replica-0", sources, false);
    metrics.owners(new Map([["gone", 3]]));
    metrics.owners(new Map([["replica-0", 2]]));
    expect(await ownerSeries(registry)).toEqual(new Map([["replica-0", 2]]));
  });
});
