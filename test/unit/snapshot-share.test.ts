// A sharded replica's snapshot reads its share only: the deployments its resources record, by id,
// a hundred per call, instead of the whole listing. What it cannot vouch for (a name, an id the
// service did not return) is asked live, so a failed or cut read never makes a resource create.
import { pino } from "pino";
import { describe, expect, it, vi } from "vitest";
import type { Deployment } from "../../src/api/wire.ts";
import type { DeploymentListings } from "../../src/reconcile/ports.ts";
import { DeploymentReconciler } from "../../src/reconcile/reconciler.ts";
import { IdBatches, idBatches, POLL_BATCH } from "../../src/reconcile/service/deployments-port.ts";
import { AHEAD_WALK_MS, RemoteSnapshot } from "../../src/reconcile/service/snapshot.ts";
import { ListingDeadlineError } from "../../src/reconcile/service/snapshot-reader.ts";
import { tellPaced } from "../../src/runtime/clock.ts";
import { BODY, REF, SPEC } from "../support/agent-fixture.ts";
import { ManualClock } from "../support/manual-clock.ts";
import {
  claimingSession,
  MemoryResources,
  MemorySecrets,
  oneSession,
  RecordedEvents,
  type ServiceMethod,
  SimulatedService,
} from "../support/memory-ports.ts";
import { remote } from "./plan-fixtures.ts";

const id = (n: number) => `00000000-0000-4000-8000-${String(n).padStart(12, "0")}`;
const named = (n: number) => remote({ id: id(n), name: `agent-${n}` });

/**
 * A snapshot reading the share `share()` from the deployments `service` holds. Each batch asked
 * is recorded; `answer` may change what a batch answers (add foreign items, fail, hang).
 */
function shareOver(
  service: Map<string, Deployment>,
  share: () => Iterable<string>,
  options: {
    answer?: (ids: readonly string[], n: number, signal: AbortSignal) => Promise<Deployment[]> | undefined;
    deadlineMs?: number;
  } = {},
) {
  const clock = new ManualClock({ start: 0 });
  const batches: string[][] = [];
  let listings = 0;
  const port: DeploymentListings = {
    listAll: async () => {
      listings += 1;
    },
    getByIds: async (ids, signal) => {
      batches.push([...ids]);
      const answered = options.answer?.(ids, batches.length, signal);
      if (answered) return answered;
      return ids.flatMap((i) => service.get(i) ?? []);
    },
  };
  const snapshot = new RemoteSnapshot(port, clock, {
    maxAgeMs: 60_000,
    share,
    ...(options.deadlineMs === undefined ? {} : { listingDeadlineMs: options.deadlineMs }),
  });
  return { snapshot, batches, clock, listings: () => listings };
}

/**
 * A sharded snapshot over `service` whose replica has `waiting()` resources without a deployment
 * id, claiming the names `claimed`: its whole listing goes page by page (100 items), stopping at
 * an aborted signal between pages as the client does.
 */
function wholeOver(
  service: Map<string, Deployment>,
  share: () => Iterable<string>,
  waiting: () => number,
  claimed: (name: string) => boolean = () => true,
) {
  const clock = new ManualClock({ start: 0 });
  const calls = { pages: 0, batches: 0, listings: 0 };
  const port: DeploymentListings = {
    listAll: async (s, each) => {
      calls.listings += 1;
      const all = [...service.values()];
      for (let at = 0; at === 0 || at < all.length; at += POLL_BATCH) {
        if (s.aborted) throw s.reason;
        calls.pages += 1;
        await Promise.resolve();
        for (const d of all.slice(at, at + POLL_BATCH)) each(d);
      }
    },
    getByIds: async (ids) => {
      calls.batches += 1;
      return ids.flatMap((i) => service.get(i) ?? []);
    },
  };
  const snapshot = new RemoteSnapshot(port, clock, {
    maxAgeMs: 60_000,
    share,
    unrecorded: () => waitingNames(waiting()),
    wanted: claimed,
  });
  return { snapshot, calls, clock };
}

/** The names of `count` resources waiting for a lookup by name: "agent-new" first. */
const waitingNames = (count: number) =>
  Array.from({ length: count }, (_, i) => (i === 0 ? "agent-new" : `agent-new-${i}`));
