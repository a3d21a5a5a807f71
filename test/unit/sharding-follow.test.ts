/**
 * A join by the ring followed (src/sharding/ring-follow.ts), on one replica against a manual clock
 * and in-memory Leases and cache: the replica follows the ring the leader's Lease publishes, never
 * starts a reconcile of a resource that ring gives another live member, hands it over with one
 * label write of its own only once the reconcile in flight ended, keeps (and reconciles again) a
 * resource whose ring changed back before that write, hands nothing to a member it does not see
 * live, and writes the ring it follows on its own Lease (its acknowledgement to the sharder).
 */
import { pino } from "pino";
import { Registry } from "prom-client";
import { describe, expect, it } from "vitest";
import { decodeLease } from "../../src/kube/shards.ts";
import { Action } from "../../src/runtime/controller.ts";
import type { LeaseRecord, LeaseSnapshot } from "../../src/runtime/leader.ts";
import { type ObjectRef, objectKey } from "../../src/runtime/queue-lines.ts";
import { heirOf, type Inheritance } from "../../src/sharding/inheritance.ts";
import { DRAIN_LABEL, OWNER_LABEL } from "../../src/sharding/labels.ts";
import { ACK_RETRY_MS } from "../../src/sharding/member.ts";
import { type CachedResource, shardedReplica } from "../../src/sharding/replica.ts";
import { FOLLOWS_ANNOTATION, followsRing, RingFollower } from "../../src/sharding/ring-follow.ts";
import type { RingLeaseObject, RingLeases, WatchHandlers } from "../../src/sharding/sharder-loop.ts";
import { ManualClock } from "../support/manual-clock.ts";

/** A reconcile of a resource let go by the ring while still cached: not run, asked again. */
const LET_GO = Action.requeueAfter(ACK_RETRY_MS);

const logger = pino({ level: "silent" });
const LEASE_MS = 15_000;
const FOUR: Inheritance = { members: ["a", "b", "c", "d"], leader: "a" };
const THREE: Inheritance = { members: ["a", "b", "c"], leader: "a" };

/** The first claim `r<i>` that `ring` gives `to`, from `from` on. */
function claimFor(ring: Inheritance, to: string, from = 0): string {
  for (let i = from; ; i++) if (heirOf(`r${i}`, ring) === to) return `r${i}`;
}

/** The ring's Leases in memory; the writes of each replica's own Lease are kept with what they carried. */
class Leases implements RingLeases {
  readonly #leases = new Map<string, RingLeaseObject>();
  readonly #handlers = new Set<WatchHandlers<RingLeaseObject>>();
  #rv = 1;
  /** Each create or update of a Lease: its name and the ring it said it follows. */
  readonly writes: { name: string; follows: Inheritance | undefined }[] = [];
  readonly synced = Promise.resolve();
  readonly clock: ManualClock;
  constructor(clock: ManualClock) {
    this.clock = clock;
  }

