// A dead replica's share inherited by the ring written on its Lease: the record, the heir of each
// claim, the sharder's step for a held owner's resource, which Leases give a replica a share, the
// second watches started and stopped, and the replica's own Lease never taken back from a sharder.
import { pino } from "pino";
import { describe, expect, it, vi } from "vitest";
import { Backoff } from "../../src/runtime/backoff.ts";
import { LeaseConflictError, type LeasePort, type LeaseRecord } from "../../src/runtime/leader.ts";
import { type MemberState, nextAction, type RingView } from "../../src/sharding/assignment.ts";
import { Heirs, heldRecord, inheritanceChain, readSeedForHeirs } from "../../src/sharding/heirs.ts";
import {
  decodeInheritance,
  encodeInheritance,
  heirOf,
  type Inheritance,
  MAX_HEIRS,
} from "../../src/sharding/inheritance.ts";
import { ownLease } from "../../src/sharding/lease-holder.ts";
import type { RingLease } from "../../src/sharding/membership.ts";
import { type ShardedResource, WriteBudget } from "../../src/sharding/pass.ts";
import { chooseMoves } from "../../src/sharding/pass-choose.ts";
import { ownerOf, ringShares } from "../../src/sharding/ring.ts";
import { RingChoices } from "../../src/sharding/ring-choices.ts";
import { ManualClock } from "../support/manual-clock.ts";

const logger = pino({ level: "silent" });
const seed = new TextEncoder().encode("install-key");

describe("the ring written on a taken Lease", () => {
  it.each([
    { value: "a;b,c", ring: { members: ["b", "c"], leader: "a" } },
    { value: ";c,b", ring: { members: ["b", "c"], leader: undefined } },
    { value: "a;b,b", ring: { members: ["b"], leader: "a" } },
    { value: undefined, ring: undefined },
    { value: "", ring: undefined },
    { value: "a;", ring: undefined },
    { value: "a;B", ring: undefined },
    { value: "A;b", ring: undefined },
    { value: "b,c", ring: undefined },
    { value: `a;${Array.from({ length: MAX_HEIRS + 1 }, (_, i) => `m${i}`).join(",")}`, ring: undefined },
  ])("reads $value as $ring", ({ value, ring }) => {
    expect(decodeInheritance(value)).toEqual(ring);
  });

  it("reads back what it writes", () => {
    const ring: Inheritance = { members: ["a", "b", "c"], leader: "b" };
    expect(decodeInheritance(encodeInheritance(ring))).toEqual(ring);
    expect(decodeInheritance(encodeInheritance({ members: ["a"], leader: undefined }))).toEqual({
      members: ["a"],
      leader: undefined,
    });
  });
});

describe("the heir of a claim", () => {
  const claims = Array.from({ length: 2_000 }, (_, i) => `conn/app-${i}`);

  it.each([
    { members: ["a", "b"], leader: "a" },
    { members: ["a", "b", "c"], leader: "b" },
    { members: ["a", "b", "c"], leader: undefined },
    { members: ["b", "c"], leader: "a" },
  ])(
    "is the sharder's choice for the record's members $members (leader $leader), one member each",
    (ring) => {
      const choices = new RingChoices(seed);
      choices.use(ring.members, ring.leader);
      const counts = new Map<string, number>();
      for (const claim of claims) {
        const heir = heirOf(claim, ring, seed);
        expect(heir).toBe(choices.desired({ claim }));
        expect(heir).toBe(ownerOf(claim, ring.members, ringShares(ring.members, ring.leader), seed));
        expect(ring.members).toContain(heir);
        counts.set(heir ?? "", (counts.get(heir ?? "") ?? 0) + 1);
      }
      // Every member inherits a part.
      expect([...counts.keys()].sort()).toEqual([...ring.members].sort());
    },
  );

  it("is the same whatever the order a survivor read the members in", () => {
    for (const claim of claims.slice(0, 200))
      expect(heirOf(claim, { members: ["c", "a", "b"], leader: "a" }, seed)).toBe(
        heirOf(claim, { members: ["a", "b", "c"], leader: "a" }, seed),
      );
  });
});