const deployments = (count: number) => new Map(Array.from({ length: count }, (_, i) => [id(i), named(i)]));
const signal = () => new AbortController().signal;

describe("RemoteSnapshot reading a share by id", () => {
  it("reads 250 known ids in three calls of at most 100 ids, and lists nothing", async () => {
    const service = deployments(1_000);
    const share = Array.from({ length: 250 }, (_, i) => id(i * 4));
    const { snapshot, batches, listings } = shareOver(service, () => share);
    await snapshot.refresh(signal());
    expect(batches.map((b) => b.length)).toEqual([100, 100, 50]);
    expect(batches.flat()).toEqual(share);
    expect(listings()).toBe(0);
    expect(snapshot.size).toBe(250);
    expect(snapshot.byId(id(8))?.name).toBe("agent-8");
    // Not in the share: not read, not held.
    expect(snapshot.byId(id(1))).toBeNull();
    expect(snapshot.listingFailure()).toBeUndefined();
    expect(snapshot.isFresh()).toBe(true);
  });

  it("costs no call when no resource of the share records a deployment yet", async () => {
    const { snapshot, batches } = shareOver(deployments(10), () => []);
    await snapshot.refresh(signal());
    expect(batches).toEqual([]);
    expect(snapshot.isFresh()).toBe(true);
  });

  it("never answers a lookup by name: a read by id cannot say that a name is free", async () => {
    const { snapshot } = shareOver(deployments(3), () => [id(0), id(1), id(2)]);
    await snapshot.refresh(signal());
    expect(snapshot.byId(id(1))?.name).toBe("agent-1");
    expect(snapshot.byName("agent-1")).toBeUndefined();
    expect(snapshot.byName("agent-7")).toBeUndefined();
  });

  it("drops a known id its batch did not return, as a listing drops a deployment it does not show", async () => {
    const service = deployments(3);
    const { snapshot, batches } = shareOver(service, () => [id(0), id(1), id(2)]);
    await snapshot.refresh(signal());
    expect(snapshot.byId(id(1))?.name).toBe("agent-1");
    service.delete(id(1));
    await snapshot.refresh(signal());
    expect(batches).toHaveLength(2);
    // null, not undefined: the read answers for it, and the lookup of a recorded id the snapshot
    // lacks asks the service before giving it up (observe.ts).
    expect(snapshot.byId(id(1))).toBeNull();
    expect(snapshot.byId(id(0))?.name).toBe("agent-0");
    expect(snapshot.size).toBe(2);
  });

  it("ignores an item of a batch's answer that was not asked for, and reads the rest", async () => {
    const foreign = remote({ id: id(900), name: "someone-elses" });
    const { snapshot } = shareOver(deployments(3), () => [id(0), id(1)], {
      answer: (ids) => Promise.resolve([foreign, ...ids.map((i) => remote({ id: i, name: `x-${i}` }))]),
    });
    await snapshot.refresh(signal());
    expect(snapshot.byId(id(900))).toBeNull();
    expect(snapshot.byId(id(1))?.name).toBe(`x-${id(1)}`);
    expect(snapshot.size).toBe(2);
  });

  it("fails the read when one batch fails, and takes nothing it asked about as gone", async () => {
    const service = deployments(150);
    const share = Array.from({ length: 150 }, (_, i) => id(i));
    let fail = false;
    const { snapshot, batches, clock } = shareOver(service, () => share, {
      answer: (_ids, n) => (fail && n % 2 === 0 ? Promise.reject(new Error("503 unavailable")) : undefined),
    });
    await snapshot.refresh(signal());
    const release = snapshot.holdFresh();
    clock.advance(1_000);
    service.clear();
    fail = true;
    await expect(snapshot.refresh(signal())).rejects.toThrow("503 unavailable");
    expect(batches.map((b) => b.length)).toEqual([100, 50, 100, 50]);
    expect(snapshot.listingFailure()).toMatchObject({ kind: "failed" });
    // The first batch answered (nothing: the service lost them), the second failed: the read
    // that failed does not answer for any of them, the last one that succeeded still does.
    expect(snapshot.listedWithin(500)).toBe(false);
    expect(snapshot.byId(id(149))?.name).toBe("agent-149");
    expect(snapshot.byId(id(0))?.name).toBe("agent-0");
    release();
  });

  it("gives up a read at the listing deadline, and says so", async () => {
    const { snapshot, clock } = shareOver(deployments(2), () => [id(0), id(1)], {
      deadlineMs: 5_000,
      answer: (_ids, _n, s) =>
        new Promise((_resolve, reject) =>
          s.addEventListener("abort", () => reject(s.reason), { once: true }),
        ),
    });
    const read = snapshot.refresh(signal());
    clock.advance(5_000);
    await expect(read).rejects.toBeInstanceOf(ListingDeadlineError);
    expect(snapshot.listingFailure()).toEqual({ kind: "deadline", deadlineMs: 5_000 });
  });

  it.each([
    { paced: true, outcome: "ends: the waits were this process's pacing" },
    { paced: false, outcome: "misses the deadline: the time was the service's" },
  ])("a read whose three calls each wait 4 s, against a 5 s deadline, $outcome", async ({ paced }) => {
    let clock: ManualClock | undefined;
    const waits: Promise<void>[] = [];
    const built = shareOver(deployments(250), () => Array.from({ length: 250 }, (_, i) => id(i)), {
      deadlineMs: 5_000,
      answer: (ids, _n, s) => {
        const wait = (clock as ManualClock).sleep(4_000, s).then(() => {
          // What the transport tells once a call got its token (src/api/transport.ts).
          if (paced) tellPaced(4_000);
        });
        waits.push(wait);
        return wait.then(() => ids.map((i) => named(Number(i.slice(-12)))));
      },
    });
    clock = built.clock;
    const read = built.snapshot.refresh(signal());
    read.catch(() => undefined);
    // Unpaced, the deadline (5 s) ends the read during the second call's wait.
    for (let i = 0; i < (paced ? 3 : 2); i++) {
      await vi.waitFor(() => expect(waits.length).toBe(i + 1));
      built.clock.advance(4_000);
    }
    if (paced) {
      await read;
      expect(built.batches.map((b) => b.length)).toEqual([100, 100, 50]);
      expect(built.snapshot.listingFailure()).toBeUndefined();
    } else {
      await expect(read).rejects.toBeInstanceOf(ListingDeadlineError);
      expect(built.snapshot.listingFailure()).toEqual({ kind: "deadline", deadlineMs: 5_000 });
    }
  });

  it("asks each id once, and never an id that is not a uuid (the client would refuse the batch)", () => {
    const ids = [
      "not-an-id",
      id(1),
      id(1),
      `${id(2)}x`,
      ...Array.from({ length: 201 }, (_, i) => id(i + 10)),
    ];
    const batches = idBatches(ids);
    expect(batches.map((b) => b.length)).toEqual([POLL_BATCH, POLL_BATCH, 2]);
    expect(batches[0]?.slice(0, 2)).toEqual([id(1), id(10)]);
  });

  it("takes no foreign item from a poll either", async () => {
    const foreign = remote({ id: id(900), name: "someone-elses" });
    const { snapshot } = shareOver(deployments(2), () => [], {
      answer: (ids) => Promise.resolve([foreign, ...ids.map((i) => named(Number(i.slice(-4))))]),
    });
    await snapshot.poll([id(1), "forged"], signal());
    expect(snapshot.byId(id(1), 1_000)?.name).toBe("agent-1");
    expect(snapshot.byId(id(900), 1_000)).toBeUndefined();
  });
});

