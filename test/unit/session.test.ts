// A connection's session keeps its own books: its writes update the snapshot (a create's and a
// PATCH's answer remembered, a deployment answered 404 forgotten, a name found taken looked up),
// so the reconciler records nothing itself.
import { pino } from "pino";
import { describe, expect, it } from "vitest";
import type { CreateDeploymentBody } from "../../src/api/wire-requests.ts";
import { CreatePace } from "../../src/reconcile/service/create-pace.ts";
import { NameReservedError } from "../../src/reconcile/service/name-reserved.ts";
import { ServiceSession } from "../../src/reconcile/service/session.ts";
import { tellPaced } from "../../src/runtime/clock.ts";
import { inReconcile } from "../../src/runtime/controller.ts";
import { createLogger } from "../../src/runtime/log.ts";
import { ManualClock } from "../support/manual-clock.ts";
import { SimulatedService } from "../support/memory-ports.ts";

const BODY: CreateDeploymentBody = {
  name: "agent",
  source: "internal_docker",
  source_revision_config: { image_uri: "registry.example.com/agent:1" },
};

function world() {
  const clock = new ManualClock({ start: Date.parse("2026-11-24T12:00:00Z") });
  const service = new SimulatedService({ now: () => clock.now() });
  const session = new ServiceSession(service, {
    clock,
    logger: pino({ level: "silent" }),
    listingMaxAgeMs: 60_000,
  });
  const signal = new AbortController().signal;
  return { clock, service, session, signal, refresh: () => session.snapshot.refresh(signal) };
}

describe("the session's writes update its snapshot", () => {
  it("a create remembers its answer, unlisted until a read shows it", async () => {
    const w = world();
    await w.refresh();
    const created = await w.session.service.create(BODY, w.signal);
    expect(w.session.snapshot.byId(created.id)).toEqual(created);
    expect(w.session.snapshot.isListed(created.id)).toBe(false);
  });

  it("a PATCH remembers its answer", async () => {
    const w = world();
    const seeded = w.service.seed(BODY);
    await w.refresh();
    const body = { source_revision_config: { image_uri: "registry.example.com/agent:2" } };
    const updated = await w.session.service.patch(seeded.id, body, w.signal);
    expect(w.session.snapshot.byId(seeded.id)).toEqual(updated);
    expect(w.session.snapshot.isListed(seeded.id)).toBe(true);
  });

  it("a PATCH answered 404 forgets the deployment, and fails with the answer", async () => {
    const w = world();
    const seeded = w.service.seed(BODY);
    await w.refresh();
    expect(w.session.snapshot.byId(seeded.id)).toBeTruthy();
    w.service.failNext("patch", { status: 404, detail: "no such deployment" });
    await expect(w.session.service.patch(seeded.id, {}, w.signal)).rejects.toMatchObject({
      kind: "not_found",
    });
    expect(w.session.snapshot.byId(seeded.id)).toBeNull();
  });

  it("a PATCH failing otherwise leaves the snapshot as it was", async () => {
    const w = world();
    const seeded = w.service.seed(BODY);
    await w.refresh();
    w.service.failNext("patch", { status: 503 });
    await expect(w.session.service.patch(seeded.id, {}, w.signal)).rejects.toBeTruthy();
    expect(w.session.snapshot.byId(seeded.id)).toEqual(seeded);
  });

  it("a delete answered 404 forgets the deployment", async () => {
    const w = world();
    const seeded = w.service.seed(BODY);
    await w.refresh();
    w.service.failNext("delete", { status: 404 });
    await expect(w.session.service.delete(seeded.id, w.signal)).rejects.toBeTruthy();
    expect(w.session.snapshot.byId(seeded.id)).toBeNull();
  });

  it("a redeploy remembers its answer", async () => {
    const w = world();
    const seeded = w.service.seed(BODY);
    await w.refresh();
    const first = seeded.latest_revision_id ?? "";
    await w.session.service.patch(
      seeded.id,
      { source_revision_config: { image_uri: "registry.example.com/agent:2" } },
      w.signal,
    );
    const outcome = await w.session.redeploys.redeploy(seeded.id, first, w.signal);
    expect(outcome.kind).toBe("redeployed");
    const answered = outcome.kind === "redeployed" ? outcome.deployment : undefined;
    expect(answered?.latest_revision_id).not.toBe(first);
    expect(w.session.snapshot.byId(seeded.id)).toEqual(answered);
  });

  it("a redeploy answered 404 forgets the deployment", async () => {
    const w = world();
    const seeded = w.service.seed(BODY);
    await w.refresh();
    const outcome = await w.session.redeploys.redeploy(seeded.id, "no-such-revision", w.signal);
    expect(outcome.kind).toBe("unknown");
    expect(w.session.snapshot.byId(seeded.id)).toBeNull();
  });

  it("a create refused with 409 looks the name up: the deployment found is in the snapshot", async () => {
    const w = world();
    await w.refresh();
    const taken = w.service.seed(BODY);
    w.service.failNext("create", { status: 409, detail: "deployment already exists" });
    await expect(w.session.service.create(BODY, w.signal)).rejects.toMatchObject({ kind: "conflict" });
    expect(w.service.calls.findByName).toBe(1);
    expect(w.session.snapshot.byName("agent")).toEqual([taken]);
    expect(w.session.snapshot.isListed(taken.id)).toBe(true);
  });

  it("a 409 of a tracing project, with no deployment of the name, is NameReserved", async () => {
    const w = world();
    await w.refresh();
    w.service.failNext("create", { status: 409, detail: "tracing project agent already exists" });
    await expect(w.session.service.create(BODY, w.signal)).rejects.toBeInstanceOf(NameReservedError);
  });
});

