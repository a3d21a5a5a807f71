// An owner's moves by the ring (src/sharding/ring-moves.ts): which of its resources it hands over,
// to whom, when it stops reconciling them, and when it may again. The sharder's side (no drain for
// an owner that moves itself) is in sharding-pass.test.ts and sharding-sharder.test.ts; the whole
// protocol against a real API server in test/integration/sharding-failover.test.ts.
import { describe, expect, it } from "vitest";
import { decodeLease } from "../../src/kube/shards.ts";
import { decodeInheritance, INHERITANCE_ANNOTATION } from "../../src/sharding/inheritance.ts";
import {
  decodeMovingBy,
  encodeMovingBy,
  MOVING_BY_ANNOTATION,
  ringOf,
} from "../../src/sharding/moving-by.ts";
import { ownerOf, ringShares } from "../../src/sharding/ring.ts";
import { HANDED_CLAIM_MS } from "../../src/sharding/ring-moves.ts";
import { ownerMoves } from "../support/ring-moves-cache.ts";

const seed = new Uint8Array([1, 2, 3]);
const four = ringOf(["d", "c", "b", "a"], "b");
const choice = (key: string, ring = four) =>
  ownerOf(key, ring.members, ringShares(ring.members, ring.leader), seed);

const moves = (keys: string[], claims?: Record<string, string>) => ownerMoves(seed, keys, claims);

const KEYS = Array.from({ length: 200 }, (_, i) => `ns/r${i}`);

describe("the ring a replica sees", () => {
  it("is its live members, sorted, and the leader's replica only while it is one of them", () => {
    expect(ringOf(["c", "a", "b", "a"], "b")).toEqual({ members: ["a", "b", "c"], leader: "b" });
    expect(ringOf(["a", "c"], "b")).toEqual({ members: ["a", "c"], leader: undefined });
    expect(ringOf(["a"], undefined)).toEqual({ members: ["a"], leader: undefined });
  });

  it("is written on its Lease as a taken Lease's record is, and read back tolerantly", () => {
    expect(encodeMovingBy(four)).toBe("b;a,b,c,d");
    expect(decodeMovingBy("b;a,b,c,d")).toEqual(four);
    expect(decodeMovingBy(";a")).toEqual({ members: ["a"], leader: undefined });
    for (const bad of [
      "",
      "b",
      "b;A_B",
      "x y;a",
      `;${Array.from({ length: 300 }, (_, i) => `m${i}`).join(",")}`,
    ])
      expect(decodeMovingBy(bad)).toBeUndefined();
    expect(decodeMovingBy).toBe(decodeInheritance);
  });

  it("is read from a replica's Lease beside a taken Lease's record, each from its own annotation", () => {
    const lease = (annotations: Record<string, unknown>) =>
      decodeLease({
        metadata: { name: "a", namespace: "ops", resourceVersion: "7", annotations },
        spec: { holderIdentity: "a_1", leaseDurationSeconds: 15 },
      });
    expect(lease({ [MOVING_BY_ANNOTATION]: "b;a,b,c,d" })?.movingBy).toEqual(four);
    expect(lease({ [MOVING_BY_ANNOTATION]: "b;a,b,c,d" })?.inheritance).toBeUndefined();
    expect(lease({ [INHERITANCE_ANNOTATION]: "b;a,b,c,d" })?.movingBy).toBeUndefined();
    expect(lease({ [MOVING_BY_ANNOTATION]: 7 })?.movingBy).toBeUndefined();
    expect(lease({ [MOVING_BY_ANNOTATION]: "not a ring" })?.movingBy).toBeUndefined();
  });
});

