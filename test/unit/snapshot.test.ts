// The resync snapshot: a listing never undoes a write answered while it was under way, and a
// caller that stops waiting for a shared listing fails alone.
import { pino } from "pino";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { Deployment, UnreadableDeployment } from "../../src/api/wire.ts";
import type { DeploymentListings } from "../../src/reconcile/ports.ts";
import { UnreadableDeploymentError } from "../../src/reconcile/service/lookup-errors.ts";
import { RolloutPoller } from "../../src/reconcile/service/rollout-poller.ts";
import { RemoteSnapshot } from "../../src/reconcile/service/snapshot.ts";
import { ListingDeadlineError, UNREADABLE_KEPT } from "../../src/reconcile/service/snapshot-reader.ts";
import { type Clock, systemClock } from "../../src/runtime/clock.ts";
import { ManualClock } from "../support/manual-clock.ts";
import { remote } from "./plan-fixtures.ts";

/** An in-memory service whose listings answer only when the test releases them. */
function heldListings(clock: Clock = systemClock, listingDeadlineMs?: number) {
  const pending: Array<{
    signal: AbortSignal;
    answer: (all: Deployment[]) => void;
    fail: (error: Error) => void;
  }> = [];
  const unused = () => Promise.reject(new Error("not used by the snapshot"));
  const port: DeploymentListings = {
    listAll: (signal, each) =>
      new Promise((resolve, reject) => {
        signal.addEventListener("abort", () => reject(signal.reason), { once: true });
        pending.push({
          signal,
          answer: (deployments) => {
            for (const deployment of deployments) each(deployment);
            resolve();
          },
          fail: reject,
        });
      }),
    getByIds: unused,
  };
  const snapshot = new RemoteSnapshot(port, clock, {
    maxAgeMs: 60_000,
    ...(listingDeadlineMs === undefined ? {} : { listingDeadlineMs }),
  });
  return { snapshot, pending };
}

const scaled = (maxScale: number) =>
  remote({ source_config: { resource_spec: { min_scale: 1, max_scale: maxScale } } });
const scaleOf = (d: Deployment | null | undefined) => d?.source_config.resource_spec?.max_scale;

describe("RemoteSnapshot", () => {
  it("keeps a write answered while the listing was under way, and takes the listing over older writes", async () => {
    const { snapshot, pending } = heldListings();
    const before = scaled(2);
    const other = remote({ id: "0f0e0d0c-0b0a-4908-8706-050403020100", name: "other" });

    snapshot.remember(scaled(5)); // answered before the listing started: the listing is newer
    const listing = snapshot.refresh(new AbortController().signal);
    snapshot.remember(scaled(3)); // a PATCH answered while the listing was under way
    snapshot.forget(other.id); // a deployment found gone meanwhile
    pending[0]?.answer([before, other]);
    await listing;

    expect(scaleOf(snapshot.byId(before.id))).toBe(3);
    expect(snapshot.byId(other.id)).toBeNull();

    // The next listing, started after those writes, is the newer word.
    const next = snapshot.refresh(new AbortController().signal);
    pending[1]?.answer([scaled(4), other]);
    await next;
    expect(scaleOf(snapshot.byId(before.id))).toBe(4);
    expect(snapshot.byId(other.id)?.name).toBe("other");
  });

  it("stops the listing once every caller gave up, and the next caller lists afresh", async () => {
    const { snapshot, pending } = heldListings();
    const a = new AbortController();
    const b = new AbortController();
    const first = snapshot.refresh(a.signal);
    const second = snapshot.refresh(b.signal);
    a.abort(new Error("a gave up"));
    b.abort(new Error("b gave up"));
    await expect(first).rejects.toThrow("a gave up");
    await expect(second).rejects.toThrow("b gave up");
    expect(pending[0]?.signal.aborted).toBe(true);
    expect(snapshot.isFresh()).toBe(false);

    const third = snapshot.refresh(new AbortController().signal);
    expect(pending).toHaveLength(2);
    pending[1]?.answer([scaled(2)]);
    await third;
    expect(snapshot.isFresh()).toBe(true);
  });
});