describe("CreatePace", () => {
  /** A pace over a manual clock whose info lines are kept. */
  function paced() {
    const clock = new ManualClock({ start: 0 });
    const lines: Array<Record<string, unknown>> = [];
    const logger = pino({ level: "info" }, { write: (line: string) => lines.push(JSON.parse(line)) });
    return { clock, lines, pace: new CreatePace(clock, logger) };
  }

  it("says once a minute, while creates run, how long each part took and how much was the rate limit's", async () => {
    const { clock, lines, pace } = paced();
    const call = (ms: number, waitedMs: number) => async () => {
      // What the transport tells once a call got its token (src/api/transport.ts).
      tellPaced(waitedMs);
      clock.advance(ms);
      return ms;
    };
    for (let i = 0; i < 2; i++) {
      await pace.timed("lookup", call(40, 30));
      await pace.timed("intent", call(20, 0));
      await pace.timed("post", call(100, 60));
    }
    expect(lines).toEqual([]);
    clock.advance(60_000);
    await pace.timed("intent", call(20, 0));
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({
      msg: "creates through this connection: where their time went",
      seconds: 60,
      creates: {
        lookup: { count: 2, meanMs: 40, meanRateLimitWaitMs: 30 },
        intent: { count: 3, meanMs: 20, meanRateLimitWaitMs: 0 },
        post: { count: 2, meanMs: 100, meanRateLimitWaitMs: 60 },
      },
    });
    // A minute without a POST says nothing.
    clock.advance(60_000);
    await pace.timed("lookup", call(40, 30));
    expect(lines).toHaveLength(1);
  });

  it("writes the connection's line without the fields of the reconcile whose create ended the minute", async () => {
    const clock = new ManualClock({ start: 0 });
    const lines: Array<Record<string, unknown>> = [];
    const logger = createLogger({
      level: "info",
      format: "json",
      destination: { write: (line: string) => lines.push(JSON.parse(line)) },
    });
    const pace = new CreatePace(clock, logger);
    await inReconcile("deployment", "team-a/first", () => pace.timed("post", async () => clock.advance(10)));
    clock.advance(60_000);
    await inReconcile("deployment", "team-b/other", () => pace.timed("post", async () => clock.advance(10)));
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ msg: "creates through this connection: where their time went" });
    expect(lines[0]).not.toHaveProperty("namespace");
    expect(lines[0]).not.toHaveProperty("name");
  });

  it("counts a part that failed, and rethrows its error", async () => {
    const { pace } = paced();
    await expect(pace.timed("post", () => Promise.reject(new Error("503")))).rejects.toThrow("503");
  });
});
