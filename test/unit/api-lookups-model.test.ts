/**
 * LookupShares against a model: random owners ask random names, the resolver answers, fails,
 * throws or answers at once in random order; after every step the bounds and the joining hold,
 * no lookup waits while there is room for it, and once every lookup is answered nothing is held.
 */
import type { LookupAddress } from "node:dns";
import type { LookupFunction } from "node:net";
import { describe, expect, it } from "vitest";
import { LookupShares } from "../../src/api/lookups.ts";
import { seeded } from "../support/seeded.ts";

type Answer = (
  error: NodeJS.ErrnoException | null,
  address: string | LookupAddress[],
  family?: number,
) => void;

interface Call {
  owner: string;
  key: string;
  answers: number;
}

interface Pending {
  owner: string;
  key: string;
  callback: Answer;
}

function assert(condition: boolean, message: string): asserts condition {
  if (!condition) throw new Error(message);
}

const keyOf = (hostname: string, all: boolean) => `${hostname}\0${all ? 1 : 0}`;

/** A world of `owners` asking through one LookupShares; the resolver's calls are held until answered. */
function world(
  seed: number,
  limits: { total: number; perOwner: number },
  owners: string[],
  names: (owner: string) => string[],
) {
  const random = seeded(seed);
  const shares = new LookupShares(limits);
  const pending: Pending[] = [];
  const calls: Call[] = [];
  const unanswered = new Set<Call>();
  /** Resolver starts, in order, by owner. */
  const starts: string[] = [];
  const resolverOf = (owner: string) =>
    ((hostname: string, options: { all?: boolean }, callback: Answer) => {
      starts.push(owner);
      const key = keyOf(hostname, options.all === true);
      // Some names the resolver refuses at once (it throws), some it answers synchronously.
      if (hostname.startsWith("refused"))
        throw Object.assign(new TypeError("refused"), { code: "ERR_INVALID_ARG_TYPE" });
      if (hostname.startsWith("sync")) return void callback(null, "127.0.0.1", 4);
      pending.push({ owner, key, callback });
    }) as unknown as LookupFunction;
  const lookups = new Map(owners.map((owner) => [owner, shares.lookupFor(owner, resolverOf(owner))]));

  const ask = (owner: string, hostname: string, all: boolean) => {
    const call: Call = { owner, key: keyOf(hostname, all), answers: 0 };
    calls.push(call);
    unanswered.add(call);
    (lookups.get(owner) as LookupFunction)(hostname, { all }, () => {
      call.answers += 1;
      assert(call.answers === 1, "a caller answered twice");
      unanswered.delete(call);
    });
  };
  const answerOne = () => {
    const at = random.int(pending.length);
    const [done] = pending.splice(at, 1) as [Pending];
    if (random.chance(0.3)) done.callback(Object.assign(new Error("EAI_AGAIN"), { code: "EAI_AGAIN" }), "");
    else done.callback(null, "10.0.0.1", 4);
    // A resolver that calls back twice is ignored the second time.
    if (random.chance(0.05)) done.callback(null, "10.0.0.2", 4);
  };

  const check = () => {
    const byOwner = new Map<string, number>();
    for (const { owner } of pending) byOwner.set(owner, (byOwner.get(owner) ?? 0) + 1);
    assert(pending.length <= limits.total, "over the total");
    assert(shares.inFlight() === pending.length, "inFlight() is not the lookups in flight");
    for (const owner of owners) {
      assert((byOwner.get(owner) ?? 0) <= limits.perOwner, `${owner} over its share`);
      assert(shares.inFlight(owner) === (byOwner.get(owner) ?? 0), `inFlight(${owner}) wrong`);
    }
    // One lookup in flight per name and options, whoever asked.
    const inFlightKeys = new Set(pending.map((p) => p.key));
    assert(inFlightKeys.size === pending.length, "a name looked up twice at once");
    // Work-conserving: an owner with an unanswered call of a name not in flight waits only at a bound.
    for (const call of unanswered) {
      if (inFlightKeys.has(call.key)) continue;
      const atBound = pending.length === limits.total || (byOwner.get(call.owner) ?? 0) === limits.perOwner;
      assert(atBound, `${call.owner} waits with room free`);
    }
  };

  const step = () => {
    if (pending.length > 0 && random.chance(0.45)) answerOne();
    else {
      const owner = random.pick(owners);
      ask(owner, random.pick(names(owner)), random.chance(0.2));
    }
    check();
  };

  const drain = () => {
    while (pending.length > 0) {
      answerOne();
      check();
    }
    expect(unanswered.size).toBe(0);
    expect(calls.every((call) => call.answers === 1)).toBe(true);
    expect(shares.inFlight()).toBe(0);
  };
  return { shares, step, drain, starts, pending, unanswered, random };
}

