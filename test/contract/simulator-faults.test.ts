import { get } from "node:http";
import { gunzipSync } from "node:zlib";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { readDeployment } from "../../src/api/validate.ts";
import { type RunningSimulator, startSimulator } from "../../src/simulator/server.ts";
import { ManualClock } from "../support/manual-clock.ts";
import { until } from "./client-fake-service.ts";
import { call, SIMULATED_EPOCH } from "./simulator-http.ts";

const LIST = "GET /v2/deployments";
const deployments = Array.from({ length: 10 }, (_, i) => ({ name: `agent-${i}`, source: "github" as const }));
const clock = new ManualClock({ start: SIMULATED_EPOCH });
let sim: RunningSimulator;
beforeEach(async () => {
  sim = await startSimulator({ seed: { deployments }, now: clock.now });
});
afterEach(() => sim.close());

const statusOf = async (path = "/v2/deployments") => (await call(sim, "GET", path)).status;

describe("scripted faults", () => {
  it("the next N requests to a route answer the given status, then the service recovers", async () => {
    sim.faults.set({ script: [{ route: LIST, count: 2, status: 503 }] });
    expect(await statusOf("/v2/auth/providers")).toBe(200);
    const failed = await call(sim, "GET", "/v2/deployments");
    expect(failed.status).toBe(503);
    expect(failed.body).toEqual({ detail: "Service Unavailable" });
    expect(sim.faults.get().script).toEqual([{ route: LIST, count: 1, status: 503 }]);
    expect(await statusOf()).toBe(503);
    expect(await statusOf()).toBe(200);
    expect(sim.counters()[LIST]).toEqual({ "503": 2, "200": 1 });
  });

  it("`gatewayAnswers`: each fault answer names a request id of its own, as a gateway's does", async () => {
    sim.faults.set({ gatewayAnswers: true, script: [{ route: LIST, count: 2, status: 503 }] });
    expect((await call(sim, "GET", "/v2/deployments")).body).toEqual({
      detail: "Service Unavailable (request id 1)",
    });
    expect((await call(sim, "GET", "/v2/deployments")).body).toEqual({
      detail: "Service Unavailable (request id 2)",
    });
    expect(await statusOf()).toBe(200);
  });

  it("entries are consumed in order, and a template without a method selects every method", async () => {
    sim.faults.set({
      script: [
        { route: "/v2/deployments/{deployment_id}", count: 1, status: 502 },
        { count: 1, status: 500 },
      ],
    });
    const id = sim.store.list()[0]?.id ?? "";
    expect((await call(sim, "PATCH", `/v2/deployments/${id}`, {})).status).toBe(502);
    expect(await statusOf("/v2/auth/providers")).toBe(500);
    expect((await call(sim, "DELETE", `/v2/deployments/${id}`)).status).toBe(204);
  });

  it("`ids` narrows a rule to the lookups by id of one id, or of several (a batch)", async () => {
    const [a, b] = sim.store.list().map((d) => d.id);
    sim.faults.set({
      errors: [{ status: 500, rate: 1, route: LIST, ids: "many" }],
      latency: [{ ms: 1, route: LIST, ids: "one" }],
    });
    expect(await statusOf(`/v2/deployments?deployment_ids=${a},${b}`)).toBe(500);
    expect(await statusOf(`/v2/deployments?deployment_ids=${a}`)).toBe(200);
    expect(await statusOf("/v2/deployments")).toBe(200);
    // A delay of its own, on single lookups only.
    expect(sim.faults.decide(LIST, "/v2/deployments", `deployment_ids=${a}`).delayMs).toBe(1);
    expect(sim.faults.decide(LIST, "/v2/deployments", "limit=100").delayMs).toBe(0);
    expect(() => sim.faults.set({ latency: [{ ms: 1, ids: "some" as "one" }] })).toThrow();
  });

  it("429 carries Retry-After", async () => {
    sim.faults.set({ script: [{ route: LIST, count: 1, status: 429, retryAfterSeconds: 2 }] });
    const res = await call(sim, "GET", "/v2/deployments");
    expect(res.status).toBe(429);
    expect(res.headers.get("retry-after")).toBe("2");
    expect(res.body).toEqual({ detail: "Too Many Requests" });
  });

  it("a scripted reset drops the connection without an answer", async () => {
    sim.faults.set({ script: [{ route: LIST, count: 1, status: "reset" }] });
    await expect(call(sim, "GET", "/v2/deployments")).rejects.toThrow();
    expect(await statusOf()).toBe(200);
    expect(sim.counters()[LIST]).toEqual({ reset: 1, "200": 1 });
  });

  it("a scripted lost answer handles the request (a write applied), then drops the connection", async () => {
    const REBUILD = "POST /v2/deployments/{deployment_id}/revisions";
    sim.rebuildRoute.mode = "present";
    const id = sim.store.getByName("agent-0")?.id ?? "";
    const before = sim.store.revisions(id)?.length ?? 0;
    sim.faults.set({ script: [{ route: REBUILD, count: 1, status: "lost" }] });
    await expect(call(sim, "POST", `/v2/deployments/${id}/revisions`, {})).rejects.toThrow();
    expect(sim.store.revisions(id)).toHaveLength(before + 1);
    expect(sim.counters()[REBUILD]).toEqual({ reset: 1 });
    expect((await call(sim, "POST", `/v2/deployments/${id}/revisions`, {})).status).toBe(201);
  });
});

