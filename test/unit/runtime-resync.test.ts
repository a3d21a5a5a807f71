// The drift resync: a pass holds what it read until the next pass's reading is in hand, however
// long the pass takes, and the next pass starts a period after the last one ended, never over it.
// Each group (a connection) is read and passed on its own: one whose reading is slow, endless or
// failing delays no other, and a failed reading is tried again sooner than a period.
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { Controller, type ReconcileResult } from "../../src/runtime/controller.ts";
import { ResyncedController } from "../../src/runtime/resync.ts";

beforeEach(() => {
  vi.useFakeTimers({ now: 0 });
});
afterEach(() => {
  vi.useRealTimers();
});

/** A resync over `keys` whose reconciles take `reconcileMs` each, one worker. */
function start(keys: string[], reconcileMs: number) {
  const log: string[] = [];
  let held = 0;
  let maxHeld = 0;
  const reconcile = async (key: string): Promise<ReconcileResult> => {
    log.push(`reconcile ${key} held=${held}`);
    await new Promise((r) => setTimeout(r, reconcileMs));
    return { kind: "done" };
  };
  const controller = new Controller({ name: "test", reconcile, random: () => 0.5 });
  const resync = new ResyncedController({
    controller,
    synced: () => Promise.resolve(),
    keys: () => keys,
    prepare: async () => {
      held += 1;
      maxHeld = Math.max(maxHeld, held);
      log.push(`prepare at ${Date.now()}`);
      return () => {
        held -= 1;
        log.push(`release at ${Date.now()}`);
      };
    },
    periodMs: 10_000,
    jitter: 0,
    spreadMs: 1_000,
    random: () => 0.5,
  });
  const stop = new AbortController();
  const running = resync.start(stop.signal, new AbortController().signal);
  return { log, stop, running, maxHeld: () => maxHeld, controller };
}

describe("ResyncedController", () => {
  it("reconciles every key at start-up under one held reading, held until the next pass's reading", async () => {
    const { log, stop, running } = start(["ns/a", "ns/b", "ns/c"], 100);
    await vi.advanceTimersByTimeAsync(1_000);
    expect(log).toEqual([
      "prepare at 0",
      "reconcile ns/a held=1",
      "reconcile ns/b held=1",
      "reconcile ns/c held=1",
    ]);
    // The pass ended at 300; the next one reads the world a period later and only then lets go.
    await vi.advanceTimersByTimeAsync(10_000);
    expect(log.slice(4, 6)).toEqual(["prepare at 10300", "release at 10300"]);
    stop.abort();
    await vi.advanceTimersByTimeAsync(1_000);
    await running;
    // Stopping lets go of the last reading, once the reconciles in flight are done with it.
    expect(log.at(-1)).toMatch(/^release at /);
    expect(log.filter((l) => l.startsWith("release"))).toHaveLength(2);
  });

  it("never starts a pass over a running one: a pass longer than the period delays the next", async () => {
    // 50 keys of 1 s each on one worker: a pass lasts 50 s, five times the 10 s period.
    const keys = Array.from({ length: 50 }, (_, i) => `ns/k${i}`);
    const { log, stop, running, maxHeld } = start(keys, 1_000);
    await vi.advanceTimersByTimeAsync(130_000);
    // Two readings are held only for the instant between the new one and the release of the old.
    expect(maxHeld()).toBe(2);
    const prepares = log.filter((l) => l.startsWith("prepare")).map((l) => Number(l.split(" at ")[1]));
    const releases = log.filter((l) => l.startsWith("release")).map((l) => Number(l.split(" at ")[1]));
    expect(prepares[0]).toBe(0);
    // The next pass starts one period after the first one ended (at 50 s), and its reading
    // replaces the first one's.
    expect(prepares[1]).toBe(60_000);
    expect(releases[0]).toBe(60_000);
    expect(log.filter((l) => l.startsWith("reconcile")).every((l) => l.endsWith("held=1"))).toBe(true);
    stop.abort();
    await vi.advanceTimersByTimeAsync(2_000);
    await running;
  });

  it("passes the keys of a group whose reading failed, and reads it again after retryMs, not a period", async () => {
    const r = failingReads({ periodMs: 10_000, retryMs: 3_000 });
    // Its reconciles learn from the reading's owner that it failed (and report it, at no call).
    await vi.advanceTimersByTimeAsync(7_000);
    expect(r.prepares).toEqual([0, 3_000, 6_000]);
    expect(r.reconciled).toEqual(["ns/a at 0", "ns/a at 3000", "ns/a at 6000"]);
    // Once a reading succeeds, the period applies again.
    r.fail = false;
    await vi.advanceTimersByTimeAsync(12_000);
    expect(r.prepares).toEqual([0, 3_000, 6_000, 9_000, 19_000]);
    await r.stop();
  });

  it("reads a failed group again after retryBaseMs, then twice as long each time up to retryMs", async () => {
    const r = failingReads({ periodMs: 60_000, retryMs: 10_000, retryBaseMs: 2_000 });
    await vi.advanceTimersByTimeAsync(35_000);
    expect(r.prepares).toEqual([0, 2_000, 6_000, 14_000, 24_000, 34_000]);
    // A success resets it: the next failure is retried after retryBaseMs again.
    r.fail = false;
    await vi.advanceTimersByTimeAsync(10_000);
    r.fail = true;
    await vi.advanceTimersByTimeAsync(60_000 + 2_000);
    expect(r.prepares.slice(6)).toEqual([44_000, 104_000, 106_000]);
    await r.stop();
  });
});

