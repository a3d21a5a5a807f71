/**
 * A request leaves nothing on the caller's signal. The operator passes each call the signal of
 * its reconcile, which is derived from the process's own (a long-lived signal): a listener left on
 * it holds the whole request (its socket, its buffers, the answer) for as long as that signal
 * lives, so every create or PATCH would add to the heap for good. Checked against the simulator
 * over loopback, for every kind of call, answered, failed and timed out.
 */
import { getEventListeners } from "node:events";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ServiceClient } from "../../src/api/client.ts";
import { type RunningSimulator, startSimulator } from "../../src/simulator/server.ts";

let sim: RunningSimulator;
beforeAll(async () => {
  sim = await startSimulator({ timing: { readyAfterMs: 0, revisionActiveAfterMs: 0, deleteAfterMs: 0 } });
});
afterAll(async () => {
  await sim.close();
});

const listeners = (signal: AbortSignal) => getEventListeners(signal, "abort").length;

describe("the caller's signal after a call", () => {
  it("carries no listener once a write, a read or a listing ended", async () => {
    const lifetime = new AbortController();
    const signal = lifetime.signal;
    const client = new ServiceClient({ baseUrl: sim.url, retries: 0 });
    const created = await client.createDeployment({ name: "signals", source: "external_docker" }, { signal });
    expect(listeners(signal)).toBe(0);
    await client.patchDeployment(
      created.id,
      { source_revision_config: { image_uri: "registry.test/app:2" } },
      { signal },
    );
    expect(listeners(signal)).toBe(0);
    await client.getDeployment(created.id, { signal });
    await client.listAllDeployments({}, { signal });
    await client.listProviders({ signal });
    expect(listeners(signal)).toBe(0);
    await client.deleteDeployment(created.id, { signal });
    expect(listeners(signal)).toBe(0);
    // Calls that waited for a token of the rate limit first.
    const paced = new ServiceClient({ baseUrl: sim.url, retries: 0, qps: 20, burst: 1 });
    await Promise.all([0, 1, 2].map(() => paced.listProviders({ signal })));
    expect(listeners(signal)).toBe(0);
  });

  it("carries no listener after a call the service refused or that timed out", async () => {
    const lifetime = new AbortController();
    const signal = lifetime.signal;
    const client = new ServiceClient({ baseUrl: sim.url, retries: 0, timeoutMs: 200 });
    await expect(
      client.patchDeployment(
        "00000000-0000-4000-8000-000000000000",
        { source_revision_config: { image_uri: "registry.test/app:3" } },
        { signal },
      ),
    ).rejects.toThrow();
    expect(listeners(signal)).toBe(0);
    sim.faults.set({ latency: [{ route: "POST /v2/deployments", ms: 2_000 }] });
    await expect(
      client.createDeployment({ name: "slow-signals", source: "external_docker" }, { signal }),
    ).rejects.toThrow();
    sim.faults.set({});
    expect(listeners(signal)).toBe(0);
  });
});

describe("an answer that ends before the request's body was written", () => {
  it("leaves no listener on the caller's signal (the server answered without reading the body)", async () => {
    const { createServer } = await import("node:http");
    // A valid deployment, as the simulator answers a create.
    const client = new ServiceClient({ baseUrl: sim.url, retries: 0 });
    const answer = JSON.stringify(
      await client.createDeployment({ name: "early", source: "external_docker" }),
    );
    const early = createServer({ keepAlive: true }, (req, res) => {
      // Answered at once, the body left unread: the request's own 'finish' comes after the answer.
      res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(answer) });
      res.end(answer);
      req.resume();
    });
    await new Promise<void>((resolve) => early.listen(0, "127.0.0.1", resolve));
    const address = early.address();
    if (address === null || typeof address === "string") throw new Error("no port");
    try {
      const lifetime = new AbortController();
      const signal = lifetime.signal;
      const earlyClient = new ServiceClient({ baseUrl: `http://127.0.0.1:${address.port}`, retries: 0 });
      const big = "x".repeat(512 * 1024);
      for (let i = 0; i < 8; i++)
        await earlyClient.createDeployment(
          { name: `early-${i}`, source: "external_docker", secrets: [{ name: "BIG", value: big }] },
          { signal },
        );
      expect(listeners(signal)).toBe(0);
    } finally {
      early.closeAllConnections();
      await new Promise((resolve) => early.close(resolve));
    }
  });
});