/** A ring of `states` with `heirs` by claim for the held owner "d". */
function ringOf(states: Record<string, MemberState>, heirs: Record<string, string> = {}): RingView {
  return {
    live: Object.keys(states).filter((m) => states[m] === "live"),
    state: (m) => states[m] ?? "down",
    heir: (member, claim) => (member === "d" ? heirs[claim] : undefined),
  };
}

describe("the sharder's step for a resource of a held replica", () => {
  it.each([
    {
      case: "no ring on its Lease: the ring's choice",
      states: { a: "live", b: "live", d: "held" },
      heirs: {} as Record<string, string>,
      action: { kind: "assign", to: "a" },
    },
    {
      case: "its heir, live: to the heir, not the ring's choice now",
      states: { a: "live", b: "live", d: "held" },
      heirs: { x: "b" },
      action: { kind: "assign", to: "b" },
    },
    {
      case: "its heir is the ring's choice: to it",
      states: { a: "live", b: "live", d: "held" },
      heirs: { x: "a" },
      action: { kind: "assign", to: "a" },
    },
    {
      case: "its heir stopped renewing: the heir's Lease taken first",
      states: { a: "live", b: "down", d: "held" },
      heirs: { x: "b" },
      action: { kind: "hold", member: "b" },
    },
    {
      case: "its heir's Lease is held too: the ring's choice",
      states: { a: "live", b: "held", d: "held" },
      heirs: { x: "b" },
      action: { kind: "assign", to: "a" },
    },
  ] as const)("$case", ({ states, heirs, action }) => {
    expect(
      nextAction(
        "x",
        { owner: "d", drain: false },
        undefined,
        ringOf(states, heirs as Record<string, string>),
        "a",
      ),
    ).toEqual(action);
  });

  it("gives a rival of a held replica's resource to that resource's heir, after the older one", () => {
    const meta = (name: string) => ({ resourceVersion: "1", name, namespace: "team" });
    const held = { uid: "1", metadata: meta("held"), created: 10, owner: "d", drain: false, claim: "x" };
    const rival = {
      uid: "2",
      metadata: meta("rival"),
      created: 20,
      owner: undefined,
      drain: false,
      claim: "x",
    };
    const ring = ringOf({ a: "live", b: "live", d: "held" }, { x: "b" });
    const choose = (older: ShardedResource) =>
      chooseMoves(
        {
          moves: [
            ...(older.owner === "d" ? [{ resource: older, owner: "d", to: "a" }] : []),
            // Once the older one is b's, the ring's choice for the claim: b.
            { resource: rival, owner: undefined, to: older.owner === "d" ? "a" : "b" },
          ],
          drains: [],
        },
        [older, rival],
        new Map(),
        ring,
        new WriteBudget(new Set()),
      );
    // The older one first, then the younger: alone on b, it would take the name.
    const rivalToB = { kind: "assign", resource: rival, to: "b", from: undefined };
    expect(choose(held).writes).toEqual([
      { kind: "assign", resource: held, to: "b", from: "d", after: [rivalToB] },
    ]);
    const second = choose({ ...held, owner: "b" });
    expect(second.writes).toEqual([rivalToB]);
  });
});

const record = (holderIdentity: string): LeaseRecord => ({
  holderIdentity,
  leaseDurationSeconds: 15,
  acquireTime: undefined,
  renewTime: undefined,
  leaseTransitions: 0,
});
const lease = (name: string, holder: string, inheritance?: Inheritance): RingLease => ({
  name,
  resourceVersion: "1",
  record: record(holder),
  ...(inheritance ? { inheritance } : {}),
});

