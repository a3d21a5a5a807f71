/**
 * What a tenant's own server may answer to hurt the operator, through the client over loopback:
 * a write's answer cut off at a bound (it was applied: never repeated blindly), JSON nested past
 * what the process can walk (refused as it arrives, naming the bound, never a stack overflow),
 * and a redirect (never followed, wherever it points).
 */
import { pino } from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { ServiceClient } from "../../src/api/client.ts";
import { MAX_ANSWER_DEPTH } from "../../src/api/exchange.ts";
import { serviceConfigFrom } from "../../src/config.ts";
import { probeConnection } from "../../src/connection/probe.ts";
import { failureOf } from "../../src/reconcile/failures.ts";
import { Rebuilder } from "../../src/reconcile/service/rebuilder.ts";
import { RuntimeMetrics } from "../../src/runtime/metrics.ts";
import { serviceConnector } from "../../src/wiring/service-connections.ts";
import { ManualClock } from "../support/manual-clock.ts";
import {
  deployment,
  type FakeService,
  type Handler,
  rejection,
  startFakeService,
} from "./client-fake-service.ts";

const DEPLOYMENT_ID = "0b6f3c2e-7d2a-4c59-9b8e-3f1a2b4c5d6e";
const REVISION_ID = "22222222-2222-4222-8222-222222222222";
const signal = new AbortController().signal;

const services: FakeService[] = [];
afterEach(async () => {
  await Promise.all(services.splice(0).map((s) => s.close()));
});

async function serve(handler: Handler): Promise<FakeService> {
  const service = await startFakeService(handler);
  services.push(service);
  return service;
}

async function clientOf(handler: Handler, maxResponseBytes?: number): Promise<ServiceClient> {
  const service = await serve(handler);
  return new ServiceClient({
    baseUrl: service.url,
    retries: 0,
    qps: 10_000,
    burst: 1000,
    ...(maxResponseBytes === undefined ? {} : { maxResponseBytes }),
  });
}

/** Answers every request with `status` and the JSON text `body`, as given. */
const answering =
  (status: number, body: string): Handler =>
  (_req, res) => {
    res.writeHead(status, { "content-type": "application/json" });
    res.end(body);
  };

/** The connection probe's verdict on the service at `url`. */
async function probed(url: string) {
  const parsed = serviceConfigFrom({ baseUrl: url, apiKey: "k-0123456789", retries: 0 }, {});
  if (!parsed.ok) throw new Error(parsed.problems.join("; "));
  const connect = serviceConnector(pino({ level: "silent" }), new RuntimeMetrics({ processMetrics: false }));
  return probeConnection(
    connect(parsed.config, "ServiceConnection/team-a/prod"),
    parsed.config,
    "k-0123456789",
    signal,
    {
      clock: new ManualClock(),
      deadlineMs: 10_000,
    },
  );
}

/** `depth` arrays, one inside the other. */
const nested = (depth: number) => "[".repeat(depth) + "]".repeat(depth);

describe("a write whose answer is cut off at a bound", () => {
  const big = JSON.stringify({ ...deployment(1), padding: "x".repeat(4096) });

  it("is a rebuild that may have built: not repeated", async () => {
    let posts = 0;
    const client = await clientOf((req, res, n) => {
      posts++;
      return answering(201, big)(req, res, n);
    }, 1024);
    const rebuilder = new Rebuilder(
      { createRevision: (id, s) => client.createRevision(id, { signal: s }) },
      pino({ level: "silent" }),
    );
    const outcome = await rebuilder.rebuild(DEPLOYMENT_ID, signal);
    expect(outcome).toMatchObject({ kind: "unconfirmed" });
    expect(posts).toBe(1);
  });

  it("is a create and a PATCH that may have been applied: the create's intent is kept", async () => {
    const client = await clientOf(answering(201, big), 1024);
    const created = await rejection(client.createDeployment({ name: "agent", source: "internal_docker" }));
    expect(created).toMatchObject({ kind: "too_large", maybeApplied: true });
    expect(failureOf(created, []).createRefused).toBeUndefined();
    const patched = await rejection(
      client.patchDeployment(DEPLOYMENT_ID, { source_config: { build_on_push: false } }),
    );
    expect(patched).toMatchObject({ kind: "too_large", maybeApplied: true });
  });

  it("is not said of a read", async () => {
    const client = await clientOf(answering(200, big), 1024);
    expect(await rejection(client.listAllDeployments())).toMatchObject({
      kind: "too_large",
      maybeApplied: false,
    });
  });
});

