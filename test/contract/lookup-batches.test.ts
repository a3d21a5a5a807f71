/**
 * A connection's lookups by id made at the same moment go out as one `deployment_ids` call, over
 * real HTTP against the simulator, each caller getting what the single lookup would give it: its
 * deployment, none, or the unreadable item that may be its own.
 */
import { pino } from "pino";
import { afterEach, describe, expect, it, vi } from "vitest";
import { ServiceClient } from "../../src/api/client.ts";
import { deploymentsPort } from "../../src/reconcile/service/deployments-port.ts";
import { UnreadableDeploymentError } from "../../src/reconcile/service/lookup-errors.ts";
import { ServiceSession } from "../../src/reconcile/service/session.ts";
import { type RunningSimulator, startSimulator } from "../../src/simulator/server.ts";
import { ManualClock } from "../support/manual-clock.ts";

let sim: RunningSimulator | undefined;
afterEach(async () => {
  await sim?.close();
  sim = undefined;
});

const id = (n: number) => `00000000-0000-4000-8000-${String(n).padStart(12, "0")}`;
const LISTING = "GET /v2/deployments";

async function portOverSimulator(count: number, unreadable: number[] = []) {
  sim = await startSimulator({
    seed: {
      deployments: Array.from({ length: count }, (_, i) => ({
        id: id(i),
        name: `agent-${i}`,
        source: "external_docker" as const,
        ...(unreadable.includes(i) ? { quirks: { omit: ["name"] } } : {}),
      })),
    },
  });
  const client = new ServiceClient({
    baseUrl: sim.url,
    qps: 10_000,
    burst: 1000,
    clock: new ManualClock({ sleepsInstantly: true }),
  });
  return { port: deploymentsPort(client), client, sim };
}

describe("lookups by id over real HTTP", () => {
  it("16 concurrent lookups cost one request; a lone one costs what the single lookup costs", async () => {
    const { port, client, sim } = await portOverSimulator(20);
    const signal = new AbortController().signal;
    const calls = () => sim.requests({ route: LISTING }).length;
    const answers = await Promise.all(Array.from({ length: 16 }, (_, i) => port.getById(id(i + 4), signal)));
    expect(answers.map((d) => d?.name)).toEqual(Array.from({ length: 16 }, (_, i) => `agent-${i + 4}`));
    expect(calls()).toBe(1);
    expect(sim.requests({ route: LISTING })[0]?.url).toContain(`deployment_ids=${id(4)}%2C${id(5)}`);

    // Some missing: the listing is read to its end (an empty page), once for them all, where a
    // single lookup of a found id costs one request and of a missing one another.
    const some = await Promise.all(Array.from({ length: 16 }, (_, i) => port.getById(id(i + 10), signal)));
    expect(some.map((d) => d?.name)).toEqual(
      Array.from({ length: 16 }, (_, i) => (i + 10 < 20 ? `agent-${i + 10}` : undefined)),
    );
    expect(calls()).toBe(3);

    // Alone: the requests of the client's own lookup, found or not.
    expect((await port.getById(id(3), signal))?.name).toBe("agent-3");
    expect(calls()).toBe(4);
    expect((await client.getDeployment(id(3), { signal }))?.name).toBe("agent-3");
    expect(calls()).toBe(5);
    expect(await port.getById(id(99), signal)).toBeUndefined();
    expect(calls()).toBe(6);
    expect(await client.getDeployment(id(99), { signal })).toBeUndefined();
    expect(calls()).toBe(7);
  });

  it("an unreadable deployment fails its own lookup only, with the message the single lookup gives", async () => {
    const { port } = await portOverSimulator(4, [2]);
    const signal = new AbortController().signal;
    const [one, two, gone] = await Promise.allSettled([
      port.getById(id(1), signal),
      port.getById(id(2), signal),
      port.getById(id(9), signal),
    ]);
    expect(one).toMatchObject({ status: "fulfilled", value: { name: "agent-1" } });
    expect(gone).toEqual({ status: "fulfilled", value: undefined });
    expect(two.status).toBe("rejected");
    const alone = await port.getById(id(2), signal).catch((e: unknown) => e);
    expect(alone).toBeInstanceOf(UnreadableDeploymentError);
    expect(two.status === "rejected" && two.reason).toEqual(alone);
  });
});

