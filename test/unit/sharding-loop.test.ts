// When the leader's sharder passes (src/sharding/sharder-loop.ts): after a short gap, at once
// after a change, else at the period or the next Lease expiry, and never once stopped.
import { pino } from "pino";
import { describe, expect, it } from "vitest";
import { ClusterUserCounts } from "../../src/sharding/cluster-users.ts";
import { OWNER_LABEL } from "../../src/sharding/labels.ts";
import { RingMembership } from "../../src/sharding/membership.ts";
import {
  PassSchedule,
  type RingLeases,
  ringLease,
  ringSettled,
  SHARDER_MIN_GAP_MS,
  SHARDER_PERIOD_MS,
  type ShardRecord,
  type ShardStore,
  sharderRunnable,
} from "../../src/sharding/sharder-loop.ts";
import { ManualClock } from "../support/manual-clock.ts";

/** Lets the promise callbacks run. */
const settle = async () => {
  for (let i = 0; i < 10; i++) await Promise.resolve();
};

/** The schedule's next pass from time 0, with `expiry` as the next Lease expiry: when it is due. */
async function dueAt(steps: {
  expiry?: number;
  /** Poked before waiting (a change during the pass), or at this time. */
  pokeAt?: number;
  stopAt?: number;
}): Promise<number | undefined> {
  const clock = new ManualClock();
  const schedule = new PassSchedule(clock);
  const stop = new AbortController();
  if (steps.pokeAt === 0) schedule.poke();
  let due: number | undefined;
  void schedule
    .next(stop.signal, () => steps.expiry)
    .then(() => {
      due = clock.now();
    });
  for (let t = 0; t < 3 * SHARDER_PERIOD_MS && due === undefined; t += 5) {
    if (t === steps.pokeAt) schedule.poke();
    if (t === steps.stopAt) stop.abort();
    await settle();
    if (due !== undefined) break;
    clock.advance(5);
  }
  return due;
}

describe("the sharder's schedule", () => {
  it.each([
    { case: "nothing changed: at the period", steps: {}, due: SHARDER_MIN_GAP_MS + SHARDER_PERIOD_MS },
    { case: "a change during the pass: after the gap only", steps: { pokeAt: 0 }, due: SHARDER_MIN_GAP_MS },
    { case: "a change during the gap: after the gap only", steps: { pokeAt: 100 }, due: SHARDER_MIN_GAP_MS },
    { case: "a change while waiting: at once", steps: { pokeAt: 1_000 }, due: 1_000 },
    { case: "a Lease expiring before the period: just after it", steps: { expiry: 900 }, due: 905 },
    { case: "a Lease expiring after the period: at the period", steps: { expiry: 9_000 }, due: 2_200 },
    { case: "stopped during the gap: at once", steps: { stopAt: 50 }, due: 50 },
    { case: "stopped while waiting: at once", steps: { stopAt: 700 }, due: 700 },
  ])("$case", async ({ steps, due }) => {
    expect(await dueAt(steps)).toBe(due);
  });

  it("leaves no timer behind once due", async () => {
    const clock = new ManualClock();
    const schedule = new PassSchedule(clock);
    const stop = new AbortController();
    const next = schedule.next(stop.signal, () => undefined);
    clock.advance(SHARDER_MIN_GAP_MS);
    await settle();
    schedule.poke();
    await next;
    expect(clock.pending).toBe(0);
    const stopped = schedule.next(stop.signal, () => undefined);
    stop.abort();
    await stopped;
    expect(clock.pending).toBe(0);
  });
});

