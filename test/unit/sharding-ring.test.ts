import { describe, expect, it } from "vitest";
import { claimOn } from "../../src/reconcile/inputs.ts";
import {
  type MemberState,
  nextAction,
  type RingView,
  type ShardLabels,
} from "../../src/sharding/assignment.ts";
import {
  DRAIN_ANY,
  DRAIN_LABEL,
  handoverTo,
  isReplicaName,
  mayLetGo,
  OWNER_LABEL,
} from "../../src/sharding/labels.ts";
import { ownerOf, SHARDER_REPLICA_SHARE } from "../../src/sharding/ring.ts";

const uids = Array.from({ length: 10_000 }, (_, i) => `7f3c${i.toString(16).padStart(4, "0")}-uid-${i}`);
const members = (n: number) => Array.from({ length: n }, (_, i) => `dms-operator-5d9f-${"abcdefgh"[i]}`);

/** Two install keys (the ring's seeds). */
const SEED = Buffer.from("5a1c0e7d9b3f4a6e8c2d1f0b7a9e3c5d", "hex");
const OTHER_SEED = Buffer.from("c4e2a0f81b3d5c7e9f1a2b4c6d8e0f12", "hex");

function shares(keys: readonly string[], ring: readonly string[], seed?: Uint8Array): Map<string, number> {
  const counts = new Map<string, number>(ring.map((m) => [m, 0]));
  for (const key of keys) {
    const owner = ownerOf(key, ring, undefined, seed) ?? "";
    counts.set(owner, (counts.get(owner) ?? 0) + 1);
  }
  return counts;
}

/** 10,000 keys hashed on each ring: some 0.4 s of CPU, 4 s at a load of 13 (CI's two cores run 13 to 20). */
const HASHING_MS = 30_000;

describe("the rendezvous ring", () => {
  it.each([2, 3, 4, 8])(
    "spreads 10,000 resources over %i members within a tenth of an equal share",
    (n) => {
      const ring = members(n);
      for (const count of shares(uids, ring).values()) {
        expect(Math.abs(count - uids.length / n)).toBeLessThan((0.1 * uids.length) / n);
      }
    },
    HASHING_MS,
  );

  it.each([2, 3, 8])(
    "keyed with a seed, spreads 10,000 resources over %i members as evenly",
    (n) => {
      const ring = members(n);
      for (const count of shares(uids, ring, SEED).values()) {
        expect(Math.abs(count - uids.length / n)).toBeLessThan((0.1 * uids.length) / n);
      }
    },
    HASHING_MS,
  );

  it("places by its seed: the same seed the same owners (every replica agrees), another seed others", () => {
    const ring = members(4);
    const placed = (seed?: Uint8Array) => uids.slice(0, 2_000).map((u) => ownerOf(u, ring, undefined, seed));
    expect(placed(Buffer.from(SEED))).toEqual(placed(SEED));
    const seeded = placed(SEED);
    const moved = (other: (string | undefined)[]) => other.filter((o, i) => o !== seeded[i]).length;
    // Another key (or none) places about 3/4 of the claims elsewhere among 4 members: it cannot
    // be told from the seeded ring's placement.
    expect(moved(placed(OTHER_SEED))).toBeGreaterThan(2_000 * 0.6);
    expect(moved(placed())).toBeGreaterThan(2_000 * 0.6);
  });

  it("keyed, cannot be aimed: a replica name chosen on the unkeyed ring to take a claim takes it no more often than chance", () => {
    // A tenant who knows the replicas' names and its own claims picks, for each victim's claim, a
    // name under which the unkeyed hash puts that claim; against the keyed ring it lands no
    // better than 1 in N.
    const ring = members(3);
    const claims = uids.slice(0, 300);
    let aimed = 0;
    let landed = 0;
    for (const claim of claims) {
      let candidate = "";
      for (let i = 0; ; i++) {
        candidate = `tenant-pick-${i}`;
        if (ownerOf(claim, [...ring, candidate]) === candidate) break;
      }
      aimed += 1;
      if (ownerOf(claim, [...ring, candidate], undefined, SEED) === candidate) landed += 1;
    }
    expect(aimed).toBe(claims.length);
    expect(landed / aimed).toBeLessThan(0.4);
  });

  it("gives the same owner whatever the order of the members", () => {
    const ring = members(4);
    const reversed = [...ring].reverse();
    for (const uid of uids.slice(0, 500)) expect(ownerOf(uid, reversed)).toBe(ownerOf(uid, ring));
  });

  it("has no owner without members", () => {
    expect(ownerOf("uid", [])).toBeUndefined();
  });

  it.each([
    [3, 4],
    [4, 3],
    [4, 2],
    [2, 3],
  ])(
    "moves at most 1/N + 0.02 of the resources from %i to %i members, only to or from the changed ones",
    (from, to) => {
      const before = members(from);
      const after = members(to);
      let moved = 0;
      for (const uid of uids) {
        const a = ownerOf(uid, before);
        const b = ownerOf(uid, after);
        if (a === b) continue;
        moved += 1;
        // A resource moves only off a member that left or onto one that joined.
        expect(!after.includes(a ?? "") || !before.includes(b ?? "")).toBe(true);
      }
      const changed = Math.abs(to - from) / Math.max(from, to);
      expect(moved / uids.length).toBeLessThanOrEqual(changed + 0.02);
    },
  );
});

