import { describe, expect, it } from "vitest";
import { passStarts } from "../bench/operator-run.ts";
import { parseTenants } from "../bench/tenancy.ts";

// The many-tenants case counts resync passes from the listing calls of every connection, and
// refuses settings under which its comparison would measure nothing.

describe("passStarts", () => {
  it("takes the listings of every connection at the start of a pass for one pass", () => {
    // Two passes of three connections each, 30 s apart, listed in whatever order they came.
    const listings = [30_400, 100, 250, 30_000, 30_100, 900];
    expect(passStarts(listings)).toEqual([100, 30_000]);
  });

  it("keeps one connection's passes apart however short the period", () => {
    expect(passStarts([0, 3_001, 6_002])).toEqual([0, 3_001, 6_002]);
    expect(passStarts([])).toEqual([]);
  });
});

describe("parseTenants", () => {
  it("reads a whole number of tenants", () => {
    expect(parseTenants("50", [10_000])).toBe(50);
    expect(parseTenants(" 2 ", [2, 100])).toBe(2);
  });

  it("refuses one tenant (no other to measure beside the black hole), fractions and words", () => {
    for (const text of ["1", "0", "2.5", "many", "501"]) {
      expect(() => parseTenants(text, [10_000])).toThrow(/--tenants: .* is not a whole number from 2 to 500/);
    }
  });

  it("refuses an N that leaves a tenant without a resource, naming it", () => {
    expect(() => parseTenants("50", [10_000, 20])).toThrow(/--n 20 would leave tenants without a resource/);
  });
});