describe("rates", () => {
  const sample = async (n: number) => {
    const statuses: number[] = [];
    for (let i = 0; i < n; i++) statuses.push(await statusOf());
    return statuses;
  };

  it("an error rate fails about that share of requests, the same ones for the same seed", async () => {
    sim.faults.set({ seed: 42, errors: [{ route: LIST, status: 503, rate: 0.3, retryAfterSeconds: 1 }] });
    const first = await sample(60);
    const failures = first.filter((s) => s === 503).length;
    expect(failures).toBeGreaterThan(5);
    expect(failures).toBeLessThan(40);
    sim.faults.set({ seed: 42, errors: [{ route: LIST, status: 503, rate: 0.3, retryAfterSeconds: 1 }] });
    expect(await sample(60)).toEqual(first);
    sim.faults.set({ seed: 7, errors: [{ route: LIST, status: 503, rate: 0.3 }] });
    expect(await sample(60)).not.toEqual(first);
  });

  it("a reset rate drops about that share of connections", async () => {
    sim.faults.set({ resets: [{ route: LIST, rate: 0.5 }] });
    let resets = 0;
    for (let i = 0; i < 20; i++) {
      await call(sim, "GET", "/v2/deployments").catch(() => {
        resets++;
      });
    }
    expect(resets).toBeGreaterThan(2);
    expect(resets).toBeLessThan(18);
    expect(sim.counters()[LIST]?.reset).toBe(resets);
  });
});

describe("slowness", () => {
  it("latency holds the answer back: a client with a short timeout gives up, other routes answer", async () => {
    sim.faults.set({ latency: [{ route: LIST, ms: 10_000 }] });
    const slow = fetch(`${sim.url}/v2/deployments`, { signal: AbortSignal.timeout(200) });
    await expect(slow).rejects.toThrow();
    expect(await statusOf("/v2/auth/providers")).toBe(200);
  });

  it("a slow body arrives in several chunks and still parses", async () => {
    sim.faults.set({ slowBody: [{ route: LIST, chunkBytes: 256, delayMs: 5 }] });
    const { chunks, text } = await new Promise<{ chunks: number; text: string }>((resolve, reject) => {
      get(`${sim.url}/v2/deployments`, (res) => {
        let chunks = 0;
        let text = "";
        res.setEncoding("utf8");
        res.on("data", (c: string) => {
          chunks++;
          text += c;
        });
        res.on("end", () => resolve({ chunks, text }));
      }).on("error", reject);
    });
    expect(chunks).toBeGreaterThan(3);
    expect(JSON.parse(text).resources).toHaveLength(10);
  });

  it("closing the simulator does not wait for delayed answers", async () => {
    sim.faults.set({ latency: [{ ms: 60_000 }] });
    const pending = fetch(`${sim.url}/v2/deployments`).catch(() => "dropped");
    // The request is in, held back by the latency: arrived, not answered.
    await until(() => sim.requests({ route: LIST }).some((r) => r.status === undefined));
    await sim.close();
    expect(await pending).toBe("dropped");
    sim = await startSimulator();
  });
});

