/**
 * A call made inside a reconcile (runtime/deadline.ts) whose rate-limit token comes later than the
 * reconcile could end is not made and reserves nothing: it throws `TokenWaitTooLongError` with the
 * wait, so that the reconcile gives its worker back (`DeferredError`) and comes again when the
 * token is due. Outside a reconcile, a call waits for its token as ever.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ServiceClient } from "../../src/api/client.ts";
import { TokenWaitTooLongError } from "../../src/api/rate-limit.ts";
import { DeferredError } from "../../src/runtime/controller.ts";
import { withinDeadline } from "../../src/runtime/deadline.ts";
import { type RunningSimulator, startSimulator } from "../../src/simulator/server.ts";

let sim: RunningSimulator;
beforeAll(async () => {
  sim = await startSimulator({ timing: { readyAfterMs: 0, revisionActiveAfterMs: 0, deleteAfterMs: 0 } });
});
afterAll(async () => {
  await sim.close();
});

describe("a token later than the reconcile's deadline", () => {
  it("is not waited for inside a reconcile: nothing sent, nothing reserved, the wait told", async () => {
    // The lowest qps a connection may have: one token per 1,000 s, a burst of one.
    const client = new ServiceClient({
      baseUrl: sim.url,
      retries: 0,
      qps: 0.001,
      burst: 1,
      timeoutMs: 1_000,
    });
    sim.resetCounters();
    // The burst's token: within the deadline, sent at once.
    await withinDeadline(
      () => 120_000,
      () => client.listProviders(),
    );
    const deferred = withinDeadline(
      () => 120_000,
      () => client.listProviders(),
    );
    await expect(deferred).rejects.toBeInstanceOf(TokenWaitTooLongError);
    const error = (await deferred.catch((e: unknown) => e)) as TokenWaitTooLongError;
    expect(error).toBeInstanceOf(DeferredError);
    // About 1,000 s until the next token (the first one was taken a moment ago).
    expect(error.afterMs).toBeGreaterThan(990_000);
    expect(error.afterMs).toBeLessThanOrEqual(1_000_000);
    expect(error.message).toContain("0.001 requests/s");
    // A second deferral waits no longer: the first reserved nothing.
    const again = (await withinDeadline(
      () => 120_000,
      () => client.listProviders().catch((e: unknown) => e),
    )) as TokenWaitTooLongError;
    expect(again.afterMs).toBeLessThanOrEqual(error.afterMs);
    expect(sim.requests()).toHaveLength(1);
  });

  it("is waited for when it comes in time for the call to end, and outside any reconcile", async () => {
    // 10 requests a second, a burst of one: the second call waits ~100 ms.
    const client = new ServiceClient({ baseUrl: sim.url, retries: 0, qps: 10, burst: 1, timeoutMs: 1_000 });
    sim.resetCounters();
    await withinDeadline(
      () => 5_000,
      () => Promise.all([client.listProviders(), client.listProviders()]),
    );
    // Without a deadline nothing is deferred, however far the token.
    const slow = new ServiceClient({ baseUrl: sim.url, retries: 0, qps: 10, burst: 1, timeoutMs: 1_000 });
    await Promise.all([slow.listProviders(), slow.listProviders()]);
    expect(sim.requests()).toHaveLength(4);
    // A deadline too near for the wait plus the request's timeout defers the second call.
    const near = new ServiceClient({ baseUrl: sim.url, retries: 0, qps: 10, burst: 1, timeoutMs: 1_000 });
    const results = await withinDeadline(
      () => 1_050,
      () => Promise.allSettled([near.listProviders(), near.listProviders()]),
    );
    expect(results.map((r) => r.status)).toEqual(["fulfilled", "rejected"]);
  });
});