  put(name: string, holder: string, follows?: Inheritance): void {
    const old = this.#leases.get(name);
    const next: RingLeaseObject = {
      metadata: { name, resourceVersion: String(this.#rv++) },
      record: {
        holderIdentity: holder,
        leaseDurationSeconds: LEASE_MS / 1000,
        acquireTime: new Date(0),
        renewTime: new Date(this.clock.now()),
        leaseTransitions: 0,
      },
      ...(follows ? { follows } : {}),
    };
    this.#leases.set(name, next);
    for (const h of this.#handlers) old ? h.onUpdate?.(old, next) : h.onAdd?.(next);
  }
  list(): readonly RingLeaseObject[] {
    return [...this.#leases.values()];
  }
  subscribe(handlers: WatchHandlers<RingLeaseObject>): () => void {
    this.#handlers.add(handlers);
    return () => this.#handlers.delete(handlers);
  }
  lease(name: string, _inheritance?: Inheritance, follows?: Inheritance) {
    const snapshot = (): LeaseSnapshot | undefined => {
      const l = this.#leases.get(name);
      return l ? { record: l.record, resourceVersion: l.metadata.resourceVersion } : undefined;
    };
    const write = async (record: LeaseRecord): Promise<LeaseSnapshot> => {
      this.writes.push({ name, follows });
      this.put(name, record.holderIdentity, follows);
      return snapshot() as LeaseSnapshot;
    };
    return {
      get: async () => snapshot(),
      create: write,
      update: (record: LeaseRecord) => write(record),
      delete: async () => true,
    };
  }
  run = async () => {};
}

/** A replica's cache of its share, in memory. */
class Cache {
  readonly #items = new Map<string, CachedResource>();
  readonly #handlers = new Set<WatchHandlers<CachedResource>>();
  #rv = 1;
  set(name: string, owner: string, drain?: string): void {
    const key = objectKey({ namespace: "ns", name });
    const old = this.#items.get(key);
    const labels: Record<string, string> = {
      [OWNER_LABEL]: owner,
      ...(drain ? { [DRAIN_LABEL]: drain } : {}),
    };
    const next = { metadata: { namespace: "ns", name, resourceVersion: String(this.#rv++), labels } };
    this.#items.set(key, next);
    for (const h of this.#handlers) old ? h.onUpdate?.(old, next) : h.onAdd?.(next);
  }
  remove(name: string): void {
    const key = objectKey({ namespace: "ns", name });
    const old = this.#items.get(key);
    this.#items.delete(key);
    if (old) for (const h of this.#handlers) h.onDelete?.(old);
  }
  get(ref: ObjectRef): CachedResource | undefined {
    return this.#items.get(objectKey(ref));
  }
  list(): CachedResource[] {
    return [...this.#items.values()];
  }
  get size(): number {
    return this.#items.size;
  }
  subscribe(handlers: WatchHandlers<CachedResource>): () => void {
    this.#handlers.add(handlers);
    return () => this.#handlers.delete(handlers);
  }
}

const settle = async () => {
  for (let i = 0; i < 20; i++) await Promise.resolve();
};

/**
 * Replica "b" of a ring led by "a" (a, b, c and d renewing), its cache holding `names` labelled
 * for it, the Lease watch's runnable started; the leader's Lease follows `published`.
 */
/**
 * What the API server does with a label patch: applies it (the cache shows it at once), applies it
 * with the cache showing it only later (`lagging`: `catchUp` then), or loses the answer without
 * applying it (`unanswered`: the patch rejects).
 */
type PatchFate = "applied" | "lagging" | "unanswered";

async function replicaB(
  names: string[],
  published: Inheritance | undefined,
  rivals = new Set<string>(),
  fates: PatchFate[] = [],
) {
  const clock = new ManualClock({ start: 1_000_000 });
  const leases = new Leases(clock);
  for (const m of ["b", "c", "d"]) leases.put(m, `${m}_1`);
  leases.put("a", "a_1", published);
  const cache = new Cache();
  for (const n of names) cache.set(n, "b");
  const patches: { name: string; rv: string; labels: Record<string, string | null>; at: number }[] = [];
  const lagging: string[] = [];
  /** The patches applied while the cache lagged now shown by it. */
  const catchUp = () => {
    for (const name of lagging.splice(0)) cache.remove(name);
  };
  const replica = shardedReplica({
    name: "b",
    identity: "b_1",
    leases,
    store: () => {
      throw new Error("not the leader");
    },
    setLabels: async () => false,
    patchLabels: async (ref, rv, labels) => {
      patches.push({ name: ref.name, rv, labels, at: clock.now() });
      const fate = fates.shift() ?? "applied";
      if (fate === "unanswered") throw new Error("the connection was lost");
      if (cache.get(ref)?.metadata.resourceVersion !== rv) return "conflict";
      const owner = labels[OWNER_LABEL];
      if (owner && owner !== "b") {
        if (fate === "lagging") lagging.push(ref.name);
        else cache.remove(ref.name);
      }
      return "written";
    },
    leaderElection: { leaseDurationMs: LEASE_MS, renewDeadlineMs: 10_000, retryPeriodMs: 2_000 },
    registry: new Registry(),
    clock,
    logger,
  });
  replica.attach(
    cache,
    (ref) => (cache.get(ref) ? (rivals.has(ref.name) ? 2 : 1) : 0),
    undefined,
    (ref) => ref.name,
  );
  replica.member.renewed(clock.now());
  replica.leaderObserved("a_1");
  const stop = new AbortController();
  const watching = replica.runnables.find((r) => r.name === "shard-inheritance");
  void watching?.start(stop.signal, stop.signal);
  await settle();
  const reconciled: string[] = [];
  const reconcile = replica.guard(async (key) => {
    reconciled.push(key);
    return Action.done();
  });
  return { clock, leases, cache, patches, replica, reconcile, reconciled, stop, catchUp };
}

/** A reconcile of `name` started on `r`'s replica, running until `finish` is called. */
function reconciling(r: Awaited<ReturnType<typeof replicaB>>, name: string) {
  let finish = () => {};
  const inFlight = r.replica.guard(
    () =>
      new Promise((resolve) => {
        finish = () => resolve(Action.done());
      }),
  )(`ns/${name}`, r.stop.signal);
  return { finish: () => finish(), inFlight };
}

/** Reconciles `name` on `r`'s replica, and expects that it was the only resource reconciled there. */
async function reconciledHere(r: Awaited<ReturnType<typeof replicaB>>, name: string): Promise<void> {
  await r.reconcile(`ns/${name}`, r.stop.signal);
  expect(r.reconciled).toEqual([`ns/${name}`]);
}

describe("a replica following the ring", () => {
  it("starts no reconcile of what the ring gives a live member, and hands it over with one write of its own", async () => {
    const toD = claimFor(FOUR, "d");
    const stays = claimFor(FOUR, "b");
    const r = await replicaB([toD, stays], FOUR);
    await settle();
    expect(r.patches).toEqual([
      {
        name: toD,
        rv: expect.any(String),
        labels: { [OWNER_LABEL]: "d", [DRAIN_LABEL]: null },
        at: 1_000_000,
      },
    ]);
    expect(r.cache.get({ namespace: "ns", name: toD })).toBeUndefined();
    // What moved is not reconciled here any more; what stays is.
    expect(await r.reconcile(`ns/${toD}`, r.stop.signal)).toEqual(Action.gone());
    await r.reconcile(`ns/${stays}`, r.stop.signal);
    expect(r.reconciled).toEqual([`ns/${stays}`]);
    r.stop.abort();
  });

  it("hands over only once the reconcile in flight ended, and starts none meanwhile", async () => {
    const toD = claimFor(FOUR, "d");
    const r = await replicaB([toD], THREE);
    const { finish, inFlight } = reconciling(r, toD);
    await settle();
    // The leader publishes the ring with d: the resource is to move, its reconcile still running.
    r.clock.advance(2_000);
    r.leases.put("a", "a_1", FOUR);
    await settle();
    expect(r.patches).toEqual([]);
    expect(await r.reconcile(`ns/${toD}`, r.stop.signal)).toEqual(LET_GO);
    expect(r.reconciled).toEqual([]);
    r.clock.advance(3_000);
    finish();
    await inFlight;
    await settle();
    expect(r.patches.map((p) => [p.name, p.labels[OWNER_LABEL], p.at])).toEqual([[toD, "d", 1_005_000]]);
    r.stop.abort();
  });

  it("keeps, and reconciles again, a resource whose ring changed back before it was handed over", async () => {
    const toD = claimFor(FOUR, "d");
    const r = await replicaB([toD], THREE);
    const { finish, inFlight } = reconciling(r, toD);
    r.leases.put("a", "a_1", FOUR);
    await settle();
    r.leases.put("a", "a_1", THREE);
    await settle();
    finish();
    await inFlight;
    await settle();
    expect(r.patches).toEqual([]);
    await reconciledHere(r, toD);
    r.stop.abort();
  });

  it("reconciles a resource whose change came while it was let go, once the ring took the hand-over back", async () => {
    const toD = claimFor(FOUR, "d");
    const r = await replicaB([toD], THREE);
    const { finish, inFlight } = reconciling(r, toD);
    r.leases.put("a", "a_1", FOUR);
    await settle();
    // An edit's reconcile while the resource is let go: not run, asked again (nothing else would).
    expect(await r.reconcile(`ns/${toD}`, r.stop.signal)).toEqual(LET_GO);
    expect(r.reconciled).toEqual([]);
    // The leader dies before the hand-over is written: no ring is followed, the resource stays.
    r.replica.leaderObserved(undefined);
    await settle();
    finish();
    await inFlight;
    await settle();
    expect(r.patches).toEqual([]);
    // The reconcile asked again runs it.
    await reconciledHere(r, toD);
    r.stop.abort();
  });

  it("keeps a resource let go while its cache still shows it, though the ring changed back after the write", async () => {
    const toD = claimFor(FOUR, "d");
    const r = await replicaB([toD], FOUR, new Set(), ["lagging"]);
    await settle();
    expect(r.patches.map((p) => p.labels[OWNER_LABEL])).toEqual(["d"]);
    // The ring changes back while the cache still shows the version the write was sent against.
    r.leases.put("a", "a_1", THREE);
    await settle();
    expect(await r.reconcile(`ns/${toD}`, r.stop.signal)).toEqual(LET_GO);
    r.clock.advance(5_000);
    await settle();
    expect(await r.reconcile(`ns/${toD}`, r.stop.signal)).toEqual(LET_GO);
    expect(r.reconciled).toEqual([]);
    expect(r.patches.length).toBe(1);
    r.catchUp();
    expect(r.cache.get({ namespace: "ns", name: toD })).toBeUndefined();
    r.stop.abort();
  });

  it("sends a hand-over whose answer was lost again, the same, whatever the ring says meanwhile", async () => {
    const toD = claimFor(FOUR, "d");
    const r = await replicaB([toD], FOUR, new Set(), ["unanswered", "unanswered"]);
    await settle();
    r.leases.put("a", "a_1", THREE);
    await settle();
    // It may have been written: nothing of it is reconciled here.
    expect(await r.reconcile(`ns/${toD}`, r.stop.signal)).toEqual(LET_GO);
    for (let i = 0; i < 3; i++) {
      r.clock.advance(1_000);
      await settle();
    }
    expect(r.reconciled).toEqual([]);
    const rv = r.patches[0]?.rv;
    expect(r.patches.map((p) => [p.labels[OWNER_LABEL], p.rv])).toEqual([
      ["d", rv],
      ["d", rv],
      ["d", rv],
    ]);
    expect(r.cache.get({ namespace: "ns", name: toD })).toBeUndefined();
    r.stop.abort();
  });

  it("takes back a resource whose hand-over lost to another write, once its cache shows that write", async () => {
    const toD = claimFor(FOUR, "d");
    const r = await replicaB([toD], FOUR, new Set(), ["unanswered"]);
    await settle();
    r.leases.put("a", "a_1", THREE);
    // Someone else's write (a spec edit): the hand-over's precondition fails against it.
    r.cache.set(toD, "b");
    await settle();
    await reconciledHere(r, toD);
    r.stop.abort();
  });

  it("leaves a resource with a rival here to the sharder's drain (rivals move together)", async () => {
    const toD = claimFor(FOUR, "d");
    const r = await replicaB([toD], FOUR, new Set([toD]));
    await settle();
    expect(r.patches).toEqual([]);
    await reconciledHere(r, toD);
    r.stop.abort();
  });

  it("hands nothing to a member it does not see live, nor by a ring without itself", async () => {
    const toD = claimFor(FOUR, "d");
    const r = await replicaB([toD], undefined);
    // d's Lease taken by a sharder: not live.
    r.leases.put("d", "sharder/a_1");
    r.leases.put("a", "a_1", FOUR);
    await settle();
    expect(r.patches).toEqual([]);
    // A ring without b is none b can follow.
    r.leases.put("d", "d_2");
    r.leases.put("a", "a_1", { members: ["a", "c", "d"], leader: "a" });
    await settle();
    expect(r.patches).toEqual([]);
    await reconciledHere(r, toD);
    // The ring with b and d live again: handed over.
    r.leases.put("a", "a_1", FOUR);
    await settle();
    expect(r.patches.map((p) => p.labels[OWNER_LABEL])).toEqual(["d"]);
    r.stop.abort();
  });

  it("writes the ring it follows on its own Lease with each renewal", async () => {
    const r = await replicaB([], FOUR);
    const holder = r.replica.runnables.find((x) => x.name === "shard-lease");
    void holder?.start(r.stop.signal, r.stop.signal);
    for (let i = 0; i < 10; i++) {
      await settle();
      r.clock.advance(1_000);
    }
    const own = r.leases.writes.filter((w) => w.name === "b");
    expect(own.length).toBeGreaterThan(1);
    for (const w of own) expect(w.follows).toEqual(FOUR);
    r.stop.abort();
  });
});

describe("the ring a replica follows", () => {
  it("is one naming it, once the ring's key is read; its handovers go to live members other than itself", () => {
    let keyRead = false;
    const f = new RingFollower({ self: "b", seed: () => undefined, seedKnown: () => keyRead });
    const toD = claimFor(FOUR, "d");
    f.follow(FOUR, ["a", "b", "c", "d"]);
    expect(f.followed).toBeUndefined();
    expect(f.handoverTo(toD)).toBeUndefined();
    keyRead = true;
    expect(f.follow(FOUR, ["a", "b", "c", "d"])).toBe(true);
    expect(f.handoverTo(toD)).toBe("d");
    expect(f.handoverTo(claimFor(FOUR, "b"))).toBeUndefined();
    // The same ring and members: nothing changed.
    expect(f.follow(FOUR, ["a", "b", "c", "d"])).toBe(false);
    // d not live: kept until it is.
    expect(f.follow(FOUR, ["a", "b", "c"])).toBe(true);
    expect(f.handoverTo(toD)).toBeUndefined();
    expect(f.follow({ members: ["a", "c", "d"], leader: "a" }, ["a", "b", "c", "d"])).toBe(true);
    expect(f.followed).toBeUndefined();
  });

  it("lets the sharder skip a member's drains while its Lease follows the ring, or another one within the grace", () => {
    const since = 50_000;
    expect(followsRing({ follows: FOUR }, FOUR, since, since + 60_000, LEASE_MS)).toBe(true);
    expect(followsRing({ follows: THREE }, FOUR, since, since + LEASE_MS - 1, LEASE_MS)).toBe(true);
    expect(followsRing({ follows: THREE }, FOUR, since, since + LEASE_MS, LEASE_MS)).toBe(false);
    expect(followsRing({}, FOUR, since, since, LEASE_MS)).toBe(false);
    expect(followsRing(undefined, FOUR, since, since, LEASE_MS)).toBe(false);
  });
});

describe("a ring Lease on the wire", () => {
  it("carries the ring its replica follows as an annotation; one that cannot be read is no ring", () => {
    const raw = (value: string) => ({
      metadata: {
        name: "b",
        namespace: "ns",
        resourceVersion: "7",
        annotations: { [FOLLOWS_ANNOTATION]: value },
      },
      spec: { holderIdentity: "b_1", leaseDurationSeconds: 15, renewTime: "2026-12-02T09:00:00.000000Z" },
    });
    expect(decodeLease(raw("a;a,b,c,d"))?.follows).toEqual(FOUR);
    expect(decodeLease(raw("a;a,B_not_a_name"))?.follows).toBeUndefined();
    expect(decodeLease(raw("a;a,b,c,d"))?.inheritance).toBeUndefined();
  });
});
