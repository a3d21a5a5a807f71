// The phases of one sharder pass, each alone: the walk, the choice of moves and drains, the
// writes, the holds; and the ring's choice noted on the records. The sharder's behaviour as a
// whole is test/unit/sharding-sharder.test.ts.
import { pino } from "pino";
import { describe, expect, it } from "vitest";
import type { DeploymentSpec } from "../../src/crd/schema.ts";
import { olderThan } from "../../src/reconcile/inputs.ts";
import type { MemberState, RingView, ShardLabels } from "../../src/sharding/assignment.ts";
import { abandoned, type Hold, holdStep, memberState } from "../../src/sharding/holds.ts";
import { DRAIN_ANY } from "../../src/sharding/labels.ts";
import type { RingLease } from "../../src/sharding/membership.ts";
import {
  CANDIDATES_PER_PASS,
  createdBefore,
  createdSeconds,
  MAX_WRITES_PER_PASS,
  NOT_CREATED,
  type PlannedWrite,
  type ShardedResource,
  WriteBudget,
} from "../../src/sharding/pass.ts";
import { chooseMoves, RIVALS_PER_PASS } from "../../src/sharding/pass-choose.ts";
import { walk } from "../../src/sharding/pass-walk.ts";
import {
  orderWrites,
  runWrites,
  ShardLabelsDenied,
  type WriteResult,
} from "../../src/sharding/pass-write.ts";
import { ownerOf, SHARDER_REPLICA_SHARE } from "../../src/sharding/ring.ts";
import { RingChoices } from "../../src/sharding/ring-choices.ts";

const logger = pino({ level: "silent" });

/**
 * A resource `uid` (its name too) with `labels`, claiming `claim` (its uid by default), created
 * `created` seconds into the epoch (its number in the uid by default: r1 is older than r2).
 */
function res(
  uid: string,
  labels: Partial<ShardLabels> = {},
  claim = uid,
  created = Number(uid.replace(/\D/g, "") || 0),
): ShardedResource {
  return {
    uid,
    metadata: { resourceVersion: "1", name: uid },
    created,
    owner: labels.owner,
    drain: labels.drain ?? false,
    drainTo: labels.drainTo,
    claim,
  };
}

/** A ring of `states` (every member named), `live` being those live. */
function ringOf(states: Record<string, MemberState>): RingView {
  return {
    live: Object.keys(states).filter((m) => states[m] === "live"),
    state: (m) => states[m] ?? "down",
  };
}

/** `r→b` for an assignment (`r1→b+r2+r3`: r2 then r3 once each before was written), `r:drain=v` for a drain. */
const uids = (writes: readonly PlannedWrite[]) =>
  writes.map((w) =>
    w.kind === "assign"
      ? `${w.resource.uid}→${w.to}${(w.after ?? []).map((t) => `+${t.resource.uid}`).join("")}`
      : `${w.resource.uid}:drain=${w.value}`,
  );

