// A joined replica's share released whole by its owner (`release.ts`), end to end through the
// owner's own parts: its Lease held by its elector on a ManualClock, the ring's Leases in memory
// with resourceVersion semantics (test/support/ring-lease-store.ts), the newcomer a Lease the test
// renews. Never two writers: the owner reconciles the released share again only once the
// newcomer's process can no longer write, whatever a user does to the newcomer's Lease.
import pino from "pino";
import { Registry } from "prom-client";
import { afterEach, describe, expect, it } from "vitest";
import { Action } from "../../src/runtime/controller.ts";
import type { LeaseRecord } from "../../src/runtime/leader.ts";
import type { ObjectRef } from "../../src/runtime/queue-records.ts";
import { heirOf } from "../../src/sharding/inheritance.ts";
import { OWNER_LABEL } from "../../src/sharding/labels.ts";
import { HOLD_RECHECK_MS } from "../../src/sharding/member.ts";
import { ringOf } from "../../src/sharding/moving-by.ts";
import { type CachedResource, type ShardedReplica, shardedReplica } from "../../src/sharding/replica.ts";
import type { WatchHandlers } from "../../src/sharding/sharder-loop.ts";
import { ManualClock } from "../support/manual-clock.ts";
import { leaseRecord, RingLeaseStore } from "../support/ring-lease-store.ts";

const LEASE_MS = 15_000;
const RETRY_MS = 2_000;
const logger = pino({ level: "silent" });
const KEYS = Array.from({ length: 40 }, (_, i) => `ns/r${i}`);
/** The ring once "d" joined: the released share is what it gives "d". */
const JOINED = ringOf(["a", "d"], "a");
const SHARE = KEYS.filter((k) => heirOf(k, JOINED, undefined) === "d");

const stops: AbortController[] = [];
afterEach(() => {
  for (const s of stops.splice(0)) s.abort();
});

/** Lets the promises the clock's timers started run to their next wait. */
const settle = async () => {
  for (let i = 0; i < 20; i++) await new Promise((r) => setImmediate(r));
};

/** A resource labelled for "c" that "a" reconciles for it (inherited, or released to "a"), the joined ring giving it "d". */
const INHERITED =
  Array.from({ length: 40 }, (_, i) => `ns/i${i}`).find((k) => heirOf(k, JOINED, undefined) === "d") ?? "";

/**
 * The owner "a" (leader of the ring), its 40 resources cached (and `others`, labelled for "c"),
 * before the newcomer "d" joins (`join`).
 */
