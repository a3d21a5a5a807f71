// A sharded replica's whole listing keeps the id it showed under each name, so that a resource
// arriving while that listing answers (the ring handed it over as it was read) reads that id, with
// other lookups by id, instead of asking the service by name. The index only ever finds: a
// name it cannot vouch for is asked live, and no create is decided on it (see also the reconciles
// of snapshot-share.test.ts).
import { describe, expect, it } from "vitest";
import type { Deployment } from "../../src/api/wire.ts";
import { lookUp } from "../../src/reconcile/observe.ts";
import type { DeploymentListings, DeploymentLookups } from "../../src/reconcile/ports.ts";
import { IdBatches, POLL_BATCH } from "../../src/reconcile/service/deployments-port.ts";
import { ListedIds, NO_LISTED_IDS } from "../../src/reconcile/service/listed-ids.ts";
import { AmbiguousNameError } from "../../src/reconcile/service/lookup-errors.ts";
import { RemoteSnapshot } from "../../src/reconcile/service/snapshot.ts";
import { ManualClock } from "../support/manual-clock.ts";
import { remote } from "./plan-fixtures.ts";

const id = (n: number) => `00000000-0000-4000-8000-${String(n).padStart(12, "0")}`;
const named = (n: number, name = `agent-${n}`) => remote({ id: id(n), name });
const signal = () => new AbortController().signal;

/**
 * A sharded snapshot over the deployments `held` (by id; a test may rename, delete or duplicate
 * them), whose replica claims the names in `claimed` and has five resources waiting for a lookup by
 * name, so that its read lists the whole connection. Lookups by id go through `IdBatches`, as a
 * connection's port sends them; each call is counted.
 */
function sharded(held: Map<string, Deployment>) {
  const clock = new ManualClock({ start: 0 });
  const claimed = new Set<string>();
  const calls = { listAll: 0, getByIds: 0, findByName: 0 };
  const byIds = async (ids: readonly string[]) => ids.flatMap((i) => held.get(i) ?? []);
  const port: DeploymentListings = {
    listAll: async (_s, each) => {
      calls.listAll += 1;
      for (const d of held.values()) each(d);
    },
    getByIds: async (ids) => {
      calls.getByIds += 1;
      return byIds(ids);
    },
  };
  const batches = new IdBatches({
    list: async function* (ids) {
      calls.getByIds += 1;
      yield* await byIds(ids);
    },
    single: async () => {
      throw new Error("not a uuid");
    },
  });
  const service: DeploymentLookups = {
    getById: (i, s) => batches.get(i, s),
    findByName: async (name) => {
      calls.findByName += 1;
      return { deployments: [...held.values()].filter((d) => d.name === name), unreadable: [] };
    },
  };
  const snapshot = new RemoteSnapshot(port, clock, {
    maxAgeMs: 60_000,
    share: () => [],
    unrecorded: () => ["a", "b", "c", "d", "e"],
    wanted: (name) => claimed.has(name),
  });
  const look = (name: string) =>
    lookUp(service, snapshot, { deploymentId: undefined, name, live: false, liveName: false }, signal());
  const reset = () => Object.assign(calls, { listAll: 0, getByIds: 0, findByName: 0 });
  return { snapshot, calls, claimed, clock, look, reset };
}

const service = (count: number) => new Map(Array.from({ length: count }, (_, i) => [id(i), named(i)]));

describe("a name a whole listing showed but did not hold", () => {
  it("is answered by one batched id read for many resources, and no lookup by name", async () => {
    const r = sharded(service(300));
    await r.snapshot.refresh(signal());
    expect(r.calls).toEqual({ listAll: 1, getByIds: 0, findByName: 0 });
    // Handed to the replica after the listing: its names were not claimed while it was read.
    r.reset();
    const found = await Promise.all([10, 20, 30, 40, 50].map((n) => r.look(`agent-${n}`)));
    expect(r.calls).toEqual({ listAll: 0, getByIds: 1, findByName: 0 });
    expect(found.map((f) => [f.deployment?.id, f.adopted, f.listed])).toEqual(
      [10, 20, 30, 40, 50].map((n) => [id(n), true, true]),
    );
    // What was read is held: the next reconcile of the resource reads it by id, with no call.
    expect(r.snapshot.byId(id(10))?.name).toBe("agent-10");
  });

  it("is asked by name once the id carries another name, and what the name holds is adopted", async () => {
    const held = service(3);
    const r = sharded(held);
    await r.snapshot.refresh(signal());
    // Renamed on the service since, and its name taken by another deployment.
    held.set(id(1), named(1, "agent-1-old"));
    held.set(id(9), named(9, "agent-1"));
    r.reset();
    const found = await r.look("agent-1");
    expect(r.calls).toEqual({ listAll: 0, getByIds: 1, findByName: 1 });
    expect(found.deployment?.id).toBe(id(9));
  });

  it("is asked by name once the id is gone, and then found free", async () => {
    const held = service(3);
    const r = sharded(held);
    await r.snapshot.refresh(signal());
    held.delete(id(2));
    r.reset();
    const found = await r.look("agent-2");
    expect(r.calls).toEqual({ listAll: 0, getByIds: 1, findByName: 1 });
    expect(found.deployment).toBeNull();
  });

  it("is asked by name when the listing showed it twice, and found ambiguous", async () => {
    const held = service(3);
    held.set(id(7), named(7, "agent-1"));
    const r = sharded(held);
    await r.snapshot.refresh(signal());
    r.reset();
    await expect(r.look("agent-1")).rejects.toThrow(AmbiguousNameError);
    expect(r.calls).toEqual({ listAll: 0, getByIds: 0, findByName: 1 });
  });

  it("is asked by name when a resource claimed it from the middle of the listing on (one held, one not)", async () => {
    const held = new Map<string, Deployment>();
    const r = sharded(held);
    // The claim arrives as the listing reaches the second item: the first "agent" is not held.
    held.set(id(1), named(1, "agent"));
    held.set(id(2), {
      ...named(2, "other"),
      get name() {
        r.claimed.add("agent");
        return "other";
      },
    });
    held.set(id(3), named(3, "agent"));
    await r.snapshot.refresh(signal());
    r.reset();
    expect([r.snapshot.byId(id(1)), r.snapshot.byId(id(3))?.id]).toEqual([null, id(3)]);
    await expect(r.look("agent")).rejects.toThrow(AmbiguousNameError);
    expect(r.calls).toEqual({ listAll: 0, getByIds: 0, findByName: 1 });
  });

  it("answers nothing once the share is read by id, or the listing no longer answers", async () => {
    let waiting = 5;
    const clock = new ManualClock({ start: 0 });
    const held = service(3);
    const port: DeploymentListings = {
      listAll: async (_s, each) => {
        for (const d of held.values()) each(d);
      },
      getByIds: async (ids) => ids.flatMap((i) => held.get(i) ?? []),
    };
    const snapshot = new RemoteSnapshot(port, clock, {
      maxAgeMs: 60_000,
      share: () => [],
      unrecorded: () => Array.from({ length: waiting }, (_, i) => `w-${i}`),
      wanted: () => false,
    });
    await snapshot.refresh(signal());
    expect(snapshot.listedId("agent-1")).toBe(id(1));
    expect(snapshot.listedId("agent-9")).toBeUndefined();
    clock.advance(60_001);
    expect(snapshot.listedId("agent-1")).toBeUndefined();
    waiting = 0;
    await snapshot.refresh(signal());
    expect(snapshot.isFresh()).toBe(true);
    expect(snapshot.listedId("agent-1")).toBeUndefined();
  });
});

