/**
 * One client, one rate limit, against the simulator over loopback (the client on a clock the
 * test moves, where the times are the point): a 429 with Retry-After pauses every caller of the client (not only the one that received it), work
 * resumes at the configured rate after the window, and a listing retries a page after a 429 or a
 * 5xx even when single calls are not retried (the operator's `retries: 0`). A request that took
 * its token before the 429 arrived is held at the moment it goes on the wire: the service's own
 * arrival times show none inside the window.
 */
import { connect, createServer, type Server, type Socket } from "node:net";
import { performance } from "node:perf_hooks";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ServiceClient } from "../../src/api/client.ts";
import type { ServiceError } from "../../src/api/errors.ts";
import { type RunningSimulator, startSimulator } from "../../src/simulator/server.ts";
import { createTestCa } from "../support/certificates.ts";
import { ManualClock } from "../support/manual-clock.ts";

let sim: RunningSimulator;
/** When each request reached the simulator's handlers (performance.now()). */
let arrivals: number[] = [];

beforeAll(async () => {
  sim = await startSimulator({
    timing: { readyAfterMs: 0, revisionActiveAfterMs: 0, deleteAfterMs: 0 },
    seed: {
      deployments: Array.from({ length: 5 }, (_, i) => ({
        name: `agent-${i}`,
        source: "external_docker" as const,
      })),
    },
    onRequest: () => arrivals.push(performance.now()),
  });
});
afterAll(async () => {
  await sim.close();
});

describe("a 429 pauses the whole client", () => {
  it("no request of any caller inside the Retry-After window; then work resumes at the configured rate", async () => {
    const qps = 10;
    // Time stands still but when the test moves it, and it moves it only while every worker
    // waits on the client's clock (none has a request on the wire): each answer's time is when
    // its request left the client, whatever the load of the machine.
    const clock = new ManualClock();
    const sent: number[] = [];
    let rateLimitedAt: number | undefined;
    // The operator's settings: no client retries (the controller retries), one shared bucket.
    const client = new ServiceClient({
      baseUrl: sim.url,
      retries: 0,
      qps,
      burst: 2,
      clock,
      onResponse: ({ status }) => {
        if (status === 429) rateLimitedAt ??= clock.now();
        else sent.push(clock.now());
      },
    });
    sim.faults.set({
      script: [{ route: "GET /v2/auth/providers", count: 1, status: 429, retryAfterSeconds: 1 }],
    });
    // Four workers calling as fast as the client lets them, for 2.5 s of the client's time.
    const stopAt = 2500;
    let working = 0;
    const worker = async (call: () => Promise<unknown>) => {
      working++;
      try {
        while (clock.now() < stopAt) {
          try {
            await call();
          } catch (error) {
            if ((error as ServiceError).kind !== "rate_limited") throw error;
          }
        }
      } finally {
        working--;
      }
    };
    let finished = false;
    const workers = Promise.all([
      worker(() => client.listProviders()),
      worker(() => client.listAllDeployments()),
      worker(() => client.listAllDeployments({ name_contains: "agent" })),
      worker(() => client.listProviders()),
    ]).finally(() => {
      finished = true;
    });
    // Each worker left waits on one timer of the clock (a token, the pause, a page's retry)
    // once none is on the wire: then time moves on to the first of them.
    while (!finished) {
      if (working > 0 && clock.pending === working)
        clock.advance((clock.nextAt ?? clock.now()) - clock.now());
      await new Promise((resolve) => setImmediate(resolve));
    }
    await workers;
    sim.faults.clear();
    expect(rateLimitedAt).toBeDefined();
    const windowStart = rateLimitedAt ?? 0;
    const windowEnd = windowStart + 1000;
    // Those sent at the 429's instant were on the wire with it.
    const inside = sent.filter((t) => t > windowStart && t < windowEnd);
    expect(inside).toEqual([]);
    const after = sent.filter((t) => t >= windowEnd).sort((a, b) => a - b);
    expect(after.length).toBeGreaterThan(3);
    // Resumed at the configured rate, not in a burst (the bucket was drained to one token, and
    // none came during the pause): a token's time, 1000 / qps ms, at least between two sends.
    const gaps = after.slice(1).map((t, i) => t - (after[i] ?? 0));
    expect(Math.min(...gaps)).toBeGreaterThanOrEqual(1000 / qps);
  });

  it("a Retry-After longer than the client waits fails every caller at once with rate_limited", async () => {
    const client = new ServiceClient({
      baseUrl: sim.url,
      retries: 0,
      maxRetryAfterMs: 1000,
      clock: new ManualClock(),
    });
    sim.faults.set({ script: [{ count: 1, status: 429, retryAfterSeconds: 30 }] });
    arrivals = [];
    const first = (await client.listProviders().catch((e) => e)) as ServiceError;
    expect(first.kind).toBe("rate_limited");
    const other = (await client.listAllDeployments().catch((e) => e)) as ServiceError;
    expect(other).toMatchObject({ kind: "rate_limited" });
    expect(other.retryAfterSeconds).toBe(30);
    expect(arrivals).toEqual([]);
    sim.faults.clear();
  });
});