describe("the walk", () => {
  it.each([
    {
      case: "an unassigned resource: a move to the ring's choice",
      resources: [res("r")],
      found: { moves: ["r→b"] },
    },
    {
      case: "a resource its live choice owns: nothing",
      resources: [res("r", { owner: "b" })],
      found: { owners: { b: 1 } },
    },
    {
      case: "a resource another live member owns: a drain",
      resources: [res("r", { owner: "c" })],
      found: { drains: ["r→b"], owners: { c: 1 } },
    },
    {
      case: "a drain under way for the choice: waiting",
      resources: [res("r", { owner: "c", drain: true, drainTo: "b" })],
      found: { waiting: 1, owners: { c: 1 } },
    },
    {
      case: "an owner that is down: its Lease to be taken",
      resources: [res("r", { owner: "d" })],
      found: { toHold: ["d"], owners: { d: 1 } },
    },
    {
      case: "an owner someone removed: written back to that owner at once, remembered meanwhile",
      resources: [res("r")],
      before: { r: { owner: "c", drain: false } },
      desired: "c",
      found: { writes: ["r→c"], owners: { c: 1 } },
    },
    {
      case: "labels remembered that the record now holds: forgotten",
      resources: [res("r", { owner: "b" })],
      before: { r: { owner: "b", drain: true } },
      found: { forget: ["r"], owners: { b: 1 } },
    },
    {
      case: "a record without a uid: not read",
      resources: [res("")],
      found: { seen: 0 },
    },
    {
      case: "moves past the candidates a pass considers: later",
      resources: [res("r1"), res("r2")],
      candidates: 1,
      found: { moves: ["r1→b"], later: 1 },
    },
    {
      case: "no room left for a write: later",
      resources: [res("r")],
      before: { r: { owner: "c", drain: false } },
      desired: "c",
      room: 0,
      found: { owners: { c: 1 }, roomLater: 1 },
    },
  ])("$case", ({ resources, before = {}, desired = "b", candidates, room = 1, found }) => {
    const budget = new WriteBudget(new Set(), room);
    const walked = walk({
      resources,
      before: new Map(Object.entries(before)),
      ring: ringOf({ b: "live", c: "live", d: "down" }),
      desired: () => desired,
      budget,
      ...(candidates !== undefined ? { candidates } : {}),
    });
    expect({
      seen: walked.seen,
      owners: Object.fromEntries(walked.owners),
      toHold: [...walked.toHold],
      writes: uids(walked.writes),
      moves: walked.moves.map((m) => `${m.resource.uid}→${m.to}`),
      drains: walked.drains.map((d) => `${d.resource.uid}→${d.to}`),
      forget: walked.forget,
      waiting: walked.waiting,
      later: walked.later,
      roomLater: budget.later,
    }).toEqual({
      seen: resources.filter((r) => r.uid !== "").length,
      owners: {},
      toHold: [],
      writes: [],
      moves: [],
      drains: [],
      forget: [],
      waiting: 0,
      later: 0,
      roomLater: 0,
      ...found,
    });
  });
});