describe("which Leases give a replica a share", () => {
  const ring = { members: ["a", "b"], leader: "a" };
  it.each([
    { case: "a sharder's hold naming it", lease: lease("d", "sharder/a_1", ring), gives: true },
    {
      case: "a sharder's hold not naming it",
      lease: lease("d", "sharder/a_1", { ...ring, members: ["b"] }),
      gives: false,
    },
    { case: "a sharder's hold without a ring", lease: lease("d", "sharder/a_1"), gives: false },
    { case: "a replica's own hold with a ring", lease: lease("d", "d_1", ring), gives: false },
    { case: "its own Lease", lease: lease("a", "sharder/b_1", ring), gives: false },
  ])("$case: $gives", ({ lease: l, gives }) => {
    const records = new Map<string, Inheritance>();
    const held = heldRecord(l);
    if (held) records.set(l.name, held);
    expect(inheritanceChain("a", l.name, records) !== undefined).toBe(gives);
  });
});

describe("the second watches", () => {
  it("starts one per Lease that gives a share, keeping the heir's claims, and stops it when the Lease is let go", () => {
    const started: { owner: string; mine: (claim: string) => boolean; signal: AbortSignal }[] = [];
    const heirs = new Heirs({
      self: "a",
      seed: () => seed,
      inherit: (owner, mine, signal) => {
        started.push({ owner, mine, signal });
        return new Promise(() => {});
      },
      logger,
    });
    const ring = { members: ["a", "b"], leader: "a" };
    const run = new AbortController();
    heirs.update("d", lease("d", "sharder/a_1", ring), run.signal);
    heirs.update("d", lease("d", "sharder/b_1", ring), run.signal);
    expect(started.map((s) => s.owner)).toEqual(["d"]);
    expect(heirs.owners).toEqual(["d"]);
    const first = started[0];
    for (const claim of ["c/1", "c/2", "c/3", "c/4"])
      expect(first?.mine(claim)).toBe(heirOf(claim, ring, seed) === "a");
    heirs.update("d", undefined, run.signal);
    expect(first?.signal.aborted).toBe(true);
    expect(heirs.owners).toEqual([]);
    heirs.update("e", lease("e", "sharder/a_1", ring), run.signal);
    heirs.update("e", lease("e", "e_1"), run.signal);
    expect(started[1]?.signal.aborted).toBe(true);
    heirs.update("f", lease("f", "sharder/a_1", ring), run.signal);
    run.abort();
    expect(started[2]?.signal.aborted).toBe(true);
  });
});

