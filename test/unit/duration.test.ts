// Durations as flags, annotations and specs write them, read and written by one module.
import { describe, expect, it } from "vitest";
import { describeDuration, flagDuration, isZeroDuration, parseDuration } from "../../src/duration.ts";

describe("parseDuration", () => {
  it.each([
    ["90s", 90_000],
    ["5m", 300_000],
    ["1h30m", 5_400_000],
    ["1.5h", 5_400_000],
    ["500ms", 500],
    [" 2m ", 120_000],
    ["1m0.5s", 60_500],
  ])("%j → %d ms", (text, ms) => {
    expect(parseDuration(text)).toBe(ms);
  });

  it.each(["", "0", "0s", "0m0s", "5", "1d", "-1s", "1h 30m", "s", "1.s", "PT1M"])(
    "%j is no duration it reads (malformed or zero)",
    (text) => {
      expect(parseDuration(text)).toBeUndefined();
    },
  );
});

describe("isZeroDuration", () => {
  it.each(["0", "000", "0s", "0m0s", "0.0h", " 0ms "])("%j is zero", (text) => {
    expect(isZeroDuration(text)).toBe(true);
  });

  it.each(["", "1s", "0m1s", "0.5s", "nonsense", "0d"])("%j is not zero", (text) => {
    expect(isZeroDuration(text)).toBe(false);
  });
});

describe("flagDuration", () => {
  it.each([
    [3_600_000, "1h"],
    [7_200_000, "2h"],
    [5_400_000, "90m"],
    [60_000, "1m"],
    [90_000, "90s"],
    [1_500, "1500ms"],
    [Number.POSITIVE_INFINITY, "none"],
  ])("%d ms → %s", (ms, text) => {
    expect(flagDuration(ms)).toBe(text);
  });

  it("writes what parseDuration reads back", () => {
    for (const ms of [1, 999, 1_000, 61_000, 3_600_000, 5_400_000, 86_400_000])
      expect(parseDuration(flagDuration(ms))).toBe(ms);
  });
});

describe("describeDuration", () => {
  it.each([
    [0, "0s"],
    [500, "0.5s"],
    [90_000, "1m30s"],
    [3_600_000, "1h"],
    [30_600_000, "8h30m"],
    [3_661_000, "1h1m1s"],
  ])("%d ms → %s", (ms, text) => {
    expect(describeDuration(ms)).toBe(text);
  });

  it("writes what parseDuration reads back", () => {
    for (const ms of [500, 90_000, 3_661_000, 30_600_000])
      expect(parseDuration(describeDuration(ms))).toBe(ms);
  });
});
