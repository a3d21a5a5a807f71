import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { Backoff, spread } from "../../src/runtime/backoff.ts";
import { WorkQueue } from "../../src/runtime/queue.ts";
import { SPREAD_MOMENTS } from "../../src/runtime/queue-schedules.ts";
import { countingClock } from "../support/manual-clock.ts";

beforeEach(() => {
  vi.useFakeTimers({ now: 0 });
});
afterEach(() => {
  vi.useRealTimers();
});

/** Resolves with the key `get` hands out, or "pending" when nothing is handed out right now. */
async function poll(queue: WorkQueue): Promise<string | undefined | "pending"> {
  const controller = new AbortController();
  const result = queue.get(controller.signal);
  await vi.advanceTimersByTimeAsync(0);
  controller.abort();
  const key = await result;
  return key === undefined ? "pending" : key;
}

describe("WorkQueue", () => {
  it("hands out a key added many times only once", async () => {
    const queue = new WorkQueue();
    queue.add("ns/a");
    queue.add("ns/a");
    queue.add("ns/b");
    queue.add("ns/a");
    expect(await queue.get()).toBe("ns/a");
    expect(await queue.get()).toBe("ns/b");
    expect(await poll(queue)).toBe("pending");
  });

  it("never hands out a key that is in flight, and processes it again after done when re-added", async () => {
    const queue = new WorkQueue();
    queue.add("ns/a");
    expect(await queue.get()).toBe("ns/a");
    queue.add("ns/a");
    queue.add("ns/a");
    expect(queue.length).toBe(0);
    const next = queue.get();
    await vi.advanceTimersByTimeAsync(0);
    queue.done("ns/a");
    expect(await next).toBe("ns/a");
    queue.done("ns/a");
    expect(await poll(queue)).toBe("pending");
  });

  it("keeps the earliest requested time for a delayed key", async () => {
    const queue = new WorkQueue();
    queue.addAfter("ns/a", 5_000);
    queue.addAfter("ns/a", 1_000);
    queue.addAfter("ns/a", 3_000);
    await vi.advanceTimersByTimeAsync(999);
    expect(await poll(queue)).toBe("pending");
    await vi.advanceTimersByTimeAsync(1);
    expect(await poll(queue)).toBe("ns/a");
    queue.done("ns/a");
    // The later requests were absorbed by the earlier one: nothing fires at 3 s or 5 s.
    await vi.advanceTimersByTimeAsync(10_000);
    expect(await poll(queue)).toBe("pending");
  });

  it("makes a delayed key ready at once when it is added without delay", async () => {
    const queue = new WorkQueue();
    queue.addAfter("ns/a", 60_000);
    queue.add("ns/a");
    expect(await poll(queue)).toBe("ns/a");
    queue.done("ns/a");
    await vi.advanceTimersByTimeAsync(60_000);
    expect(await poll(queue)).toBe("pending");
  });

  it("takes a follow-up coming due before a backlog of fresh keys, then each line in turn", async () => {
    const queue = new WorkQueue();
    for (const key of ["ns/a", "ns/b", "ns/c", "ns/d"]) queue.add(key);
    queue.addAfter("ns/f1", 1_000, { followUp: true });
    queue.addAfter("ns/f2", 1_000, { followUp: true });
    queue.addAfter("ns/late", 1_000);
    await vi.advanceTimersByTimeAsync(1_000);
    expect(queue.length).toBe(7);
    const order: string[] = [];
    for (let i = 0; i < 7; i++) {
      const key = await poll(queue);
      if (typeof key !== "string" || key === "pending") throw new Error(`nothing handed out at ${i}`);
      order.push(key);
      queue.done(key);
    }
    // A plain delayed add coming due is fresh work: it waits behind the fresh backlog.
    expect(order).toEqual(["ns/f1", "ns/a", "ns/f2", "ns/b", "ns/c", "ns/d", "ns/late"]);
  });

  it("keeps every other turn for fresh keys however many follow-ups are ready", async () => {
    const queue = new WorkQueue();
    for (let i = 0; i < 50; i++) queue.addAfter(`ns/follow-${i}`, 0, { followUp: true });
    for (let i = 0; i < 3; i++) queue.add(`ns/fresh-${i}`);
    const first: string[] = [];
    for (let i = 0; i < 6; i++) {
      const key = await queue.get();
      if (key === undefined) throw new Error("queue shut down");
      first.push(key);
      queue.done(key);
      // Each follow-up asks to be looked at again at once: the follow-ups' line never empties.
      if (key.includes("follow")) queue.addAfter(key, 0, { followUp: true });
    }
    expect(first.filter((k) => k.includes("fresh"))).toEqual(["ns/fresh-0", "ns/fresh-1", "ns/fresh-2"]);
  });

  it("schedules a retry (addRateLimited) as a follow-up", async () => {
    const queue = new WorkQueue({ backoff: { baseMs: 1_000, maxMs: 1_000, jitter: 0 } });
    for (const key of ["ns/a", "ns/b"]) queue.add(key);
    queue.addRateLimited("ns/failed");
    await vi.advanceTimersByTimeAsync(1_000);
    expect(await poll(queue)).toBe("ns/failed");
  });

  it("leaves a key in the line it waits in when it is added to the other, once", async () => {
    const queue = new WorkQueue();
    queue.add("ns/a");
    queue.add("ns/b");
    queue.addAfter("ns/b", 0, { followUp: true });
    queue.addAfter("ns/f", 0, { followUp: true });
    queue.add("ns/f");
    expect(queue.length).toBe(3);
    const order: unknown[] = [];
    for (let i = 0; i < 4; i++) {
      const key = await poll(queue);
      order.push(key);
      if (typeof key === "string" && key !== "pending") queue.done(key);
    }
    expect(order).toEqual(["ns/f", "ns/a", "ns/b", "pending"]);
  });

  it("spreads keys over moments of the spread, each key once at its moment", async () => {
    const queue = new WorkQueue();
    const draws = [0, 0.5, 0.99, 0.5];
    queue.addSpread(["ns/now", "ns/middle", "ns/last", "ns/middle-too"], 3_200, () => draws.shift() ?? 0);
    // Moment 0 is at once; 3,200 ms in 32 moments: 0.5 is moment 16 (1,600 ms), 0.99 moment 31.
    expect(await poll(queue)).toBe("ns/now");
    queue.done("ns/now");
    await vi.advanceTimersByTimeAsync(1_599);
    expect(await poll(queue)).toBe("pending");
    await vi.advanceTimersByTimeAsync(1);
    expect(queue.length).toBe(2);
    for (const key of ["ns/middle", "ns/middle-too"]) {
      expect(await poll(queue)).toBe(key);
      queue.done(key);
    }
    await vi.advanceTimersByTimeAsync(1_499);
    expect(await poll(queue)).toBe("pending");
    await vi.advanceTimersByTimeAsync(1);
    expect(await poll(queue)).toBe("ns/last");
    queue.done("ns/last");
    await vi.advanceTimersByTimeAsync(10_000);
    expect(await poll(queue)).toBe("pending");
  });

  it("keeps a spread key's sooner schedule, and brings a later one forward to its moment", async () => {
    const queue = new WorkQueue();
    queue.addAfter("ns/sooner", 500);
    queue.addAfter("ns/later", 60_000);
    queue.addSpread(["ns/sooner", "ns/later"], 3_200, () => 0.5);
    await vi.advanceTimersByTimeAsync(500);
    expect(await poll(queue)).toBe("ns/sooner");
    queue.done("ns/sooner");
    await vi.advanceTimersByTimeAsync(1_100);
    expect(await poll(queue)).toBe("ns/later");
    queue.done("ns/later");
    // Each came once: the spread did not add the sooner one again, nor the later one's timer fire.
    await vi.advanceTimersByTimeAsync(120_000);
    expect(await poll(queue)).toBe("pending");
  });

  it("hands a spread key out once when it is added, scheduled sooner or cancelled before its moment", async () => {
    const queue = new WorkQueue();
    queue.addSpread(["ns/added", "ns/sooner", "ns/later", "ns/cancelled", "ns/waits"], 3_200, () => 0.5);
    expect(queue.delayedCount).toBe(5);
    queue.add("ns/added");
    queue.addAfter("ns/sooner", 500);
    queue.addAfter("ns/later", 5_000);
    queue.cancel("ns/cancelled");
    // Scheduled later: "ns/sooner" (its own timer, once), "ns/later" and "ns/waits" (the spread).
    expect(queue.delayedCount).toBe(3);
    const handed: string[] = [];
    const take = async () => {
      for (;;) {
        const key = await poll(queue);
        if (key === "pending" || key === undefined) return;
        handed.push(key);
        queue.done(key);
      }
    };
    await take();
    await vi.advanceTimersByTimeAsync(500);
    await take();
    // The spread's moment (1,600 ms): only the keys still waiting for it.
    await vi.advanceTimersByTimeAsync(1_100);
    await take();
    await vi.advanceTimersByTimeAsync(60_000);
    await take();
    expect(handed).toEqual(["ns/added", "ns/sooner", "ns/later", "ns/waits"]);
    expect(queue.delayedCount).toBe(0);
  });

  it("keeps the earliest of two spreads of one key", async () => {
    const queue = new WorkQueue();
    queue.addSpread(["ns/a"], 3_200, () => 0.9);
    queue.addSpread(["ns/a"], 3_200, () => 0.1);
    queue.addSpread(["ns/a"], 3_200, () => 0.5);
    const at: number[] = [];
    for (let t = 0; t < 4_000; t += 100) {
      await vi.advanceTimersByTimeAsync(100);
      const key = await poll(queue);
      if (key === "ns/a") {
        at.push(Date.now());
        queue.done(key);
      }
    }
    // 0.1 of 32 moments is moment 3: 300 ms; the later moments find it handed out already.
    expect(at).toEqual([300]);
  });

  it("keeps a follow-up added while its key is in flight in the follow-ups' line", async () => {
    const queue = new WorkQueue();
    queue.add("ns/f");
    expect(await queue.get()).toBe("ns/f");
    for (const key of ["ns/a", "ns/b"]) queue.add(key);
    queue.addAfter("ns/f", 0, { followUp: true });
    queue.done("ns/f");
    expect(await poll(queue)).toBe("ns/f");
  });

  it("sets one timer per moment of a spread, not one per key, and cancels them on shutdown", async () => {
    const { clock: counting, timers } = countingClock();
    const queue = new WorkQueue({ clock: counting });
    const keys = Array.from({ length: 10_000 }, (_, i) => `ns/k${i}`);
    queue.addSpread(keys, 6_000);
    expect(timers()).toBeLessThanOrEqual(SPREAD_MOMENTS);
    queue.shutDown();
    await vi.advanceTimersByTimeAsync(10_000);
    expect(await queue.get()).toBeUndefined();
    expect(queue.length).toBe(0);
  });

  it("backs a failing key off exponentially up to the cap, and forget resets it", () => {
    const queue = new WorkQueue({ backoff: { baseMs: 1_000, maxMs: 30_000, jitter: 0 } });
    const delays = Array.from({ length: 7 }, () => queue.addRateLimited("ns/a"));
    expect(delays).toEqual([1_000, 2_000, 4_000, 8_000, 16_000, 30_000, 30_000]);
    expect(queue.numRequeues("ns/a")).toBe(7);
    expect(queue.addRateLimited("ns/b")).toBe(1_000);
    queue.forget("ns/a");
    expect(queue.addRateLimited("ns/a")).toBe(1_000);
  });

  it("honours a minimum delay (Retry-After) over a shorter backoff", () => {
    const queue = new WorkQueue({ backoff: { jitter: 0 } });
    expect(queue.addRateLimited("ns/a", 7_000)).toBe(7_000);
    expect(queue.addRateLimited("ns/a", 500)).toBe(2_000);
  });

  it("delivers a rate-limited key only after its backoff", async () => {
    const queue = new WorkQueue({ backoff: { baseMs: 1_000, jitter: 0 } });
    queue.addRateLimited("ns/a");
    queue.addRateLimited("ns/a");
    await vi.advanceTimersByTimeAsync(999);
    expect(await poll(queue)).toBe("pending");
    await vi.advanceTimersByTimeAsync(1);
    expect(await poll(queue)).toBe("ns/a");
  });

  it("stops intake on shutdown, drops waiting keys, and drains only when in-flight work is done", async () => {
    const queue = new WorkQueue();
    queue.add("ns/a");
    queue.add("ns/b");
    queue.addAfter("ns/c", 1_000);
    expect(await queue.get()).toBe("ns/a");
    queue.shutDown();
    queue.add("ns/d");
    expect(await queue.get()).toBeUndefined();
    expect(queue.length).toBe(0);
    expect(queue.delayedCount).toBe(0);
    let drained = false;
    void queue.drained().then(() => {
      drained = true;
    });
    await vi.advanceTimersByTimeAsync(5_000);
    expect(drained).toBe(false);
    queue.add("ns/a");
    queue.done("ns/a");
    await vi.advanceTimersByTimeAsync(0);
    expect(drained).toBe(true);
    expect(await poll(queue)).toBe("pending");
  });

  it("releases a worker waiting for a key when the queue shuts down", async () => {
    const queue = new WorkQueue();
    const waiting = queue.get();
    queue.shutDown();
    expect(await waiting).toBeUndefined();
  });

  it("reports depth, adds, retries, time in queue and work duration", async () => {
    const seen = {
      depth: [] as number[],
      adds: 0,
      retries: 0,
      latency: [] as number[],
      work: [] as number[],
    };
    const queue = new WorkQueue({
      backoff: { jitter: 0 },
      metrics: {
        depth: (d) => seen.depth.push(d),
        added: () => seen.adds++,
        retried: () => seen.retries++,
        queueLatency: (s) => seen.latency.push(s),
        workDuration: (s) => seen.work.push(s),
      },
    });
    queue.add("ns/a");
    queue.add("ns/b");
    await vi.advanceTimersByTimeAsync(3_000);
    const key = await queue.get();
    await vi.advanceTimersByTimeAsync(2_000);
    expect(queue.inFlight()).toEqual({ count: 1, unfinishedSeconds: 2, longestSeconds: 2 });
    queue.done(key ?? "");
    queue.addRateLimited("ns/c");
    expect(seen.adds).toBe(2);
    expect(seen.retries).toBe(1);
    expect(seen.latency).toEqual([3]);
    expect(seen.work).toEqual([2]);
    expect(seen.depth.at(-1)).toBe(1);
  });
});

describe("Backoff", () => {
  it("keeps a jittered delay between (1 - jitter) × ceiling and the ceiling", () => {
    for (const r of [0, 0.25, 0.5, 0.999]) {
      const backoff = new Backoff({ baseMs: 1_000, maxMs: 300_000, jitter: 1, random: () => r });
      for (let attempt = 0; attempt < 12; attempt++) {
        const ceiling = Math.min(300_000, 1_000 * 2 ** attempt);
        const delay = backoff.delayMs(attempt);
        expect(delay).toBeGreaterThanOrEqual(0);
        expect(delay).toBeLessThanOrEqual(ceiling);
        expect(delay).toBe(Math.round(ceiling * (1 - r)));
      }
    }
  });

  it("rejects a cap below the base", () => {
    expect(() => new Backoff({ baseMs: 10, maxMs: 5 })).toThrow(RangeError);
  });

  it("spreads a period by at most ± the fraction", () => {
    expect(spread(600_000, 0.1, () => 0)).toBe(540_000);
    expect(spread(600_000, 0.1, () => 0.5)).toBe(600_000);
    expect(spread(600_000, 0.1, () => 0.9999999)).toBe(660_000);
  });
});