describe("LookupShares, against a model", () => {
  it("keeps the bounds and joins, starts what fits, and holds nothing once all is answered (100 seeds)", () => {
    const owners = ["namespace/a", "namespace/b", "namespace/c", "connection/shared"];
    const shared = ["api.example", "sync.example", "refused.example", "other.example", "x.example"];
    for (let seed = 1; seed <= 100; seed++) {
      const r = seeded(seed * 7919);
      const total = 1 + r.int(6);
      const perOwner = 1 + r.int(total);
      const w = world(seed, { total, perOwner }, owners, () => shared);
      for (let i = 0; i < 200; i++) w.step();
      w.drain();
    }
  });

  it("serves owners in turn: while an owner waits below its share, no other owner starts twice (100 seeds)", () => {
    const owners = ["namespace/a", "namespace/b", "namespace/c"];
    for (let seed = 1; seed <= 100; seed++) {
      const r = seeded(seed * 104729);
      const total = 1 + r.int(4);
      const perOwner = 1 + r.int(total);
      // Names of an owner's own: a start of each owner's lookup is a call of the resolver.
      const w = world(seed, { total, perOwner }, owners, (owner) =>
        Array.from({ length: 6 }, (_, i) => `${owner.slice(-1)}${i}.example`),
      );
      for (let i = 0; i < 200; i++) {
        const startsBefore = w.starts.length;
        // Who waits below its share before the step: an unanswered call of a name not in flight.
        const inFlight = new Set(w.pending.map((p) => p.key));
        const eligible = owners.filter(
          (o) =>
            [...w.unanswered].some((c) => c.owner === o && !inFlight.has(c.key)) &&
            w.pending.filter((p) => p.owner === o).length < perOwner,
        );
        w.step();
        const started = w.starts.slice(startsBefore);
        // One step starts each owner waiting below its share before any owner's second start.
        for (const owner of eligible) {
          const first = started.indexOf(owner);
          const seen = new Set<string>();
          for (let j = 0; j < (first === -1 ? started.length : first); j++) {
            assert(!seen.has(started[j] as string), `${started[j]} started twice while ${owner} waited`);
            seen.add(started[j] as string);
          }
        }
      }
      w.drain();
    }
  });

  it("an owner that keeps asking cannot hold another owner's lookup back more than one turn each", () => {
    const shares = new LookupShares({ total: 2, perOwner: 2 });
    const pending: Array<{ owner: string; callback: Answer }> = [];
    const resolverOf = (owner: string) =>
      ((_h: string, _o: unknown, callback: Answer) =>
        void pending.push({ owner, callback })) as unknown as LookupFunction;
    const greedy = shares.lookupFor("namespace/greedy", resolverOf("namespace/greedy"));
    const quiet = shares.lookupFor("namespace/quiet", resolverOf("namespace/quiet"));
    let n = 0;
    for (let i = 0; i < 10; i++) greedy(`g${n++}`, {}, () => {});
    let quietAnswered = false;
    quiet("q.example", {}, () => {
      quietAnswered = true;
    });
    // Each greedy lookup answered is asked again at once; the quiet one starts at the first room.
    let greedyStartsBeforeQuiet = 0;
    for (let round = 0; round < 100 && !quietAnswered; round++) {
      const next = pending.shift();
      if (next === undefined) break;
      if (next.owner === "namespace/greedy") greedyStartsBeforeQuiet += 1;
      next.callback(null, "10.0.0.1", 4);
      greedy(`g${n++}`, {}, () => {});
    }
    expect(quietAnswered).toBe(true);
    expect(greedyStartsBeforeQuiet).toBeLessThanOrEqual(2);
  });
});