describe("an owner's moves by the ring", () => {
  it("hands over, once agreed on a ring, each resource the ring places elsewhere, to the ring's choice", () => {
    const { m, changed } = moves(KEYS);
    expect(m.moving).toBe(0);
    m.agree(four);
    const elsewhere = KEYS.filter((k) => choice(k) !== "a");
    expect(elsewhere.length).toBeGreaterThan(10);
    expect(m.moving).toBe(elsewhere.length);
    for (const key of KEYS) expect(m.target(key)).toBe(choice(key) === "a" ? undefined : choice(key));
    expect(changed.sort()).toEqual([...elsewhere].sort());
    // Agreeing again on the same ring changes nothing.
    changed.length = 0;
    m.agree(ringOf(["a", "b", "c", "d"], "b"));
    expect(changed).toEqual([]);
  });

  it("stops moving when no ring is agreed (the leader's Lease shows another), and reports the keys it gave back", () => {
    const { m, changed } = moves(KEYS);
    m.agree(four);
    const moved = [...changed];
    changed.length = 0;
    m.agree(undefined);
    expect(m.moving).toBe(0);
    expect(changed.sort()).toEqual(moved.sort());
    for (const key of KEYS) expect(m.stopped(key, "1")).toBe(false);
  });

  it("moves by the ring's weights: the leader's replica's smaller share", () => {
    const { m } = moves(KEYS);
    const even = ringOf(["a", "b", "c", "d"], undefined);
    m.agree(even);
    const byEven = KEYS.filter((k) => m.target(k) !== undefined);
    m.agree(ringOf(["a", "b", "c", "d"], "a"));
    const byLeader = KEYS.filter((k) => m.target(k) !== undefined);
    // As the leader's replica, "a" keeps a smaller share: it hands over more.
    expect(byLeader.length).toBeGreaterThan(byEven.length);
    for (const key of byEven) expect(byLeader).toContain(key);
  });

  it("leaves a claim with rivals here to the sharder's drain (rivals move together, oldest first)", () => {
    const rivals = KEYS.filter((k) => choice("x") !== "a" && k.endsWith("7"));
    const claims = Object.fromEntries(rivals.map((k) => [k, "x"]));
    const { m } = moves(KEYS, claims);
    m.agree(four);
    for (const key of rivals) expect(m.target(key)).toBeUndefined();
    // One rival left alone (the others gone from the cache): it moves like any other.
    const { m: alone } = moves([rivals[0] ?? ""], claims);
    alone.agree(four);
    expect(alone.target(rivals[0] ?? "")).toBe(choice("x"));
  });

  it("moves a resource that arrives while the ring places it elsewhere, and not one it keeps", () => {
    const { m, cache } = moves([]);
    m.agree(four);
    const there = KEYS.find((k) => choice(k) !== "a") ?? "";
    const here = KEYS.find((k) => choice(k) === "a") ?? "";
    cache.keys.push(there, here);
    m.refresh(there);
    m.refresh(here);
    expect(m.target(there)).toBe(choice(there));
    expect(m.target(here)).toBeUndefined();
    m.forget(there);
    expect(m.target(there)).toBeUndefined();
  });

  it("keeps a resource stopped while the cache still shows the version its hand-over was written against, whatever the ring does", () => {
    const { m } = moves(KEYS);
    m.agree(four);
    const key = KEYS.find((k) => m.target(k) !== undefined) ?? "";
    expect(m.stopped(key, "5")).toBe(true);
    m.handing(key, "5");
    // The ring changes again before the cache shows the hand-over: still not reconciled here.
    m.agree(undefined);
    expect(m.target(key)).toBeUndefined();
    expect(m.stopped(key, "5")).toBe(true);
    // The cache shows another version (the hand-over lost a race, or it came back): free again.
    expect(m.stopped(key, "6")).toBe(false);
    expect(m.stopped(key, "5")).toBe(false);
    // Gone from the cache: forgotten.
    m.handing(key, "7");
    m.forget(key);
    expect(m.stopped(key, "7")).toBe(false);
  });

  it("holds a rival found here from the moment its claim's hand-over is sent, until the one handed over is back or the time is up", () => {
    const older = KEYS.find((k) => choice(k) !== "a") ?? "";
    const rival = "ns/x1";
    const claims = { [older]: older, [rival]: older };
    const { m, cache, clock } = moves([older], claims);
    m.agree(four);
    expect(m.heldMs(older)).toBe(0);
    m.handing(older, "3");
    // The sharder placed the rival here by where the older one was, before the answer came: held,
    // whatever the ring, and not moved by it.
    cache.keys.push(rival);
    m.refresh(rival);
    expect(m.target(rival)).toBeUndefined();
    expect(m.heldMs(rival)).toBe(HANDED_CLAIM_MS);
    expect(m.heldMs(older)).toBe(0);
    // The older one's label changed: it left the cache; the rival stays held.
    cache.keys.splice(0, 1);
    m.forget(older);
    m.agree(undefined);
    clock.now += 1_000;
    expect(m.heldMs(rival)).toBe(HANDED_CLAIM_MS - 1_000);
    // It is back here: the claim is judged here whole, nothing held.
    cache.keys.push(older);
    m.refresh(older);
    expect(m.heldMs(rival)).toBe(0);
    // Handed over again, and lost the race: nothing held. Handed over once more, and the time up.
    m.handing(older, "4");
    expect(m.heldMs(rival)).toBeGreaterThan(0);
    m.notHanded(older);
    expect(m.heldMs(rival)).toBe(0);
    m.handing(older, "5");
    clock.now += HANDED_CLAIM_MS;
    expect(m.heldMs(rival)).toBe(0);
    // The younger let go (a drain): the older here is not held, it holds the name.
    m.handing(rival, "6");
    expect(m.heldMs(older)).toBe(0);
  });
});
