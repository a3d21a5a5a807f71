/**
 * A call made inside a reconcile (runtime/clock.ts) whose rate-limit token comes later than the
 * call could end before the reconcile's deadline is not made: the token is reserved for the
 * reconcile's key and the call throws `TokenWaitTooLongError` with the wait, so that the reconcile
 * gives its worker back (`DeferredError`) and comes again when its token is due, and then sends
 * on it without waiting behind the callers that came since. Outside a reconcile, a call waits for
 * its token as ever.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ServiceClient } from "../../src/api/client.ts";
import { TokenWaitTooLongError } from "../../src/api/reserved-tokens.ts";
import { DeferredError, withinDeadline } from "../../src/runtime/clock.ts";
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

/** A client at the lowest qps a connection may have (a token per 1,000 s, a burst of one), time standing still. */
function slowestClient() {
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
  return { clock, client };
}

describe("a token later than the reconcile's deadline", () => {
  it("is reserved for the reconcile's key, not waited for: nothing sent until it is due, then sent at once", async () => {
    const { clock, client } = slowestClient();
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

  it("on a connection several namespaces share, puts a namespace's reservation before another's thousandth, not after it", async () => {
    // A ClusterServiceConnection at one token per 1,000 s: one namespace's 1,000 edited resources
    // each reserved a token; another namespace's edit is a token or two away, not a thousand.
    const { clock, client } = slowestClient();
    await inReconcile("noisy/r0", 120_000, () => client.listProviders());
    const noisy = (i: number) => deferral(inReconcile(`noisy/r${i}`, 120_000, () => client.listProviders()));
    for (let i = 1; i <= 1_000; i++) expect((await noisy(i))?.afterMs).toBe(i * 1_000_000);
    const quiet = () => deferral(inReconcile("quiet/app", 120_000, () => client.listProviders()));
    // After the noisy namespace's first reservation (its turn), before its second.
    expect((await quiet())?.afterMs).toBe(2_000_000);
    // The rate holds: noisy/r2 and every later one moved one token later, the last onto the next token.
    expect((await noisy(1))?.afterMs).toBe(1_000_000);
    expect((await noisy(2))?.afterMs).toBe(3_000_000);
    expect((await noisy(1_000))?.afterMs).toBe(1_001_000_000);
    // When its token is due, the quiet namespace's call is sent; the noisy one due next is not yet.
    clock.advance(1_000_000);
    await inReconcile("noisy/r1", 120_000, () => client.listProviders());
    clock.advance(1_000_000);
    await inReconcile("quiet/app", 120_000, () => client.listProviders());
    expect((await noisy(2))?.afterMs).toBe(1_000_000);
    expect(sim.requests()).toHaveLength(3);
  });

  it("is waited for when it comes in time for the call to end, and outside any reconcile", async () => {
    // 10 requests a second, a burst of one: the second call waits 100 ms, on a clock whose
    // sleeps move it (nothing of the machine's speed in the waits or the deadline's arithmetic).
    const client = (clock: ManualClock) =>
      new ServiceClient({ baseUrl: sim.url, retries: 0, qps: 10, burst: 1, timeoutMs: 1_000, clock });
    sim.resetCounters();
    // Just in time: the wait and the request's timeout end with the deadline.
    const inTimeClock = new ManualClock({ sleepsInstantly: true });
    const inTime = client(inTimeClock);
    await inReconcile("ns/a", 1_100, () => Promise.all([inTime.listProviders(), inTime.listProviders()]));
    expect(inTimeClock.sleeps).toEqual([100]);
    // Without a deadline nothing is deferred, however far the token.
    const slowClock = new ManualClock({ sleepsInstantly: true });
    const slow = client(slowClock);
    await Promise.all([slow.listProviders(), slow.listProviders()]);
    expect(slowClock.sleeps).toEqual([100]);
    expect(sim.requests()).toHaveLength(4);
    // A deadline a millisecond too near for the wait plus the request's timeout defers the
    // second call, before any wait.
    const nearClock = new ManualClock({ sleepsInstantly: true });
    const near = client(nearClock);
    const results = await inReconcile("ns/a", 1_099, () =>
      Promise.allSettled([near.listProviders(), near.listProviders()]),
    );
    expect(results.map((r) => r.status)).toEqual(["fulfilled", "rejected"]);
    expect(nearClock.sleeps).toEqual([]);
    expect(sim.requests()).toHaveLength(5);
  });
});
