// The drift resync: a pass holds what it read until the next pass's reading is in hand, however
// long the pass takes, and the next pass starts a period after the last one ended, never over it.
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
function start(keys: string[], reconcileMs: number, prepare?: () => Promise<void>) {
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
      await prepare?.();
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

  it("skips a periodic pass whose reading failed, but still reconciles everything at start-up", async () => {
    let fail = true;
    const { log, stop, running } = start(["ns/a"], 10, async () => {
      if (fail) throw new Error("listing failed");
    });
    await vi.advanceTimersByTimeAsync(100);
    expect(log).toEqual(["reconcile ns/a held=0"]);
    await vi.advanceTimersByTimeAsync(10_000);
    expect(log).toEqual(["reconcile ns/a held=0"]);
    fail = false;
    await vi.advanceTimersByTimeAsync(11_000);
    // The periodic pass spreads its keys (here: half of the 1 s spread).
    expect(log.slice(1)).toEqual(["prepare at 20010", "reconcile ns/a held=1"]);
    // A failed reading lets go of the one before: it is a period older than a reading may be.
    fail = true;
    await vi.advanceTimersByTimeAsync(10_000);
    expect(log.slice(3)).toEqual(["release at 30520"]);
    stop.abort();
    await vi.advanceTimersByTimeAsync(100);
    await running;
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