describe("RemoteSnapshot of a share while many of its resources lack a deployment id", () => {
  it("lists the whole connection when more resources wait than it has pages, and answers names from it", async () => {
    const service = deployments(250);
    const { snapshot, calls } = wholeOver(
      service,
      () => [id(0), id(1)],
      () => 4,
    );
    await snapshot.refresh(signal());
    // Three pages instead of the share's batch: the share is in the listing.
    expect(calls).toEqual({ pages: 3, batches: 0, listings: 1 });
    expect(snapshot.byId(id(1))?.name).toBe("agent-1");
    expect(snapshot.byName("agent-7")?.map((d) => d.id)).toEqual([id(7)]);
    expect(snapshot.byName("agent-new")).toEqual([]);
  });

  it("reads the share by id once fewer resources wait than the listing has pages, and answers no name", async () => {
    let waiting = 4;
    const { snapshot, calls, clock } = wholeOver(
      deployments(250),
      () => [id(0)],
      () => waiting,
    );
    await snapshot.refresh(signal());
    waiting = 3;
    clock.advance(1_000);
    await snapshot.refresh(signal());
    expect(calls).toEqual({ pages: 3, batches: 1, listings: 1 });
    expect(snapshot.byName("agent-7")).toBeUndefined();
    expect(snapshot.byName("agent-new")).toBeUndefined();
  });

  it("gives a whole listing up once it is longer than the lookups it saves, then reads the share by id", async () => {
    const service = deployments(1_000);
    let waiting = 2;
    const { snapshot, calls, clock } = wholeOver(
      service,
      () => [id(0)],
      () => waiting,
    );
    await snapshot.refresh(signal());
    // Three pages read (the third passing 200 items), then the share's batch.
    expect(calls).toEqual({ pages: 3, batches: 1, listings: 1 });
    expect(snapshot.byName("agent-new")).toBeUndefined();
    expect(snapshot.byId(id(0))?.name).toBe("agent-0");
    expect(snapshot.listingFailure()).toBeUndefined();
    // Its length is remembered: not tried again while as few resources wait.
    clock.advance(1_000);
    await snapshot.refresh(signal());
    expect(calls).toEqual({ pages: 3, batches: 2, listings: 1 });
    // Once more resources wait than it has pages, listed whole, to its end.
    waiting = 11;
    clock.advance(1_000);
    await snapshot.refresh(signal());
    expect(calls).toEqual({ pages: 13, batches: 2, listings: 2 });
    expect(snapshot.byName("agent-new")).toEqual([]);
  });

  it("does not call a name free that the listing showed while no resource of the replica claimed it", async () => {
    const service = deployments(250);
    const claimed = new Set(["agent-1"]);
    const { snapshot } = wholeOver(
      service,
      () => [],
      () => 5,
      (name) => claimed.has(name),
    );
    await snapshot.refresh(signal());
    expect(snapshot.byName("agent-1")?.map((d) => d.id)).toEqual([id(1)]);
    // A resource that reached the replica after the listing (a label, a move): asked live.
    expect(snapshot.byName("agent-2")).toBeUndefined();
    expect(snapshot.byName("agent-new")).toEqual([]);
  });

  it("has concurrent lookups by name share one whole listing when it pays, and none when it does not", async () => {
    const service = deployments(150);
    let waiting = 10;
    const { snapshot, calls, clock } = wholeOver(
      service,
      () => [],
      () => waiting,
    );
    const answers = await Promise.all(
      ["agent-3", "agent-new", "agent-149"].map((n) => snapshot.byNameOrWholeListing(n, signal())),
    );
    expect(answers.map((a) => a?.map((d) => d.id))).toEqual([[id(3)], [], [id(149)]]);
    expect(calls).toEqual({ pages: 2, batches: 0, listings: 1 });
    // Answered from it while it is fresh; past its age, listed again only while it pays.
    expect(await snapshot.byNameOrWholeListing("agent-4", signal())).toHaveLength(1);
    clock.advance(60_001);
    waiting = 2;
    expect(await snapshot.byNameOrWholeListing("agent-4", signal())).toBeUndefined();
    expect(calls).toEqual({ pages: 2, batches: 0, listings: 1 });
  });

  it("leaves a lookup to ask the service when the whole listing fails, and lists whole again only a period later", async () => {
    const clock = new ManualClock({ start: 0 });
    let listings = 0;
    const failing = new RemoteSnapshot(
      {
        listAll: () => {
          listings += 1;
          return Promise.reject(new Error("503 unavailable"));
        },
        getByIds: () => Promise.resolve([]),
      },
      clock,
      { maxAgeMs: 60_000, share: () => [], unrecorded: () => waitingNames(10) },
    );
    expect(await failing.byNameOrWholeListing("agent-new", signal())).toBeUndefined();
    // The share was read by id instead: the connection's read did not fail.
    expect(failing.listingFailure()).toBeUndefined();
    expect(listings).toBe(1);
    // A whole listing failed lately: a lookup asks the service, without listing again.
    clock.advance(1_000);
    expect(await failing.byNameOrWholeListing("agent-new", signal())).toBeUndefined();
    expect(listings).toBe(1);
    clock.advance(60_000);
    expect(await failing.byNameOrWholeListing("agent-new", signal())).toBeUndefined();
    expect(listings).toBe(2);
  });

  it.each([
    { how: "misses its deadline", failure: "deadline" },
    { how: "fails with a 5xx", failure: "503" },
  ])(
    "reads the share by id in the same pass when the whole listing $how, and backs off whole listings",
    async ({ failure }) => {
      const clock = new ManualClock({ start: 0 });
      const calls = { pages: 0, byIds: 0, listings: 0 };
      const port: DeploymentListings = {
        // A slow service: each page (100 items) takes 2 s; or one failing at its 11th page.
        listAll: async (s, each) => {
          calls.listings += 1;
          for (let p = 0; p < 1_000; p++) {
            await clock.sleep(2_000, s);
            if (s.aborted) throw s.reason;
            if (failure === "503" && p === 10) throw new Error("503 unavailable");
            calls.pages += 1;
            for (let i = 0; i < POLL_BATCH; i++) each(remote({ id: id(p * 100 + i), name: `x-${p}-${i}` }));
          }
        },
        getByIds: async (ids) => {
          calls.byIds += 1;
          return ids.map((i) => named(Number(i.slice(-12))));
        },
      };
      const snapshot = new RemoteSnapshot(port, clock, {
        maxAgeMs: 600_000,
        listingDeadlineMs: 60_000,
        share: () => [id(1)],
        unrecorded: () => waitingNames(200),
      });
      /** A pass's read, the clock moved 2 s at a time until it ends. */
      const pass = async () => {
        let outcome = "pending";
        snapshot.refresh(signal()).then(
          () => (outcome = "ok"),
          (e: unknown) => (outcome = String(e)),
        );
        for (let i = 0; i < 100 && outcome === "pending"; i++) {
          clock.advance(2_000);
          await new Promise((resolve) => setImmediate(resolve));
        }
        return outcome;
      };
      expect(await pass()).toBe("ok");
      expect(calls.listings).toBe(1);
      expect(calls.byIds).toBe(1);
      expect(snapshot.listingFailure()).toBeUndefined();
      expect(snapshot.byId(id(1))?.name).toBe("agent-1");
      // A read of ids says no name is free.
      expect(snapshot.byName("agent-new")).toBeUndefined();
      // The next pass does not try the whole listing again so soon: the share by id only.
      const pages = calls.pages;
      clock.advance(10_000);
      expect(await pass()).toBe("ok");
      expect(calls).toMatchObject({ listings: 1, byIds: 2, pages });
      expect(snapshot.listingFailure()).toBeUndefined();
    },
  );

  it("calls free names free from a whole listing many times longer than the last one (a connection being filled)", async () => {
    const service = deployments(300);
    const { snapshot, clock } = wholeOver(
      service,
      () => [],
      () => 5_000,
      (name) => name.startsWith("agent-new"),
    );
    await snapshot.refresh(signal());
    for (let i = 300; i < 10_000; i++) service.set(id(i), named(i));
    clock.advance(60_001);
    await snapshot.refresh(signal());
    // Sized after the last listing (300), the filter of names not held grew with this one: a
    // free name is asked live about as rarely as from a filter sized for 10,000 (96.6 % before).
    const asked = waitingNames(1_000).filter((name) => snapshot.byName(name) === undefined).length;
    expect(asked / 1_000).toBeLessThan(0.05);
    expect(snapshot.byName("agent-9999")).toBeUndefined();
  });

  it("calls a name free that the whole listing did not show, claimed at its start or since", async () => {
    // A resource that reached this replica since (a move) takes the listing's word too: a create
    // its earlier owner may have made is recorded on it first (its intent makes the lookup ask
    // the service: "asks the name live … while a create of its own may be pending"), and any
    // other create since makes the POST answer 409, whose retry adopts what the name holds.
    const { snapshot } = wholeOver(
      deployments(150),
      () => [],
      () => 3,
    );
    await snapshot.refresh(signal());
    expect(snapshot.byName("agent-new")).toEqual([]);
    expect(snapshot.byName("agent-new-2")).toEqual([]);
    expect(snapshot.byName("agent-moved")).toEqual([]);
    // A deployment the listing showed under a claimed name is answered, waiting or not.
    expect(snapshot.byName("agent-7")?.map((d) => d.id)).toEqual([id(7)]);
  });

  it("walks the replica's resources for the waiting count once per read, not once per lookup", async () => {
    let walks = 0;
    const { snapshot, clock } = wholeOver(
      deployments(1_000),
      () => [id(0)],
      () => {
        walks += 1;
        return 2;
      },
    );
    // The whole listing (10 pages) is given up for its length: the share by id.
    await snapshot.refresh(signal());
    expect(walks).toBe(1);
    const answers = await Promise.all(
      Array.from({ length: 1_000 }, (_, i) => snapshot.byNameOrWholeListing(`agent-new-${i}`, signal())),
    );
    expect(answers.every((a) => a === undefined)).toBe(true);
    expect(walks).toBe(1);
    // Counted again a second later: resources that reached the replica since are seen.
    clock.advance(1_000);
    await snapshot.byNameOrWholeListing("agent-new", signal());
    expect(walks).toBe(2);
  });
});

