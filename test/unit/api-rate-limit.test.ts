import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { ApiClock } from "../../src/api/clock.ts";
import { TokenBucket } from "../../src/api/rate-limit.ts";

describe("TokenBucket", () => {
  it("serves a burst at once and then one caller per 1/qps, in arrival order", async () => {
    // Time stands still: every caller arrives at t=0, so each later one queues behind the others.
    const sleeps: number[] = [];
    const clock: ApiClock = { now: () => 0, sleep: async (ms) => void sleeps.push(ms) };
    const bucket = new TokenBucket({ qps: 4, burst: 3, clock });
    for (let i = 0; i < 7; i++) await bucket.acquire();
    expect(sleeps).toEqual([250, 500, 750, 1000]);
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