describe("listing faults", () => {
  it("a listing lag hides deployments created less than lagMs ago", async () => {
    sim.faults.set({ listingLagMs: 1000 });
    const created = await call(sim, "POST", "/v2/deployments", {
      name: "fresh",
      source: "github",
      source_config: {},
      source_revision_config: {},
      secrets: [],
    });
    const listed = async () =>
      (await call(sim, "GET", "/v2/deployments?limit=100")).body.resources.map(
        (d: { name: string }) => d.name,
      );
    expect(await listed()).not.toContain("fresh");
    expect(sim.store.get(created.body.id)?.name).toBe("fresh");
    clock.advance(1000);
    expect(await listed()).toContain("fresh");
  });

  it("a page cap returns fewer items than the limit, with an offset that still advances", async () => {
    sim.faults.set({ pageCap: 3 });
    const page = (await call(sim, "GET", "/v2/deployments?limit=20&offset=2")).body;
    expect(page.resources.map((d: { name: string }) => d.name)).toEqual(["agent-2", "agent-3", "agent-4"]);
    expect(page.offset).toBe(5);
  });

  it("repeat-offset answers the request's own offset", async () => {
    sim.faults.set({ repeatOffset: true });
    const page = (await call(sim, "GET", "/v2/deployments?limit=4&offset=4")).body;
    expect(page.resources).toHaveLength(4);
    expect(page.offset).toBe(4);
  });
});