async function owner(others: readonly string[] = [], transit: ReadonlySet<string> = new Set()) {
  const clock = new ManualClock({ start: 1_000_000 });
  const leases = new RingLeaseStore();
  const labelled = (key: string, replica: string): [string, CachedResource] => {
    const [namespace, name] = key.split("/") as [string, string];
    return [key, { metadata: { namespace, name, resourceVersion: "1", labels: { [OWNER_LABEL]: replica } } }];
  };
  const cached = new Map<string, CachedResource>([
    ...KEYS.map((key) => labelled(key, "a")),
    ...others.map((key) => labelled(key, "c")),
  ]);
  const enqueued: string[] = [];
  const watchers: WatchHandlers<CachedResource>[] = [];
  const replica: ShardedReplica = shardedReplica({
    name: "a",
    identity: "a_1",
    leases,
    store: () => {
      throw new Error("no sharder runs here");
    },
    setLabels: async () => false,
    // Never written within a test (the newcomer never says it listed the share, and a minute does
    // not pass): a label would move the resource to the newcomer's cache.
    patchLabels: async () => "conflict",
    leaderElection: { leaseDurationMs: LEASE_MS, renewDeadlineMs: 10_000, retryPeriodMs: RETRY_MS },
    registry: new Registry(),
    clock,
    logger,
  });
  const keyOf = (ref: ObjectRef) => `${ref.namespace}/${ref.name}`;
  replica.attach(
    {
      get: (ref) => cached.get(keyOf(ref)),
      inTransit: (ref) => transit.has(keyOf(ref)),
      list: () => [...cached.values()],
      get size() {
        return cached.size;
      },
      subscribe: (handlers) => watchers.push(handlers),
    },
    keyOf,
    (obj) => [obj],
    undefined,
    undefined,
    (key) => enqueued.push(key),
  );
  replica.leaderObserved("a_1");
  const stop = new AbortController();
  stops.push(stop);
  const shardLease = replica.runnables.find((r) => r.name === "shard-lease");
  void shardLease?.start(stop.signal, new AbortController().signal);
  let newcomerAlive = true;
  let renewedAt = clock.now();
  const d = () => leases.get("d")?.record;
  /** Moves time on by `ms`, the newcomer renewing every retry period while it lives, as its elector does. */
  const advance = async (ms: number) => {
    for (let left = ms; left > 0; left -= 100) {
      clock.advance(Math.min(100, left));
      await settle();
      const record = d();
      if (newcomerAlive && record !== undefined && clock.now() - renewedAt >= RETRY_MS) {
        renewedAt = clock.now();
        // Its elector takes back a Lease whose holder was cleared, and renews its own.
        const ours = record.holderIdentity === "d_1";
        const acquiredAt = ours ? (record.acquireTime?.getTime() ?? renewedAt) : renewedAt;
        leases.put(
          "d",
          leaseRecord("d_1", LEASE_MS, acquiredAt, renewedAt, record.leaseTransitions + (ours ? 0 : 1)),
        );
      }
    }
  };
  /** Whether the owner reconciles `key` now (its guard calls the reconcile). */
  const reconciles = async (key: string) => {
    let called = false;
    await replica.guard(async () => {
      called = true;
      return Action.done();
    })(key, new AbortController().signal);
    return called;
  };
  await advance(RETRY_MS * 2);
  expect(leases.get("a")?.movingBy).toEqual(ringOf(["a"], "a"));
  return {
    replica,
    clock,
    leases,
    enqueued,
    advance,
    reconciles,
    /** The newcomer joins: its Lease, then the owner's next renewals show the ring with it. */
    join: async () => {
      leases.put("d", leaseRecord("d_1", LEASE_MS, clock.now()));
      renewedAt = clock.now();
      await advance(RETRY_MS * 3);
    },
    /**
     * `key` labelled for `replica` as the owner's watch shows it; undefined: for a replica whose
     * resources it does not watch (it left its cache).
     */
    relabel: (key: string, replica: string | undefined) => {
      const old = cached.get(key);
      if (replica === undefined) {
        cached.delete(key);
        for (const w of watchers) if (old) w.onDelete?.(old);
        return;
      }
      const obj = labelled(key, replica)[1];
      cached.set(key, obj);
      for (const w of watchers) old ? w.onUpdate?.(old, obj) : w.onAdd?.(obj);
    },
    /** The newcomer stops renewing (its process stopped, or the test leaves its Lease as edited). */
    die: () => {
      newcomerAlive = false;
    },
    /** When the newcomer last renewed: its process may write until a Lease duration after. */
    lastRenewal: () => renewedAt,
  };
}

/** {@link owner}, the newcomer joined and the share released to it. */
async function handOff() {
  const h = await owner();
  await h.join();
  expect(h.leases.get("a")?.released?.identity).toBe("d_1");
  expect(SHARE.length).toBeGreaterThan(0);
  for (const key of SHARE) expect(await h.reconciles(key)).toBe(false);
  return h;
}

