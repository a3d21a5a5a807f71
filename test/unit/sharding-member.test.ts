/**
 * A replica's side of sharding against a manual clock: a drain and the Lease's release wait for
 * the writes that got no answer (they may still run at the service), a stop with an aborted
 * signal returns at once, and a reconcile met before the Lease is held waits for it.
 */
import { getEventListeners } from "node:events";
import { pino } from "pino";
import { describe, expect, it } from "vitest";
import { Action } from "../../src/runtime/controller.ts";
import {
  ACK_CONCURRENCY,
  ACK_RETRY_MS,
  FENCE_MARGIN_MS,
  HOLD_RECHECK_MS,
  ShardMember,
  type ShardWriteGrant,
} from "../../src/sharding/member.ts";
import { ManualClock } from "../support/manual-clock.ts";

const logger = pino({ level: "silent" });
const signal = new AbortController().signal;

function replica(clock: ManualClock) {
  const owned = new Map<string, { drain: boolean }>();
  const acks: { key: string; at: number }[] = [];
  const member = new ShardMember({
    name: "a",
    leaseDurationMs: 15_000,
    owned: (key) => owned.get(key),
    acknowledge: async (key) => {
      acks.push({ key, at: clock.now() });
      owned.delete(key);
      return true;
    },
    clock,
    logger,
  });
  return { member, owned, acks };
}

/** Lets the promises queued so far run (the acknowledgement's chain). */
async function settle(): Promise<void> {
  for (let i = 0; i < 10; i++) await Promise.resolve();
}

describe("a replica's writes that got no answer", () => {
  it("delay that key's drain until the write's end plus its timeout plus the fence margin; an answered one does not", async () => {
    const clock = new ManualClock({ start: 100_000 });
    const { member, owned, acks } = replica(clock);
    member.renewed(clock.now());
    owned.set("ns/slow", { drain: false });
    owned.set("ns/quick", { drain: false });
    // Each reconcile makes one write through the gate, as the transport does.
    const ends = new Map<string, number>([
      ["ns/slow", 3_000],
      ["ns/quick", 0],
    ]);
    const reconcile = member.guard(async (key) => {
      const grant = member.grant();
      clock.advance(3_000);
      grant.ended(ends.get(key) ?? 0);
      return Action.done();
    });
    await reconcile("ns/slow", signal);
    await reconcile("ns/quick", signal);
    const ended = clock.now();
    // ns/slow's write ended unanswered 3 s before `ended` (ns/quick's reconcile took 3 s), with 3 s.
    expect(member.mayRunUntil("ns/slow")).toBe(ended);
    expect(member.mayRunUntil("ns/quick")).toBe(Number.NEGATIVE_INFINITY);
    owned.set("ns/slow", { drain: true });
    owned.set("ns/quick", { drain: true });
    member.changed("ns/slow");
    member.changed("ns/quick");
    await settle();
    expect(acks).toEqual([{ key: "ns/quick", at: ended }]);
    clock.advance(FENCE_MARGIN_MS - 1);
    await settle();
    expect(acks.map((a) => a.key)).toEqual(["ns/quick"]);
    clock.advance(1);
    await settle();
    expect(acks).toEqual([
      { key: "ns/quick", at: ended },
      { key: "ns/slow", at: ended + FENCE_MARGIN_MS },
    ]);
  });

  it("count for every key when made outside any reconcile, and as twice their time while still open", async () => {
    const clock = new ManualClock({ start: 100_000 });
    const { member, owned, acks } = replica(clock);
    member.renewed(clock.now());
    const open: ShardWriteGrant = member.grant();
    const start = clock.now();
    expect(member.mayRunUntil("ns/any")).toBe(start + 2 * 14_000);
    owned.set("ns/any", { drain: true });
    member.changed("ns/any");
    clock.advance(2_000);
    // Answered: nothing waits for it any more (the acknowledgement's sleep ends at its time).
    open.ended(0);
    open.ended(9_000);
    expect(member.mayRunUntil()).toBe(Number.NEGATIVE_INFINITY);
    clock.advance(2 * 14_000 + FENCE_MARGIN_MS);
    await settle();
    expect(acks.map((a) => a.key)).toEqual(["ns/any"]);
  });

  it("hold the Lease's release (settled) until they cannot run any more, unless the Lease is lost", async () => {
    const clock = new ManualClock({ start: 100_000 });
    const { member } = replica(clock);
    member.renewed(clock.now());
    const grant = member.grant();
    clock.advance(1_000);
    grant.ended(5_000);
    let done = false;
    const settled = member.settled(signal).then(() => (done = true));
    await settle();
    expect(done).toBe(false);
    clock.advance(5_000 + FENCE_MARGIN_MS - 1);
    await settle();
    expect(done).toBe(false);
    clock.advance(1);
    await settled;
    // Nothing outstanding: at once.
    await member.settled(signal);
    // A lost Lease: no release follows, nothing to wait for.
    member.grant().ended(60_000);
    const lost = new AbortController();
    const waiting = member.settled(lost.signal);
    lost.abort();
    await waiting;
  });
});