describe("a silent replica's share, listed ahead of a take", () => {
  const ring = { members: ["a", "b"], leader: "a" };
  /** `holder`'s Lease `name` as renewed at `renewedAt` (ms). */
  const renewed = (name: string, holder: string, renewedAt: number): RingLease => ({
    ...lease(name, holder),
    record: { ...record(holder), renewTime: new Date(renewedAt) },
  });

  function survivor(self = "a") {
    const clock = new ManualClock();
    const listings: { owner: string; signal: AbortSignal }[] = [];
    const inherited: { owner: string; signal: AbortSignal }[] = [];
    const heirs = new Heirs({
      self,
      seed: () => seed,
      inherit: (owner, _mine, signal) => {
        inherited.push({ owner, signal });
        return new Promise(() => {});
      },
      early: { list: (owner, signal) => void listings.push({ owner, signal }), silenceMs: 5_000, clock },
      logger,
    });
    const run = new AbortController();
    /** Moves time by `ms`, its own Lease renewed after each second (a replica that renews on time). */
    const advance = (ms: number) => {
      for (let left = ms; left > 0; left -= 1_000) {
        clock.advance(Math.min(1_000, left));
        heirs.update(self, renewed(self, `${self}_1`, clock.now()), run.signal);
      }
    };
    heirs.update(self, renewed(self, `${self}_1`, 0), run.signal);
    return { clock, advance, heirs, listings, inherited, run };
  }

  it("lists a replica's share once its Lease has gone unrenewed for the silence, and stops if it renews", () => {
    const { advance, heirs, listings, run } = survivor();
    heirs.update("d", renewed("d", "d_1", 0), run.signal);
    advance(2_000);
    heirs.update("d", renewed("d", "d_1", 2_000), run.signal);
    advance(4_999);
    expect(listings).toEqual([]);
    advance(1);
    expect(listings.map((l) => l.owner)).toEqual(["d"]);
    // The same record seen again (a resync of the watch) is no renewal.
    heirs.update("d", renewed("d", "d_1", 2_000), run.signal);
    expect(listings[0]?.signal.aborted).toBe(false);
    heirs.update("d", renewed("d", "d_1", 9_000), run.signal);
    expect(listings[0]?.signal.aborted).toBe(true);
    advance(5_000);
    expect(listings.map((l) => l.owner)).toEqual(["d", "d"]);
    heirs.update("d", undefined, run.signal);
    expect(listings[1]?.signal.aborted).toBe(true);
    advance(60_000);
    expect(listings).toHaveLength(2);
  });

  it("keeps the listing through a take whose record names it, for the inherited watch to adopt", () => {
    const { advance, heirs, listings, inherited, run } = survivor();
    heirs.update("d", renewed("d", "d_1", 0), run.signal);
    advance(5_000);
    heirs.update("d", lease("d", "sharder/b_1", ring), run.signal);
    expect(inherited.map((i) => i.owner)).toEqual(["d"]);
    expect(listings[0]?.signal.aborted).toBe(false);
    // Released: whatever the inherited watch did not adopt stops.
    heirs.update("d", lease("d", ""), run.signal);
    expect(listings[0]?.signal.aborted).toBe(true);
  });

  it.each([
    { case: "a record that gives it nothing", taken: lease("d", "sharder/b_1", { ...ring, members: ["b"] }) },
    { case: "no record", taken: lease("d", "sharder/b_1") },
    { case: "a release", taken: lease("d", "") },
  ])("stops the listing at $case", ({ taken }) => {
    const { advance, heirs, listings, inherited, run } = survivor();
    heirs.update("d", renewed("d", "d_1", 0), run.signal);
    advance(5_000);
    heirs.update("d", taken, run.signal);
    expect(inherited).toEqual([]);
    expect(listings[0]?.signal.aborted).toBe(true);
  });

  it("lists no share of its own, and nothing once closed", () => {
    const { advance, heirs, listings, run } = survivor("a");
    heirs.update("d", renewed("d", "d_1", 0), run.signal);
    advance(5_000);
    expect(listings.map((l) => l.owner)).toEqual(["d"]);
    heirs.update("e", renewed("e", "e_1", 5_000), run.signal);
    heirs.close();
    expect(listings[0]?.signal.aborted).toBe(true);
    advance(5_000);
    expect(listings).toHaveLength(1);
  });

  it("waits for its own renewal: a silence seen while its own Lease is unrenewed too lists nothing until then", () => {
    const { clock, heirs, listings, run } = survivor();
    heirs.update("d", renewed("d", "d_1", 0), run.signal);
    // Neither renewed for 5 s (the API server, or this replica's watch, behind): nothing listed.
    clock.advance(5_000);
    expect(listings).toEqual([]);
    clock.advance(3_000);
    expect(listings).toEqual([]);
    // A sharder's take of its own Lease is no renewal of it.
    heirs.update("a", lease("a", "sharder/b_1"), run.signal);
    expect(listings).toEqual([]);
    heirs.update("a", renewed("a", "a_2", clock.now()), run.signal);
    expect(listings.map((l) => l.owner)).toEqual(["d"]);
  });

  it("starts no listing deferred by its own silence once the Lease is taken: the inherited watch lists", () => {
    const { clock, heirs, listings, inherited, run } = survivor();
    heirs.update("d", renewed("d", "d_1", 0), run.signal);
    clock.advance(5_000);
    heirs.update("d", lease("d", "sharder/b_1", ring), run.signal);
    heirs.update("a", renewed("a", "a_2", clock.now()), run.signal);
    expect(inherited.map((i) => i.owner)).toEqual(["d"]);
    expect(listings).toEqual([]);
  });

  it("lists one silent share at a time, the next once the first is adopted or stopped", () => {
    const { advance, heirs, listings, run } = survivor();
    heirs.update("d", renewed("d", "d_1", 0), run.signal);
    heirs.update("e", renewed("e", "e_1", 0), run.signal);
    advance(5_000);
    expect(listings.map((l) => l.owner)).toEqual(["d"]);
    advance(10_000);
    expect(listings.map((l) => l.owner)).toEqual(["d"]);
    // d renewed after all: its listing stops, and e's starts at this replica's next renewal.
    heirs.update("d", renewed("d", "d_1", 15_000), run.signal);
    expect(listings[0]?.signal.aborted).toBe(true);
    advance(1_000);
    expect(listings.map((l) => l.owner)).toEqual(["d", "e"]);
    // e taken, its listing adopted: d's next silence is listed beside the inherited watch.
    heirs.update("e", lease("e", "sharder/b_1", ring), run.signal);
    advance(5_000);
    expect(listings.map((l) => l.owner)).toEqual(["d", "e", "d"]);
    expect(listings[1]?.signal.aborted).toBe(false);
  });
});