// A new sharder's first pass: once the ring has been quiet for a renew period (no member joined
// in this process's Lease watch), at most a Lease duration after the sharder started.
describe("the sharder's first pass", () => {
  const RENEW_MS = 2_000;
  const LEASE_MS = 15_000;
  const lease = (name: string, holder: string, renewAt: number) => ({
    name,
    resourceVersion: String(renewAt),
    record: {
      holderIdentity: holder,
      leaseDurationSeconds: LEASE_MS / 1000,
      acquireTime: new Date(0),
      renewTime: new Date(renewAt),
      leaseTransitions: 0,
    },
  });

  /** Runs the wait from time 0, with `joins` (member, time) seen by the watch: when it ends. */
  async function firstPassAt(joins: Array<[string, number]>, stopAt?: number): Promise<number | undefined> {
    const clock = new ManualClock();
    const membership = new RingMembership();
    const stop = new AbortController();
    const pending = [...joins];
    const seeDue = () => {
      while (pending.length > 0 && (pending[0]?.[1] ?? 0) <= clock.now()) {
        const [name] = pending.shift() ?? [""];
        membership.seen(lease(name, `${name}_id`, clock.now()), clock.now());
      }
    };
    seeDue();
    let due: number | undefined;
    void ringSettled({
      membership,
      clock,
      startedAt: 0,
      quietMs: RENEW_MS,
      boundMs: LEASE_MS,
      signal: stop.signal,
    }).then(() => {
      due = clock.now();
    });
    for (let t = 0; t <= 2 * LEASE_MS; t += 100) {
      if (t === stopAt) stop.abort();
      await settle();
      if (due !== undefined) break;
      clock.advance(100);
      seeDue();
    }
    return due;
  }

  it.each([
    {
      case: "replicas starting together: a renew period after the last one joined",
      joins: [
        ["a", 0],
        ["b", 700],
        ["c", 1_500],
      ] as Array<[string, number]>,
      due: 3_500,
    },
    {
      case: "its own Lease alone: a renew period after it",
      joins: [["a", 0]] as Array<[string, number]>,
      due: RENEW_MS,
    },
    {
      case: "members joining without a pause: a Lease duration after it started",
      joins: Array.from({ length: 20 }, (_, i) => [`m${i}`, i * 1_000] as [string, number]),
      due: LEASE_MS,
    },
  ])("$case", async ({ joins, due }) => {
    expect(await firstPassAt(joins)).toBe(due);
  });

  it("at once on a leader elected after the ring was quiet (a failover)", async () => {
    const clock = new ManualClock({ start: 60_000 });
    const membership = new RingMembership();
    for (const m of ["a", "b", "c"]) membership.seen(lease(m, `${m}_id`, 0), 0);
    // Renewals and a Lease taken by a sharder are no joins.
    membership.seen(lease("a", "a_id", 59_000), 59_000);
    membership.seen(lease("c", "sharder/b_1", 59_500), 59_500);
    expect(membership.joinedAt).toBe(0);
    const stop = new AbortController();
    await ringSettled({
      membership,
      clock,
      startedAt: clock.now(),
      quietMs: RENEW_MS,
      boundMs: LEASE_MS,
      signal: stop.signal,
    });
    expect(clock.now()).toBe(60_000);
    // A replica restarted and holding its Lease again is a join.
    membership.seen(lease("c", "c_id2", 60_000), 60_000);
    expect(membership.joinedAt).toBe(60_000);
  });

  it("ends when stopped", async () => {
    expect(await firstPassAt([["a", 0]], 500)).toBe(500);
  });
});

/**
 * A new leader "b"'s sharder runnable over the Leases of "a" (the old leader, renewed last at
 * `aRenewedAt`) and "b" (renewed at 20,000, when this leadership begins), its store still listing
 * (30,000 resources, say: its `synced` never comes). `written` are the Lease writes it made.
 */