describe("the choice of moves and drains", () => {
  it.each([
    {
      case: "a drain without a rival names the next owner",
      resources: [res("r", { owner: "c" })],
      drains: [{ uid: "r", to: "b" }],
      chosen: { writes: ["r:drain=b"] },
    },
    {
      case: "a drain with a rival names none (rivals move together)",
      resources: [res("r1", { owner: "c" }, "x"), res("r2", { owner: "c" }, "x")],
      drains: [{ uid: "r1", to: "b" }],
      chosen: { writes: [`r1:drain=${DRAIN_ANY}`] },
    },
    {
      case: "a move whose rival another live replica holds: deferred",
      resources: [res("r1", {}, "x"), res("r2", { owner: "c" }, "x")],
      moves: [{ uid: "r1", to: "b" }],
      chosen: { deferred: 1 },
    },
    {
      case: "a move whose rival is on a held replica, or on its new owner: made",
      resources: [res("r1", {}, "x"), res("r2", { owner: "h" }, "x"), res("r3", { owner: "b" }, "x")],
      moves: [{ uid: "r1", to: "b" }],
      chosen: { writes: ["r1→b"] },
    },
    {
      case: "a deferred move's remembered labels the record holds: forgotten",
      resources: [res("r1", { owner: "c" }, "x"), res("r2", { owner: "c" }, "x")],
      before: { r1: { owner: "c", drain: true } },
      moves: [{ uid: "r1", to: "b" }],
      chosen: { deferred: 1, forget: ["r1"] },
    },
    {
      case: "rivals placed together: one chain of writes, oldest first",
      resources: [res("r2", {}, "x"), res("r1", {}, "x"), res("r3", {}, "x")],
      moves: [
        { uid: "r2", to: "b" },
        { uid: "r1", to: "b" },
        { uid: "r3", to: "b" },
      ],
      chosen: { writes: ["r1→b+r2+r3"] },
    },
    {
      case: "rivals joining an older one already labelled for their replica: the older first",
      resources: [res("r1", { owner: "b" }, "x"), res("r2", {}, "x"), res("r3", {}, "x")],
      moves: [
        { uid: "r3", to: "b" },
        { uid: "r2", to: "b" },
      ],
      chosen: { writes: ["r2→b+r3"] },
    },
    {
      case: "an older rival not moving in this pass: the younger ones wait for it",
      resources: [res("r1", {}, "x"), res("r2", {}, "x"), res("r3", {}, "x")],
      moves: [
        { uid: "r3", to: "b" },
        { uid: "r2", to: "b" },
      ],
      chosen: { deferred: 2 },
    },
    {
      case: "rivals without room for all: the chain stops at the first without",
      resources: [res("r1", {}, "x"), res("r2", {}, "x"), res("r3", {}, "x")],
      moves: [
        { uid: "r1", to: "b" },
        { uid: "r2", to: "b" },
        { uid: "r3", to: "b" },
      ],
      room: 2,
      chosen: { writes: ["r1→b+r2"], deferred: 1, roomLater: 1 },
    },
    {
      case: "more rivals than one pass moves: the oldest sixteen, the others in a later pass",
      resources: Array.from({ length: RIVALS_PER_PASS + 2 }, (_, i) => res(`r${i + 1}`, {}, "x")),
      moves: Array.from({ length: RIVALS_PER_PASS + 2 }, (_, i) => ({ uid: `r${i + 1}`, to: "b" })),
      room: 100,
      chosen: {
        writes: [`r1→b${Array.from({ length: RIVALS_PER_PASS - 1 }, (_, i) => `+r${i + 2}`).join("")}`],
        deferred: 2,
      },
    },
    {
      case: "rivals created in the same second: by namespace and name, as the reconciler orders them",
      resources: [res("b", {}, "x", 5), res("a", {}, "x", 5)],
      moves: [
        { uid: "b", to: "b" },
        { uid: "a", to: "b" },
      ],
      chosen: { writes: ["a→b+b"] },
    },
    {
      case: "a drain without a rival whose owner moves by the ring: not written, the owner hands it over",
      resources: [res("r", { owner: "m" })],
      drains: [{ uid: "r", to: "b" }],
      chosen: { byOwners: 1 },
    },
    {
      case: "a drain with a rival whose owner moves by the ring: written (rivals move together, by the sharder)",
      resources: [res("r1", { owner: "m" }, "x"), res("r2", { owner: "m" }, "x")],
      drains: [{ uid: "r1", to: "b" }],
      chosen: { writes: [`r1:drain=${DRAIN_ANY}`] },
    },
    {
      case: "a drain label naming another replica than the ring's choice, whoever the owner: written again",
      resources: [res("r", { owner: "m", drain: true, drainTo: "c" })],
      drains: [{ uid: "r", to: "b" }],
      chosen: { writes: ["r:drain=b"] },
    },
    {
      case: "drains take room before moves",
      resources: [res("r1", { owner: "c" }), res("r2")],
      drains: [{ uid: "r1", to: "b" }],
      moves: [{ uid: "r2", to: "b" }],
      room: 1,
      chosen: { writes: ["r1:drain=b"], roomLater: 1 },
    },
    {
      case: "moves off a held replica take room before drains and other moves",
      resources: [res("r1", { owner: "c" }), res("r2"), res("r3", { owner: "h" })],
      drains: [{ uid: "r1", to: "b" }],
      moves: [
        { uid: "r2", to: "b" },
        { uid: "r3", to: "b" },
      ],
      room: 2,
      chosen: { writes: ["r3→b", "r1:drain=b"], roomLater: 1 },
    },
  ])("$case", ({ resources, before = {}, drains = [], moves = [], room = 10, chosen }) => {
    const byUid = new Map(resources.map((r) => [r.uid, r]));
    const of = (uid: string) => byUid.get(uid) ?? res(uid);
    const budget = new WriteBudget(new Set(), room);
    const choice = chooseMoves(
      {
        drains: drains.map((d) => ({ resource: of(d.uid), to: d.to })),
        moves: moves.map((m) => ({ resource: of(m.uid), owner: of(m.uid).owner, to: m.to })),
      },
      resources,
      new Map(Object.entries(before)),
      // `m` moves its own resources by the ring (`ring-moves.ts`); the others wait for drains.
      { ...ringOf({ b: "live", c: "live", h: "held", m: "live" }), movesItself: (member) => member === "m" },
      budget,
    );
    expect({
      writes: uids(choice.writes),
      deferred: choice.deferred,
      byOwners: choice.byOwners,
      forget: choice.forget,
      roomLater: budget.later,
    }).toEqual({
      writes: [],
      deferred: 0,
      byOwners: 0,
      forget: [],
      roomLater: 0,
      ...chosen,
    });
  });
});