describe("RemoteSnapshot listing deadline", () => {
  it("gives up a listing at its deadline and says so until a listing ends in time", async () => {
    const clock = new ManualClock({ start: 0 });
    const { snapshot, pending } = heldListings(clock, 5_000);
    const first = snapshot.refresh(new AbortController().signal);
    clock.advance(4_999);
    expect(snapshot.listingFailure()).toBeUndefined();
    clock.advance(1);
    await expect(first).rejects.toBeInstanceOf(ListingDeadlineError);
    // The request itself is cancelled: nothing keeps waiting on that service.
    expect(pending[0]?.signal.aborted).toBe(true);
    expect(snapshot.listingFailure()).toEqual({ kind: "deadline", deadlineMs: 5_000 });

    const second = snapshot.refresh(new AbortController().signal);
    pending[1]?.fail(new Error("GET /v2/deployments: 503 unavailable: gateway down"));
    await expect(second).rejects.toThrow("gateway down");
    expect(snapshot.listingFailure()).toMatchObject({ kind: "failed", deadlineMs: 5_000 });
    expect(String((snapshot.listingFailure() as { error: unknown }).error)).toContain("gateway down");

    // A listing its callers gave up (a shutdown) says nothing of the service.
    const caller = new AbortController();
    const third = snapshot.refresh(caller.signal);
    caller.abort(new Error("stopping"));
    await expect(third).rejects.toThrow("stopping");
    expect(snapshot.listingFailure()?.kind).toBe("failed");

    const fourth = snapshot.refresh(new AbortController().signal);
    clock.advance(4_000);
    pending[3]?.answer([scaled(2)]);
    await fourth;
    expect(snapshot.listingFailure()).toBeUndefined();
    expect(snapshot.listedWithin(1)).toBe(false);
    expect(snapshot.listedWithin(4_001)).toBe(true);
    // The deadline of a listing that ended in time fires no more.
    expect(clock.pending).toBe(0);
  });
});