describe("lookups by name over real HTTP", () => {
  it("a name found on a page shorter than the service's full pages costs one request", async () => {
    const { port, sim } = await portOverSimulator(150);
    const signal = new AbortController().signal;
    const calls = () => sim.requests({ route: LISTING }).length;
    // No full page seen yet: the page of the name (agent-3, agent-30…39, agent-130…139) and the
    // empty page that proves the end.
    expect((await port.findByName("agent-3", signal)).deployments.map((d) => d.name)).toEqual(["agent-3"]);
    expect(calls()).toBe(2);
    // The whole listing: pages of 100 and 50, and the empty page.
    let listed = 0;
    await port.listAll(
      signal,
      () => listed++,
      () => undefined,
    );
    expect([listed, calls()]).toEqual([150, 5]);
    // The service fills pages of 100: a page of 21 holding the name is the last.
    expect((await port.findByName("agent-7", signal)).deployments.map((d) => d.name)).toEqual(["agent-7"]);
    expect(calls()).toBe(6);
    // Not found on a short page (names containing it, none exactly it): the end is proven.
    expect((await port.findByName("gent-7", signal)).deployments).toEqual([]);
    expect(calls()).toBe(8);
    // None containing it: the first page is empty and ends the listing.
    expect((await port.findByName("agent-999", signal)).deployments).toEqual([]);
    expect(calls()).toBe(9);
  });
});

describe("a sharded session's lookups by id read ahead over real HTTP", () => {
  it("a share inherited whole is read a hundred ids a call, by the lookups its reconciles make anyway", async () => {
    const { port, sim } = await portOverSimulator(400);
    const signal = new AbortController().signal;
    const calls = () => sim.requests({ route: LISTING }).length;
    let share = Array.from({ length: 100 }, (_, i) => id(i));
    const session = new ServiceSession(port, {
      clock: new ManualClock({ sleepsInstantly: true }),
      logger: pino({ level: "silent" }),
      listingMaxAgeMs: 60_000,
      share: () => share,
    });
    await session.snapshot.refresh(signal);
    expect(calls()).toBe(1);
    // 300 more inherited, 10 of them recording deployments the service no longer has.
    share = Array.from({ length: 310 }, (_, i) => id(i < 300 ? i : 1000 + i));
    // 16 reconciles look theirs up at once: one call, 84 ids read ahead.
    const first = await Promise.all(
      Array.from({ length: 16 }, (_, i) => session.service.getById(id(100 + i), signal)),
    );
    expect(first.map((d) => d?.name)).toEqual(Array.from({ length: 16 }, (_, i) => `agent-${100 + i}`));
    expect(calls()).toBe(2);
    expect(sim.requests({ route: LISTING })[1]?.url.split("%2C")).toHaveLength(100);
    // The next reconciles find theirs in the snapshot, as a poll's read: no call. (The callers
    // are answered as their items come; the call reads on to the end of its page.)
    await vi.waitFor(() => expect(session.snapshot.byId(id(199), 1)?.name).toBe("agent-199"));
    expect(session.snapshot.byId(id(200))).toBeNull();
    // Two more lookups read the rest: 100 found, then 100 with the 10 gone, whose short page
    // ends the call (no empty page to prove them gone: nobody waits for them).
    await session.service.getById(id(200), signal);
    await session.service.getById(id(300), signal);
    await vi.waitFor(() => expect(session.snapshot.byId(id(299), 1)?.name).toBe("agent-299"));
    expect(calls()).toBe(4);
    // The share was gone through: until it may be again (AHEAD_WALK_MS), a lookup reads nothing ahead.
    await session.service.getById(id(5), signal);
    expect(sim.requests({ route: LISTING })[4]?.url.split("%2C")).toHaveLength(1);
  });
  it("an unsharded session reads nothing ahead: its whole listing holds what it asks", async () => {
    const { port, sim } = await portOverSimulator(50);
    const signal = new AbortController().signal;
    const session = new ServiceSession(port, {
      clock: new ManualClock({ sleepsInstantly: true }),
      logger: pino({ level: "silent" }),
      listingMaxAgeMs: 60_000,
    });
    await session.service.getById(id(3), signal);
    const asked = sim.requests({ route: LISTING }).map((r) => r.url.split("%2C").length);
    expect(asked).toEqual([1]);
  });
});
