/**
 * The redeploy route (from the service's public documentation, not the shared spec) and the one
 * read that finds its candidates, through the client against the simulator over loopback: both
 * behaviours of the route, unknown deployment or revision, a bad id refused before any request,
 * a service without the route (404 and 405), and the first page of the revision listing in one
 * request however many revisions there are.
 */
import { afterEach, describe, expect, it } from "vitest";
import { ServiceClient } from "../../src/api/client.ts";
import { RequestValidationError, RevisionsRouteMissingError } from "../../src/api/errors.ts";
import { REDEPLOY_ROUTE, RedeployRouteMissingError } from "../../src/api/redeploy.ts";
import { ROUTES } from "../../src/api/wire.ts";
import { type RunningSimulator, type SimulatorOptions, startSimulator } from "../../src/simulator/server.ts";
import { ManualClock } from "../support/manual-clock.ts";

const UNKNOWN = "d0000000-0000-4000-8000-000000000009";
let sim: RunningSimulator | undefined;
afterEach(async () => {
  await sim?.close();
  sim = undefined;
});

async function start(options: SimulatorOptions = {}) {
  const clock = new ManualClock({ start: Date.parse("2030-01-01T00:00:00Z") });
  sim = await startSimulator({
    timing: { readyAfterMs: 0, revisionActiveAfterMs: 6000, deleteAfterMs: 0 },
    now: clock.now,
    ...options,
  });
  const client = new ServiceClient({ baseUrl: sim.url, qps: 10_000, burst: 1000, retries: 0 });
  return { sim, clock, client };
}

/** A deployment with `count` revisions, each live in turn (tags v1, v2, …); its id and revision ids. */
async function withRevisions(client: ServiceClient, clock: ManualClock, count: number) {
  const created = await client.createDeployment({
    name: "agent",
    source: "external_docker",
    source_revision_config: { image_uri: "registry.example/agent:v1" },
  });
  const ids = [created.latest_revision_id ?? ""];
  clock.advance(6000);
  for (let i = 2; i <= count; i++) {
    const patched = await client.patchDeployment(created.id, {
      source_revision_config: { image_uri: `registry.example/agent:v${i}` },
    });
    ids.push(patched.latest_revision_id ?? "");
    clock.advance(6000);
  }
  return { id: created.id, revisions: ids };
}

describe("ServiceClient.redeploy", () => {
  it("new-revision: answers the deployment with a new latest revision copying the named one", async () => {
    const { sim, clock, client } = await start();
    const { id, revisions } = await withRevisions(client, clock, 2);
    const answered = await client.redeploy(id, revisions[0] ?? "");
    expect(answered?.latest_revision_id).not.toBe(revisions[1]);
    expect(answered?.source_revision_config.image_uri).toBe("registry.example/agent:v1");
    expect(sim.store.redeploys(id)).toMatchObject([{ revision_id: revisions[0] }]);
    expect(sim.counters()[`POST ${REDEPLOY_ROUTE}`]).toEqual({ "200": 1 });
  });

  it("switch-active: the same call, the active revision switches back later", async () => {
    const { clock, client } = await start({ redeployRoute: "switch-active" });
    const { id, revisions } = await withRevisions(client, clock, 2);
    const answered = await client.redeploy(id, revisions[0] ?? "");
    expect(answered?.latest_revision_id).toBe(revisions[1]);
    clock.advance(2000);
    expect((await client.getDeployment(id))?.active_revision_id).toBe(revisions[0]);
  });

  it("undefined for an unknown deployment or revision; a bad id is refused before any request", async () => {
    const { sim, clock, client } = await start();
    const { id, revisions } = await withRevisions(client, clock, 1);
    expect(await client.redeploy(UNKNOWN, revisions[0] ?? "")).toBeUndefined();
    expect(await client.redeploy(id, UNKNOWN)).toBeUndefined();
    sim.resetCounters();
    await expect(client.redeploy(id, "revision-1")).rejects.toBeInstanceOf(RequestValidationError);
    expect(sim.counters()).toEqual({});
  });

  it.each(["missing", "method-not-allowed"] as const)(
    "a service without the route (%s) throws RedeployRouteMissingError",
    async (mode) => {
      const { sim, clock, client } = await start({ redeployRoute: mode });
      const { id, revisions } = await withRevisions(client, clock, 1);
      const error = await client.redeploy(id, revisions[0] ?? "").catch((e: unknown) => e);
      expect(error).toBeInstanceOf(RedeployRouteMissingError);
      expect((error as RedeployRouteMissingError).status).toBe(mode === "missing" ? 404 : 405);
      expect(sim.store.redeploys()).toEqual([]);
    },
  );
});

describe("ServiceClient.firstRevisionPage", () => {
  it("one request for the first page, newest first, however many revisions there are", async () => {
    const { sim, clock, client } = await start();
    const { id, revisions } = await withRevisions(client, clock, 5);
    sim.resetCounters();
    const rows = await client.firstRevisionPage(id, { limit: 3 });
    expect(rows.map((r) => (r.ok ? r.revision.id : "?"))).toEqual(revisions.slice(2).reverse());
    expect(sim.counters()[`GET ${ROUTES.REVISIONS}`]).toEqual({ "200": 1 });
  });

  it("a service without the listing throws RevisionsRouteMissingError", async () => {
    const { clock, client } = await start({ revisionListing: "missing" });
    const { id } = await withRevisions(client, clock, 1);
    await expect(client.firstRevisionPage(id)).rejects.toBeInstanceOf(RevisionsRouteMissingError);
  });
});