describe("the order of rivals", () => {
  it("is the reconciler's: by creationTimestamp to the second, then namespace and name", () => {
    const stamps = [
      "2026-12-02T10:00:00Z",
      "2026-12-02T10:00:01Z",
      "2025-01-01T00:00:00Z",
      undefined,
      "soon",
    ];
    const keys = [
      { namespace: "team-a", name: "app" },
      { namespace: "team-b", name: "app" },
      { namespace: "team-a", name: "app-2" },
    ];
    const claimants = stamps.flatMap((creationTimestamp) =>
      keys.map((key) => ({
        metadata: { ...key, ...(creationTimestamp === undefined ? {} : { creationTimestamp }) },
        spec: { name: "shared" } as DeploymentSpec,
      })),
    );
    const sharded = (c: (typeof claimants)[number]): ShardedResource => ({
      ...res(c.metadata.name, {}, "shared", createdSeconds(c.metadata.creationTimestamp)),
      metadata: { resourceVersion: "1", name: c.metadata.name, namespace: c.metadata.namespace },
    });
    // A timestamp the API server would not write ("soon") is younger than any here, as a missing one.
    const readable = (c: (typeof claimants)[number]) => c.metadata.creationTimestamp !== "soon";
    for (const a of claimants.filter(readable))
      for (const b of claimants.filter(readable))
        expect(
          createdBefore(sharded(a), sharded(b)),
          `${JSON.stringify(a.metadata)} ${JSON.stringify(b.metadata)}`,
        ).toBe(olderThan(a, b));
    expect(createdSeconds("soon")).toBe(NOT_CREATED);
    expect(createdSeconds(undefined)).toBe(NOT_CREATED);
    expect(createdSeconds("2026-12-02T10:00:01Z")).toBe(Date.UTC(2026, 11, 2, 10, 0, 1) / 1000);
  });
});

describe("the room for writes", () => {
  it("gives writes that failed last pass room of their own", () => {
    const budget = new WriteBudget(new Set(["f1", "f2"]), 1);
    expect(["a", "f1", "b", "f2"].map((uid) => budget.take(uid))).toEqual([true, true, false, false]);
    expect(budget.later).toBe(2);
  });
});