/**
 * A resync over groups whose readings take `readMs[group]` each (never, when absent from it),
 * with the keys of each group `group/0` and `group/1`.
 */
function startGroups(initial: string[], readMs: Record<string, number>, ungrouped: string[] = []) {
  let groups = initial;
  const reconciled: string[] = [];
  /** Readings held, per group. */
  const held = new Map<string, number>();
  const holding = () =>
    [...held]
      .filter(([, n]) => n > 0)
      .map(([group]) => group)
      .sort();
  const controller = new Controller({
    name: "test",
    reconcile: async (key) => {
      reconciled.push(`${key} at ${Date.now()}`);
      return { kind: "done" };
    },
    concurrency: 4,
  });
  const resync = new ResyncedController({
    controller,
    synced: () => Promise.resolve(),
    groups: () => groups,
    keys: (group) => [`${group}/0`, `${group}/1`],
    ungrouped: () => ungrouped,
    prepare: async (group, signal) => {
      const ms = readMs[group];
      // A reading that never ends holds on until its signal aborts (the group or the resync stops).
      await new Promise<void>((resolve, reject) => {
        if (ms !== undefined) setTimeout(resolve, ms);
        signal.addEventListener("abort", () => reject(signal.reason), { once: true });
      });
      held.set(group, (held.get(group) ?? 0) + 1);
      return () => held.set(group, (held.get(group) ?? 0) - 1);
    },
    periodMs: 10_000,
    jitter: 0,
    spreadMs: 0,
  });
  const stop = new AbortController();
  const running = resync.start(stop.signal, new AbortController().signal);
  const when = (key: string) =>
    reconciled.filter((r) => r.startsWith(`${key} at `)).map((r) => Number(r.split(" at ")[1]));
  return {
    resync,
    reconciled,
    holding,
    when,
    setGroups: (next: string[]) => {
      groups = next;
      resync.groupsChanged();
    },
    stop: async () => {
      stop.abort();
      await vi.advanceTimersByTimeAsync(100);
      await running;
    },
  };
}

