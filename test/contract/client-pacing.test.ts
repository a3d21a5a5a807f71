/**
 * The transport tells the work it runs for how long each call waited for a token of the client's
 * rate limit (runtime/clock.ts): a connection's periodic read moves its deadline by that much,
 * so that the deadline bounds the service, not this process's own pacing.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ServiceClient } from "../../src/api/client.ts";
import { whilePaced } from "../../src/runtime/clock.ts";
import { type RunningSimulator, startSimulator } from "../../src/simulator/server.ts";

let sim: RunningSimulator;
beforeAll(async () => {
  sim = await startSimulator({ timing: { readyAfterMs: 0, revisionActiveAfterMs: 0, deleteAfterMs: 0 } });
});
afterAll(async () => {
  await sim.close();
});

describe("the waits for the rate limit, told to the work that made them", () => {
  it("tells the waits of the calls behind the limit", async () => {
    // 10 requests a second, a burst of one: the second and third calls wait ~100 and ~200 ms.
    const client = new ServiceClient({ baseUrl: sim.url, retries: 0, qps: 10, burst: 1 });
    const told: number[] = [];
    await whilePaced(
      (ms) => told.push(ms),
      () => Promise.all([0, 1, 2].map(() => client.listProviders())),
    );
    // Two waits of about 100 and 200 ms (the first call's token was there: a millisecond at most).
    expect(told.filter((ms) => ms >= 50)).toHaveLength(2);
    expect(told.reduce((a, b) => a + b, 0)).toBeGreaterThanOrEqual(250);
  });
});
