// The Bloom filter a connection's snapshot keeps of the names its listing showed but did not hold:
// a wrong "no" would make a reconcile create a deployment that exists, so it must never say one.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { NameFilter } from "../../src/runtime/name-filter.ts";

describe("NameFilter", () => {
  it("says yes for every name added, whatever the names and however full it is", () => {
    fc.assert(
      fc.property(
        fc.array(fc.string({ unit: "grapheme", maxLength: 253 }), { maxLength: 3_000 }),
        fc.nat(5_000),
        (names, expected) => {
          const filter = new NameFilter(expected);
          for (const name of names) filter.add(name);
          expect(names.filter((name) => !filter.has(name))).toEqual([]);
        },
      ),
      { numRuns: 200 },
    );
  });

  it("says no to an empty filter, and rarely yes to a name not added when sized for its names", () => {
    expect(new NameFilter(0).has("anything")).toBe(false);
    const filter = new NameFilter(10_000);
    for (let i = 0; i < 10_000; i++) filter.add(`endless-${i}`);
    let wrong = 0;
    for (let i = 0; i < 10_000; i++) if (filter.has(`agent-${i}`)) wrong += 1;
    // Ten bits and four hashes per name: about 1 % in theory.
    expect(wrong / 10_000).toBeLessThan(0.03);
  });

  it("grows past the names it was sized for: 10,000 names in a filter sized for 600 rarely say yes to another", () => {
    // A connection being filled: the last listing showed 300 deployments, this one 10,000. One
    // layer of the size asked for said yes to 96.6 % of the names not added.
    const filter = new NameFilter(600);
    for (let i = 0; i < 10_000; i++) filter.add(`other-${i}`);
    let wrong = 0;
    for (let i = 0; i < 10_000; i++) if (filter.has(`mine-${i}`)) wrong += 1;
    expect(wrong / 10_000).toBeLessThan(0.05);
    expect(filter.bytes).toBeLessThan(10_000 * 4);
  });

  it("past its largest size it only says yes more often, and holds at most 128 KiB", () => {
    // 128 KiB holds 104,858 names at ten bits a name: 200,000 puts the last 95,000 past it.
    for (const expected of [0, 600, 10_000_000]) {
      const filter = new NameFilter(expected);
      for (let i = 0; i < 200_000; i++) filter.add(`endless-${i}`);
      expect(filter.has("endless-199999")).toBe(true);
      expect(filter.has("endless-0")).toBe(true);
      expect(filter.count).toBe(200_000);
      expect(filter.bytes).toBeLessThanOrEqual(128 * 1024);
    }
  });
});