/**
 * The reconciler of a sharded replica over in-memory ports: its snapshot reads the share by id.
 * With `batchedIds`, its lookups by id go out together (`IdBatches`), as a connection's port sends them.
 */
function replica(options: { unrecorded?: () => readonly string[]; batchedIds?: boolean } = {}) {
  const { batchedIds, ...sessionOptions } = options;
  const clock = new ManualClock({ start: Date.parse("2030-01-01T00:00:00Z") });
  const now = () => clock.now();
  const resources = new MemoryResources(now);
  const service = new SimulatedService({ now });
  if (batchedIds) {
    const batches = new IdBatches({
      list: async function* (ids, s) {
        yield* await service.getByIds(ids, s);
      },
      single: service.getById.bind(service),
    });
    service.getById = (i, s) => batches.get(i, s);
  }
  const logger = pino({ level: "silent" });
  const session = claimingSession(service, resources, {
    clock,
    logger,
    listingDeadlineMs: 30_000,
    share: () => {
      const recorded = resources.get(REF)?.status?.deploymentId;
      return recorded ? [recorded] : [];
    },
    ...sessionOptions,
  });
  const reconciler = new DeploymentReconciler({
    resources,
    sessions: oneSession(session),
    secrets: new MemorySecrets(),
    events: new RecordedEvents(),
    clock,
    logger,
    pollMs: 5_000,
    createGraceMs: 60_000,
  });
  const calls = () =>
    Object.fromEntries(Object.entries(service.calls).filter(([, n]) => n > 0)) as Partial<
      Record<ServiceMethod, number>
    >;
  return {
    clock,
    resources,
    service,
    session,
    calls,
    reconcile: () => reconciler.reconcile("default/agent", signal()),
    /** A resync pass's read, its calls returned and then forgotten. */
    async pass() {
      await session.snapshot.refresh(signal());
      const made = calls();
      service.resetCalls();
      return made;
    },
    /** A resource with its deployment READY, reconciled until nothing is left to do. */
    async settled() {
      resources.create({ metadata: { name: "agent" }, spec: SPEC });
      await this.pass();
      await this.reconcile();
      clock.advance(5_000);
      await this.pass();
      await this.reconcile();
      await this.pass();
      service.resetCalls();
    },
  };
}