describe("RemoteSnapshot lookups", () => {
  const id = (n: number) => `00000000-0000-4000-8000-${String(n).padStart(12, "0")}`;
  const named = (n: number, name = `agent-${n}`) => remote({ id: id(n), name });

  /** A snapshot over an in-memory listing; `calls` counts the service calls by kind. */
  function snapshotOver(listing: Deployment[], maxAgeMs = 60_000, unreadable: UnreadableDeployment[] = []) {
    const calls = { listAll: 0, getByIds: [] as number[] };
    const port: DeploymentListings = {
      listAll: async (_signal, each, skipped) => {
        calls.listAll += 1;
        for (const deployment of listing) each(deployment);
        for (const item of unreadable) skipped(item);
      },
      getByIds: async (ids) => {
        calls.getByIds.push(ids.length);
        return listing.filter((d) => ids.includes(d.id));
      },
    };
    return { snapshot: new RemoteSnapshot(port, systemClock, { maxAgeMs }), calls };
  }

  afterEach(() => {
    vi.useRealTimers();
  });

  it("holds a deployment's new fields when only their names changed, not its old ones", async () => {
    // The same values, the last under another name (unknown fields kept as the service sent
    // them): the JSON of the values is the same text, the shape is not.
    const before = { ...named(1), kept_field: "x" } as Deployment;
    const after = { ...named(1), renamed_field: "x" } as Deployment;
    const { snapshot } = snapshotOver([before]);
    await snapshot.refresh(new AbortController().signal);
    expect(snapshot.byId(id(1))).toStrictEqual(before);
    snapshot.remember(after);
    const held = snapshot.byId(id(1)) as Deployment & Record<string, unknown>;
    expect(held).toStrictEqual(after);
    expect(Object.keys(held).at(-1)).toBe("renamed_field");
    expect("kept_field" in held).toBe(false);
  });

  it("holds the latest revision its own writes answered, the newest 512 deployments' only", () => {
    const { snapshot } = snapshotOver([]);
    const written = (n: number, revision: string) =>
      ({ ...named(n), latest_revision_id: revision }) as Deployment;
    snapshot.remember(written(1, "r-1"));
    snapshot.remember(written(1, "r-2"));
    expect(snapshot.ownLatest(id(1))).toBe("r-2");
    for (let n = 2; n <= 512; n += 1) snapshot.remember(written(n, `r-${n}`));
    expect(snapshot.ownLatest(id(1))).toBe("r-2");
    snapshot.remember(written(513, "r-513"));
    expect(snapshot.ownLatest(id(1))).toBeUndefined();
    expect(snapshot.ownLatest(id(2))).toBe("r-2");
    expect(snapshot.ownLatest(id(513))).toBe("r-513");
  });

  it("answers by exact name, and follows a write that renames or a deployment forgotten", async () => {
    const { snapshot } = snapshotOver([named(1), named(2), named(3, "agent-1")]);
    expect(snapshot.byName("agent-1")).toBeUndefined();
    await snapshot.refresh(new AbortController().signal);
    expect(snapshot.byName("agent-1")?.map((d) => d.id)).toEqual([id(1), id(3)]);
    expect(snapshot.byName("agent")).toEqual([]);
    snapshot.remember(named(3, "renamed"));
    expect(snapshot.byName("agent-1")?.map((d) => d.id)).toEqual([id(1)]);
    expect(snapshot.byName("renamed")?.map((d) => d.id)).toEqual([id(3)]);
    snapshot.forget(id(1));
    expect(snapshot.byName("agent-1")).toEqual([]);
    expect(snapshot.byId(id(1))).toBeNull();
  });

  it("serves a resync pass however long it takes, and goes stale once the pass released it", async () => {
    vi.useFakeTimers({ now: 0 });
    const { snapshot } = snapshotOver([named(1)], 10_000);
    await snapshot.refresh(new AbortController().signal);
    const release = snapshot.holdFresh();
    vi.setSystemTime(600_000);
    expect(snapshot.byId(id(1))?.name).toBe("agent-1");
    expect(snapshot.byName("agent-1")).toHaveLength(1);
    release();
    release();
    expect(snapshot.isFresh()).toBe(false);
    expect(snapshot.byId(id(1))).toBeUndefined();
    expect(snapshot.byName("agent-1")).toBeUndefined();
  });

  it("answers a poll-fresh lookup only with an entry the service gave in that window", async () => {
    vi.useFakeTimers({ now: 0 });
    const { snapshot } = snapshotOver([named(1), named(2)]);
    await snapshot.refresh(new AbortController().signal);
    vi.setSystemTime(8_000);
    snapshot.remember(named(2));
    vi.setSystemTime(12_000);
    expect(snapshot.byId(id(1), 10_000)).toBeUndefined();
    expect(snapshot.byId(id(2), 10_000)?.name).toBe("agent-2");
    expect(snapshot.byId(id(1))?.name).toBe("agent-1");
  });

  it("polls a hundred ids per call and keeps an id the service did not return", async () => {
    vi.useFakeTimers({ now: 0 });
    const listing = Array.from({ length: 250 }, (_, i) => named(i));
    const { snapshot, calls } = snapshotOver(listing);
    await snapshot.refresh(new AbortController().signal);
    vi.setSystemTime(20_000);
    const lagging = id(999);
    snapshot.remember(remote({ id: lagging, name: "just-created" }));
    vi.setSystemTime(40_000);
    await snapshot.poll([...listing.map((d) => d.id), lagging], new AbortController().signal);
    expect(calls.getByIds).toEqual([100, 100, 51]);
    expect(snapshot.byId(id(42), 1_000)?.name).toBe("agent-42");
    expect(snapshot.byId(lagging)?.name).toBe("just-created");
  });

  it("polls a deployment once per reconcile that takes the read, however long the queue held it", async () => {
    vi.useFakeTimers({ now: 0 });
    const { snapshot, calls } = snapshotOver([named(1), named(2)]);
    await snapshot.refresh(new AbortController().signal);
    const signal = new AbortController().signal;
    await snapshot.poll([id(1), id(2)], signal);
    // A backlog: no reconcile took those reads yet, so polling again asks nothing.
    vi.setSystemTime(5_000);
    await snapshot.poll([id(1), id(2)], signal);
    expect(calls.getByIds).toEqual([2]);
    // The reconcile of 1 comes a minute late and reads what the poller read for it; reading
    // changes nothing ...
    vi.setSystemTime(60_000);
    expect(snapshot.byId(id(1), 10_000)?.name).toBe("agent-1");
    expect(snapshot.byId(id(1), 10_000)?.name).toBe("agent-1");
    // ... until it takes the read, once: its next reconcile needs a newer one, which the next
    // poll makes.
    snapshot.takePollAnswer(id(1));
    expect(snapshot.byId(id(1), 10_000)).toBeUndefined();
    await snapshot.poll([id(1), id(2)], signal);
    expect(calls.getByIds).toEqual([2, 1]);
    // A reconcile's own lookup spends the poll read too: the poller reads 2 again.
    snapshot.observed(named(2));
    await snapshot.poll([id(1), id(2)], signal);
    expect(calls.getByIds).toEqual([2, 1, 1]);
  });

  it("knows a created deployment only from the create's answer until a read lists it", async () => {
    const created = named(7);
    const { snapshot } = snapshotOver([]);
    await snapshot.refresh(new AbortController().signal);
    snapshot.remember(created);
    expect(snapshot.byId(created.id)?.name).toBe("agent-7");
    expect(snapshot.isListed(created.id)).toBe(false);
    // A PATCH's answer does not make it listed either; a read does, and stays so after a write.
    snapshot.remember(created);
    expect(snapshot.isListed(created.id)).toBe(false);
    snapshot.observed(created);
    expect(snapshot.isListed(created.id)).toBe(true);
    snapshot.remember(created);
    expect(snapshot.isListed(created.id)).toBe(true);
  });

  it("refuses to say a name or an id is free when the listing held an item it could not read", async () => {
    const problem = (what: string) => `deployment ${what}: id: expected a uuid`;
    const { snapshot } = snapshotOver([named(1)], 60_000, [
      { name: "broken", field: "id", message: problem("broken") },
      { id: id(5), name: "half-read", field: "status", message: problem("half-read") },
    ]);
    await snapshot.refresh(new AbortController().signal);
    expect(() => snapshot.byName("broken")).toThrow(UnreadableDeploymentError);
    expect(() => snapshot.byName("broken")).toThrow(/nothing is created meanwhile/);
    expect(() => snapshot.byId(id(5))).toThrow(UnreadableDeploymentError);
    expect(snapshot.byName("agent-1")).toHaveLength(1);
    expect(snapshot.byName("free")).toEqual([]);

    // An item with no name could be any name's: the snapshot cannot say a name is free.
    const unnamed = snapshotOver([named(1)], 60_000, [{ field: "name", message: problem("#3") }]).snapshot;
    await unnamed.refresh(new AbortController().signal);
    expect(unnamed.byName("free")).toBeUndefined();
    expect(unnamed.byName("agent-1")).toHaveLength(1);
  });
});