describe("a joined replica's share released whole", () => {
  const edits: Array<[string, (now: number, r: LeaseRecord) => Partial<LeaseRecord>]> = [
    ["its holder cleared", () => ({ holderIdentity: "" })],
    [
      "its holder cleared and its duration cut to a second",
      () => ({ holderIdentity: "", leaseDurationSeconds: 1 }),
    ],
    [
      "its holder cleared and its renewal moved a minute back",
      (_now, r) => ({
        holderIdentity: "",
        renewTime: new Date((r.renewTime?.getTime() ?? 0) - 60_000),
      }),
    ],
    ["another process named its holder", () => ({ holderIdentity: "d_2" })],
  ];

  for (const [what, change] of edits)
    it(`is not reconciled by its owner while the newcomer may still write, its Lease edited by hand: ${what}`, async () => {
      const h = await handOff();
      // The newcomer stops renewing right after a renewal; its Lease is edited by hand then.
      await h.advance(500);
      h.die();
      const writesUntil = h.lastRenewal() + LEASE_MS;
      const record = h.leases.get("d")?.record as LeaseRecord;
      h.leases.edit("d", change(h.clock.now(), record));
      while (h.clock.now() < writesUntil) {
        await h.advance(500);
        expect(h.enqueued).toEqual([]);
        for (const key of SHARE.slice(0, 3)) expect(await h.reconciles(key)).toBe(false);
      }
      // Its process cannot write now: the share is reconciled here again, each key queued.
      await h.advance(LEASE_MS);
      expect([...h.enqueued].sort()).toEqual([...SHARE].sort());
      for (const key of SHARE) expect(await h.reconciles(key)).toBe(true);
      expect(h.leases.get("a")?.released).toBeUndefined();
    });

  it("stays released when the newcomer takes back the Lease whose holder was cleared by hand", async () => {
    const h = await handOff();
    h.leases.edit("d", { holderIdentity: "" });
    await h.advance(LEASE_MS * 2);
    expect(h.leases.get("d")?.record.holderIdentity).toBe("d_1");
    expect(h.enqueued).toEqual([]);
    expect(h.leases.get("a")?.released?.identity).toBe("d_1");
    for (const key of SHARE) expect(await h.reconciles(key)).toBe(false);
  });

  it("is reconciled here again at once when the newcomer released its Lease (its writes settled)", async () => {
    const h = await handOff();
    h.die();
    const now = new Date(h.clock.now());
    // What its elector writes once its writes settled.
    h.leases.edit("d", { holderIdentity: "", leaseDurationSeconds: 1, acquireTime: now, renewTime: now });
    await h.advance(100);
    expect([...h.enqueued].sort()).toEqual([...SHARE].sort());
  });

  it("is reconciled here again a Lease duration after the newcomer's Lease was deleted", async () => {
    const h = await handOff();
    h.die();
    const writesUntil = h.lastRenewal() + LEASE_MS;
    h.leases.remove("d");
    while (h.clock.now() < writesUntil) {
      await h.advance(500);
      expect(h.enqueued).toEqual([]);
    }
    await h.advance(LEASE_MS);
    expect([...h.enqueued].sort()).toEqual([...SHARE].sort());
  });
});

/** A reconcile of `key` by `replica` whose write was sent and waits for its answer (`answer`). */
async function writing(replica: ShardedReplica, key: string) {
  let answer = () => {};
  const answered = new Promise<void>((resolve) => {
    answer = resolve;
  });
  let sent = false;
  const reconcile = replica.guard(async () => {
    const grant = replica.writeGate();
    if ("refuse" in grant) throw new Error(grant.refuse);
    sent = true;
    await answered;
    grant.ended(0);
    return Action.done();
  })(key, new AbortController().signal);
  await settle();
  expect(sent).toBe(true);
  return { answer, reconcile };
}