describe("the writes", () => {
  const assign = (uid: string): PlannedWrite => ({
    kind: "assign",
    resource: res(uid),
    to: "b",
    from: undefined,
  });
  const drain = (uid: string): PlannedWrite => ({ kind: "drain", resource: res(uid), value: "b" });

  it.each([
    { case: "in the order decided", writes: ["a", "b"], failed: [], max: 5, order: ["a", "b"], later: 0 },
    {
      case: "those that failed last pass last",
      writes: ["f", "a", "b"],
      failed: ["f"],
      max: 5,
      order: ["a", "b", "f"],
      later: 0,
    },
    {
      case: "at most the maximum",
      writes: ["a", "b", "f"],
      failed: ["a"],
      max: 2,
      order: ["b", "f"],
      later: 1,
    },
  ])("go out $case", ({ writes, failed, max, order, later }) => {
    const ordered = orderWrites(writes.map(assign), new Set(failed), max);
    expect({ order: ordered.ordered.map((w) => w.resource.uid), later: ordered.later }).toEqual({
      order,
      later,
    });
  });

  it.each([
    { case: "written", results: ["written", "written"], outcome: { assigned: 1, drained: 1 } },
    { case: "lost a race", results: ["lost", "written"], outcome: { lost: 1, drained: 1 } },
    { case: "skipped", results: ["skipped", "skipped"], outcome: {} },
    {
      case: "denied (reported once)",
      results: ["denied", "denied"],
      outcome: { denied: 2, failed: ["a", "d"] },
      errors: 1,
    },
    { case: "failed otherwise", results: ["throws", "written"], outcome: { drained: 1, failed: ["a"] } },
  ])("are counted when $case", async ({ results, outcome, errors = 0 }) => {
    const lines: string[] = [];
    const log = pino({ level: "error" }, { write: (line: string) => void lines.push(line) });
    const byUid = new Map([
      ["a", results[0]],
      ["d", results[1]],
    ]);
    const written = await runWrites([assign("a"), drain("d")], {
      write: async ({ resource }) => {
        const result = byUid.get(resource.uid);
        if (result === "denied") throw new ShardLabelsDenied("denied by policy", true);
        if (result === "throws") throw new Error("connection reset");
        return result as WriteResult;
      },
      concurrency: 2,
      signal: new AbortController().signal,
      logger: log,
    });
    expect({ ...written, failed: [...written.failed] }).toEqual({
      assigned: 0,
      drained: 0,
      lost: 0,
      denied: 0,
      failed: [],
      ...outcome,
    });
    expect(lines.length).toBe(errors);
  });

  it.each([
    { case: "each once the one before it was written", results: {}, tried: ["r1", "r2", "r3"], assigned: 3 },
    { case: "none after one that lost a race", results: { r2: "lost" }, tried: ["r1", "r2"], assigned: 1 },
    { case: "none after one that failed", results: { r1: "throws" }, tried: ["r1"], assigned: 0 },
  ])("write a claim's rivals in order: $case", async ({ results, tried: expected, assigned }) => {
    const tried: string[] = [];
    const inFlight = new Set<string>();
    const chain: PlannedWrite = { ...assign("r1"), after: [assign("r2"), assign("r3")] } as PlannedWrite;
    const written = await runWrites([chain, assign("other")], {
      write: async ({ resource }) => {
        // The chain's writes never overlap: each starts once the one before it was answered.
        if (resource.uid !== "other") {
          expect([...inFlight]).toEqual([]);
          inFlight.add(resource.uid);
        }
        tried.push(resource.uid);
        await new Promise((resolve) => setImmediate(resolve));
        inFlight.delete(resource.uid);
        const result = (results as Record<string, string>)[resource.uid] ?? "written";
        if (result === "throws") throw new Error("connection reset");
        return result as WriteResult;
      },
      concurrency: 8,
      signal: new AbortController().signal,
      logger,
    });
    expect(tried.filter((uid) => uid !== "other")).toEqual(expected);
    expect(written.assigned).toBe(assigned + 1);
  });

  it("writes nothing once the pass is stopped", async () => {
    const stopped = new AbortController();
    stopped.abort();
    const tried: string[] = [];
    const written = await runWrites([assign("a")], {
      write: async ({ resource }) => {
        tried.push(resource.uid);
        return "written";
      },
      concurrency: 1,
      signal: stopped.signal,
      logger,
    });
    expect({ tried, assigned: written.assigned }).toEqual({ tried: [], assigned: 0 });
  });
});