describe("RemoteSnapshot of a connection whose resources claim a few names", () => {
  const id = (n: number) => `00000000-0000-4000-8000-${String(n).padStart(12, "0")}`;
  const unused = () => Promise.reject(new Error("not used by the snapshot"));

  /**
   * A snapshot over a listing of `pages` pages of a hundred distinct deployments `endless-<n>`
   * (made as they are read, as a hostile server answers them), whose resources claim `claimed`.
   * `largest` is the most entries the snapshot held at any item of the listing.
   */
  function claimedOf(
    pages: number,
    claimed: Set<string>,
    unreadable = 0,
    nameOf = (i: number) => `endless-${i}`,
  ) {
    const seen = { largest: 0, items: 0 };
    const port: DeploymentListings = {
      listAll: async (_signal, each, skipped) => {
        for (let page = 0; page < pages; page++) {
          for (let i = page * 100; i < page * 100 + 100; i++) each(remote({ id: id(i), name: nameOf(i) }));
          seen.largest = Math.max(seen.largest, snapshot.size);
          // Let other work run between pages, as the HTTP client does.
          await Promise.resolve();
        }
        for (let i = 0; i < unreadable; i++)
          skipped({ id: id(1_000_000 + i), name: `broken-${i}`, field: "status", message: `broken-${i}` });
      },
      getByIds: unused,
    };
    const snapshot = new RemoteSnapshot(port, systemClock, {
      maxAgeMs: 60_000,
      wanted: (name) => {
        seen.items += 1;
        return claimed.has(name);
      },
    });
    return { snapshot, seen };
  }

  it("holds only the claimed deployments of a listing of 100,000: the rest cost their page only", async () => {
    const claimed = new Set(["endless-7", "endless-99999", "agent"]);
    const { snapshot, seen } = claimedOf(1000, claimed);
    for (let listing = 0; listing < 2; listing++) await snapshot.refresh(new AbortController().signal);
    expect(seen.items).toBe(200_000);
    expect(seen.largest).toBeLessThanOrEqual(2);
    expect(snapshot.size).toBe(2);
    expect(snapshot.byName("endless-7")?.map((d) => d.id)).toEqual([id(7)]);
    expect(snapshot.byId(id(99_999))?.name).toBe("endless-99999");
    // A claimed name the listing did not have is free: the check before a create costs no call.
    expect(snapshot.byName("agent")).toEqual([]);
    // A name the listing showed but did not hold: the snapshot cannot say (never "none").
    for (let i = 0; i < 100_000; i += 97)
      if (!claimed.has(`endless-${i}`)) expect(snapshot.byName(`endless-${i}`)).toBeUndefined();
    expect(snapshot.byId(id(5))).toBeNull(); // not held: a lookup of the id asks the service
    // Names the listing did not show are, nearly all, known to be free.
    const free = Array.from({ length: 1000 }, (_, i) => snapshot.byName(`agent-${i}`));
    expect(free.every((answer) => answer === undefined || answer.length === 0)).toBe(true);
    expect(free.filter((answer) => answer !== undefined).length).toBeGreaterThan(950);
  });

  it("holds two of a claimed name the listing repeats 50,000 times: enough to say it is ambiguous", async () => {
    const { snapshot, seen } = claimedOf(500, new Set(["x"]), 0, () => "x");
    await snapshot.refresh(new AbortController().signal);
    expect(seen.largest).toBeLessThanOrEqual(2);
    expect(snapshot.byName("x")?.map((d) => d.id)).toEqual([id(0), id(1)]);
    // The next listing holds the same two, and no more.
    await snapshot.refresh(new AbortController().signal);
    expect(snapshot.size).toBe(2);
  });

  it("looks up live a name claimed after its item went by, and drops an entry no longer claimed", async () => {
    const claimed = new Set(["endless-1"]);
    const { snapshot } = claimedOf(1, claimed);
    await snapshot.refresh(new AbortController().signal);
    expect(snapshot.size).toBe(1);
    // A resource created since claims endless-2, which the listing had: not "none".
    claimed.add("endless-2");
    expect(snapshot.byName("endless-2")).toBeUndefined();
    // The next listing holds it, and lets endless-1 go once nothing claims it.
    claimed.delete("endless-1");
    await snapshot.refresh(new AbortController().signal);
    expect(snapshot.byName("endless-2")?.map((d) => d.id)).toEqual([id(2)]);
    expect(snapshot.byName("endless-1")).toBeUndefined();
    expect(snapshot.byId(id(1))).toBeNull();
    expect(snapshot.size).toBe(1);
  });

  it("keeps a write of an unclaimed deployment answered while the listing was under way", async () => {
    const { snapshot } = claimedOf(1, new Set());
    const listing = snapshot.refresh(new AbortController().signal);
    snapshot.remember(remote({ id: id(3), name: "endless-3" }));
    await listing;
    expect(snapshot.byId(id(3))?.name).toBe("endless-3");
    // The next listing lets it go: nothing claims it.
    await snapshot.refresh(new AbortController().signal);
    expect(snapshot.byId(id(3))).toBeNull();
    expect(snapshot.size).toBe(0);
  });

  it(`keeps ${UNREADABLE_KEPT} unreadable items of a listing; a name of the others is looked up live`, async () => {
    const { snapshot } = claimedOf(1, new Set(["endless-1"]), 5_000);
    await snapshot.refresh(new AbortController().signal);
    expect(() => snapshot.byName("broken-0")).toThrow(UnreadableDeploymentError);
    expect(() => snapshot.byId(id(1_000_000))).toThrow(UnreadableDeploymentError);
    expect(snapshot.byName(`broken-${UNREADABLE_KEPT}`)).toBeUndefined();
    expect(snapshot.byName("broken-4999")).toBeUndefined();
    expect(snapshot.byId(id(1_004_999))).toBeNull();
    expect(snapshot.byName("endless-1")).toHaveLength(1);
  });
});