describe("a sharded replica's reconciles over a share read by id", () => {
  it("reads a settled resource's deployment in the pass's batch, and its reconcile costs no call", async () => {
    const r = replica();
    await r.settled();
    expect(r.service.store.list()).toHaveLength(1);
    expect(await r.pass()).toEqual({ getByIds: 1 });
    await r.reconcile();
    expect(r.calls()).toEqual({});
  });

  it("looks a new resource's name up live before it creates, and adopts what the name holds", async () => {
    const r = replica();
    const existing = r.service.seed(BODY);
    r.clock.advance(5_000);
    r.resources.create({ metadata: { name: "agent" }, spec: SPEC });
    expect(await r.pass()).toEqual({});
    await r.reconcile();
    expect(r.calls()).toEqual({ findByName: 1 });
    expect(r.resources.stored(REF)?.status?.deploymentId).toBe(existing.id);
    expect(r.service.store.list()).toHaveLength(1);

    // No deployment under the name: the live lookup, then one create.
    const fresh = replica();
    fresh.resources.create({ metadata: { name: "agent" }, spec: SPEC });
    await fresh.pass();
    await fresh.reconcile();
    expect(fresh.calls()).toEqual({ findByName: 1, create: 1 });
  });

  it("creates a new resource with one call while a whole listing answers for its name", async () => {
    // Many resources of the replica wait for their creates: its read lists the whole connection.
    const r = replica({ unrecorded: () => ["agent"] });
    r.resources.create({ metadata: { name: "agent" }, spec: SPEC });
    expect(await r.pass()).toEqual({ listAll: 1 });
    await r.reconcile();
    expect(r.calls()).toEqual({ create: 1 });

    // A deployment under the name is adopted from the listing, without a call.
    const adopting = replica({ unrecorded: () => ["agent"] });
    const existing = adopting.service.seed(BODY);
    adopting.clock.advance(5_000);
    adopting.resources.create({ metadata: { name: "agent" }, spec: SPEC });
    await adopting.pass();
    await adopting.reconcile();
    expect(adopting.calls()).toEqual({});
    expect(adopting.resources.stored(REF)?.status?.deploymentId).toBe(existing.id);
  });

  it("asks the name live, never the listing, while a create of its own may be pending", async () => {
    const r = replica({ unrecorded: () => ["agent"] });
    r.resources.create({ metadata: { name: "agent" }, spec: SPEC });
    await r.pass();
    // The POST reaches the service but its answer never comes back.
    const create = r.service.create.bind(r.service);
    r.service.create = async (body, s) => {
      await create(body, s);
      throw new Error("socket hang up");
    };
    await r.reconcile().catch(() => undefined);
    expect(r.resources.stored(REF)?.status?.createRequestedAt).toBeDefined();
    r.service.create = create;
    r.service.resetCalls();
    // The listing the pass took before the create says the name is free: not asked.
    expect(r.session.snapshot.byName("agent")).toEqual([]);
    r.clock.advance(5_000);
    await r.reconcile();
    expect(r.calls()).toEqual({ findByName: 1 });
    expect(r.service.store.list()).toHaveLength(1);
  });

  it("asks the service about a deployment its batch did not return before creating it again", async () => {
    const r = replica();
    await r.settled();
    const [gone] = r.service.store.list();
    r.service.store.delete(gone?.id ?? "");
    r.clock.advance(60_000);
    expect(await r.pass()).toEqual({ getByIds: 1 });
    expect(r.session.snapshot.byId(gone?.id ?? "")).toBeNull();
    await r.reconcile();
    // As after a listing that does not show it: the id is asked live, then the name, then created.
    expect(r.calls()).toEqual({ getById: 1, findByName: 1, create: 1 });
    expect(r.service.store.list().filter((d) => d.name === "agent")).toHaveLength(1);
  });

  it("creates nothing when a batch's answer was cut short: the id is asked again and found", async () => {
    const r = replica();
    await r.settled();
    const [kept] = r.service.store.list();
    const answer = r.service.getByIds.bind(r.service);
    // One answer without the deployment the service still has.
    r.service.getByIds = async (ids, s) => (await answer(ids, s)).filter((d) => d.id !== kept?.id);
    expect(await r.pass()).toEqual({ getByIds: 1 });
    r.service.getByIds = answer;
    await r.reconcile();
    expect(r.calls()).toEqual({ getById: 1 });
    expect(r.service.store.list()).toHaveLength(1);
    expect(r.resources.stored(REF)?.status?.deploymentId).toBe(kept?.id);
  });

  it("adopts through the id a whole listing showed under a name it did not hold, with no lookup by name", async () => {
    const r = replica({ unrecorded: () => ["a", "b", "c"], batchedIds: true });
    const existing = r.service.seed(BODY);
    r.clock.advance(5_000);
    // Listed before the resource reached the replica: its name was not claimed, not held.
    expect(await r.pass()).toEqual({ listAll: 1 });
    r.resources.create({ metadata: { name: "agent" }, spec: SPEC });
    await r.reconcile();
    expect(r.calls()).toEqual({ getByIds: 1 });
    expect(r.resources.stored(REF)?.status?.deploymentId).toBe(existing.id);
  });

  it("creates only after the lookup by name when the id a whole listing showed is gone", async () => {
    const r = replica({ unrecorded: () => ["a", "b", "c"], batchedIds: true });
    const existing = r.service.seed(BODY);
    r.clock.advance(5_000);
    await r.pass();
    r.service.store.delete(existing.id);
    r.clock.advance(5_000);
    r.resources.create({ metadata: { name: "agent" }, spec: SPEC });
    await r.reconcile();
    expect(r.calls()).toEqual({ getByIds: 1, findByName: 1, create: 1 });
    expect(r.service.store.list().filter((d) => d.name === "agent")).toHaveLength(1);
  });

  it("makes no call for a resource while its connection's last read failed", async () => {
    const r = replica();
    await r.settled();
    r.service.failNext("getByIds", { status: 503, detail: "gateway down" });
    await expect(r.session.snapshot.refresh(signal())).rejects.toThrow("gateway down");
    r.service.resetCalls();
    await r.reconcile().catch(() => undefined);
    expect(r.calls()).toEqual({});
    expect(r.service.store.list()).toHaveLength(1);
  });
});

