import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { LeaderElector, LeadershipLostError, LeaseConflictError } from "../../src/runtime/leader.ts";
import { MemoryLease } from "./runtime-memory-lease.ts";

beforeEach(() => {
  vi.useFakeTimers({ now: 1_000_000 });
});
afterEach(() => {
  vi.useRealTimers();
});

/** Runs one election term for `identity`; the leader work runs until `stop` aborts (graceful). */
function candidate(lease: MemoryLease, identity: string, random = () => 0) {
  const port = lease.port(identity);
  const changes: boolean[] = [];
  const elector = new LeaderElector({
    lease: port,
    identity,
    random,
    onLeadingChange: (l) => changes.push(l),
  });
  const stop = new AbortController();
  const state: { leading?: AbortSignal; startedAt?: number; lostAt?: number; drainMs: number } = {
    drainMs: 0,
  };
  const outcome = elector.run(stop.signal, async (leading) => {
    state.leading = leading;
    state.startedAt = Date.now();
    leading.addEventListener("abort", () => {
      state.lostAt = Date.now();
    });
    await new Promise<void>((resolve) => {
      const done = () => setTimeout(resolve, state.drainMs);
      if (stop.signal.aborted || leading.aborted) done();
      stop.signal.addEventListener("abort", done, { once: true });
      leading.addEventListener("abort", () => resolve(), { once: true });
    });
  });
  return { elector, port, stop, state, outcome, changes };
}