describe("RolloutPoller", () => {
  it("polls each connection on its own: one whose poll never answers is skipped, and holds back no other", async () => {
    const clock = new ManualClock({ start: 0 });
    const calls = { hanging: 0, healthy: 0 };
    const portOf = (name: keyof typeof calls): DeploymentListings => {
      const unused = () => Promise.reject(new Error("not used by the poller"));
      return {
        getByIds: (_ids, signal) => {
          calls[name] += 1;
          if (name === "healthy") return Promise.resolve([]);
          return new Promise((_, reject) =>
            signal.addEventListener("abort", () => reject(signal.reason), { once: true }),
          );
        },
        listAll: unused,
      };
    };
    const hanging = new RemoteSnapshot(portOf("hanging"), clock, { maxAgeMs: 60_000 });
    const healthy = new RemoteSnapshot(portOf("healthy"), clock, { maxAgeMs: 60_000 });
    const poller = new RolloutPoller({
      targets: () => [
        { snapshot: hanging, ids: ["00000000-0000-4000-8000-000000000001"] },
        { snapshot: healthy, ids: ["00000000-0000-4000-8000-000000000002"] },
      ],
      periodMs: 1_000,
      clock,
      logger: pino({ level: "silent" }),
    });
    const stop = new AbortController();
    const running = poller.start(stop.signal);
    for (let i = 0; i < 3; i++) {
      clock.advance(1_000);
      await new Promise<void>((resolve) => setImmediate(resolve));
    }
    expect(calls).toEqual({ hanging: 1, healthy: 3 });
    stop.abort(new Error("stopping"));
    await running;
  });
});