describe("a second death during a failover", () => {
  // d died: its Lease's record r1 names h, y and z. Then h, heir of some of d's claims, died: its
  // Lease's record r2 names y and z. For the claim n, h is d's heir under r1 and y is h's under r2:
  // n's rivals, one still labelled owner=d (its label write conflicted), one owner=h, must both be
  // y's, never split between y (watching owner=h) and nobody (d's heir under r1 being dead h).
  const r1: Inheritance = { members: ["h", "y", "z"], leader: "z" };
  const r2: Inheritance = { members: ["y", "z"], leader: "z" };
  const claims = Array.from({ length: 200 }, (_, i) => `conn/app-${i}`);
  const n = claims.find((c) => heirOf(c, r1, seed) === "h" && heirOf(c, r2, seed) === "y") ?? "";
  const zs = claims.find((c) => heirOf(c, r1, seed) === "h" && heirOf(c, r2, seed) === "z") ?? "";
  const direct = claims.find((c) => heirOf(c, r1, seed) === "y") ?? "";

  function survivor(self: string) {
    const watches: { owner: string; mine: (claim: string) => boolean; signal: AbortSignal }[] = [];
    const heirs = new Heirs({
      self,
      seed: () => seed,
      inherit: (owner, mine, signal) => {
        watches.push({ owner, mine, signal });
        return new Promise(() => {});
      },
      logger,
    });
    const live = (owner: string) => watches.filter((w) => w.owner === owner && !w.signal.aborted);
    return { heirs, live };
  }

  it("found claims of each kind", () => {
    expect([n, zs, direct].every((c) => c !== "")).toBe(true);
  });

  it.each([
    { self: "y", d: { [n]: true, [zs]: false, [direct]: true }, h: { [n]: true, [zs]: false } },
    { self: "z", d: { [n]: false, [zs]: true, [direct]: false }, h: { [n]: false, [zs]: true } },
  ])("gives both rivals to one survivor: $self keeps $d of d's, $h of h's", ({ self, d, h }) => {
    const run = new AbortController();
    const { heirs, live } = survivor(self);
    heirs.update("d", lease("d", "sharder/z_1", r1), run.signal);
    heirs.update("h", lease("h", "h_1"), run.signal);
    // Before h died: d's claim n is h's, not this survivor's.
    const before = live("d")[0];
    expect(before?.mine(n)).toBe(false);
    heirs.update("h", lease("h", "sharder/z_1", r2), run.signal);
    // The watch of d starts again, keeping by the chain d → h → (y or z).
    expect(before?.signal.aborted).toBe(true);
    expect(live("d")).toHaveLength(1);
    expect(live("h")).toHaveLength(1);
    for (const [claim, mine] of Object.entries(d)) expect(live("d")[0]?.mine(claim)).toBe(mine);
    for (const [claim, mine] of Object.entries(h)) expect(live("h")[0]?.mine(claim)).toBe(mine);
    expect(heirs.owners.sort()).toEqual(["d", "h"]);
  });

  it("starts a watch of d for a survivor that d's record does not name, once a chain leads to it", () => {
    const run = new AbortController();
    const { heirs, live } = survivor("w");
    heirs.update("d", lease("d", "sharder/z_1", { members: ["h", "z"], leader: "z" }), run.signal);
    expect(live("d")).toHaveLength(0);
    heirs.update("h", lease("h", "sharder/z_1", { members: ["w"], leader: undefined }), run.signal);
    const [watch] = live("d");
    const chained = claims.find((c) => heirOf(c, { members: ["h", "z"], leader: "z" }, seed) === "h") ?? "";
    expect(watch?.mine(chained)).toBe(true);
    // h's Lease deleted (no resource names h any more): d's watch keeps by d's record alone again.
    heirs.update("h", undefined, run.signal);
    expect(watch?.signal.aborted).toBe(true);
    expect(live("d")).toHaveLength(0);
  });

  it("gives nobody a claim whose chain loops, and keeps a watch through a Lease renewal", () => {
    const run = new AbortController();
    const { heirs, live } = survivor("y");
    heirs.update("d", lease("d", "sharder/z_1", { members: ["h", "y"], leader: undefined }), run.signal);
    heirs.update("h", lease("h", "sharder/z_1", { members: ["d"], leader: undefined }), run.signal);
    const [watch] = live("d");
    const looped =
      claims.find((c) => heirOf(c, { members: ["h", "y"], leader: undefined }, seed) === "h") ?? "";
    expect(looped).not.toBe("");
    expect(watch?.mine(looped)).toBe(false);
    heirs.update("h", lease("h", "sharder/y_2", { members: ["d"], leader: undefined }), run.signal);
    expect(watch?.signal.aborted).toBe(false);
  });

  /** The sharder's ring: d and h held, y and z live; heirs by record. */
  const held: RingView = {
    live: ["y", "z"],
    state: (m) => (m === "y" || m === "z" ? "live" : m === "d" || m === "h" ? "held" : "down"),
    heir: (member, claim) =>
      member === "d" ? heirOf(claim, r1, seed) : member === "h" ? heirOf(claim, r2, seed) : undefined,
  };

  it.each([
    { owner: "d", claim: () => n, to: "y" },
    { owner: "h", claim: () => n, to: "y" },
    { owner: "d", claim: () => zs, to: "z" },
    { owner: "d", claim: () => direct, to: "y" },
  ])(
    "labels $owner's resource for the chain's last heir $to, whatever the ring's choice",
    ({ owner, claim, to }) => {
      const other = to === "y" ? "z" : "y";
      expect(nextAction(claim(), { owner, drain: false }, undefined, held, other)).toEqual({
        kind: "assign",
        to,
      });
    },
  );

  it("gives a rival still labelled for d to the survivor inheriting its rival labelled for h", () => {
    const meta = (name: string) => ({ resourceVersion: "1", name });
    const rOld = { uid: "1", metadata: meta("old"), created: 10, owner: "d", drain: false, claim: n };
    const rYoung = { uid: "2", metadata: meta("young"), created: 20, owner: "h", drain: false, claim: n };
    const choice = chooseMoves(
      {
        moves: [
          { resource: rOld, owner: "d", to: "z" },
          { resource: rYoung, owner: "h", to: "z" },
        ],
        drains: [],
      },
      [rOld, rYoung],
      new Map(),
      held,
      new WriteBudget(new Set()),
    );
    // The younger one once the older one is labelled for y (rivals move oldest first).
    const [write] = choice.writes;
    expect(choice.writes).toHaveLength(1);
    expect(
      write?.kind === "assign" && [
        write.resource.uid,
        write.to,
        write.after?.map((t) => [t.resource.uid, t.to]),
      ],
    ).toEqual(["1", "y", [["2", "y"]]]);
  });
});