/**
 * A TCP relay on loopback to `port` that holds the server's first bytes (its side of the TLS
 * handshake) on every connection but the first until `release()`: the requests on those
 * connections have their token and wait for their handshake, as requests do behind a new
 * connection. What the test waits for is said by when it releases, not by a time.
 */
async function startHandshakeDelay(
  port: number,
): Promise<{ url: string; release(): void; close(): Promise<void> }> {
  const sockets = new Set<Socket>();
  const held = new Set<() => void>();
  let released = false;
  let accepted = 0;
  const server: Server = createServer((downstream) => {
    const hold = accepted++ > 0;
    const upstream = connect(port, "127.0.0.1");
    for (const s of [downstream, upstream]) {
      sockets.add(s);
      s.on("error", () => {});
      s.on("close", () => {
        sockets.delete(s);
        downstream.destroy();
        upstream.destroy();
      });
    }
    downstream.pipe(upstream);
    if (!hold) upstream.pipe(downstream);
    else {
      const pass = () => {
        upstream.pipe(downstream);
        upstream.resume();
      };
      if (released) pass();
      else {
        upstream.pause();
        held.add(pass);
      }
    }
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address() as import("node:net").AddressInfo;
  return {
    url: `https://127.0.0.1:${address.port}`,
    release: () => {
      released = true;
      for (const pass of held) pass();
      held.clear();
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

describe("a pause holds at the moment of sending", () => {
  it("requests that took their token before the 429 reach the service only after the window, by its own arrival times", async () => {
    const ca = await createTestCa();
    const tlsSim = await startSimulator({
      timing: { readyAfterMs: 0, revisionActiveAfterMs: 0, deleteAfterMs: 0 },
      tls: await ca.leaf(),
    });
    const relay = await startHandshakeDelay(Number(new URL(tlsSim.url).port));
    try {
      const client = new ServiceClient({
        baseUrl: relay.url,
        caBundle: ca.cert,
        retries: 0,
        qps: 100,
        burst: 20,
      });
      tlsSim.faults.set({
        script: [{ route: "GET /v2/auth/providers", count: 1, status: 429, retryAfterSeconds: 1 }],
      });
      // Twelve concurrent calls take their tokens at once; the first connection's answers the 429
      // while the eleven others are still in their handshakes, which go on once that call has
      // settled (the only one that can: the others wait for their handshakes).
      const calls = Array.from({ length: 12 }, () => client.listProviders());
      void Promise.race(calls.map((call) => call.catch(() => undefined))).then(() => relay.release());
      const results = await Promise.allSettled(calls);
      const arrivals = tlsSim.requests({ route: "GET /v2/auth/providers" });
      const limited = arrivals.filter((r) => r.status === "429");
      expect(limited).toHaveLength(1);
      const pausedAt = limited[0]?.at ?? 0;
      const inside = arrivals.filter((r) => r.status !== "429" && r.at >= pausedAt && r.at < pausedAt + 1000);
      expect(inside).toEqual([]);
      // Held, not failed: the eleven went out after the window, as many times as called.
      expect(results.filter((r) => r.status === "fulfilled")).toHaveLength(11);
      expect(arrivals.filter((r) => r.status === "200")).toHaveLength(11);
    } finally {
      await relay.close();
      await tlsSim.close();
    }
  });
});

describe("a listing retries a page", () => {
  it.each([429, 500, 503])("after a %i, although single calls are not retried", async (status) => {
    const client = new ServiceClient({
      baseUrl: sim.url,
      retries: 0,
      pageRetries: 3,
      retryBaseDelayMs: 10,
    });
    sim.resetCounters();
    // One page fails once; the listing goes on instead of giving up the pass.
    sim.faults.set({
      script: [
        {
          route: "GET /v2/deployments",
          count: 1,
          status,
          ...(status === 429 ? { retryAfterSeconds: 0 } : {}),
        },
      ],
    });
    const again = await client.listAllDeployments({}, { pageSize: 2 });
    expect(again.map((d) => d.name).sort()).toEqual(["agent-0", "agent-1", "agent-2", "agent-3", "agent-4"]);
    // Pages of 2, 2 and 1 item, then the empty page that ends the listing; one of them twice.
    expect(sim.counters()["GET /v2/deployments"]).toEqual({ [String(status)]: 1, "200": 4 });
    // A single call is still not retried: the controller does that.
    sim.faults.set({ script: [{ route: "GET /v2/auth/providers", count: 1, status }] });
    await expect(client.listProviders()).rejects.toMatchObject({ status });
    sim.faults.clear();
  });

  it("gives up after pageRetries", async () => {
    const client = new ServiceClient({ baseUrl: sim.url, retries: 0, pageRetries: 2, retryBaseDelayMs: 5 });
    sim.resetCounters();
    sim.faults.set({ script: [{ route: "GET /v2/deployments", count: 5, status: 503 }] });
    await expect(client.listAllDeployments()).rejects.toMatchObject({ kind: "unavailable" });
    expect(sim.counters()["GET /v2/deployments"]).toEqual({ "503": 3 });
    sim.faults.clear();
  });
});