describe("a replica's lifecycle", () => {
  it("returns from stop at once when its signal is already aborted, a reconcile still in flight", async () => {
    const clock = new ManualClock();
    const { member, owned } = replica(clock);
    member.renewed(clock.now());
    owned.set("ns/busy", { drain: false });
    const reconcile = member.guard(() => new Promise(() => {}));
    void reconcile("ns/busy", signal);
    await settle();
    expect(member.busy).toBe(1);
    await member.stop(AbortSignal.abort());
  });

  it("waits for its first renewal before reconciling, instead of requeueing every key each second", async () => {
    const clock = new ManualClock();
    const { member, owned } = replica(clock);
    owned.set("ns/mine", { drain: false });
    const calls: string[] = [];
    const reconcile = member.guard(async (key) => {
      calls.push(key);
      return Action.done();
    });
    let result: unknown;
    const first = reconcile("ns/mine", signal).then((r) => (result = r));
    clock.advance(30_000);
    await settle();
    expect([result, calls, clock.pending]).toEqual([undefined, [], 0]);
    member.renewed(clock.now());
    await first;
    expect([result, calls]).toEqual([Action.done(), ["ns/mine"]]);
    // Its own signal (a reconcile timeout, a shutdown) ends the wait: requeued, not reconciled.
    const { member: other, owned: others } = replica(clock);
    others.set("ns/mine", { drain: false });
    const aborted = new AbortController();
    const waiting = other.guard(async () => Action.done())("ns/mine", aborted.signal);
    aborted.abort();
    expect(await waiting).toEqual(Action.requeueAfter(1_000));
    // A stop ends it too, with nothing reconciled.
    const stopped = other.guard(async () => Action.done())("ns/mine", signal);
    await other.stop(signal);
    expect(await stopped).toEqual(Action.gone());
  });
});

describe("a held resource", () => {
  it("is not reconciled while held, asked again every HOLD_RECHECK_MS (or at its hold's end), and reconciled once the hold ends", async () => {
    const clock = new ManualClock();
    const owned = new Map<string, { drain: boolean; holdMs?: number }>();
    const member = new ShardMember({
      name: "a",
      leaseDurationMs: 15_000,
      owned: (key) => owned.get(key),
      acknowledge: async () => true,
      clock,
      logger,
    });
    member.renewed(clock.now());
    const calls: string[] = [];
    const reconcile = member.guard(async (key) => {
      calls.push(key);
      return Action.done();
    });
    owned.set("ns/younger", { drain: false, holdMs: 80_000 });
    expect(await reconcile("ns/younger", signal)).toEqual(Action.requeueAfter(HOLD_RECHECK_MS));
    owned.set("ns/younger", { drain: false, holdMs: 500 });
    expect(await reconcile("ns/younger", signal)).toEqual(Action.requeueAfter(500));
    expect(calls).toEqual([]);
    // The older one came back: no hold any more, reconciled at the next look.
    owned.set("ns/younger", { drain: false });
    expect(await reconcile("ns/younger", signal)).toEqual(Action.done());
    expect(calls).toEqual(["ns/younger"]);
  });
});