describe("the replica's own Lease", () => {
  function port(holder: string | undefined) {
    const state = { holder, rv: 1, created: 0, updated: 0 };
    const p: LeasePort = {
      get: async () =>
        state.holder === undefined
          ? undefined
          : { resourceVersion: String(state.rv), record: record(state.holder) },
      create: async (r) => {
        state.created += 1;
        state.holder = r.holderIdentity;
        return { resourceVersion: String(++state.rv), record: r };
      },
      update: async (r) => {
        state.updated += 1;
        return { resourceVersion: String(++state.rv), record: r };
      },
    };
    return { state, p };
  }
  const signal = new AbortController().signal;

  it("is never taken back from a sharder's hold, and is created again only a Lease duration after it was found gone", async () => {
    const clock = new ManualClock({ start: 0 });
    const { state, p } = port("sharder/a_1");
    const own = ownLease(p, 15_000, clock);
    const read = await own.get(signal);
    await expect(own.update(record("d_2"), read?.resourceVersion ?? "", signal)).rejects.toThrow(
      LeaseConflictError,
    );
    expect(state.updated).toBe(0);
    state.holder = undefined;
    expect(await own.get(signal)).toBeUndefined();
    await expect(own.create(record("d_2"), signal)).rejects.toThrow(LeaseConflictError);
    clock.advance(14_999);
    await expect(own.create(record("d_2"), signal)).rejects.toThrow(LeaseConflictError);
    clock.advance(1);
    await own.create(record("d_2"), signal);
    expect(state.created).toBe(1);
  });

  it("is taken back from its previous process, and created at once when no sharder held it", async () => {
    const clock = new ManualClock({ start: 0 });
    const { state, p } = port("d_1");
    const own = ownLease(p, 15_000, clock);
    const read = await own.get(signal);
    await own.update(record("d_2"), read?.resourceVersion ?? "", signal);
    expect(state.updated).toBe(1);
    const fresh = port(undefined);
    const other = ownLease(fresh.p, 15_000, clock);
    expect(await other.get(signal)).toBeUndefined();
    await other.create(record("d_2"), signal);
    expect(fresh.state.created).toBe(1);
  });
});