describe("ResyncedController with groups", () => {
  it("passes each group's keys as soon as its own reading is in: one that never ends delays no other", async () => {
    const r = startGroups(["fast", "slow", "stuck"], { fast: 100, slow: 4_000 });
    await vi.advanceTimersByTimeAsync(35_000);
    // Each group's pass follows its own reading, and its next one a period after it ended.
    expect(r.when("fast/0")).toEqual([100, 10_200, 20_300, 30_400]);
    expect(r.when("slow/1")).toEqual([4_000, 18_000, 32_000]);
    expect(r.when("stuck/0")).toEqual([]);
    expect(r.holding()).toEqual(["fast", "slow"]);
    await r.stop();
    expect(r.holding()).toEqual([]);
  });

  it("reconciles the keys of no group once at the start, at once", async () => {
    const r = startGroups(["stuck"], {}, ["elsewhere/a"]);
    await vi.advanceTimersByTimeAsync(25_000);
    expect(r.reconciled).toEqual(["elsewhere/a at 0"]);
    await r.stop();
  });

  it("gives a group that comes into scope its first pass at once, and lets go of one that leaves", async () => {
    const r = startGroups(["a"], { a: 100, b: 100 });
    await vi.advanceTimersByTimeAsync(3_000);
    r.setGroups(["a", "b"]);
    await vi.advanceTimersByTimeAsync(1_000);
    expect(r.when("b/0")).toEqual([3_100]);
    expect(r.holding()).toEqual(["a", "b"]);
    r.setGroups(["b"]);
    await vi.advanceTimersByTimeAsync(30_000);
    expect(r.holding()).toEqual(["b"]);
    // Not passed again once out of scope; the other goes on.
    expect(r.when("a/0")).toEqual([100]);
    expect(r.when("b/0")).toEqual([3_100, 13_200, 23_300, 33_400]);
    await r.stop();
  });
});

describe("Controller.pass", () => {
  it("ends when each key was reconciled once, counting a failed one and a forgotten one", async () => {
    const reconcile = async (key: string): Promise<ReconcileResult> => {
      await new Promise((r) => setTimeout(r, 100));
      if (key === "ns/bad") throw new Error("boom");
      return { kind: "done" };
    };
    const controller = new Controller({ name: "test", reconcile, backoff: { jitter: 0 } });
    const stop = new AbortController();
    const running = controller.start(stop.signal);
    let ended = false;
    void controller.pass(["ns/a", "ns/bad", "ns/gone"], 0).then(() => {
      ended = true;
    });
    controller.forget("ns/gone");
    await vi.advanceTimersByTimeAsync(150);
    expect(ended).toBe(false);
    await vi.advanceTimersByTimeAsync(100);
    expect(ended).toBe(true);
    stop.abort();
    await vi.advanceTimersByTimeAsync(10_000);
    await running;
  });

  it("ends at once when the controller is not running, and when it stops", async () => {
    const controller = new Controller({
      name: "test",
      reconcile: async () => ({ kind: "done" }),
    });
    let idle = false;
    void controller.pass(["ns/a"], 0).then(() => {
      idle = true;
    });
    await vi.advanceTimersByTimeAsync(0);
    expect(idle).toBe(true);
    const stop = new AbortController();
    const running = controller.start(stop.signal);
    // Spread over a minute: without the stop it would still be enqueuing keys after 100 ms.
    let ended = false;
    void controller.pass(["ns/a", "ns/b"], 60_000).then(() => {
      ended = true;
    });
    await vi.advanceTimersByTimeAsync(100);
    expect(ended).toBe(false);
    stop.abort();
    await vi.advanceTimersByTimeAsync(100);
    expect(ended).toBe(true);
    await running;
  });
});

/**
 * A running resync of one group with one key, `ns/a`, whose reading fails while `fail` is set:
 * when each reading started, and each reconcile with its time.
 */
function failingReads(timing: { periodMs: number; retryMs: number; retryBaseMs?: number }) {
  const state = { fail: true, prepares: [] as number[], reconciled: [] as string[], stop: async () => {} };
  const controller = new Controller({
    name: "test",
    reconcile: async (key) => {
      state.reconciled.push(`${key} at ${Date.now()}`);
      return { kind: "done" };
    },
  });
  const resync = new ResyncedController({
    controller,
    synced: () => Promise.resolve(),
    keys: () => ["ns/a"],
    prepare: async () => {
      state.prepares.push(Date.now());
      if (state.fail) throw new Error("listing failed");
      return () => {};
    },
    ...timing,
    jitter: 0,
    spreadMs: 0,
  });
  const stop = new AbortController();
  const running = resync.start(stop.signal, new AbortController().signal);
  state.stop = async () => {
    stop.abort();
    await vi.advanceTimersByTimeAsync(100);
    await running;
  };
  return state;
}