describe("an answer nested deeper than the process walks", () => {
  const deep = nested(20_000);
  const item = JSON.stringify(deployment(1)).replace(/}$/, `,"extra":${deep}}`);

  it.each([
    ["an error's detail", 400, `{"detail":[${deep}]}`],
    ["a listing's item", 200, `{"resources":[${item}],"offset":1}`],
    ["a deployment a write answered", 201, item],
  ])("%s: refused as it arrives, naming the bound", async (_what, status, body) => {
    const client = await clientOf(answering(status, body));
    const calls = [
      () => client.listAllDeployments(),
      () => client.createDeployment({ name: "agent", source: "internal_docker" }),
      () => client.listRevisions(DEPLOYMENT_ID),
      () => client.getRevision(DEPLOYMENT_ID, REVISION_ID),
      () => client.listProviders(),
      () => client.listRepos(DEPLOYMENT_ID),
    ];
    for (const call of calls) {
      const error = await rejection(call());
      expect(error.kind).toBe("too_large");
      expect(error.detail).toContain(`deeper than ${MAX_ANSWER_DEPTH} levels`);
    }
  });

  it("fails the connection's probe ResponseTooLarge, naming the bound", async () => {
    const service = await serve(answering(200, `[${deep}]`));
    const verdict = await probed(service.url);
    expect(verdict).toMatchObject({ ok: false, reason: "ResponseTooLarge" });
    expect(JSON.stringify(verdict)).toContain(`deeper than ${MAX_ANSWER_DEPTH} levels`);
  });

  it("reads an answer nested as deep as the bound, and a string full of brackets", async () => {
    const within = `{"resources":[],"offset":0,"x":${nested(MAX_ANSWER_DEPTH - 1)},"s":"${"[".repeat(50_000)}"}`;
    const client = await clientOf(answering(200, within));
    expect(await client.listAllDeployments()).toEqual([]);
  });
});

describe("a page of more items than the limit asked", () => {
  it("is read to the limit: 100,000 unreadable items cost a page's worth, not a hundred thousand descriptions", async () => {
    const page = JSON.stringify({ resources: Array.from({ length: 100_000 }, () => ({})), offset: 100_000 });
    const client = await clientOf((req, res, n) =>
      answering(200, req.query.get("offset") === "0" ? page : `{"resources":[],"offset":0}`)(req, res, n),
    );
    let told = 0;
    expect(await client.listAllDeployments({}, { onUnreadable: () => told++ })).toEqual([]);
    expect(told).toBe(100);
  }, 60_000);

  it("is read to the limit in a revision listing too (the revisions command)", async () => {
    const page = JSON.stringify({ resources: Array.from({ length: 100_000 }, () => ({})), offset: 100_000 });
    const client = await clientOf((req, res, n) =>
      answering(200, req.query.get("offset") === "0" ? page : `{"resources":[],"offset":0}`)(req, res, n),
    );
    const listing = await client.listRevisions(DEPLOYMENT_ID);
    expect(listing.rows).toHaveLength(100);
    expect(listing.truncated).toBe(false);
  }, 60_000);

  it("asks for the rest from where it stopped: a service ignoring the limit is still read whole", async () => {
    const all = Array.from({ length: 250 }, (_, i) => deployment(i + 1));
    const service = await serve((req, res, n) => {
      const offset = Number(req.query.get("offset"));
      answering(200, JSON.stringify({ resources: all.slice(offset), offset: all.length }))(req, res, n);
    });
    const client = new ServiceClient({ baseUrl: service.url, retries: 0, qps: 10_000, burst: 1000 });
    const listed = await client.listAllDeployments({}, { pageSize: 100 });
    expect(listed.map((d) => d.name)).toEqual(all.map((d) => d.name));
    expect(service.requests.map((r) => r.query.get("offset"))).toEqual(["0", "100", "200", "250"]);
  });
});

describe("a redirect", () => {
  it.each([301, 302, 303, 307, 308])(
    "%i to another loopback port is not followed: the call fails there",
    async (status) => {
      const elsewhere = await serve(answering(200, `{"resources":[],"offset":0}`));
      const client = await clientOf((_req, res) => {
        res.writeHead(status, { location: `${elsewhere.url}/v2/deployments` });
        res.end();
      });
      const read = await rejection(client.listAllDeployments());
      expect(read).toMatchObject({ kind: "rejected", status, retryable: false });
      const write = await rejection(client.createDeployment({ name: "agent", source: "internal_docker" }));
      expect(write).toMatchObject({ kind: "rejected", status });
      expect(elsewhere.requests).toHaveLength(0);
    },
  );

  it("on the connection's probe is not followed: Unreachable, naming the status", async () => {
    const elsewhere = await serve(answering(200, "[]"));
    const service = await serve((_req, res) => {
      res.writeHead(302, { location: `${elsewhere.url}/v2/auth/providers` });
      res.end();
    });
    const verdict = await probed(service.url);
    expect(verdict).toMatchObject({ ok: false, reason: "Unreachable" });
    expect(JSON.stringify(verdict)).toContain("HTTP 302");
    expect(elsewhere.requests).toHaveLength(0);
  });
});
