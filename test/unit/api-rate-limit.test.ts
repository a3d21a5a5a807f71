import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { TokenBucket } from "../../src/api/budgets.ts";
import { RESERVATION_KEPT_MS } from "../../src/api/reserved-tokens.ts";
import type { ApiClock } from "../../src/runtime/clock.ts";

describe("TokenBucket", () => {
  it("reserves a holder's token in line with the waiters, once, and drops it when it is not taken in time", async () => {
    let time = 0;
    const sleeps: number[] = [];
    const clock: ApiClock = { now: () => time, sleep: async (ms) => void sleeps.push(ms) };
    const bucket = new TokenBucket({ qps: 1, burst: 1, clock });
    await bucket.acquire();
    // a reserves the next token (in 1 s), b the one after; a again keeps its own.
    expect(bucket.reserve("a")).toBe(1_000);
    expect(bucket.reserve("b")).toBe(2_000);
    expect(bucket.reserve("a")).toBe(1_000);
    // A caller that waits comes after both.
    await bucket.acquire();
    expect(sleeps).toEqual([3_000]);
    time = 1_000;
    expect(bucket.reservedFor("a")).toBe(0);
    bucket.take("a");
    expect(bucket.reservedFor("a")).toBeUndefined();
    // b never comes back: its reservation goes once it is RESERVATION_KEPT_MS past due.
    time = 2_000 + RESERVATION_KEPT_MS + 1;
    bucket.reserve("c");
    expect(bucket.reservedFor("b")).toBeUndefined();
    expect(bucket.reservedFor("c")).toBe(0);
  });

  it("reserves the namespaces' tokens in turns, each namespace's in order, at the rate (property)", () => {
    // Each step: time goes on, the holders whose token is due take it, one more reserves.
    const step = fc.record({
      namespace: fc.integer({ min: 0, max: 3 }),
      advance: fc.integer({ min: 0, max: 3_000 }),
    });
    fc.assert(
      fc.property(fc.array(step, { minLength: 1, maxLength: 80 }), (steps) => {
        let time = 0;
        const clock: ApiClock = { now: () => time, sleep: async () => undefined };
        const bucket = new TokenBucket({ qps: 1, burst: 1, clock });
        const pending: string[] = [];
        const dues = () => new Map(pending.map((h) => [h, bucket.reservedFor(h) as number]));
        steps.forEach(({ namespace, advance }, i) => {
          time += advance;
          const before = dues();
          for (const [holder, ms] of before)
            if (ms === 0) {
              bucket.take(holder);
              pending.splice(pending.indexOf(holder), 1);
              before.delete(holder);
            }
          // Taking a token moves no other one.
          expect(dues()).toEqual(before);
          const others = new Set(pending.map((h) => h.slice(0, h.indexOf("/"))));
          const first = !others.delete(`ns${namespace}`);
          const holder = `ns${namespace}/r${i}`;
          const ms = bucket.reserve(holder);
          pending.push(holder);
          // A namespace holding none waits at most two tokens per other namespace holding some
          // (its turn and the next), whatever they hold.
          if (first) expect(ms).toBeLessThanOrEqual((2 * others.size + 1) * 1_000);
          const now = dues();
          // The rate: no two tokens less than 1/qps apart.
          const sorted = [...now.values()].sort((a, b) => a - b);
          const gaps = sorted.slice(1).map((at, j) => at - (sorted[j] as number));
          expect(gaps.filter((gap) => gap < 1_000 - 1e-6)).toEqual([]);
          // Each namespace's in the order reserved.
          for (const ns of new Set(pending.map((h) => h.slice(0, h.indexOf("/"))))) {
            const own = pending.filter((h) => h.startsWith(`${ns}/`)).map((h) => now.get(h) as number);
            expect(own).toEqual([...own].sort((a, b) => a - b));
          }
        });
      }),
    );
  });

  it("serves a burst at once and then one caller per 1/qps, in arrival order", async () => {
    // Time stands still: every caller arrives at t=0, so each later one queues behind the others.
    const sleeps: number[] = [];
    const clock: ApiClock = { now: () => 0, sleep: async (ms) => void sleeps.push(ms) };
    const bucket = new TokenBucket({ qps: 4, burst: 3, clock });
    for (let i = 0; i < 7; i++) await bucket.acquire();
    expect(sleeps).toEqual([250, 500, 750, 1000]);
  });

  it("gives a sharded replica its share of qps and burst, read as the share changes", async () => {
    const sleeps: number[] = [];
    let share = 0.5;
    const clock: ApiClock = { now: () => 0, sleep: async (ms) => void sleeps.push(ms) };
    const bucket = new TokenBucket({ qps: 4, burst: 4, clock, share: () => share });
    // A burst of 2 at once, then one per 1/(4 × 0.5) s.
    for (let i = 0; i < 4; i++) await bucket.acquire();
    expect(sleeps).toEqual([500, 1000]);
    // A share out of (0, 1] counts as the whole budget.
    share = 0;
    await bucket.acquire();
    expect(sleeps.at(-1)).toBe(750);
  });

  it("never lets more than burst + qps·t through in any window (property)", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 50 }),
        fc.integer({ min: 1, max: 10 }),
        fc.array(fc.integer({ min: 0, max: 500 }), { minLength: 1, maxLength: 60 }),
        async (qps, burst, gaps) => {
          let time = 0;
          const clock: ApiClock = {
            now: () => time,
            sleep: async (ms) => {
              time += ms;
            },
          };
          const bucket = new TokenBucket({ qps, burst, clock });
          const grants: number[] = [];
          for (const gap of gaps) {
            time += gap;
            await bucket.acquire();
            grants.push(time);
          }
          for (let i = 0; i < grants.length; i++) {
            for (let j = i; j < grants.length; j++) {
              const window = ((grants[j] ?? 0) - (grants[i] ?? 0)) / 1000;
              expect(j - i + 1).toBeLessThanOrEqual(burst + qps * window + 1e-6);
            }
          }
        },
      ),
    );
  });

  it("refuses a nonsensical configuration", () => {
    const clock: ApiClock = { now: () => 0, sleep: async () => {} };
    expect(() => new TokenBucket({ qps: 0, burst: 1, clock })).toThrow(/qps/);
    expect(() => new TokenBucket({ qps: 1, burst: 0, clock })).toThrow(/burst/);
  });
});

