import { describe, expect, it } from "vitest";
import { median, ofRepeats, type ScaleFigures } from "../bench/scale-report.ts";

// `scale --repeat R` reports each RSS figure as the median of R cold runs with its spread; a
// wrong combination would publish a lucky run as the figure.

/** The figures of one run, only what the combination reads filled in. */
function run(peak: number, idle: number, steady: number, edit: number): ScaleFigures {
  return {
    n: 1000,
    loadAverage: { start: 1, end: 2 },
    rssMiB: { idle, steady, peak, peakCold: peak, peakAdoption: peak - 5 },
    edit: { p50Ms: edit },
    perResource: { resyncCpuMs: 1, steadyKiB: 0 },
  } as unknown as ScaleFigures;
}

describe("the median of repeated runs", () => {
  it("is the middle value, or the mean of the middle two", () => {
    expect(median([3, 1, 2])).toBe(2);
    expect(median([4, 1, 3, 2])).toBe(2.5);
  });

  it("reports every RSS figure as its median with min–max, the rest as the run of median peak", () => {
    const combined = ofRepeats([run(130, 84, 120, 10), run(150, 83, 118, 20), run(140, 85, 125, 30)]);
    expect(combined.rssMiB.peak).toBe(140);
    expect(combined.rssMiB.idle).toBe(84);
    expect(combined.rssMiB.steady).toBe(120);
    expect(combined.repeats?.rssMiB.peak).toEqual({
      median: 140,
      min: 130,
      max: 150,
      runs: { "1": 130, "2": 150, "3": 140 },
    });
    expect(combined.repeats?.runs).toBe(3);
    // The other figures are one real run's: the one whose peak is the median.
    expect(combined.edit.p50Ms).toBe(30);
    // Per resource from the medians: (120 - 84) MiB over 1,000 resources.
    expect(combined.perResource.steadyKiB).toBe(36.86);
  });

  it("leaves one run as it is", () => {
    const one = run(130, 84, 120, 10);
    expect(ofRepeats([one])).toBe(one);
    expect(() => ofRepeats([])).toThrow(/no runs/);
  });
});
