/**
 * The bound on every answer of the service, over real HTTP against the simulator's hostile
 * faults: a gzip bomb and a plain huge body are cut off while they arrive, on a listing page, a
 * read by id and the providers probe, and fail `too_large` at once, without a retry; an honest
 * listing of 100 deployments with every field filled still comes through under the default.
 */
import { gzipSync } from "node:zlib";
import { afterEach, describe, expect, it } from "vitest";
import { JsonWeigher, OWNER_SHARE, ResponseMemory } from "../../src/api/budgets.ts";
import { ServiceClient } from "../../src/api/client.ts";
import { DEFAULT_MAX_RESPONSE_BYTES, type ServiceError } from "../../src/api/errors.ts";
import { type RunningSimulator, startSimulator } from "../../src/simulator/server.ts";
import { send, startFakeService, until } from "./client-fake-service.ts";
import { fullDeployment } from "./full-deployment.ts";

const MiB = 1024 * 1024;
const ID = "0b6f3c2e-7d2a-4c59-9b8e-3f1a2b4c5d6e";
/** V8's heap limit under the shipped `--max-old-space-size=96 --max-semi-space-size=1`. */
const SHIPPED_HEAP_LIMIT = 99 * MiB;

let sim: RunningSimulator | undefined;
let closeService: (() => Promise<void>) | undefined;
afterEach(async () => {
  await sim?.close();
  await closeService?.();
  sim = undefined;
  closeService = undefined;
});

/** A client with the default bound that would retry anything transient, many times. */
const clientOf = (url: string, extra: Partial<ConstructorParameters<typeof ServiceClient>[0]> = {}) =>
  new ServiceClient({ baseUrl: url, retries: 4, pageRetries: 4, retryBaseDelayMs: 1, ...extra });

const calls = {
  "a listing page": {
    route: "GET /v2/deployments",
    run: (c: ServiceClient) => c.listAllDeployments(),
  },
  "a read by id": {
    route: "GET /v2/deployments",
    run: (c: ServiceClient) => c.getDeployment(ID),
  },
  "the providers probe": {
    route: "GET /v2/auth/providers",
    run: (c: ServiceClient) => c.listProviders(),
  },
} as const;

const bodies = [
  { body: "a gzip bomb of 256 MiB", bytes: 256 * MiB, gzip: true },
  { body: "a plain body of 200 MiB", bytes: 200 * MiB, gzip: false },
];

describe("an answer past --max-response-bytes", () => {
  const table = bodies.flatMap((b) => Object.entries(calls).map(([call, c]) => ({ ...b, call, ...c })));

  it.each(table)("$body on $call: too_large, cut off while it arrives, never retried", async (t) => {
    sim = await startSimulator();
    sim.faults.set({ oversized: [{ route: t.route, bytes: t.bytes, gzip: t.gzip }] });
    const error = (await t.run(clientOf(sim.url)).catch((e: unknown) => e)) as ServiceError;

    expect(error.name).toBe("ServiceError");
    expect(error.kind).toBe("too_large");
    expect(error.retryable).toBe(false);
    expect(error.message).toContain(
      `the answer was larger than ${DEFAULT_MAX_RESPONSE_BYTES} bytes (--max-response-bytes / DMS_MAX_RESPONSE_BYTES)`,
    );
    // One request: a repeat would bring the same answer.
    expect(sim.counters()[t.route]).toEqual({ "200": 1 });
    // The server saw the client hang up before it had written the whole body.
    await until(() => sim?.requests({ route: t.route })[0]?.closedEarly === true);
  });

  it("an error status with a huge body is cut off the same way, not retried as a 503 would be", async () => {
    const service = await startFakeService((_req, res) => {
      res.writeHead(503, { "content-type": "application/json", "content-encoding": "gzip" });
      res.end(gzipSync(Buffer.alloc(16 * MiB, " ")));
    });
    closeService = service.close;
    const error = (await clientOf(service.url)
      .listProviders()
      .catch((e: unknown) => e)) as ServiceError;
    expect(error.kind).toBe("too_large");
    expect(service.requests).toHaveLength(1);
  });

  it("a Content-Length past the bound fails before a byte of the body is read", async () => {
    let closedEarly = false;
    const service = await startFakeService((_req, res) => {
      res.writeHead(200, { "content-type": "application/json", "content-length": 64 * MiB });
      res.once("close", () => {
        closedEarly = !res.writableFinished;
      });
      // Headers only: a client waiting for the body would wait for its timeout.
      res.flushHeaders();
    });
    closeService = service.close;
    const error = (await clientOf(service.url, { timeoutMs: 60_000 })
      .listProviders()
      .catch((e: unknown) => e)) as ServiceError;
    expect(error.kind).toBe("too_large");
    await until(() => closedEarly);
  });

  it("a smaller bound given by the setting is the one applied and named", async () => {
    sim = await startSimulator();
    sim.faults.set({ oversized: [{ route: "GET /v2/auth/providers", bytes: 200_000 }] });
    const error = (await clientOf(sim.url, { maxResponseBytes: 100_000 })
      .listProviders()
      .catch((e: unknown) => e)) as ServiceError;
    expect(error.kind).toBe("too_large");
    expect(error.detail).toContain("larger than 100000 bytes");
    // Under the bound, the same fault's answer is read whole (and then fails as not a list).
    sim.faults.set({ oversized: [{ route: "GET /v2/auth/providers", bytes: 50_000 }] });
    const whole = (await clientOf(sim.url, { maxResponseBytes: 100_000 })
      .listProviders()
      .catch((e: unknown) => e)) as ServiceError;
    expect(whole.kind).toBe("bad_response");
  });
});