describe("the ring with the sharder's replica weighted down", () => {
  const ring = members(3);
  const lighter = (m: string) => (m === ring[0] ? SHARDER_REPLICA_SHARE : 1);

  it(
    "gives the unweighted answer when every share is equal",
    () => {
      for (const uid of uids) expect(ownerOf(uid, ring, () => 1)).toBe(ownerOf(uid, ring));
    },
    HASHING_MS,
  );

  it("gives a member with a lighter share its fraction of the keys (0.6 / 2.6 for 0.6 against 1)", () => {
    const counts = new Map<string, number>();
    for (const uid of uids) {
      const owner = ownerOf(uid, ring, lighter) ?? "";
      counts.set(owner, (counts.get(owner) ?? 0) + 1);
    }
    const total = SHARDER_REPLICA_SHARE + 2;
    expect(
      Math.abs((counts.get(ring[0] ?? "") ?? 0) / uids.length - SHARDER_REPLICA_SHARE / total),
    ).toBeLessThan(0.02);
    for (const m of ring.slice(1))
      expect(Math.abs((counts.get(m) ?? 0) / uids.length - 1 / total)).toBeLessThan(0.02);
  });

  it("moves keys only onto a member that joins, about its share of them", () => {
    const four = members(4);
    const moved = uids.filter((u) => ownerOf(u, ring, lighter) !== ownerOf(u, four, lighter));
    expect(moved.every((u) => ownerOf(u, four, lighter) === four[3])).toBe(true);
    expect(Math.abs(moved.length / uids.length - 1 / (SHARDER_REPLICA_SHARE + 3))).toBeLessThan(0.02);
  });
});

describe("the ring over claims", () => {
  // One connection's resources, each with a name of its own: what the ring hashes is the claim
  // (the connection's key and the service name), so they still spread over every replica.
  const claims = Array.from({ length: 20_000 }, (_, i) =>
    claimOn("ServiceConnection/team-a/prod", `app-${i.toString(36)}`),
  );

  it("spreads 20,000 names of one connection over 3 replicas within 5 % of a third each", () => {
    const counts = shares(claims, members(3));
    for (const count of counts.values())
      expect(Math.abs(count / claims.length - 1 / 3)).toBeLessThan(0.05 / 3);
  });

  it("moves about a quarter of them from 3 to 4 replicas, all onto the newcomer", () => {
    // 10,000 of them, as many resources as the moves above check (there 1/4 ± 0.02 is 4.6 standard
    // deviations), each placed once on each ring: 20,000 took 4.8 s at a load of 13.
    const some = claims.slice(0, 10_000);
    const before = members(3);
    const after = members(4);
    const movedTo = some.flatMap((c) => {
      const to = ownerOf(c, after);
      return ownerOf(c, before) === to ? [] : [to];
    });
    expect(movedTo.every((to) => to === after[3])).toBe(true);
    expect(Math.abs(movedTo.length / some.length - 1 / 4)).toBeLessThan(0.02);
  });

  it("gives two rivals for one name on one connection one replica, and the name on another connection its own place", () => {
    const ring = members(3);
    const a = claimOn("ServiceConnection/team-a/prod", "shop");
    expect(ownerOf(a, ring)).toBe(ownerOf(claimOn("ServiceConnection/team-a/prod", "shop"), ring));
    // The same name on many connections is many claims, spread like any others.
    const spread = shares(
      Array.from({ length: 3_000 }, (_, i) => claimOn(`ServiceConnection/team-${i}/prod`, "shop")),
      ring,
    );
    for (const count of spread.values()) expect(count).toBeGreaterThan(800);
  });
});

function ring(live: string[], states: Record<string, MemberState> = {}): RingView {
  return { live, state: (m) => states[m] ?? (live.includes(m) ? "live" : "down") };
}

