import { describe, expect, it } from "vitest";
import { type ScaleFigures, steadyMemorySplit } from "../bench/scale-report.ts";

// A figure per resource, (steady − idle) ÷ N, mixes what each resource costs with what is there
// whatever N; the split draws the line through two N and reads both off it.

function at(n: number, idle: number, steady: number): ScaleFigures {
  return { n, rssMiB: { idle, steady } } as unknown as ScaleFigures;
}

describe("the steady memory as a line in N", () => {
  it("reads the slope between the smallest and the largest N, and the intercept at N = 0", () => {
    // 3,000 resources: 18.2 MiB over idle; 10,000: 34.7. Slope 16.5 MiB over 7,000 resources.
    const split = steadyMemorySplit({
      "10000": at(10_000, 81.7, 116.4),
      "1000": at(1000, 80, 90),
      "3000": at(3000, 81.4, 99.6),
    });
    // The line is the smallest's and the largest's: 1,000 (10 MiB) and 10,000 (34.7 MiB).
    expect(split?.between).toEqual({ from: 1000, to: 10_000 });
    expect(split?.marginalKiB).toBeCloseTo(((34.7 - 10) / 9000) * 1024, 2);
    expect(split?.fixedMiB).toBeCloseTo(10 - ((34.7 - 10) / 9000) * 1000, 1);
  });

  it("says nothing with one N", () => {
    expect(steadyMemorySplit({ "10000": at(10_000, 80, 115) })).toBeUndefined();
    expect(steadyMemorySplit({})).toBeUndefined();
  });

  it("a memory that grows exactly with N has no fixed part", () => {
    const split = steadyMemorySplit({ "1000": at(1000, 80, 82.5), "5000": at(5000, 80, 92.5) });
    expect(split?.marginalKiB).toBe(2.56);
    expect(split?.fixedMiB).toBe(0);
  });
});
