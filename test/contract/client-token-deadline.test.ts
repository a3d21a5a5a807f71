/**
 * A call made inside a reconcile (runtime/clock.ts) whose rate-limit token comes later than the
 * call could end before the reconcile's deadline is not made: the token is reserved for the
 * reconcile's key and the call throws `TokenWaitTooLongError` with the wait, so that the reconcile
 * gives its worker back (`DeferredError`) and comes again when its token is due, and then sends
 * on it without waiting behind the callers that came since. Outside a reconcile, a call waits for
 * its token as ever.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TokenWaitTooLongError } from "../../src/api/budgets.ts";
import { ServiceClient } from "../../src/api/client.ts";
import { withinDeadline } from "../../src/runtime/clock.ts";
import { DeferredError } from "../../src/runtime/controller.ts";
import { type RunningSimulator, startSimulator } from "../../src/simulator/server.ts";
import { ManualClock } from "../support/manual-clock.ts";

let sim: RunningSimulator;
beforeAll(async () => {
  sim = await startSimulator({ timing: { readyAfterMs: 0, revisionActiveAfterMs: 0, deleteAfterMs: 0 } });
});
afterAll(async () => {
  await sim.close();
});

/** A reconcile of `holder` with `leftMs` left. */
const inReconcile = <T>(holder: string, leftMs: number, work: () => Promise<T>) =>
  withinDeadline({ timeLeft: () => leftMs, holder }, work);

const deferral = (promise: Promise<unknown>) =>
  promise.then(
    () => undefined,
    (e: unknown) => e as TokenWaitTooLongError,
  );

describe("a token later than the reconcile's deadline", () => {
  it("is reserved for the reconcile's key, not waited for: nothing sent until it is due, then sent at once", async () => {
    // The lowest qps a connection may have: one token per 1,000 s, a burst of one; time stands still.
    const clock = new ManualClock();
    const client = new ServiceClient({
      baseUrl: sim.url,
      retries: 0,
      qps: 0.001,
      burst: 1,
      timeoutMs: 1_000,
      clock,
    });
    sim.resetCounters();
    // The burst's token: within the deadline, sent at once.
    await inReconcile("ns/a", 120_000, () => client.listProviders());
    const first = await deferral(inReconcile("ns/a", 120_000, () => client.listProviders()));
    expect(first).toBeInstanceOf(TokenWaitTooLongError);
    expect(first).toBeInstanceOf(DeferredError);
    expect(first?.afterMs).toBe(1_000_000);
    expect(first?.message).toContain("0.001 requests/s");
    // The same reconcile again: the same token, reserved once.
    expect((await deferral(inReconcile("ns/a", 120_000, () => client.listProviders())))?.afterMs).toBe(
      1_000_000,
    );
    // Another one: the token after it.
    expect((await deferral(inReconcile("ns/b", 120_000, () => client.listProviders())))?.afterMs).toBe(
      2_000_000,
    );
    expect(sim.requests()).toHaveLength(1);
    // When a's token is due, a sends on it at once; b is still a token away.
    clock.advance(1_000_000);
    await inReconcile("ns/a", 120_000, () => client.listProviders());
    expect(sim.requests()).toHaveLength(2);
    expect((await deferral(inReconcile("ns/b", 120_000, () => client.listProviders())))?.afterMs).toBe(
      1_000_000,
    );
  });

  it("is waited for when it comes in time for the call to end, and outside any reconcile", async () => {
    // 10 requests a second, a burst of one: the second call waits ~100 ms.
    const client = new ServiceClient({ baseUrl: sim.url, retries: 0, qps: 10, burst: 1, timeoutMs: 1_000 });
    sim.resetCounters();
    await inReconcile("ns/a", 5_000, () => Promise.all([client.listProviders(), client.listProviders()]));
    // Without a deadline nothing is deferred, however far the token.
    const slow = new ServiceClient({ baseUrl: sim.url, retries: 0, qps: 10, burst: 1, timeoutMs: 1_000 });
    await Promise.all([slow.listProviders(), slow.listProviders()]);
    expect(sim.requests()).toHaveLength(4);
    // A deadline too near for the wait plus the request's timeout defers the second call.
    const near = new ServiceClient({ baseUrl: sim.url, retries: 0, qps: 10, burst: 1, timeoutMs: 1_000 });
    const results = await inReconcile("ns/a", 1_050, () =>
      Promise.allSettled([near.listProviders(), near.listProviders()]),
    );
    expect(results.map((r) => r.status)).toEqual(["fulfilled", "rejected"]);
  });
});
