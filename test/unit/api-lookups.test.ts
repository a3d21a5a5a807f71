import type { LookupAddress } from "node:dns";
import type { LookupFunction } from "node:net";
import { describe, expect, it } from "vitest";
import { LookupShares, lookupLimits, threadPoolSize } from "../../src/api/lookups.ts";

type Answer = (
  error: NodeJS.ErrnoException | null,
  address: string | LookupAddress[],
  family?: number,
) => void;

/** A resolver whose lookups answer only when told: the names asked, in order, and their callbacks. */
function heldResolver() {
  const asked: string[] = [];
  const pending = new Map<string, Answer[]>();
  const resolve = ((hostname: string, _options: unknown, callback: Answer) => {
    asked.push(hostname);
    pending.set(hostname, [...(pending.get(hostname) ?? []), callback]);
  }) as unknown as LookupFunction;
  const answer = (hostname: string, address = "127.0.0.1") => {
    const callbacks = pending.get(hostname) ?? [];
    pending.delete(hostname);
    for (const callback of callbacks) callback(null, address, 4);
  };
  return { asked, resolve, answer };
}

/** Looks `hostname` up through `lookup`; resolves what it called back with. */
function lookUp(lookup: LookupFunction, hostname: string): Promise<string | Error> {
  return new Promise((resolve) =>
    lookup(hostname, {}, (error, address) => resolve(error ?? (address as string))),
  );
}

describe("LookupShares", () => {
  it("holds an owner whose names never answer to its share, and starts another owner's lookup at once", async () => {
    const { asked, resolve, answer } = heldResolver();
    const shares = new LookupShares({ total: 4, perOwner: 2 });
    const hostile = shares.lookupFor("namespace/a", resolve);
    for (let i = 0; i < 10; i++) void lookUp(hostile, `never-${i}.example`);
    expect(asked).toEqual(["never-0.example", "never-1.example"]);
    const other = lookUp(shares.lookupFor("namespace/b", resolve), "healthy.example");
    expect(asked).toContain("healthy.example");
    answer("healthy.example");
    expect(await other).toBe("127.0.0.1");
    expect([shares.inFlight(), shares.inFlight("namespace/a"), shares.inFlight("namespace/b")]).toEqual([
      2, 2, 0,
    ]);
    // A lookup of the owner ends when getaddrinfo returns: the next of its own starts then.
    answer("never-0.example");
    expect(asked.at(-1)).toBe("never-2.example");
  });

  it("asks once for a name looked up again while the first lookup is under way, and answers every caller", async () => {
    const { asked, resolve, answer } = heldResolver();
    const shares = new LookupShares({ total: 4, perOwner: 1 });
    const lookup = shares.lookupFor("namespace/a", resolve);
    const calls = Array.from({ length: 50 }, () => lookUp(lookup, "one.example"));
    // Another owner's lookup of the same name joins it too: one answer for both.
    calls.push(lookUp(shares.lookupFor("namespace/b", resolve), "one.example"));
    answer("one.example", "10.0.0.7");
    expect(await Promise.all(calls)).toEqual(Array(51).fill("10.0.0.7"));
    expect(asked).toEqual(["one.example"]);
    // Once answered, the name is asked again (no answer is kept).
    void lookUp(lookup, "one.example");
    expect(asked).toEqual(["one.example", "one.example"]);
  });

  it("never makes another owner's lookup of a name wait behind an owner's full share (the public service's name)", async () => {
    const { asked, resolve, answer } = heldResolver();
    const shares = new LookupShares({ total: 4, perOwner: 1 });
    const hostile = shares.lookupFor("namespace/a", resolve);
    void lookUp(hostile, "never.example");
    const queued = lookUp(hostile, "api.dms.example");
    expect(asked).toEqual(["never.example"]);
    // Namespace b's share is free: its lookup of the name starts; namespace a's waits its own turn.
    const other = lookUp(shares.lookupFor("namespace/b", resolve), "api.dms.example");
    expect(asked).toEqual(["never.example", "api.dms.example"]);
    answer("api.dms.example");
    expect(await other).toBe("127.0.0.1");
    answer("never.example");
    void lookUp(shares.lookupFor("namespace/b", resolve), "api.dms.example");
    answer("api.dms.example");
    expect(await queued).toBe("127.0.0.1");
  });

  it("starts the waiting lookups an owner at a time, in turn, within the total", () => {
    const { asked, resolve, answer } = heldResolver();
    const shares = new LookupShares({ total: 1, perOwner: 1 });
    const a = shares.lookupFor("namespace/a", resolve);
    const b = shares.lookupFor("namespace/b", resolve);
    for (let i = 0; i < 3; i++) void lookUp(a, `a${i}`);
    for (let i = 0; i < 3; i++) void lookUp(b, `b${i}`);
    for (const name of ["a0", "b0", "a1", "b1", "a2"]) answer(name);
    expect(asked).toEqual(["a0", "b0", "a1", "b1", "a2", "b2"]);
  });

  it("forgets the turn of an owner whose waiting lookup joined another's: it has none, and goes first when it asks again", () => {
    const { asked, resolve, answer } = heldResolver();
    const shares = new LookupShares({ total: 3, perOwner: 1 });
    const lookup = (owner: string, name: string) => void lookUp(shares.lookupFor(owner, resolve), name);
    lookup("c", "c-hang");
    lookup("a", "a-hang");
    lookup("d", "d-hang");
    // a's lookup of the name waits in its full share; e's, waiting for room, starts first.
    lookup("a", "shared.example");
    lookup("e", "shared.example");
    lookup("c", "c2");
    answer("a-hang");
    expect(asked.at(-1)).toBe("shared.example");
    // a's turn comes: its lookup joins e's, in flight (no thread of its own).
    answer("d-hang");
    answer("shared.example");
    expect(shares.inFlight("a")).toBe(0);
    // a holds no lookup, waiting or in flight: it has no turn. Full again, a and c wait.
    lookup("f", "f1");
    lookup("g", "g1");
    lookup("a", "a1");
    // c's lookup ends: of c (a turn, its last start) and a (none), a starts first.
    answer("c-hang");
    expect(asked.slice(-2)).toEqual(["g1", "a1"]);
  });

  it("answers a lookup the resolver refuses at once with its error, and frees its place", async () => {
    const shares = new LookupShares({ total: 1, perOwner: 1 });
    const refusing = (() => {
      throw Object.assign(new TypeError('The "hostname" argument must be of type string'), {
        code: "ERR_INVALID_ARG_TYPE",
      });
    }) as unknown as LookupFunction;
    const failed = await lookUp(shares.lookupFor("namespace/a", refusing), "x");
    expect(failed).toBeInstanceOf(TypeError);
    expect(shares.inFlight()).toBe(0);
  });

  it("takes three quarters of the thread pool for lookups, a quarter of those for one owner", () => {
    expect(lookupLimits(4)).toEqual({ total: 3, perOwner: 1 });
    expect(lookupLimits(16)).toEqual({ total: 12, perOwner: 3 });
    // As libuv reads it: unset 4, else atoi with 0 as 1, capped at 1,024 (a negative read unsigned).
    const read = [undefined, "16", "16abc", "0", "x", "", "5000", "-3"].map(threadPoolSize);
    expect(read).toEqual([4, 16, 16, 1, 1, 1, 1024, 1024]);
  });
});
