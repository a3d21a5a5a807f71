/**
 * The transport tells the work it runs for how long each call waited for a token of the client's
 * rate limit (runtime/clock.ts): a connection's periodic read moves its deadline by that much,
 * so that the deadline bounds the service, not this process's own pacing.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { ServiceClient } from "../../src/api/client.ts";
import { whilePaced } from "../../src/runtime/clock.ts";
import { type RunningSimulator, startSimulator } from "../../src/simulator/server.ts";
import { ManualClock } from "../support/manual-clock.ts";

let sim: RunningSimulator;
beforeAll(async () => {
  sim = await startSimulator({ timing: { readyAfterMs: 0, revisionActiveAfterMs: 0, deleteAfterMs: 0 } });
});
afterAll(async () => {
  await sim.close();
});

describe("the waits for the rate limit, told to the work that made them", () => {
  it("tells the waits of the calls behind the limit", async () => {
    // 10 requests a second, a burst of one, time standing still but when moved: the second and
    // third calls wait 100 and 200 ms.
    const clock = new ManualClock();
    const client = new ServiceClient({ baseUrl: sim.url, retries: 0, qps: 10, burst: 1, clock });
    const told: number[] = [];
    const calls = whilePaced(
      (ms) => told.push(ms),
      () => Promise.all([0, 1, 2].map(() => client.listProviders())),
    );
    // The first call's token was there (no wait, nothing told); the two others wait for theirs.
    await vi.waitFor(() => expect(clock.pending).toBe(2));
    expect(told).toEqual([]);
    clock.advance(100);
    await vi.waitFor(() => expect(told).toHaveLength(1));
    clock.advance(100);
    await calls;
    expect(told).toEqual([100, 200]);
  });
});