describe("the holds", () => {
  const timing = { leaseDurationMs: 10_000, holdMarginMs: 3_000 };
  const lease = (name: string, resourceVersion: string, holderIdentity = `${name}_id`): RingLease => ({
    name,
    resourceVersion,
    record: {
      holderIdentity,
      leaseDurationSeconds: 10,
      acquireTime: new Date(0),
      renewTime: new Date(0),
      leaseTransitions: 0,
    },
  });
  const hold: Hold = { since: 1_000, basedOn: "5", rv: "6" };

  it.each([
    {
      case: "someone else wrote the Lease since",
      lease: lease("a", "7"),
      owned: 0,
      now: 2_000,
      step: "forget",
    },
    {
      case: "the Lease is gone and was not created by the hold",
      lease: undefined,
      owned: 0,
      now: 2_000,
      step: "forget",
    },
    {
      case: "no resource names the replica, the hold lasting",
      lease: lease("a", "6"),
      owned: 0,
      now: 2_000,
      step: "delete",
    },
    {
      case: "the watch still shows the version the hold was based on",
      lease: lease("a", "5"),
      owned: 0,
      now: 2_000,
      step: "delete",
    },
    {
      case: "no resource names it, but the hold ends within the margin",
      lease: lease("a", "6"),
      owned: 0,
      now: 8_000,
      step: "renew",
    },
    {
      case: "resources name it, half the margin gone by",
      lease: lease("a", "6"),
      owned: 3,
      now: 2_501,
      step: "renew",
    },
    { case: "resources name it, freshly held", lease: lease("a", "6"), owned: 3, now: 2_500, step: "keep" },
  ])("a hold is let go, deleted, renewed or kept: $case", ({ lease, owned, now, step }) => {
    expect(holdStep(hold, lease, owned, now, timing)).toBe(step);
  });

  const isLive = (l: RingLease) => l.record.holderIdentity !== "";
  it.each([
    {
      case: "a name no replica can bear",
      member: "Not_A_Name",
      lease: undefined,
      hold: undefined,
      state: "held",
    },
    { case: "no Lease", member: "a", lease: undefined, hold: undefined, state: "down" },
    { case: "a live Lease", member: "a", lease: lease("a", "1"), hold: undefined, state: "live" },
    { case: "a released Lease", member: "a", lease: lease("a", "1", ""), hold: undefined, state: "down" },
    { case: "held, the hold lasting", member: "a", lease: lease("a", "6"), hold, state: "held" },
    {
      case: "held, within the margin of its end",
      member: "a",
      lease: lease("a", "6"),
      hold,
      now: 8_000,
      state: "down",
    },
    { case: "a hold someone else overwrote", member: "a", lease: lease("a", "7"), hold, state: "live" },
  ])("a member's state: $case", ({ member, lease, hold, now = 2_000, state }) => {
    expect(memberState(member, lease, hold, { isLive }, now, timing)).toBe(state);
  });

  it("takes the Leases no resource names that nobody renews, once each", () => {
    const leases = [
      lease("gone", "1"),
      lease("named", "1"),
      lease("live", "1"),
      lease("held", "1"),
      lease("fresh", "1"),
    ];
    const expired = (l: RingLease) => l.name !== "fresh";
    const names = abandoned(leases, new Map([["named", 2]]), ["live"], (n) => n === "held", { expired }, 0);
    expect(names).toEqual(["gone"]);
  });
});

