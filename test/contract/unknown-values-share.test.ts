/**
 * `dms_service_unknown_values_total` when tenants' services answer values the spec does not list,
 * through the operator's connector and registry, against simulators on loopback: one tenant's
 * many odd values take its own share of the labelled values, never the others', and a connection
 * deleted gives its series and its share back, however many are made and deleted.
 */
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ServiceConfig, serviceConfigFrom } from "../../src/config.ts";
import { ConnectionRegistry, type ConnectionRegistryOptions } from "../../src/connection/registry.ts";
import { RuntimeMetrics } from "../../src/runtime/metrics.ts";
import { UNKNOWN_VALUES_PER_TENANT } from "../../src/runtime/unknown-values.ts";
import { type RunningSimulator, startSimulator } from "../../src/simulator/server.ts";
import { serviceConnector } from "../../src/wiring/service-connections.ts";

const UNKNOWN = "dms_service_unknown_values_total";
const signal = new AbortController().signal;

/** A simulator whose deployments have the statuses `statuses`, none the spec lists. */
const serving = (statuses: string[]) =>
  startSimulator({
    timing: { readyAfterMs: 0, revisionActiveAfterMs: 0, deleteAfterMs: 0 },
    seed: {
      deployments: statuses.map((status, i) => ({
        id: `c0000000-0000-4000-8000-${String(i).padStart(12, "0")}`,
        name: `odd-${i}`,
        source: "external_docker" as const,
        status,
      })),
    },
  });

let hostile: RunningSimulator;
let plain: RunningSimulator;
beforeAll(async () => {
  // One tenant's server answers 60 odd values; another's the one the real service uses.
  hostile = await serving(Array.from({ length: 60 }, (_, i) => `MADE_UP_${i}`));
  plain = await serving(["AWAITING_FINAL_DELETE"]);
});
afterAll(async () => {
  await Promise.all([hostile.close(), plain.close()]);
});

function config(baseUrl: string): ServiceConfig {
  const parsed = serviceConfigFrom({ baseUrl, retries: 0, qps: 10_000, burst: 10_000 }, {});
  if (!parsed.ok) throw new Error(parsed.problems.join("; "));
  return parsed.config;
}

/** The registry of the operator's connections, its clients built by the operator's connector. */
function registryOf(metrics: RuntimeMetrics): ConnectionRegistry {
  return new ConnectionRegistry({
    connections: {} as ConnectionRegistryOptions["connections"],
    // The sessions are not what is counted here: the clients are.
    defaultSession: {} as ConnectionRegistryOptions["defaultSession"],
    connect: serviceConnector(pino({ level: "silent" }), metrics),
    session: () => ({}) as ReturnType<ConnectionRegistryOptions["session"]>,
  });
}

/** Builds `key`'s client on `sim` and reads its whole listing through it. */
async function readThrough(registry: ConnectionRegistry, key: string, sim: RunningSimulator): Promise<void> {
  const { entry } = registry.entry(key, config(sim.url));
  await entry.service.port.listAll(
    signal,
    () => {},
    () => {},
  );
}

/** The series of the counter, as scraped. */
async function series(metrics: RuntimeMetrics): Promise<string[]> {
  const text = await metrics.registry.getSingleMetricAsString(UNKNOWN);
  return text.split("\n").filter((l) => l.startsWith(`${UNKNOWN}{`));
}

describe("dms_service_unknown_values_total", () => {
  it("labels another tenant's value when one tenant's connections answer odd values under many names", async () => {
    const metrics = new RuntimeMetrics({ processMetrics: false });
    const registry = registryOf(metrics);
    for (let i = 0; i < 20; i++) await readThrough(registry, `ServiceConnection/team-a/c-${i}`, hostile);
    await readThrough(registry, "ServiceConnection/team-b/prod", plain);
    const scraped = await series(metrics);
    expect(scraped).toContain(
      `${UNKNOWN}{connection="ServiceConnection/team-b/prod",field="deployment.status",value="AWAITING_FINAL_DELETE"} 1`,
    );
    // team-a's connections label their tenant's share in all; the rest of theirs count as other.
    const teamA = scraped.filter((l) => l.includes('connection="ServiceConnection/team-a/'));
    expect(teamA.filter((l) => !l.includes('value="other"'))).toHaveLength(UNKNOWN_VALUES_PER_TENANT);
    expect(teamA.filter((l) => l.includes('value="other"'))).toHaveLength(20);
  });

  it("returns to its baseline after 2,000 connections made, read through and deleted", async () => {
    const metrics = new RuntimeMetrics({ processMetrics: false });
    const registry = registryOf(metrics);
    await readThrough(registry, "ServiceConnection/team-b/prod", plain);
    const baseline = { held: metrics.unknownValues.held(), series: await series(metrics) };
    expect(baseline.held).toEqual({ clients: 1, tenants: 1, labelled: 1 });
    for (let i = 0; i < 2_000; i++) {
      const key = `ServiceConnection/churn-${i % 50}/c-${i}`;
      await readThrough(registry, key, hostile);
      expect(registry.forget(key)).toBe(true);
    }
    expect(metrics.unknownValues.held()).toEqual(baseline.held);
    expect(await series(metrics)).toEqual(baseline.series);
    // The shares given back are there to take: a new tenant's values are labelled.
    await readThrough(registry, "ServiceConnection/team-c/prod", plain);
    expect(await series(metrics)).toContain(
      `${UNKNOWN}{connection="ServiceConnection/team-c/prod",field="deployment.status",value="AWAITING_FINAL_DELETE"} 1`,
    );
  });
});