function newLeader(aRenewedAt: number) {
  const LEASE_MS = 15_000;
  const clock = new ManualClock({ start: 0 });
  const at = (name: string, renewAt: number) => ({
    metadata: { name, resourceVersion: `${name}-${renewAt}` },
    record: {
      holderIdentity: `${name}_id`,
      leaseDurationSeconds: LEASE_MS / 1000,
      acquireTime: new Date(0),
      renewTime: new Date(renewAt),
      leaseTransitions: 0,
    },
  });
  // This process watched both throughout.
  const membership = new RingMembership();
  const ring = [at("a", 0), at("b", 0)];
  for (const l of ring) membership.seen(ringLease(l), 0);
  if (aRenewedAt > 0) {
    clock.advance(aRenewedAt);
    ring[0] = at("a", aRenewedAt);
    membership.seen(ringLease(ring[0]), aRenewedAt);
  }
  clock.advance(20_000 - clock.now());
  ring[1] = at("b", 20_000);
  membership.seen(ringLease(ring[1]), 20_000);
  const written: Array<{ name: string; holder: string; inheritance: unknown }> = [];
  const leases: RingLeases = {
    list: () => ring,
    subscribe: () => () => {},
    lease: (name, inheritance) => ({
      get: async () => undefined,
      create: async () => {
        throw new Error("no Lease is created here");
      },
      update: async (record, resourceVersion) => {
        written.push({ name, holder: record.holderIdentity, inheritance });
        return { record, resourceVersion: `${resourceVersion}+1` };
      },
      delete: async () => false,
    }),
    run: async () => {},
    synced: Promise.resolve(),
  };
  const stop = new AbortController();
  const store: ShardStore<ShardRecord> = {
    run: (signal) =>
      new Promise((resolve) => signal.addEventListener("abort", () => resolve(), { once: true })),
    synced: new Promise(() => {}),
    hasSynced: () => false,
    values: () => [],
    usersOf: () => [],
    subscribe: () => () => {},
  };
  const running = sharderRunnable({
    store: () => store,
    leases,
    membership,
    setLabels: async () => {
      throw new Error("no label is written before the store has listed");
    },
    users: new ClusterUserCounts(),
    identity: "b_1",
    self: "b",
    leaseDurationMs: LEASE_MS,
    renewDeadlineMs: 10_000,
    retryPeriodMs: 2_000,
    onPass: () => {},
    clock,
    logger: pino({ level: "silent" }),
  }).start(stop.signal, stop.signal);
  const turns = async () => {
    for (let i = 0; i < 50; i++) await new Promise((r) => setImmediate(r));
  };
  const stopped = async () => {
    stop.abort();
    await running;
  };
  return { clock, written, turns, stopped };
}

const TAKEN = { name: "a", holder: "sharder/b_1", inheritance: { members: ["b"], leader: "b" } };

describe("the sharder's runnable", () => {
  it("takes a dead member's Lease, with its ring, before its store has listed a resource (a failover's new leader)", async () => {
    const leader = newLeader(0);
    await leader.turns();
    expect(leader.written).toEqual([TAKEN]);
    await leader.stopped();
  });

  it("takes a dead member's Lease that expires after its leadership began, while its store still lists", async () => {
    // "a" renewed at 10,000 as its election Lease: its shard Lease expires at 25,000.
    const leader = newLeader(10_000);
    await leader.turns();
    expect(leader.written).toEqual([]);
    // Taken within a renew period of its expiry, not at the first pass after the listing.
    for (let t = 0; t < 4; t++) {
      leader.clock.advance(2_000);
      await leader.turns();
    }
    expect(leader.clock.now()).toBe(28_000);
    expect(leader.written).toEqual([TAKEN]);
    await leader.stopped();
  });
});