describe("a share released while the owner writes for another replica a resource the release gives away", () => {
  // The owner reconciles a resource labelled for another replica (a share inherited, or released
  // to it as it joined), and its write is in flight when a replica joins. That resource joins the
  // owner's share by another's label write, and the newcomer reconciles it the moment it does.
  for (const [what, cached] of [
    ["cached", true],
    ["not cached a moment (between two watches, or deleted)", false],
  ] as const)
    it(`is said released only once that write was answered, and the resource is not reconciled here meanwhile: ${what}`, async () => {
      expect(INHERITED).not.toBe("");
      const h = await owner([INHERITED]);
      const { answer, reconcile } = await writing(h.replica, INHERITED);
      // The other replica's label for this one: gone from one watch, not yet in the other.
      if (!cached) h.relabel(INHERITED, undefined);
      await h.join();
      // Released with the rest: never reconciled here again while the release lasts.
      expect(await h.reconciles(INHERITED)).toBe(false);
      // Not said while its write may still run at the service, however many renewals pass.
      for (let i = 0; i < 5; i++) {
        await h.advance(RETRY_MS);
        expect(h.leases.get("a")?.released).toBeUndefined();
      }
      answer();
      await reconcile;
      await h.advance(RETRY_MS * 2);
      expect(h.leases.get("a")?.released?.identity).toBe("d_1");
      expect(await h.reconciles(INHERITED)).toBe(false);
    });

  it("goes on while that resource is labelled for the other replica, the rest of the share gone to the newcomer", async () => {
    const h = await owner([INHERITED]);
    await h.join();
    expect(h.leases.get("a")?.released?.identity).toBe("d_1");
    // The owner's labels for the newcomer landed: none of its own share is left here.
    for (const key of SHARE) h.relabel(key, undefined);
    await h.advance(RETRY_MS * 3);
    // The other replica's label for this one has not: the newcomer reconciles the resource the
    // moment it lands, by the release it reads on this Lease (its watch of this Lease may lag).
    expect(h.leases.get("a")?.released?.identity).toBe("d_1");
    expect(await h.reconciles(INHERITED)).toBe(false);
    // It lands: one of the released share, stopped here, and the release goes on.
    h.relabel(INHERITED, "a");
    await h.advance(RETRY_MS * 3);
    expect(h.leases.get("a")?.released?.identity).toBe("d_1");
    expect(await h.reconciles(INHERITED)).toBe(false);
    // Labelled for the newcomer: nothing of the release is left, it ends.
    h.relabel(INHERITED, undefined);
    await h.advance(RETRY_MS * 2);
    expect(h.leases.get("a")?.released).toBeUndefined();
  });

  it("is parked while the release lasts, not looked at again every few seconds, and queued again once the newcomer cannot take it up", async () => {
    const h = await owner([INHERITED]);
    await h.join();
    expect(h.leases.get("a")?.released?.identity).toBe("d_1");
    // Thousands may be (a share released to this replica a moment before): none is queued again
    // while the release lasts, ahead of the replica's other work.
    const result = await h.replica.guard(async () => Action.done())(INHERITED, new AbortController().signal);
    expect(result).toEqual(Action.gone());
    // The newcomer released its Lease (its writes settled): reconciled here again, queued.
    h.die();
    const now = new Date(h.clock.now());
    h.leases.edit("d", { holderIdentity: "", leaseDurationSeconds: 1, acquireTime: now, renewTime: now });
    await h.advance(100);
    expect(h.enqueued).toContain(INHERITED);
    expect(await h.reconciles(INHERITED)).toBe(true);
  });
});

describe("a resource of a released share deleted and created again under its name", () => {
  // The sharder gives the new resource to the replica that had the deleted one (`recreated.ts`):
  // its write for the deleted one, the same deployment by name, may still run at the service.
  it("is part of the release there: not reconciled, and the release said only once that write was answered", async () => {
    const key = SHARE[0] ?? "";
    const h = await owner();
    const { answer, reconcile } = await writing(h.replica, key);
    await h.join();
    h.relabel(key, undefined);
    h.relabel(key, "a");
    for (let i = 0; i < 5; i++) {
      await h.advance(RETRY_MS);
      expect(h.leases.get("a")?.released).toBeUndefined();
      expect(await h.reconciles(key)).toBe(false);
    }
    answer();
    await reconcile;
    await h.advance(RETRY_MS * 2);
    expect(h.leases.get("a")?.released?.identity).toBe("d_1");
    expect(await h.reconciles(key)).toBe(false);
  });
});

describe("a resource between two of the replica's watches (in transit)", () => {
  it("is not reconciled and not dropped: looked at again until it is back, dropped once it is not", async () => {
    const transit = new Set<string>();
    const o = await owner([], transit);
    const key = KEYS[0] ?? "";
    const guarded = () => o.replica.guard(async () => Action.done())(key, new AbortController().signal);
    // Its watch stopped to start again by a new ring: out of the cache, in transit.
    o.relabel(key, undefined);
    transit.add(key);
    expect(await guarded()).toEqual(Action.requeueAfter(HOLD_RECHECK_MS));
    // Listed again: reconciled.
    o.relabel(key, "a");
    transit.delete(key);
    expect(await guarded()).toEqual(Action.done());
    // Gone for good (its transit over): nothing to reconcile.
    o.relabel(key, undefined);
    expect(await guarded()).toEqual(Action.gone());
  });
});
