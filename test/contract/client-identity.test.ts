/**
 * What every request says about its sender, and the write fence of a sharded replica, against
 * the simulator over loopback: the `User-Agent` the simulator records, and a write held back
 * unsent (the simulator never sees it) while reads still go out.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ServiceClient } from "../../src/api/client.ts";
import type { WriteGrant } from "../../src/api/client-options.ts";
import { isServiceError } from "../../src/api/errors.ts";
import { systemApiClock } from "../../src/runtime/clock.ts";
import { type RunningSimulator, startSimulator } from "../../src/simulator/server.ts";
import { VERSION } from "../../src/version.ts";

let sim: RunningSimulator;
beforeAll(async () => {
  sim = await startSimulator({ timing: { readyAfterMs: 0, revisionActiveAfterMs: 0, deleteAfterMs: 0 } });
});
afterAll(async () => {
  await sim.close();
});

describe("the client's identity and write fence", () => {
  it("sends dms-operator/<version> by default, and the replica's own User-Agent when given", async () => {
    sim.resetCounters();
    await new ServiceClient({ baseUrl: sim.url, retries: 0 }).listProviders();
    await new ServiceClient({
      baseUrl: sim.url,
      retries: 0,
      userAgent: `dms-operator/${VERSION} (dms-operator-5d9f8-x2x7q)`,
    }).listProviders();
    expect(sim.requests().map((r) => r.userAgent)).toEqual([
      `dms-operator/${VERSION}`,
      `dms-operator/${VERSION} (dms-operator-5d9f8-x2x7q)`,
    ]);
  });

  it("holds a write back unsent while the gate refuses, lets reads through, and cuts a write's timeout to the time granted", async () => {
    sim.resetCounters();
    let grant: WriteGrant = { refuse: "this replica's shard Lease is not current" };
    const client = new ServiceClient({ baseUrl: sim.url, retries: 0, writeGate: () => grant });
    const created = client.createDeployment({ name: "fenced", source: "external_docker" });
    await expect(created).rejects.toSatisfy(
      (e) =>
        isServiceError(e, "unavailable") && e.message.includes("shard Lease is not current") && e.retryable,
    );
    await client.listProviders();
    expect(sim.requests().map((r) => r.route)).toEqual(["GET /v2/auth/providers"]);
    grant = { withinMs: 5_000 };
    await client.createDeployment({ name: "fenced", source: "external_docker" });
    expect(sim.requests().map((r) => r.route)).toEqual(["GET /v2/auth/providers", "POST /v2/deployments"]);
    // A service slower than the time granted: the write times out at the grant, not the timeout.
    // The service answers after 5 s, well within the client's 10 s timeout: the write fails as a
    // timeout only by the grant's, before the service answered it.
    sim.faults.set({ latency: [{ route: "POST /v2/deployments", ms: 5_000 }] });
    grant = { withinMs: 300 };
    await expect(client.createDeployment({ name: "slow", source: "external_docker" })).rejects.toSatisfy(
      (e) => isServiceError(e, "timeout"),
    );
    const answered = sim.requests({ route: "POST /v2/deployments" }).filter((r) => r.status !== undefined);
    expect(answered.map((r) => r.status)).toEqual(["201"]);
    sim.faults.set({});
  });

  it("sends no write whose grant ran out before it reached the wire (the process stalled in between), and asks the gate again", async () => {
    sim.resetCounters();
    // The process is stopped right after its gate granted the write (SIGSTOP, a node frozen, a
    // long pause): by its clock the time granted is up before the request goes on the wire,
    // while its own timeout has not fired yet. Meanwhile its Lease expired and was taken.
    let stalledMs = 0;
    const clock = { ...systemApiClock, now: () => systemApiClock.now() + stalledMs };
    const asked: string[] = [];
    const client = new ServiceClient({
      baseUrl: sim.url,
      retries: 0,
      clock,
      writeGate: () => {
        asked.push(stalledMs === 0 ? "granted" : "refused");
        if (stalledMs > 0) return { refuse: "this replica's shard Lease is not current" };
        stalledMs = 2_000;
        return { withinMs: 1_000 };
      },
    });
    await client.listProviders();
    await expect(client.createDeployment({ name: "stalled", source: "external_docker" })).rejects.toSatisfy(
      (e) => isServiceError(e, "unavailable") && e.message.includes("shard Lease is not current"),
    );
    expect(asked).toEqual(["granted", "refused"]);
    expect(sim.requests().map((r) => r.route)).toEqual(["GET /v2/auth/providers"]);
  });

  it("tells the gate how each write ended: answered (0), or unanswered with the timeout it was given", async () => {
    const endings: number[] = [];
    let withinMs = 5_000;
    const client = new ServiceClient({
      baseUrl: sim.url,
      retries: 0,
      writeGate: () => ({ withinMs, ended: (ms) => endings.push(ms) }),
    });
    await client.createDeployment({ name: "answered", source: "external_docker" });
    await client.listProviders();
    expect(endings).toEqual([0]);
    sim.faults.set({ latency: [{ route: "POST /v2/deployments", ms: 5_000 }] });
    withinMs = 300;
    await expect(
      client.createDeployment({ name: "unanswered", source: "external_docker" }),
    ).rejects.toSatisfy((e) => isServiceError(e, "timeout"));
    sim.faults.set({});
    expect(endings).toEqual([0, 300]);
  });
});
