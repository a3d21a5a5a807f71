/**
 * What a connection's listing costs when its server answers without end, over real HTTP against
 * the simulator's hostile faults: the snapshot holds the claimed deployments only, page after
 * page, and a listing full of unreadable items logs a few lines, not one per item.
 */
import { afterEach, describe, expect, it } from "vitest";
import { ServiceClient, UNREADABLE_WARNINGS } from "../../src/api/client.ts";
import { deploymentsPort } from "../../src/reconcile/service/deployments-port.ts";
import { RemoteSnapshot } from "../../src/reconcile/service/snapshot.ts";
import { systemClock } from "../../src/runtime/clock.ts";
import { RuntimeMetrics } from "../../src/runtime/metrics.ts";
import { type RunningSimulator, startSimulator } from "../../src/simulator/server.ts";
import { LogCapture } from "../support/logs.ts";
import { ManualClock } from "../support/manual-clock.ts";

let sim: RunningSimulator | undefined;
afterEach(async () => {
  await sim?.close();
  sim = undefined;
});

const clientOf = (url: string, extra: Partial<ConstructorParameters<typeof ServiceClient>[0]> = {}) =>
  new ServiceClient({
    baseUrl: url,
    qps: 10_000,
    burst: 1000,
    clock: new ManualClock({ sleepsInstantly: true }),
    ...extra,
  });

describe("a connection's listing that never ends", () => {
  it("holds only the deployments its resources claim, page after page, until the page cap", async () => {
    sim = await startSimulator();
    sim.faults.set({ endlessListing: { pageDelayMs: 0 } });
    const pages = 300;
    const claimed = new Set(["endless-42", "endless-12345", "agent"]);
    const seen = { items: 0, largest: 0 };
    const snapshot: RemoteSnapshot = new RemoteSnapshot(
      deploymentsPort(clientOf(sim.url, { maxPages: pages })),
      systemClock,
      {
        maxAgeMs: 60_000,
        wanted: (name) => {
          seen.items += 1;
          seen.largest = Math.max(seen.largest, snapshot.size);
          return claimed.has(name);
        },
      },
    );
    const error = await snapshot.refresh(new AbortController().signal).catch((e: unknown) => e);
    expect(error).toMatchObject({
      kind: "bad_response",
      detail: expect.stringMatching(/did not end after 300 pages/),
    });
    expect(seen.items).toBe(pages * 100);
    // Two claimed names were listed: the snapshot never held more, whatever the listing's length.
    expect(seen.largest).toBeLessThanOrEqual(2);
    expect(snapshot.size).toBe(2);
    expect(snapshot.listingFailure()).toMatchObject({ kind: "failed" });
  });
});

describe("a listing full of unreadable items", () => {
  it(`logs the first ${UNREADABLE_WARNINGS} and one line counting them all; the metric counts every one`, async () => {
    const count = 250;
    sim = await startSimulator({
      seed: {
        deployments: Array.from({ length: count }, (_, i) => ({
          name: `no-id-${i}`,
          source: "external_docker" as const,
          quirks: { omit: ["id"] },
        })),
      },
    });
    const metrics = new RuntimeMetrics({ processMetrics: false });
    const logs = new LogCapture();
    const client = clientOf(sim.url, { logger: logs.logger, onUnreadable: metrics.recordUnreadable });
    let told = 0;
    const listed = await client.listAllDeployments({}, { onUnreadable: () => told++ });
    expect(listed).toEqual([]);
    expect(told).toBe(count);
    expect(logs.find("skipped a deployment of the listing")).toHaveLength(UNREADABLE_WARNINGS);
    const summary = logs.find(`skipped ${count} deployments of the listing that could not be read`);
    expect(summary).toHaveLength(1);
    expect(summary[0]?.record).toMatchObject({ skipped: count });
    expect(await metrics.registry.getSingleMetricAsString("dms_service_unreadable_items_total")).toContain(
      `dms_service_unreadable_items_total ${count}`,
    );
  });
});