describe("TokenBucket.pause", () => {
  /** A clock whose sleeps advance time at once, recording when each acquisition was granted. */
  const instantClock = () => {
    let time = 0;
    const clock: ApiClock = {
      now: () => time,
      sleep: async (ms) => {
        time += ms;
      },
    };
    return { clock, now: () => time };
  };

  it("grants nothing during the pause, then one at once and the rest at qps, not a burst", async () => {
    const { clock, now } = instantClock();
    const bucket = new TokenBucket({ qps: 10, burst: 40, clock });
    bucket.pause(2000);
    expect(bucket.pausedForMs()).toBe(2000);
    const grants: number[] = [];
    for (let i = 0; i < 4; i++) {
      await bucket.acquire();
      grants.push(now());
    }
    expect(grants).toEqual([2000, 2100, 2200, 2300]);
    expect(bucket.pausedForMs()).toBe(0);
  });

  it("a waiter already queued when the pause begins waits for the pause too", async () => {
    let time = 0;
    let wakeups: Array<{ at: number; wake: () => void }> = [];
    const clock: ApiClock = {
      now: () => time,
      sleep: (ms) => new Promise<void>((wake) => wakeups.push({ at: time + ms, wake })),
    };
    const advance = async (to: number) => {
      time = to;
      const due = wakeups.filter((w) => w.at <= to);
      wakeups = wakeups.filter((w) => w.at > to);
      for (const w of due) w.wake();
      await new Promise((r) => setImmediate(r));
    };
    const bucket = new TokenBucket({ qps: 10, burst: 1, clock });
    await bucket.acquire();
    let granted: number | undefined;
    const waiting = bucket.acquire().then(() => {
      granted = time;
    });
    bucket.pause(1000);
    await advance(100);
    expect(granted).toBeUndefined();
    await advance(1000);
    await advance(1100);
    await waiting;
    expect(granted).toBeGreaterThanOrEqual(1000);
  });

  it("keeps the longer of two pauses", () => {
    const { clock } = instantClock();
    const bucket = new TokenBucket({ qps: 1, burst: 1, clock });
    bucket.pause(5000);
    bucket.pause(1000);
    expect(bucket.pausedForMs()).toBe(5000);
  });
});