describe("the ring's choice noted on the records", () => {
  it("hashes a claim once per membership, and never reads another's note as its own", () => {
    const choices = new RingChoices();
    const r = res("r", {}, "claim-1");
    choices.use(["a", "b", "c"], undefined);
    const first = choices.desired(r);
    expect(first).toBe(ownerOf("claim-1", ["a", "b", "c"]));
    const note = r.ringChoice;
    expect(choices.desired(r)).toBe(first);
    expect(r.ringChoice).toBe(note);
    // The same members again: the note holds.
    choices.use(["a", "b", "c"], undefined);
    expect(r.ringChoice === note && choices.desired(r) === first).toBe(true);
    // Its own replica's share: a membership of its own.
    const shared = (m: string) => (m === "a" ? SHARDER_REPLICA_SHARE : 1);
    choices.use(["a", "b", "c"], "a");
    expect(choices.desired(r)).toBe(ownerOf("claim-1", ["a", "b", "c"], shared));
    expect(r.ringChoice).not.toBe(note);
    // Another sharder on the same records, with other members: its own choice, not the note.
    const other = new RingChoices();
    other.use(["d"], undefined);
    expect(other.desired(r)).toBe("d");
    choices.use(["a", "b", "c"], "a");
    expect(choices.desired(r)).toBe(ownerOf("claim-1", ["a", "b", "c"], shared));
  });
});

describe("the sharder's pass: a namespace's new resources and another's", () => {
  const ring: RingView = { live: ["b"], state: (m) => (m === "b" ? "live" : "down") };
  /** An unlabelled (new) resource of `namespace`, claiming its own name, created at `created` s. */
  const fresh = (namespace: string, name: string, created: number): ShardedResource => ({
    uid: `${namespace}-${name}`,
    metadata: { resourceVersion: "1", name, namespace },
    created,
    owner: undefined,
    drain: false,
    drainTo: undefined,
    claim: `${namespace}/${name}`,
  });
  const pass = (resources: ShardedResource[]) => {
    const budget = new WriteBudget(new Set());
    const found = walk({ resources, before: new Map(), ring, desired: () => "b", budget });
    const chosen = chooseMoves(found, resources, new Map(), ring, budget);
    return { found, written: chosen.writes.map((w) => w.resource.metadata.namespace) };
  };

  it("labels another namespace's new resource in the first pass while a namespace's 5,000 wait to be labelled", () => {
    // Team a created 5,000 resources; team b one, a second later.
    const resources = Array.from({ length: 5 * MAX_WRITES_PER_PASS }, (_, i) =>
      fresh("team-a", `r${i}`, 100),
    );
    resources.push(fresh("team-b", "app", 101));
    const { found, written } = pass(resources);
    expect(found.moves.filter((m) => m.resource.metadata.namespace === "team-a")).toHaveLength(
      CANDIDATES_PER_PASS / 2,
    );
    expect(found.moves.some((m) => m.resource.metadata.namespace === "team-b")).toBe(true);
    expect(written).toHaveLength(MAX_WRITES_PER_PASS);
    expect(written.includes("team-b")).toBe(true);
  });

  it("still writes a lone namespace's thousand a pass, and the first of each namespace past the candidates", () => {
    const alone = pass(
      Array.from({ length: 3 * MAX_WRITES_PER_PASS }, (_, i) => fresh("team-a", `r${i}`, 100)),
    );
    expect(alone.written).toHaveLength(MAX_WRITES_PER_PASS);
    // Five namespaces of a thousand each: four fill the candidates; the fifth's first, and a
    // sixth's one, are considered still; the writes go a namespace at a time in turn.
    const crowded = ["n1", "n2", "n3", "n4", "n5"].flatMap((ns) =>
      Array.from({ length: MAX_WRITES_PER_PASS }, (_, i) => fresh(ns, `r${i}`, 100)),
    );
    crowded.push(fresh("late", "app", 101));
    const { found, written } = pass(crowded);
    expect(found.moves).toHaveLength(CANDIDATES_PER_PASS + 2);
    expect(found.later).toBe(MAX_WRITES_PER_PASS - 1);
    expect(written).toHaveLength(MAX_WRITES_PER_PASS);
    expect(written.filter((ns) => ns === "late" || ns === "n5")).toEqual(["n5", "late"]);
    expect(written.filter((ns) => ns === "n1")).toHaveLength(250);
  });
});
