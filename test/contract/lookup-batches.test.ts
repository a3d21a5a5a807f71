/**
 * A connection's lookups by id made at the same moment go out as one `deployment_ids` call, over
 * real HTTP against the simulator, each caller getting what the single lookup would give it: its
 * deployment, none, or the unreadable item that may be its own.
 */
import { afterEach, describe, expect, it } from "vitest";
import { ServiceClient } from "../../src/api/client.ts";
import { deploymentsPort } from "../../src/connection/service-port.ts";
import { UnreadableDeploymentError } from "../../src/reconcile/service/lookup-errors.ts";
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