// What wakes the runnable's sharder between its passes (`asksPass` as the store's handler uses it):
// a hand-over onto the ring's choice does not, a label the ring does not choose does, at once.
describe("the sharder's runnable between passes", () => {
  it("starts no pass for a hand-over onto the ring's choice, and one at once for another owner", async () => {
    const LEASE_MS = 15_000;
    const clock = new ManualClock({ start: 60_000 });
    const lease = (name: string) => ({
      metadata: { name, resourceVersion: `${name}-1` },
      record: {
        holderIdentity: `${name}_id`,
        leaseDurationSeconds: LEASE_MS / 1000,
        acquireTime: new Date(0),
        renewTime: new Date(60_000),
        leaseTransitions: 0,
      },
    });
    const ring = [lease("a"), lease("b")];
    const membership = new RingMembership();
    // Both members seen since long before: no wait for the ring to settle.
    for (const l of ring)
      membership.seen({ ...ringLease(l), record: { ...l.record, renewTime: new Date(0) } }, 0);
    for (const l of ring) membership.seen(ringLease(l), 60_000);
    const leases: RingLeases = {
      list: () => ring,
      subscribe: () => () => {},
      lease: () => {
        throw new Error("no Lease is written here");
      },
      run: async () => {},
      synced: Promise.resolve(),
    };
    const record = (name: string, owner: string | undefined): ShardRecord => ({
      uid: `uid-${name}`,
      metadata: { name, namespace: "ns", resourceVersion: "1" },
      created: 0,
      owner,
      drain: false,
      drainTo: undefined,
      claim: `c/${name}`,
      connection: "ns/default",
    });
    const records = new Map(Array.from({ length: 20 }, (_, i) => [`r${i}`, record(`r${i}`, undefined)]));
    const handlers = new Set<{ onUpdate?(old: ShardRecord, r: ShardRecord): void }>();
    /** Replaces a record as a watch event would, telling every subscriber. */
    const update = (next: ShardRecord) => {
      const old = records.get(next.metadata.name);
      if (!old) throw new Error(next.metadata.name);
      records.set(next.metadata.name, next);
      for (const h of handlers) h.onUpdate?.(old, next);
    };
    const store: ShardStore<ShardRecord> = {
      run: (signal) =>
        new Promise((resolve) => signal.addEventListener("abort", () => resolve(), { once: true })),
      synced: Promise.resolve(),
      hasSynced: () => true,
      values: () => records.values(),
      usersOf: () => [],
      subscribe: (h) => {
        handlers.add(h);
        return () => handlers.delete(h);
      },
    };
    const passes: number[] = [];
    const stop = new AbortController();
    const running = sharderRunnable({
      store: () => store,
      leases,
      membership,
      setLabels: async (resource, labels) => {
        const owner = labels[OWNER_LABEL] ?? undefined;
        update({ ...resource, metadata: { ...resource.metadata, resourceVersion: "2" }, owner });
        return true;
      },
      users: new ClusterUserCounts(),
      identity: "a_1",
      self: "a",
      leaseDurationMs: LEASE_MS,
      renewDeadlineMs: 10_000,
      retryPeriodMs: 2_000,
      onPass: () => passes.push(clock.now()),
      clock,
      logger: pino({ level: "silent" }),
    }).start(stop.signal, stop.signal);
    const turn = async () => {
      for (let i = 0; i < 20; i++) await new Promise((r) => setImmediate(r));
    };
    await turn();
    // The first pass placed every resource; its own writes (onto the ring's choice) asked no other.
    expect(passes).toEqual([60_000]);
    const placed = [...records.values()];
    expect(placed.every((r) => r.owner === "a" || r.owner === "b")).toBe(true);
    clock.advance(SHARDER_MIN_GAP_MS + 300);
    await turn();
    expect(passes).toHaveLength(1);
    // A hand-over onto the ring's choice: as seen, from the other member to the chosen one.
    const [first] = placed;
    if (!first?.owner) throw new Error("no resource placed");
    const other = first.owner === "a" ? "b" : "a";
    records.set(first.metadata.name, { ...first, owner: other });
    update({ ...first, metadata: { ...first.metadata, resourceVersion: "3" } });
    await turn();
    clock.advance(100);
    await turn();
    expect(passes).toHaveLength(1);
    // A label the ring does not choose: a pass at once, not at the period.
    update({ ...first, metadata: { ...first.metadata, resourceVersion: "4" }, owner: other });
    await turn();
    expect(passes).toEqual([60_000, 60_000 + SHARDER_MIN_GAP_MS + 400]);
    stop.abort();
    await running;
  });
});