describe("ListedIds", () => {
  it("gives back the id shown under a name, and nothing for a name not shown", () => {
    const index = new ListedIds(10);
    index.add("agent-1", id(1));
    index.add("agent-2", id(2));
    // A service repeating an item on a later page: one id, not ambiguous.
    index.add("agent-2", id(2));
    expect(index.idOf("agent-1")).toBe(id(1));
    expect(index.idOf("agent-2")).toBe(id(2));
    expect(index.idOf("agent-3")).toBeUndefined();
    expect(NO_LISTED_IDS.idOf("agent-1")).toBeUndefined();
  });

  it("of no room (an unsharded listing's), does no work per item and stays empty", () => {
    let hashed = 0;
    const none = new ListedIds(0, 0, () => {
      hashed += 1;
      return 7;
    });
    none.add("agent-1", id(1));
    none.unreadable("agent-2");
    none.unreadable(undefined);
    expect(hashed).toBe(0);
    expect(none.size).toBe(0);
    expect(none.idOf("agent-1")).toBeUndefined();
  });

  it("answers nothing for a name shown with two ids, or with an id that is not a canonical uuid", () => {
    const index = new ListedIds(10);
    index.add("twice", id(1));
    index.add("twice", id(2));
    index.add("upper", "9d8c7b6a-5f4e-4d3c-8b2a-1f0e9d8c7b6a".toUpperCase());
    index.add("lower", "9d8c7b6a-5f4e-4d3c-8b2a-1f0e9d8c7b6a");
    index.add("odd", "not-a-uuid");
    index.add("odd", id(4));
    for (const name of ["twice", "upper", "odd"]) expect(index.idOf(name)).toBeUndefined();
    expect(index.idOf("lower")).toBe("9d8c7b6a-5f4e-4d3c-8b2a-1f0e9d8c7b6a");
  });

  it("answers nothing for two names of one hash (a collision)", () => {
    const index = new ListedIds(10, 0, (name) => (name.startsWith("x") ? 7 : name.length));
    index.add("x-one", id(1));
    index.add("x-two", id(2));
    index.add("yy", id(3));
    expect(index.idOf("x-one")).toBeUndefined();
    expect(index.idOf("x-two")).toBeUndefined();
    expect(index.idOf("yy")).toBe(id(3));
    // A name not listed whose hash is a listed name's gets that id: its read shows another name.
    expect(index.idOf("zz")).toBe(id(3));
  });

  it("answers nothing for a name an unreadable item carries, nor any name after one without a name", () => {
    const index = new ListedIds(10);
    index.add("agent-1", id(1));
    index.add("agent-2", id(2));
    index.unreadable("agent-1");
    expect(index.idOf("agent-1")).toBeUndefined();
    expect(index.idOf("agent-2")).toBe(id(2));
    index.unreadable(undefined);
    expect(index.idOf("agent-2")).toBeUndefined();
  });

  it("holds no more names than its cap, yet marks one it holds ambiguous when it shows again", () => {
    const index = new ListedIds(2);
    index.add("a", id(1));
    index.add("b", id(2));
    index.add("c", id(3));
    index.add("a", id(4));
    expect(index.size).toBe(2);
    expect([index.idOf("a"), index.idOf("b"), index.idOf("c")]).toEqual([undefined, id(2), undefined]);
  });

  it(`holds 30,000 names in under 50 bytes each, growing from a first guess of ${POLL_BATCH}`, () => {
    const index = new ListedIds(30_000, POLL_BATCH);
    for (let n = 0; n < 30_000; n += 1) index.add(`agent-${n}`, id(n));
    expect(index.size).toBe(30_000);
    expect(index.bytes / index.size).toBeLessThan(50);
    for (const n of [0, 1, 12_345, 29_999]) expect(index.idOf(`agent-${n}`)).toBe(id(n));
  });
});