describe("hostile faults", () => {
  it("oversized: a 200 whose body is exactly `bytes` bytes of JSON, on the matching route only", async () => {
    sim.faults.set({ oversized: [{ route: "GET /v2/auth/providers", bytes: 100_000 }] });
    const res = await fetch(`${sim.url}/v2/auth/providers`);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-length")).toBeNull();
    const text = await res.text();
    expect(Buffer.byteLength(text)).toBe(100_000);
    expect(Object.keys(JSON.parse(text))).toEqual(["padding"]);
    expect((await call(sim, "GET", "/v2/deployments")).body.resources).toHaveLength(10);
    expect(sim.counters()["GET /v2/auth/providers"]).toEqual({ "200": 1 });
  });

  it("oversized with gzip: Content-Encoding gzip, a small body on the wire that inflates to `bytes`", async () => {
    sim.faults.set({ oversized: [{ route: LIST, bytes: 4 * 1024 * 1024, gzip: true }] });
    const { encoding, body } = await new Promise<{ encoding: string | undefined; body: Buffer }>(
      (resolve, reject) => {
        get(`${sim.url}/v2/deployments`, { headers: { "accept-encoding": "gzip" } }, (res) => {
          const chunks: Buffer[] = [];
          res.on("data", (c: Buffer) => chunks.push(c));
          res.on("end", () =>
            resolve({ encoding: res.headers["content-encoding"], body: Buffer.concat(chunks) }),
          );
        }).on("error", reject);
      },
    );
    expect(encoding).toBe("gzip");
    const inflated = gunzipSync(body);
    expect(inflated.length).toBe(4 * 1024 * 1024);
    expect(JSON.parse(inflated.toString("utf8")).padding).toHaveLength(4 * 1024 * 1024 - 14);
    const wire = body.length;
    expect(wire).toBeLessThan(64 * 1024);
  });

  it("oversized stops writing when the client hangs up, and the record says so", async () => {
    sim.faults.set({ oversized: [{ route: LIST, bytes: 1024 * 1024 * 1024 }] });
    // Waited for however long a loaded machine takes (a simulator that never answers fails the
    // test's timeout), not raced against a timer of its own.
    await new Promise<void>((resolve) => {
      const req = get(`${sim.url}/v2/deployments`, (res) => {
        res.once("data", () => {
          req.destroy();
          resolve();
        });
      });
      req.on("error", () => {});
      req.on("close", resolve);
    });
    await until(() => sim.requests({ route: LIST })[0]?.closedEarly === true);
    expect(sim.requests({ route: LIST })).toMatchObject([{ status: "200", closedEarly: true }]);
  });

  it("endlessListing: every page is full of distinct, valid deployments, and a next page always exists", async () => {
    sim.faults.set({ endlessListing: { pageDelayMs: 0 } });
    const pages = [0, 100, 5_000_000].map(async (offset) => {
      const page = (await call(sim, "GET", `/v2/deployments?limit=100&offset=${offset}`)).body;
      expect(page.offset).toBe(offset + 100);
      return page.resources as { id: string; name: string }[];
    });
    const items = (await Promise.all(pages)).flat();
    expect(items).toHaveLength(300);
    expect(new Set(items.map((d) => d.id)).size).toBe(300);
    expect((await Promise.all(items.map(readDeployment))).map((d) => d.ok)).not.toContain(false);
    // Filters are ignored: a search by name never ends either.
    expect(
      (await call(sim, "GET", "/v2/deployments?name_contains=nothing&limit=7")).body.resources,
    ).toHaveLength(7);
  });

  it("endlessListing: each page is held back by pageDelayMs, other routes answer", async () => {
    sim.faults.set({ endlessListing: { pageDelayMs: 10_000 } });
    await expect(fetch(`${sim.url}/v2/deployments`, { signal: AbortSignal.timeout(200) })).rejects.toThrow();
    expect(await statusOf("/v2/auth/providers")).toBe(200);
  });

  it("rejects malformed hostile faults with a 422 naming the field", async () => {
    const small = await call(sim, "PUT", "/_sim/faults", { oversized: [{ bytes: 3 }] });
    expect(small.status).toBe(422);
    expect(small.body.detail[0].loc).toEqual(["body", "oversized", 0, "bytes"]);
    expect(() => sim.faults.set({ endlessListing: { pageDelayMs: -1 } })).toThrow(
      /endlessListing\.pageDelayMs/,
    );
    const put = await call(sim, "PUT", "/_sim/faults", { endlessListing: { pageDelayMs: 5 } });
    expect(put.body).toEqual({ endlessListing: { pageDelayMs: 5 } });
  });
});

describe("/_sim/faults", () => {
  it("PUT sets, GET shows, DELETE clears; faults never touch /_sim/ itself", async () => {
    const put = await call(sim, "PUT", "/_sim/faults", { script: [{ count: 5, status: 500 }] });
    expect(put.status).toBe(200);
    expect((await call(sim, "GET", "/_sim/faults")).body).toEqual({ script: [{ count: 5, status: 500 }] });
    expect(await statusOf()).toBe(500);
    expect((await call(sim, "GET", "/_sim/faults")).body.script[0].count).toBe(4);
    expect((await call(sim, "DELETE", "/_sim/faults")).status).toBe(204);
    expect(await statusOf()).toBe(200);
  });

  it("rejects malformed faults with a 422 naming the field, leaving the faults as they were", async () => {
    sim.faults.set({ pageCap: 2 });
    const res = await call(sim, "PUT", "/_sim/faults", { errors: [{ status: 503, rate: 2 }] });
    expect(res.status).toBe(422);
    expect(res.body.detail[0].loc).toEqual(["body", "errors", 0, "rate"]);
    expect(sim.faults.get()).toEqual({ pageCap: 2 });
    expect(() => sim.faults.set({ latency: [{ ms: -1 }] })).toThrow(/latency\[0\]\.ms/);
  });
});
