// The rebuilds of one connection against the simulated service: one call creates one revision; a
// service without the route is asked once and remembered for the connection; a lost answer is
// never repeated (it may have built).
import { pino } from "pino";
import { describe, expect, it } from "vitest";
import { NO_REBUILD_ROUTE, Rebuilder } from "../../src/reconcile/service/rebuilder.ts";
import { SimulatedService } from "../support/memory-ports.ts";

const signal = new AbortController().signal;

function world() {
  const service = new SimulatedService({ now: () => Date.parse("2030-01-01T00:00:00Z") });
  const deployment = service.seed({
    name: "agent",
    source: "external_docker",
    source_revision_config: { image_uri: "repo/agent:1" },
  });
  return { service, id: deployment.id, rebuilder: new Rebuilder(service, pino({ level: "silent" })) };
}

describe("Rebuilder", () => {
  it("one call creates one revision of the deployment's current configuration", async () => {
    const { service, id, rebuilder } = world();
    const outcome = await rebuilder.rebuild(id, signal);
    expect(outcome.kind).toBe("rebuilt");
    expect(service.store.revisions(id)).toHaveLength(2);
    expect(service.total).toBe(1);
  });

  it("a service without the route: asked once, then remembered for the connection", async () => {
    const { service, id, rebuilder } = world();
    service.rebuildRoute = false;
    expect(await rebuilder.rebuild(id, signal)).toEqual({ kind: "missing", why: NO_REBUILD_ROUTE });
    expect(rebuilder.missing).toBe(NO_REBUILD_ROUTE);
    expect(await rebuilder.rebuild(id, signal)).toEqual({ kind: "missing", why: NO_REBUILD_ROUTE });
    expect(service.calls.createRevision).toBe(1);
    expect(service.store.revisions(id)).toHaveLength(1);
  });

  it("an answer lost is unconfirmed, not a failure to retry; another failure rejects", async () => {
    const { service, id, rebuilder } = world();
    service.failNext("createRevision", { status: 504, maybeApplied: true });
    expect(await rebuilder.rebuild(id, signal)).toMatchObject({ kind: "unconfirmed" });
    service.failNext("createRevision", { status: 503 });
    await expect(rebuilder.rebuild(id, signal)).rejects.toMatchObject({ status: 503 });
    expect(rebuilder.missing).toBeUndefined();
  });
});
