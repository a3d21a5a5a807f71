// What a release gives its heir, remembered while it lasts (`ReleasedClaims`, src/sharding/release.ts):
// the owner asks it of every resource of its share at each renewal of its Lease. Remembered or
// not, the answer is the ring's (`heirOf`): the same keys are released and passed on, across a
// change of the ring while the release lasts, a release that ends and the next one, a resource
// created again under its name with another claim, and a change of the ring's key.
import { describe, expect, it } from "vitest";
import { heirOf, type Inheritance } from "../../src/sharding/inheritance.ts";
import { ringOf } from "../../src/sharding/moving-by.ts";
import { type Release, ReleasedClaims } from "../../src/sharding/release.ts";
import { ownerMoves } from "../support/ring-moves-cache.ts";

const seed = new Uint8Array([7, 7, 7]);
const other = new Uint8Array([9, 9, 9]);
const three = ringOf(["a", "b", "c"], "b");
const withD = ringOf(["a", "b", "c", "d"], "b");
const withE = ringOf(["a", "b", "c", "e"], "b");
const KEYS = Array.from({ length: 400 }, (_, i) => `ns/r${i}`);
/** Labelled for another replica, reconciled here for it. */
const OTHERS = Array.from({ length: 200 }, (_, i) => `ns/o${i}`);

/** Whether `ring` gives `claim` to `heir`, asked afresh (nothing remembered). */
const gives = (claim: string, ring: Inheritance, heir: string, key = seed) =>
  heirOf(claim, ring, key) === heir;

describe("what a release gives its heir, remembered", () => {
  const release: Release = { heir: "d", identity: "d_1", ring: withD };

  it("is the ring's answer, asked once or again", () => {
    const claims = new ReleasedClaims(release, () => seed);
    for (let round = 0; round < 2; round++)
      for (const key of KEYS) expect(claims.gives(key, key)).toBe(gives(key, withD, "d"));
    expect(claims.size).toBe(KEYS.length);
    expect(KEYS.filter((k) => gives(k, withD, "d")).length).toBeGreaterThan(50);
  });

  it("is asked again of a resource created again under its name with another claim", () => {
    const given = KEYS.find((k) => gives(k, withD, "d")) ?? "";
    const kept = KEYS.find((k) => !gives(k, withD, "d")) ?? "";
    const claims = new ReleasedClaims(release, () => seed);
    expect(claims.gives("ns/x", given)).toBe(true);
    expect(claims.gives("ns/x", kept)).toBe(false);
    expect(claims.gives("ns/x", given)).toBe(true);
  });

  it("is asked again of every resource once the ring's key changes", () => {
    let key: Uint8Array | undefined;
    const claims = new ReleasedClaims(release, () => key);
    const differ = KEYS.filter((k) => gives(k, withD, "d", seed) !== gives(k, withD, "d", other));
    expect(differ.length).toBeGreaterThan(10);
    for (const k of [undefined, seed, other, seed]) {
      key = k;
      for (const c of KEYS) expect(claims.gives(c, c)).toBe(heirOf(c, withD, k) === "d");
    }
  });

  it("keeps one answer per resource the cache holds: a resource that left it is forgotten", () => {
    const claims = new ReleasedClaims(release, () => seed);
    for (const key of KEYS) claims.gives(key, key);
    for (const key of KEYS.slice(100)) claims.forget(key);
    expect(claims.size).toBe(100);
  });
});

/**
 * Replica "a" owning what `three` gives it of {@link KEYS} and reconciling {@link OTHERS} for
 * another replica, the Leases of "d" and "e" held.
 */
function owner() {
  const moves = ownerMoves(seed, [...KEYS], undefined, (replica) => `${replica}_1`);
  const { m, cache } = moves;
  cache.keys.splice(0, cache.keys.length, ...KEYS.filter((k) => heirOf(k, three, seed) === "a"));
  const own = cache.claimOf;
  /** The claim of each resource, by key: a test changes one to create it again under its name. */
  const claims = new Map<string, string>(OTHERS.map((k) => [k, k]));
  cache.claimOf = (key) => (own(key) === undefined ? undefined : (claims.get(key) ?? key));
  cache.othersKeys = () => OTHERS;
  cache.anyClaimOf = (key) =>
    claims.has(key) && !cache.keys.includes(key) ? claims.get(key) : cache.claimOf(key);
  m.agree(three);
  /** Each resource's release and passing on, against the ring's answer for `heir` (none: no release). */
  const expectReleased = (heir: string | undefined, ring: Inheritance) => {
    let released = 0;
    for (const key of cache.keys) {
      const is = heir !== undefined && gives(cache.claimOf(key) ?? "", ring, heir);
      expect(m.releasedTo(key)?.release.heir, key).toBe(is ? heir : undefined);
      if (is) released += 1;
    }
    let passed = 0;
    for (const key of OTHERS) {
      const is = heir !== undefined && gives(cache.anyClaimOf(key) ?? "", ring, heir);
      expect(m.passesOn(key), key).toBe(is);
      if (is) passed += 1;
    }
    if (heir !== undefined) expect(released * passed).toBeGreaterThan(0);
  };
  return { ...moves, claims, expectReleased };
}

describe("an owner's release, its answers remembered", () => {
  it("releases and passes on the keys the ring gives the heir, whatever the ring does meanwhile, until it ends; the next release by its own ring", () => {
    const { m, expectReleased } = owner();
    m.agree(withD);
    expect(m.release?.heir).toBe("d");
    expectReleased("d", withD);
    expect(m.announce(() => true)?.heir).toBe("d");
    expectReleased("d", withD);
    // The ring changes while the release lasts (a member dies): what it gives stays.
    m.agree(ringOf(["a", "b", "d"], "b"));
    expectReleased("d", withD);
    // It ends (the newcomer cannot take it up): nothing is released or passed on.
    m.end();
    expect(m.release).toBeUndefined();
    expectReleased(undefined, withD);
    // Another replica joins the ring as it was: released to it by its ring, nothing of the last.
    m.agree(three);
    m.agree(withE);
    expect(m.release?.heir).toBe("e");
    expectReleased("e", withE);
  });

  it("passes on by the claim a resource has now, one created again under its name with another", () => {
    const { m, claims, expectReleased } = owner();
    m.agree(withD);
    expectReleased("d", withD);
    const passed = OTHERS.find((k) => m.passesOn(k)) ?? "";
    const kept = OTHERS.find((k) => !m.passesOn(k)) ?? "";
    claims.set(passed, kept);
    claims.set(kept, passed);
    expect(m.passesOn(passed)).toBe(false);
    expect(m.passesOn(kept)).toBe(true);
    expectReleased("d", withD);
  });

  it("ends once none of it is left here, and a release taken over later answers by its own ring", () => {
    const { m, cache, expectReleased } = owner();
    m.agree(withD);
    expect(m.announce(() => true)?.heir).toBe("d");
    const left = cache.keys.filter((k) => m.releasedTo(k) === undefined);
    cache.keys.splice(0, cache.keys.length, ...left);
    cache.othersKeys = () => OTHERS.filter((k) => !m.passesOn(k));
    expect(m.announce(() => true)).toBeUndefined();
    expect(m.release).toBeUndefined();
    cache.othersKeys = () => OTHERS;
    m.adopt({ heir: "e", identity: "e_1", ring: withE });
    expectReleased("e", withE);
  });
});
