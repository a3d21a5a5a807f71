// The watch cache's secondary indexes answer exactly what a scan of the cache would, after any
// sequence of adds, updates and deletes: a claim check or a Secret trigger then reads only the
// few objects concerned, at any cache size.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { CacheIndexes } from "../../src/runtime/compact.ts";

interface Item {
  names: string[];
}

const byNames = (o: Item) => o.names;

describe("CacheIndexes", () => {
  it("moves a key between values as its object changes, and drops it on delete", () => {
    const index = new CacheIndexes<Item>({ claim: byNames });
    index.update("ns/a", undefined, { names: ["web"] });
    index.update("ns/b", undefined, { names: ["web", "api"] });
    expect([...index.keys("claim", "web")]).toEqual(["ns/a", "ns/b"]);
    index.update("ns/a", { names: ["web"] }, { names: ["api"] });
    expect([...index.keys("claim", "web")]).toEqual(["ns/b"]);
    expect([...index.keys("claim", "api")].sort()).toEqual(["ns/a", "ns/b"]);
    index.update("ns/b", { names: ["web", "api"] }, undefined);
    expect([...index.keys("claim", "web")]).toEqual([]);
    expect([...index.keys("claim", "api")]).toEqual(["ns/a"]);
    expect([...index.keys("unknown-index", "api")]).toEqual([]);
  });

  it("agrees with a scan of the cache after any sequence of changes", () => {
    const key = fc.constantFrom("a/1", "a/2", "b/1", "b/2", "c");
    const value = fc.constantFrom("x", "y", "z");
    const op = fc.record({
      key,
      names: fc.option(fc.uniqueArray(value, { maxLength: 3 }), { nil: undefined }),
    });
    fc.assert(
      fc.property(fc.array(op, { maxLength: 40 }), (ops) => {
        const cache = new Map<string, Item>();
        const index = new CacheIndexes<Item>({ claim: byNames, first: (o) => o.names.slice(0, 1) });
        for (const { key: k, names } of ops) {
          const old = cache.get(k);
          const next = names === undefined ? undefined : { names };
          if (next) cache.set(k, next);
          else cache.delete(k);
          index.update(k, old, next);
        }
        for (const v of ["x", "y", "z"]) {
          const scan = [...cache].filter(([, o]) => o.names.includes(v)).map(([k]) => k);
          expect([...index.keys("claim", v)].sort()).toEqual(scan.sort());
          const firstScan = [...cache].filter(([, o]) => o.names[0] === v).map(([k]) => k);
          expect([...index.keys("first", v)].sort()).toEqual(firstScan.sort());
        }
      }),
    );
  });
});
