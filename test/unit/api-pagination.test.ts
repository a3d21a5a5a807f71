import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { paginate } from "../../src/api/deployment-routes.ts";

const collect = async <T>(it: AsyncIterable<T>) => {
  const out: T[] = [];
  for await (const x of it) out.push(x);
  return out;
};

describe("paginate", () => {
  it("yields every item once and in order from any consistent service (property)", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 0, max: 300 }),
        fc.integer({ min: 1, max: 100 }),
        fc.array(fc.integer({ min: 1, max: 100 }), { minLength: 1, maxLength: 10 }),
        async (n, limit, caps) => {
          const items = Array.from({ length: n }, (_, i) => `item-${i}`);
          let call = 0;
          const fetchPage = async (offset: number, size: number) => {
            // A service that may answer shorter pages than asked, differently each time.
            const cap = caps[call++ % caps.length] ?? size;
            const page = items.slice(offset, offset + Math.min(size, cap));
            return { items: page, nextOffset: offset + page.length };
          };
          const listed = await collect(
            paginate(fetchPage, { offset: 0, limit, maxPages: 10_000, idOf: (x) => x, route: "/r" }),
          );
          expect(listed).toEqual(items);
        },
      ),
    );
  });

  it("yields once an item a listing shifted by an insert repeats on the next page", async () => {
    // Page 2 is asked from offset 2 after "new" was inserted first: "b" moved onto it.
    const pages: Record<number, string[]> = { 0: ["a", "b"], 2: ["b", "c"], 4: [] };
    const listed = await collect(
      paginate(async (offset) => ({ items: pages[offset] ?? [], nextOffset: offset + 2 }), {
        offset: 0,
        limit: 2,
        maxPages: 10,
        idOf: (x) => x,
        route: "/r",
      }),
    );
    expect(listed).toEqual(["a", "b", "c"]);
  });

  it("reports why a listing ended early", async () => {
    const reasons: string[] = [];
    const listed = await collect(
      paginate(async (offset) => ({ items: ["a", "b"], nextOffset: offset }), {
        offset: 0,
        limit: 2,
        maxPages: 10,
        idOf: (x) => x,
        route: "/r",
        onEarlyEnd: (r) => reasons.push(r),
      }),
    );
    expect(listed).toEqual(["a", "b"]);
    expect(reasons).toEqual(["response offset 0 did not advance past 0"]);
  });
});