describe("the next step for one resource", () => {
  const two = ["a", "b"];
  // A uid that the two-member ring gives to "a" and one it gives to "b".
  const toA = uids.find((u) => ownerOf(u, two) === "a") ?? "";
  const toB = uids.find((u) => ownerOf(u, two) === "b") ?? "";
  const none: ShardLabels = { drain: false };
  const owned = (owner: string, drain = false): ShardLabels => ({ owner, drain });

  it.each<[string, string, ShardLabels, ShardLabels | undefined, RingView, ReturnType<typeof nextAction>]>([
    ["no member: nothing", toA, none, undefined, ring([]), { kind: "none" }],
    ["unassigned: to the ring's choice", toA, none, undefined, ring(two), { kind: "assign", to: "a" }],
    ["owned by the ring's choice: nothing", toA, owned("a"), owned("a"), ring(two), { kind: "none" }],
    [
      "live owner, ring says another: drain first, naming the next owner",
      toB,
      owned("a"),
      owned("a"),
      ring(two),
      { kind: "drain", to: "b" },
    ],
    ["drain set, not acknowledged: wait", toB, owned("a", true), owned("a"), ring(two), { kind: "wait" }],
    [
      "acknowledged (owner and drain removed): to the ring's choice",
      toB,
      none,
      owned("a", true),
      ring(two),
      { kind: "assign", to: "b" },
    ],
    [
      "owner removed without a drain: back to that owner, still live",
      toB,
      none,
      owned("a"),
      ring(two),
      { kind: "assign", to: "a" },
    ],
    [
      "owner removed without a drain, owner down: take its Lease first",
      toB,
      none,
      owned("c"),
      ring(two),
      { kind: "hold", member: "c" },
    ],
    [
      "owner down: take its Lease first",
      toA,
      owned("c"),
      owned("c"),
      ring(two),
      { kind: "hold", member: "c" },
    ],
    [
      "owner's Lease held by the sharder: move without waiting",
      toA,
      owned("c", true),
      owned("c", true),
      ring(two, { c: "held" }),
      { kind: "assign", to: "a" },
    ],
    [
      "drain naming the ring's choice, not acknowledged: wait",
      toB,
      { owner: "a", drain: true, drainTo: "b" },
      owned("a", true),
      ring(two),
      { kind: "wait" },
    ],
    [
      "drain naming a replica the ring no longer chooses: named again",
      toB,
      { owner: "a", drain: true, drainTo: "c" },
      owned("a", true),
      ring(two),
      { kind: "drain", to: "b" },
    ],
    [
      "drain set, the ring turned back to the owner: drain cleared",
      toA,
      owned("a", true),
      owned("a", true),
      ring(two),
      { kind: "assign", to: "a" },
    ],
    [
      "a label naming a live member the ring does not choose (written by someone else): drained back",
      toA,
      owned("b"),
      owned("a"),
      ring(two),
      { kind: "drain", to: "a" },
    ],
  ])("%s", (_, uid, labels, before, view, expected) => {
    expect(nextAction(uid, labels, before, view)).toEqual(expected);
  });
});

describe("replica names", () => {
  it.each([
    ["dms-operator-5d9f8-x2x7q", true],
    ["a", true],
    ["", false],
    ["Upper", false],
    ["under_score", false],
    ["x".repeat(64), false],
    ["-leading", false],
    ["dotted.name-1", true],
    // Label values, but no Lease's name (a DNS-1123 subdomain): never taken, moved at once.
    ["x..0", false],
    ["a.-b", false],
    ["a-.b", false],
    ["trailing.", false],
  ])("%s → %s", (name, ok) => {
    expect(isReplicaName(name)).toBe(ok);
  });
});

describe("the owner a drained resource is handed over to", () => {
  it.each<[string, string | undefined, string | null]>([
    ["the replica the drain names", "dms-operator-7c9d-x2", "dms-operator-7c9d-x2"],
    ["none for a drain that names no replica (rivals move by the sharder)", DRAIN_ANY, null],
    ["none for a drain naming the owner itself", "dms-operator-7c9d-a1", null],
    ["none for a value that cannot be a replica's name", "Not_A-Lease", null],
    ["none without a drain", undefined, null],
  ])("%s", (_, drain, expected) => {
    expect(handoverTo(drain, "dms-operator-7c9d-a1")).toBe(expected);
  });

  it("is none while another resource of the owner claims the same name (rivals move by the sharder)", () => {
    expect(handoverTo("dms-operator-7c9d-x2", "dms-operator-7c9d-a1", 1)).toBeNull();
  });
});

describe("letting go of a drained resource with rivals", () => {
  const self = "dms-operator-7c9d-a1";
  const rival = (labels: Record<string, string>, running = false) => ({ metadata: { labels }, running });
  it.each([
    ["without rivals: at once", [], true],
    [
      "once every rival here is drained too",
      [rival({ [OWNER_LABEL]: self, [DRAIN_LABEL]: DRAIN_ANY })],
      true,
    ],
    [
      "not while a rival here is not drained: alone, it would take the name",
      [rival({ [OWNER_LABEL]: self })],
      false,
    ],
    [
      "not while a drained rival's reconcile runs",
      [rival({ [OWNER_LABEL]: self, [DRAIN_LABEL]: DRAIN_ANY }, true)],
      false,
    ],
    [
      "not while a rival inherited from a dead replica is here (reconciled whatever its drain label)",
      [rival({ [OWNER_LABEL]: "dms-operator-7c9d-d4", [DRAIN_LABEL]: DRAIN_ANY })],
      false,
    ],
  ])("%s", (_, rivals, expected) => {
    expect(mayLetGo(rivals, self, (r) => r.running)).toBe(expected);
  });
});