describe("the ring's key of the inherited watches", () => {
  it("is read again after each failure, with a warning, until it is had", async () => {
    const clock = new ManualClock({ start: 0 });
    const warnings: unknown[] = [];
    const log = pino({ level: "warn" }, { write: (line: string) => warnings.push(JSON.parse(line)) });
    let reads = 0;
    const read = async () => {
      reads += 1;
      if (reads < 3) throw new Error("secrets is forbidden");
      return seed;
    };
    const backoff = new Backoff({ baseMs: 1_000, maxMs: 30_000, jitter: 0 });
    const had = readSeedForHeirs(read, new AbortController().signal, clock, log, backoff);
    await vi.waitFor(() => expect(clock.sleeps).toEqual([1_000]));
    expect(warnings).toHaveLength(1);
    clock.advance(1_000);
    await vi.waitFor(() => expect(clock.sleeps).toEqual([1_000, 2_000]));
    clock.advance(2_000);
    expect(await had).toBe(seed);
    expect(reads).toBe(3);
    expect(warnings.map((w) => (w as { failures: number }).failures)).toEqual([1, 2]);
  });

  it("stops being read when the replica stops", async () => {
    const clock = new ManualClock({ start: 0 });
    const stop = new AbortController();
    const had = readSeedForHeirs(
      async () => {
        throw new Error("secrets is forbidden");
      },
      stop.signal,
      clock,
      logger,
    );
    await vi.waitFor(() => expect(clock.sleeps).toHaveLength(1));
    stop.abort();
    expect(await had).toBeUndefined();
    expect(clock.pending).toBe(0);
  });
});