describe("the memory the answers in flight may take together", () => {
  it("refuses an answer whose parsed form alone would take more than the budget, though few bytes", async () => {
    // 300 KB of `{},` would be over 6 MB of objects once parsed.
    const body = `[${Array(100_000).fill("{}").join(",")}]`;
    const service = await startFakeService((_req, res) => {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(body);
    });
    closeService = service.close;
    const memory = new ResponseMemory(4 * MiB);
    const error = (await clientOf(service.url, { responseMemory: memory })
      .listProviders()
      .catch((e: unknown) => e)) as ServiceError;
    expect(error.kind).toBe("too_large");
    expect(error.detail).toContain(`more than ${4 * MiB} bytes of memory once parsed`);
    expect(memory.held).toBe(0);
  });

  it("lets an answer wait for room while another holds it, then reads it", async () => {
    const service = await startFakeService((_req, res) => send(res, 200, []));
    closeService = service.close;
    const memory = new ResponseMemory(1000);
    const other = memory.open();
    await other.take(999);
    const waiting = clientOf(service.url, { responseMemory: memory }).listProviders();
    await until(() => service.requests.length === 1);
    other.close();
    expect(await waiting).toEqual([]);
    expect(memory.held).toBe(0);
  });
});

describe("an answer refused only because others hold the room", () => {
  it("is read again once they are done: a read crowded out is retried, not failed", async () => {
    let release: () => void = () => {};
    const service = await startFakeService((_req, res) => {
      if (service.requests.length > 1) return send(res, 200, []);
      // The first answer comes in two parts; another answer takes the room in between.
      res.writeHead(200, { "content-type": "application/json" });
      res.write(`[${" ".repeat(1000)}`);
      release = () => res.end(`${" ".repeat(1000)}]`);
    });
    closeService = service.close;
    const memory = new ResponseMemory(10_000);
    const answer = clientOf(service.url, { responseMemory: memory }).listProviders();
    await until(() => memory.held > 0);
    const other = memory.open();
    await other.take(8_000);
    release();
    await until(() => service.requests.length === 2);
    other.close();
    expect(await answer).toEqual([]);
    expect(memory.held).toBe(0);
  });
});

describe("an honest answer under the default", () => {
  it("a listing of 100 deployments with every field filled comes through; the largest page has room to spare", async () => {
    const deployments = Array.from({ length: 100 }, (_, i) => fullDeployment(i));
    sim = await startSimulator({ seed: { deployments } });
    const listed = await clientOf(sim.url).listAllDeployments();
    expect(listed.map((d) => d.name)).toEqual(deployments.map((d) => d.name));
    expect(listed[0]?.source_config.resource_spec?.sidecars).toHaveLength(2);

    const page = Buffer.from(await (await fetch(`${sim.url}/v2/deployments?limit=100`)).arrayBuffer());
    // The default is at least twice the largest honest page (4.1 MB when measured)…
    expect(page.length * 2).toBeLessThanOrEqual(DEFAULT_MAX_RESPONSE_BYTES);
    // …and a page of that shape as large as the default fits the shipped heap's budget alone.
    const weightAtDefault = (new JsonWeigher().weigh(page) / page.length) * DEFAULT_MAX_RESPONSE_BYTES;
    expect(weightAtDefault).toBeLessThan(SHIPPED_HEAP_LIMIT / 3);
    // …and the honest page itself fits one tenant's share of that budget.
    expect(new JsonWeigher().weigh(page)).toBeLessThan((SHIPPED_HEAP_LIMIT / 3) * OWNER_SHARE);
  });
});

describe("the answers' memory, shared by tenants", () => {
  it("reads another namespace's answer while one namespace's connections hold answers that trickle", async () => {
    const memory = new ResponseMemory(10_000);
    const trickling: Array<() => void> = [];
    // Team a: three ServiceConnections (one owner: its namespace) to a service that sends 3,300
    // bytes of an answer, then stalls (three would take all 10,000).
    const hostile = await startFakeService((_req, res) => {
      res.writeHead(200, { "content-type": "application/json" });
      res.write(`[${" ".repeat(3_300)}`);
      trickling.push(() => res.end("]"));
    });
    const healthy = await startFakeService((_req, res) => send(res, 200, []));
    try {
      const owned = (url: string, owner: string) =>
        clientOf(url, { retries: 0, timeoutMs: 60_000, responseMemory: memory, responseMemoryOwner: owner });
      const stalled = [0, 1, 2].map(() =>
        owned(hostile.url, "namespace/team-a")
          .listProviders()
          .catch((e: unknown) => e),
      );
      await until(() => trickling.length === 3);
      await until(() => memory.held > 0);
      // Team b's answer is read while team a's stall (they end only at their timeout, 60 s: past
      // the test's own; on a budget first come, first served it would wait for them).
      expect(await owned(healthy.url, "namespace/team-b").listProviders()).toEqual([]);
      // Team a's share (half) holds one of its answers; the others wait for it, holding nothing.
      expect(memory.held).toBeLessThanOrEqual(5_000);
      for (const end of trickling.splice(0)) end();
      await Promise.all(stalled);
      expect(memory.held).toBe(0);
    } finally {
      for (const end of trickling.splice(0)) end();
      await hostile.close();
      await healthy.close();
    }
  });
});