describe("RemoteSnapshot.readAhead: what lookups by id read ahead of a share", () => {
  it("is none unsharded: a whole listing holds what is asked", () => {
    const clock = new ManualClock({ start: 0 });
    const port: DeploymentListings = { listAll: async () => {}, getByIds: async () => [] };
    expect(new RemoteSnapshot(port, clock, { maxAgeMs: 60_000 }).readAhead()).toBeUndefined();
  });

  it("gives the share's ids the snapshot lacks, in order, a room at a time, none asked already", async () => {
    const service = deployments(300);
    let share = Array.from({ length: 100 }, (_, i) => id(i));
    const { snapshot } = shareOver(service, () => share);
    await snapshot.refresh(signal());
    // A share inherited: 200 more ids, the first 100 held.
    share = Array.from({ length: 300 }, (_, i) => id(i));
    const ahead = snapshot.readAhead();
    if (!ahead) throw new Error("sharded: a read-ahead");
    expect(ahead.ids(3, new Set([id(101)]))).toEqual([id(100), id(102), id(103)]);
    expect(ahead.ids(99, new Set())).toEqual(Array.from({ length: 99 }, (_, i) => id(104 + i)));
    // What comes is held, and answers the next reconcile's lookup whatever the listing's age.
    ahead.found(named(104));
    expect(snapshot.byId(id(104), 1)?.name).toBe("agent-104");
    expect(ahead.ids(1000, new Set())).toEqual(Array.from({ length: 97 }, (_, i) => id(203 + i)));
  });

  it(`goes through the share again no sooner than ${AHEAD_WALK_MS} ms after its last walk began`, async () => {
    const service = deployments(10);
    let walks = 0;
    const share = [id(0), id(1), id(2)];
    const { snapshot, clock } = shareOver(service, () => {
      walks += 1;
      return share;
    });
    const ahead = snapshot.readAhead();
    if (!ahead) throw new Error("sharded: a read-ahead");
    expect(ahead.ids(99, new Set())).toEqual(share);
    expect(walks).toBe(1);
    // Nothing found: still lacking, but not walked for again at once.
    expect(ahead.ids(99, new Set())).toEqual([]);
    clock.advance(AHEAD_WALK_MS - 1);
    expect(ahead.ids(99, new Set())).toEqual([]);
    expect(walks).toBe(1);
    clock.advance(1);
    ahead.found(named(1));
    expect(ahead.ids(99, new Set())).toEqual([id(0), id(2)]);
    expect(walks).toBe(2);
  });
});