describe("LeaderElector", () => {
  it("acquires a lease that does not exist and keeps renewing it", async () => {
    const lease = new MemoryLease();
    const a = candidate(lease, "a");
    await vi.advanceTimersByTimeAsync(0);
    expect(a.elector.isLeader()).toBe(true);
    expect(a.changes).toEqual([true]);
    expect(lease.snapshot?.record).toMatchObject({
      holderIdentity: "a",
      leaseDurationSeconds: 15,
      leaseTransitions: 0,
    });
    const acquired = lease.snapshot?.record.acquireTime?.getTime();
    await vi.advanceTimersByTimeAsync(60_000);
    expect(lease.holder).toBe("a");
    expect(lease.snapshot?.record.acquireTime?.getTime()).toBe(acquired);
    expect(lease.snapshot?.record.renewTime?.getTime()).toBeGreaterThanOrEqual(Date.now() - 2_000);
    expect(a.state.leading?.aborted).toBe(false);
  });

  it("does not take a lease another holder keeps renewing", async () => {
    const lease = new MemoryLease();
    const a = candidate(lease, "a");
    await vi.advanceTimersByTimeAsync(0);
    const b = candidate(lease, "b");
    await vi.advanceTimersByTimeAsync(120_000);
    expect(b.elector.isLeader()).toBe(false);
    expect(b.state.startedAt).toBeUndefined();
    expect(lease.holder).toBe("a");
    expect(a.elector.isLeader()).toBe(true);
  });

  it("loses leadership within the renew deadline when renewals fail, and the other takes over only after expiry", async () => {
    const lease = new MemoryLease();
    const a = candidate(lease, "a");
    await vi.advanceTimersByTimeAsync(0);
    const b = candidate(lease, "b");
    await vi.advanceTimersByTimeAsync(10_000);
    const lastRenew = lease.snapshot?.record.renewTime?.getTime() ?? 0;
    a.port.down = true;
    await vi.advanceTimersByTimeAsync(30_000);
    expect(await a.outcome).toBe("lost");
    expect(a.state.leading?.reason).toBeInstanceOf(LeadershipLostError);
    expect(a.changes).toEqual([true, false]);
    // Lost no later than the renew deadline after its last renewal ...
    expect(a.state.lostAt).toBeLessThanOrEqual(lastRenew + 10_000);
    // ... and b acquired only once the lease had expired, so the two never led at once.
    expect(b.state.startedAt).toBeGreaterThanOrEqual(lastRenew + 15_000);
    expect(b.state.startedAt).toBeGreaterThan(a.state.lostAt ?? Infinity);
    expect(lease.snapshot?.record).toMatchObject({ holderIdentity: "b", leaseTransitions: 1 });
  });

  it("tries again the moment the holder's lease expires by its clock, not up to a jittered retry later", async () => {
    const lease = new MemoryLease();
    const a = candidate(lease, "a");
    await vi.advanceTimersByTimeAsync(0);
    // b's retries at their longest: 2 s × 2.2.
    const b = candidate(lease, "b", () => 1);
    const get = b.port.get;
    let lastChangeSeen = 0;
    let lastRecord = "";
    b.port.get = async (s) => {
      const snapshot = await get(s);
      const record = JSON.stringify(snapshot?.record);
      if (snapshot?.record.holderIdentity === "a" && record !== lastRecord) {
        lastChangeSeen = Date.now();
        lastRecord = record;
      }
      return snapshot;
    };
    await vi.advanceTimersByTimeAsync(10_000);
    a.port.down = true;
    await vi.advanceTimersByTimeAsync(30_000);
    expect(b.elector.isLeader()).toBe(true);
    // Never before the record it last saw change had gone unchanged for the whole duration ...
    expect(b.state.startedAt).toBeGreaterThanOrEqual(lastChangeSeen + 15_000);
    // ... and at that moment, not at its next jittered retry (up to 4.4 s later).
    expect(b.state.startedAt).toBeLessThanOrEqual(lastChangeSeen + 15_000 + 10);
  });

  it("steps down at once when it observes another holder", async () => {
    const lease = new MemoryLease();
    const a = candidate(lease, "a");
    await vi.advanceTimersByTimeAsync(0);
    // An operator (or a split-brain peer) overwrites the lease.
    const intruder = lease.port("x");
    const current = await intruder.get(new AbortController().signal);
    await intruder.update(
      {
        holderIdentity: "x",
        leaseDurationSeconds: 15,
        acquireTime: new Date(),
        renewTime: new Date(),
        leaseTransitions: 1,
      },
      current?.resourceVersion ?? "",
      new AbortController().signal,
    );
    const overwritten = Date.now();
    await vi.advanceTimersByTimeAsync(2_001);
    expect(await a.outcome).toBe("lost");
    expect((a.state.lostAt ?? Infinity) - overwritten).toBeLessThanOrEqual(2_001);
  });

  it("releases the lease on a graceful stop, so the next candidate acquires without waiting for expiry", async () => {
    const lease = new MemoryLease();
    const a = candidate(lease, "a");
    await vi.advanceTimersByTimeAsync(0);
    const b = candidate(lease, "b");
    await vi.advanceTimersByTimeAsync(5_000);
    a.stop.abort();
    await vi.advanceTimersByTimeAsync(0);
    expect(await a.outcome).toBe("stopped");
    expect(a.changes).toEqual([true, false]);
    expect(lease.snapshot?.record).toMatchObject({ holderIdentity: "", leaseDurationSeconds: 1 });
    const released = Date.now();
    await vi.advanceTimersByTimeAsync(5_000);
    expect(b.elector.isLeader()).toBe(true);
    // Acquire retries every 2 s (jitter pinned to 0 here): far sooner than the 15 s expiry.
    expect((b.state.startedAt ?? Infinity) - released).toBeLessThanOrEqual(2_000);
    expect(lease.snapshot?.record).toMatchObject({ holderIdentity: "b", leaseTransitions: 1 });
  });

  it("keeps renewing while the leader work drains after a stop, longer than the lease lasts", async () => {
    const lease = new MemoryLease();
    const a = candidate(lease, "a");
    a.state.drainMs = 25_000;
    await vi.advanceTimersByTimeAsync(0);
    const b = candidate(lease, "b");
    a.stop.abort();
    await vi.advanceTimersByTimeAsync(24_000);
    expect(lease.holder).toBe("a");
    expect(b.elector.isLeader()).toBe(false);
    await vi.advanceTimersByTimeAsync(1_000);
    expect(await a.outcome).toBe("stopped");
    expect(lease.holder).toBe("");
  });

  it("treats a write conflict as a lost race and retries", async () => {
    const lease = new MemoryLease();
    const raced = lease.port("a");
    let conflicts = 1;
    const elector = new LeaderElector({
      identity: "a",
      random: () => 0,
      lease: {
        get: (s) => raced.get(s),
        create: async (record, s) => {
          if (conflicts-- > 0) {
            // Someone else created it between our get and our create.
            await lease.port("b").create({ ...record, holderIdentity: "", leaseDurationSeconds: 1 }, s);
            throw new LeaseConflictError("already exists");
          }
          return raced.create(record, s);
        },
        update: (record, rv, s) => raced.update(record, rv, s),
      },
    });
    const started: number[] = [];
    void elector.run(new AbortController().signal, async () => {
      started.push(Date.now());
    });
    await vi.advanceTimersByTimeAsync(0);
    expect(started).toEqual([]);
    await vi.advanceTimersByTimeAsync(2_000);
    expect(started).toHaveLength(1);
    expect(lease.writes.map((w) => w.record.holderIdentity)).toEqual(["", "a", ""]);
  });

  it("rejects timings where the renew deadline is not below the lease duration", () => {
    const lease = new MemoryLease();
    expect(
      () =>
        new LeaderElector({
          lease: lease.port("a"),
          identity: "a",
          leaseDurationMs: 10_000,
          renewDeadlineMs: 10_000,
        }),
    ).toThrow(/leaseDuration > renewDeadline/);
  });
});