describe("a replica's acknowledgements of drains", () => {
  it("are sent at most ACK_CONCURRENCY at once, and every drained resource is let go in the end", async () => {
    const clock = new ManualClock({ start: 100_000 });
    const owned = new Map<string, { drain: boolean }>();
    const pending: (() => void)[] = [];
    let sending = 0;
    let most = 0;
    const acked: string[] = [];
    const member = new ShardMember({
      name: "a",
      leaseDurationMs: 15_000,
      owned: (key) => owned.get(key),
      acknowledge: async (key) => {
        sending += 1;
        most = Math.max(most, sending);
        await new Promise<void>((resolve) => pending.push(resolve));
        sending -= 1;
        acked.push(key);
        owned.delete(key);
        return true;
      },
      clock,
      logger,
    });
    member.renewed(clock.now());
    const keys = Array.from({ length: 3 * ACK_CONCURRENCY + 1 }, (_, i) => `ns/r${i}`);
    for (const key of keys) {
      owned.set(key, { drain: true });
      member.changed(key);
    }
    await settle();
    expect(sending).toBe(ACK_CONCURRENCY);
    // A drain lifted while it waits for a slot is not acknowledged.
    owned.set("ns/r20", { drain: false });
    while (pending.length > 0) {
      for (const release of pending.splice(0)) release();
      await settle();
    }
    expect(most).toBe(ACK_CONCURRENCY);
    expect(acked.sort()).toEqual(keys.filter((k) => k !== "ns/r20").sort());
    expect(sending).toBe(0);
  });
  it("wait, once a slot came, for a write that got no answer while they waited for it", async () => {
    const clock = new ManualClock({ start: 100_000 });
    const owned = new Map<string, { drain: boolean }>();
    const pending: (() => void)[] = [];
    const acked: { key: string; at: number }[] = [];
    const member = new ShardMember({
      name: "a",
      leaseDurationMs: 15_000,
      owned: (key) => owned.get(key),
      acknowledge: async (key) => {
        if (key !== "ns/late") await new Promise<void>((resolve) => pending.push(resolve));
        acked.push({ key, at: clock.now() });
        owned.delete(key);
        return true;
      },
      clock,
      logger,
    });
    member.renewed(clock.now());
    for (const key of [...Array.from({ length: ACK_CONCURRENCY }, (_, i) => `ns/r${i}`), "ns/late"]) {
      owned.set(key, { drain: true });
      member.changed(key);
    }
    await settle();
    // ns/late waits for a slot; meanwhile a write (outside any reconcile: it counts for every key)
    // ends without an answer, so it may still run at the service for 3 s.
    member.grant().ended(3_000);
    const until = clock.now() + 3_000 + FENCE_MARGIN_MS;
    for (const release of pending.splice(0)) release();
    await settle();
    expect(acked.map((a) => a.key)).not.toContain("ns/late");
    clock.advance(until - clock.now());
    await settle();
    expect(acked.find((a) => a.key === "ns/late")?.at).toBe(until);
  });

  it("that may not be written yet are tried again each second on one listener of the replica's stop, which ends them all at once", async () => {
    // A release's thousands of resources wait for their labels this way, each asleep between
    // tries: one listener each on the stop signal would cost the square of their number.
    const clock = new ManualClock({ start: 100_000 });
    const owned = new Map<string, { drain: boolean }>();
    let mayWrite = false;
    let tries = 0;
    let stop: AbortSignal | undefined;
    const member = new ShardMember({
      name: "a",
      leaseDurationMs: 15_000,
      owned: (key) => owned.get(key),
      acknowledge: async (key, signal) => {
        tries += 1;
        stop = signal;
        if (!mayWrite) return false;
        owned.delete(key);
        return true;
      },
      clock,
      logger,
    });
    member.renewed(clock.now());
    const n = 300;
    for (let i = 0; i < n; i++) {
      owned.set(`ns/r${i}`, { drain: true });
      member.changed(`ns/r${i}`);
    }
    const turn = () => new Promise((resolve) => setImmediate(resolve));
    while (clock.pending < n) await turn();
    expect(tries).toBe(n);
    expect(stop && getEventListeners(stop, "abort")).toHaveLength(1);
    clock.advance(ACK_RETRY_MS);
    while (clock.pending < n) await turn();
    expect(tries).toBe(2 * n);
    expect(stop && getEventListeners(stop, "abort")).toHaveLength(1);
    // Written at the next try: no wait is left, nor its listener.
    mayWrite = true;
    clock.advance(ACK_RETRY_MS);
    while (owned.size > 0) await turn();
    expect(clock.pending).toBe(0);
    expect(stop && getEventListeners(stop, "abort")).toHaveLength(0);
    // Waiting again, then stopped: every wait ends at once, and none tries again.
    mayWrite = false;
    for (let i = 0; i < n; i++) {
      owned.set(`ns/s${i}`, { drain: true });
      member.changed(`ns/s${i}`);
    }
    while (clock.pending < n) await turn();
    await member.stop(new AbortController().signal);
    expect(clock.pending).toBe(0);
    expect(stop && getEventListeners(stop, "abort")).toHaveLength(0);
    const before = tries;
    clock.advance(ACK_RETRY_MS);
    await turn();
    expect(tries).toBe(before);
  });
});
