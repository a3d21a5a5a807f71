// A join's share released whole (src/sharding/release.ts): the annotation, the join told from two
// rings, the ring a sharder writes on a releasing owner's Lease taken, the owner's side in
// RingMoves (what it stops, when it says so, when it lets go), the newcomer's side in Heirs, and
// the sharder's take. The whole protocol against a real API server is in
// test/integration/sharding-release.test.ts.
import { Environment } from "@marcbachmann/cel-js";
import pino from "pino";
import { describe, expect, it } from "vitest";
import { openApiSchema } from "../../src/crd/render.ts";
import type { DeploymentSpec } from "../../src/crd/schema.ts";
import type { KubeClient } from "../../src/kube/client.ts";
import { apiErrorFrom } from "../../src/kube/errors.ts";
import { decodeLease, handOverLabels, OWNER_LABEL } from "../../src/kube/shards.ts";
import { type Claimant, claimOf } from "../../src/reconcile/inputs.ts";
import type { LeaseRecord } from "../../src/runtime/leader.ts";
import { Heirs, releaseFor } from "../../src/sharding/heirs.ts";
import { LeaseHolds } from "../../src/sharding/holds.ts";
import { heirOf, type Inheritance } from "../../src/sharding/inheritance.ts";
import { type RingLease, RingMembership } from "../../src/sharding/membership.ts";
import { ringOf } from "../../src/sharding/moving-by.ts";
import {
  decodeHolding,
  decodeRelease,
  encodeHolding,
  encodeRelease,
  HOLDING_ANNOTATION,
  joinedOne,
  RELEASED_ANNOTATION,
  type Release,
  releasedRecord,
} from "../../src/sharding/release.ts";
import { ownerMoves } from "../support/ring-moves-cache.ts";

const seed = new Uint8Array([7, 7, 7]);
const logger = pino({ level: "silent" });
const three = ringOf(["a", "b", "c"], "b");
const four = ringOf(["a", "b", "c", "d"], "b");
const KEYS = Array.from({ length: 400 }, (_, i) => `ns/r${i}`);

describe("a release on its Lease", () => {
  it("names the joined replica's process and the ring, and is read back tolerantly", () => {
    const release: Release = { heir: "d", identity: "d_0a1b2c3d", ring: four };
    expect(encodeRelease(release)).toBe("d_0a1b2c3d@b;a,b,c,d");
    expect(decodeRelease("d_0a1b2c3d@b;a,b,c,d")).toEqual(release);
    for (const bad of [
      undefined,
      "",
      "@b;a,b,c,d",
      "d_1",
      "d_1@",
      "D_1@b;a,b,c,d",
      "e_1@b;a,b,c,d", // the ring does not name its heir
      "d 1@b;a,b,c,d",
      `${"d".repeat(200)}_1@b;a,b,c,d`,
      "d_1@b;A",
    ])
      expect(decodeRelease(bad)).toBeUndefined();
  });

  it("is read from a replica's Lease beside the ring it moves by", () => {
    const lease = decodeLease({
      metadata: {
        name: "a",
        namespace: "ops",
        resourceVersion: "7",
        annotations: { [RELEASED_ANNOTATION]: "d_1@b;a,b,c,d", "sharding.dms.dev/moving-by": "b;a,b,c,d" },
      },
      spec: { holderIdentity: "a_1", leaseDurationSeconds: 15 },
    });
    expect(lease?.released).toEqual({ heir: "d", identity: "d_1", ring: four });
    expect(lease?.movingBy).toEqual(four);
  });

  it("names, on the newcomer's Lease, the owners whose released share it has listed", () => {
    expect(encodeHolding(["c", "a", "c"])).toBe("a,c");
    expect(encodeHolding([])).toBeUndefined();
    expect(decodeHolding("a,c")).toEqual(["a", "c"]);
    // Read tolerantly: what names no replica is left out, a value naming none is none.
    expect(decodeHolding("a,,B,c d,c")).toEqual(["a", "c"]);
    for (const none of [undefined, "", ",", "A"]) expect(decodeHolding(none)).toBeUndefined();
    // At most 64 names read, however long the value.
    expect(decodeHolding(Array.from({ length: 100 }, (_, i) => `r${i}`).join(","))).toHaveLength(64);
    const lease = decodeLease({
      metadata: {
        name: "d",
        namespace: "ops",
        resourceVersion: "8",
        annotations: { [HOLDING_ANNOTATION]: "a,c" },
      },
      spec: { holderIdentity: "d_1", leaseDurationSeconds: 15 },
    });
    expect(lease?.holding).toEqual(["a", "c"]);
  });
});

describe("a join, told from two rings", () => {
  it("is one member more, the leader the same", () => {
    expect(joinedOne(three, four)).toBe("d");
    expect(joinedOne(ringOf(["a", "b"], undefined), ringOf(["a", "b", "c"], undefined))).toBe("c");
  });

  it("is not a leave, a change of leader, a swap, two joins, or a first ring", () => {
    expect(joinedOne(four, three)).toBeUndefined();
    expect(joinedOne(three, ringOf(["a", "b", "c", "d"], "a"))).toBeUndefined();
    expect(joinedOne(three, ringOf(["a", "b", "d", "e"], "b"))).toBeUndefined();
    expect(joinedOne(three, ringOf(["a", "b", "c", "d", "e"], "b"))).toBeUndefined();
    expect(joinedOne(undefined, four)).toBeUndefined();
    expect(joinedOne(three, undefined)).toBeUndefined();
  });
});

describe("the ring written on a releasing owner's Lease taken", () => {
  // The property the protocol rests on: every claim the owner released goes to the same heir,
  // whichever member the owner is; every other claim to a member other than the owner.
  it.each([
    ["a member", "a", four],
    ["the leader's replica", "b", four],
    ["a member, no leader known", "a", ringOf(["a", "b", "c", "d"], undefined)],
    ["a member of a larger ring", "c", ringOf(["a", "b", "c", "d", "e", "f"], "e")],
  ])("gives each claim released by %s to the same heir", (_what, owner, ring) => {
    const record = releasedRecord(owner, ring);
    expect(record).toBeDefined();
    if (!record) return;
    expect(record.members).not.toContain(owner);
    let released = 0;
    for (const claim of KEYS) {
      const before = heirOf(claim, ring, seed);
      const after = heirOf(claim, record, seed);
      if (before === owner) expect(after).not.toBe(owner);
      else {
        released += 1;
        expect(after).toBe(before);
      }
    }
    expect(released).toBeGreaterThan(KEYS.length / 2);
  });

  it("is none when the owner was the ring's only member", () => {
    expect(releasedRecord("a", ringOf(["a"], "a"))).toBeUndefined();
  });
});

/** Replica "a" owning `keys` under `three`, the Lease of "d" held by `identities.d`. */
function owner(
  keys: string[],
  claims?: Record<string, string>,
  identities: Record<string, string> = { d: "d_1" },
) {
  // A copy: the cache's keys change as the tests go.
  const moves = ownerMoves(seed, [...keys], claims, (replica) => identities[replica]);
  const { m, cache } = moves;
  // Everything here is where the three-member ring places it.
  cache.keys.splice(
    0,
    cache.keys.length,
    ...keys.filter((k) => heirOf(claims?.[k] ?? k, three, seed) === "a"),
  );
  m.agree(three);
  moves.changed.length = 0;
  return moves;
}

const released = (keys: readonly string[]) => keys.filter((k) => heirOf(k, four, seed) === "d");

describe("an owner releasing a joined replica's share", () => {
  it("stops every resource the ring gives the newcomer, and no other, as a join begins", () => {
    const { m, changed, cache } = owner(KEYS);
    m.agree(four);
    const share = released(cache.keys);
    expect(share.length).toBeGreaterThan(10);
    expect(m.release).toEqual({ heir: "d", identity: "d_1", ring: four });
    expect([...changed].sort()).toEqual([...share].sort());
    for (const key of cache.keys) {
      expect(m.stopped(key, "1")).toBe(share.includes(key));
      expect(m.target(key)).toBe(share.includes(key) ? "d" : undefined);
      expect(m.releasedTo(key)).toEqual(
        share.includes(key)
          ? { release: { heir: "d", identity: "d_1", ring: four }, quietAt: undefined }
          : undefined,
      );
    }
  });

  it("says so on its Lease only once none of them may run, and lets their labels be written then", () => {
    const { m, changed, cache, clock } = owner(KEYS);
    m.agree(four);
    const share = released(cache.keys);
    const busy = new Set([share[0]]);
    expect(m.announce((key) => !busy.has(key))).toBeUndefined();
    expect(m.releasedTo(share[1] ?? "")?.quietAt).toBeUndefined();
    busy.clear();
    changed.length = 0;
    clock.now = 4_000;
    expect(m.announce(() => true)).toEqual({ heir: "d", identity: "d_1", ring: four });
    // Quiet since then: the time its labels' wait for the heir's list counts from.
    clock.now = 9_000;
    expect(m.releasedTo(share[1] ?? "")).toEqual({
      release: { heir: "d", identity: "d_1", ring: four },
      quietAt: 4_000,
    });
    // Each released resource is looked at again: its label is written now.
    expect([...changed].sort()).toEqual([...share].sort());
    // Once quiet, it stays so: a resource is never reconciled here again while released.
    expect(m.announce(() => false)).toEqual({ heir: "d", identity: "d_1", ring: four });
  });

  it("says so only once what it reconciles for another replica that the release gives the newcomer is quiet too, and what the cache does not show", () => {
    // Labelled for another replica (inherited, or released to this one as it joined): it joins
    // this share by another's label write, and the newcomer reconciles it the moment it does.
    const others = Array.from({ length: 40 }, (_, i) => `ns/o${i}`);
    const given = others.find((k) => heirOf(k, four, seed) === "d") ?? "";
    const kept = others.find((k) => heirOf(k, four, seed) !== "d") ?? "";
    const { m, cache } = owner(KEYS);
    const claimOf = cache.claimOf;
    cache.othersKeys = () => [given, kept];
    cache.anyClaimOf = (key) => (key === given || key === kept ? key : claimOf(key));
    expect(m.passesOn(given)).toBe(false);
    m.agree(four);
    expect(m.passesOn(given)).toBe(true);
    expect(m.passesOn(kept)).toBe(false);
    expect(m.announce((key) => key !== given)).toBeUndefined();
    // A key with a reconcile or a write running that the cache does not show (between two
    // watches, or just deleted) may be one released: waited for too; a cached one by `quiet`.
    expect(m.announce(() => true, ["ns/in-transit"])).toBeUndefined();
    expect(m.announce((key) => key !== kept, [kept, cache.keys[0] ?? ""])).toEqual({
      heir: "d",
      identity: "d_1",
      ring: four,
    });
  });

  it("keeps a released resource going to its heir whatever the ring does meanwhile, rivals and drains alike", () => {
    const rival = "ns/x-rival";
    const share0 = released(KEYS.filter((k) => heirOf(k, three, seed) === "a"));
    const claim = share0[0] ?? "";
    const { m, cache } = owner([...KEYS, rival], { [rival]: claim });
    cache.drained = (key) => key === claim;
    m.agree(four);
    expect(m.target(rival)).toBe("d");
    expect(m.target(claim)).toBe("d");
    // The ring changes again (another member dies): the release holds.
    m.agree(ringOf(["a", "b", "d"], "b"));
    expect(m.target(claim)).toBe("d");
    expect(m.release?.heir).toBe("d");
  });

  it("ends once none of the share is labelled for it", () => {
    const { m, cache } = owner(KEYS);
    m.agree(four);
    m.announce(() => true);
    const share = released(cache.keys);
    cache.keys.splice(0, cache.keys.length, ...cache.keys.filter((k) => !share.includes(k)));
    expect(m.announce(() => true)).toBeUndefined();
    expect(m.release).toBeUndefined();
  });

  it("ends when the newcomer cannot take it up, and the share is reconciled here again", () => {
    const { m, changed, resumed, cache } = owner(KEYS);
    m.agree(four);
    m.announce(() => true);
    changed.length = 0;
    m.end();
    expect(m.release).toBeUndefined();
    const share = released(cache.keys);
    // The ring still places them on "d": they are handed over one by one, as before.
    for (const key of share) expect(m.releasedTo(key)).toBeUndefined();
    expect(resumed).toEqual([]);
    m.agree(three);
    for (const key of share) expect(m.stopped(key, "1")).toBe(false);
    // Each one turned away meanwhile is queued again: nothing else would reconcile it.
    expect([...resumed].sort()).toEqual([...share].sort());
  });

  it("is not begun for a leave, a change of leader, an unknown process, or a hand-over in transit", () => {
    expect(owner(KEYS).m.release).toBeUndefined();
    const leave = owner(KEYS);
    leave.m.agree(ringOf(["a", "b"], "b"));
    expect(leave.m.release).toBeUndefined();
    const leader = owner(KEYS);
    leader.m.agree(ringOf(["a", "b", "c", "d"], "a"));
    expect(leader.m.release).toBeUndefined();
    const unknown = owner(KEYS, undefined, {});
    unknown.m.agree(four);
    expect(unknown.m.release).toBeUndefined();
    const transit = owner(KEYS);
    transit.m.handing(transit.cache.keys[0] ?? "", "5");
    transit.m.agree(four);
    expect(transit.m.release).toBeUndefined();
  });

  it("is not begun while a younger rival it would release is held (its older one just left)", () => {
    const share0 = released(KEYS.filter((k) => heirOf(k, three, seed) === "a"));
    const claim = share0[0] ?? "";
    const rival = "ns/x-rival";
    const { m, cache } = owner([...KEYS, rival], { [rival]: claim });
    m.handing(claim, "5");
    m.forget(claim);
    cache.keys.splice(cache.keys.indexOf(claim), 1);
    expect(m.heldMs(rival)).toBeGreaterThan(0);
    m.agree(four);
    expect(m.release).toBeUndefined();
  });

  it("is taken over by a restarted owner from its Lease, quiet at once", () => {
    const { m, cache } = owner(KEYS);
    const release: Release = { heir: "d", identity: "d_1", ring: four };
    m.adopt(release);
    expect(m.release).toEqual(release);
    const share = released(cache.keys);
    for (const key of share) expect(m.releasedTo(key)).toEqual({ release, quietAt: 1_000 });
    expect(m.announce(() => false)).toEqual(release);
  });
});

const record = (holderIdentity: string): LeaseRecord => ({
  holderIdentity,
  leaseDurationSeconds: 15,
  acquireTime: new Date(0),
  renewTime: new Date(0),
  leaseTransitions: 0,
});

describe("a newcomer taking up a released share", () => {
  const release: Release = { heir: "d", identity: "d_1", ring: four };
  const lease = (holder: string, r: Release | null = release, inheritance?: Inheritance): RingLease => ({
    name: "a",
    resourceVersion: "3",
    record: record(holder),
    ...(r ? { released: r } : {}),
    ...(inheritance ? { inheritance } : {}),
  });

  it("takes it from the owner's Lease while the owner (or nobody) holds it, naming this process", () => {
    expect(releaseFor(lease("a_9"), "d_1")).toEqual(four);
    expect(releaseFor(lease(""), "d_1")).toEqual(four);
    expect(releaseFor(lease("a_9"), "d_2")).toBeUndefined();
    expect(releaseFor(lease("sharder/b_1"), "d_1")).toBeUndefined();
    expect(releaseFor(lease("e_1"), "d_1")).toBeUndefined();
    expect(releaseFor(lease("a_9", null), "d_1")).toBeUndefined();
  });

  it("watches the owner's resources it is given, and stops once the release ends; a take restarts it by the record", () => {
    const runs: { owner: string; mine: (claim: string) => boolean; signal: AbortSignal }[] = [];
    const said: string[] = [];
    const heirs = new Heirs({
      self: "d",
      seed: () => seed,
      identity: "d_1",
      inherit: (o, mine, signal) => {
        runs.push({ owner: o, mine, signal });
        return new Promise(() => {});
      },
      logger: pino({ level: "info" }, { write: (line: string) => void said.push(JSON.parse(line).msg) }),
    });
    const stop = new AbortController();
    heirs.update("a", lease("a_9"), stop.signal);
    expect(heirs.owners).toEqual(["a"]);
    const first = runs[0];
    for (const claim of KEYS) expect(first?.mine(claim)).toBe(heirOf(claim, four, seed) === "d");
    // A renewal changes nothing.
    heirs.update("a", lease("a_9"), stop.signal);
    expect(runs).toHaveLength(1);
    // The owner died: its Lease is taken with the record that keeps the released claims here.
    const taken = releasedRecord("a", four);
    heirs.update("a", lease("sharder/b_1", null, taken), stop.signal);
    expect(first?.signal.aborted).toBe(true);
    expect(runs).toHaveLength(2);
    expect(said).toContain("inheriting a share again: the replica releasing it died and its Lease was taken");
    for (const claim of KEYS) if (heirOf(claim, four, seed) === "d") expect(runs[1]?.mine(claim)).toBe(true);
    // The release ended (the annotation gone): nothing inherited.
    heirs.update("a", lease("a_9", null), stop.signal);
    expect(runs[1]?.signal.aborted).toBe(true);
    expect(heirs.owners).toEqual([]);
  });

  it("says which released shares it has listed, once each list is complete and while the release lasts", () => {
    const lists = new Map<string, () => void>();
    const heirs = new Heirs({
      self: "d",
      seed: () => seed,
      identity: "d_1",
      inherit: (o, _mine, _signal, listed) => {
        if (listed) lists.set(o, listed);
        return new Promise(() => {});
      },
      logger,
    });
    const stop = new AbortController();
    heirs.update("a", lease("a_9"), stop.signal);
    heirs.update("c", { ...lease("c_9"), name: "c" }, stop.signal);
    // Taken up, not listed yet: its owner's labels wait.
    expect(heirs.holding()).toEqual([]);
    lists.get("a")?.();
    expect(heirs.holding()).toEqual(["a"]);
    lists.get("c")?.();
    expect(heirs.holding().sort()).toEqual(["a", "c"]);
    // The release of "a" ended: its watch stopped, it is no longer named (a late call changes nothing).
    heirs.update("a", lease("a_9", null), stop.signal);
    expect(heirs.holding()).toEqual(["c"]);
    lists.get("a")?.();
    expect(heirs.holding()).toEqual(["c"]);
    // A dead replica's share, listed, is never named: the sharder labels it, not an owner waiting.
    heirs.update("a", lease("sharder/b_1", null, releasedRecord("a", four)), stop.signal);
    lists.get("a")?.();
    expect(heirs.holding()).toEqual(["c"]);
    heirs.close();
    expect(heirs.holding()).toEqual([]);
  });

  it("takes nothing from a release that names another process", () => {
    let started = 0;
    const heirs = new Heirs({
      self: "d",
      seed: () => seed,
      identity: "d_2",
      inherit: () => {
        started += 1;
        return new Promise(() => {});
      },
      logger,
    });
    heirs.update("a", lease("a_9"), new AbortController().signal);
    expect(started).toBe(0);
  });
});

describe("a sharder taking a releasing owner's Lease", () => {
  it("writes the ring that gives the released share to the same heir", async () => {
    const written: (Inheritance | undefined)[] = [];
    const now = 100_000;
    const ring = new RingMembership();
    const holds = new LeaseHolds({
      holder: "sharder/b_1",
      leaseDurationMs: 15_000,
      holdMarginMs: 2_000,
      ring,
      clock: { now: () => now } as never,
      logger,
      ports: {
        writeLease: async (_name, _rv, _record, inheritance) => {
          written.push(inheritance);
          return "9";
        },
        deleteLease: async () => true,
      },
    });
    const expired: RingLease = {
      name: "a",
      resourceVersion: "3",
      record: record("a_9"),
      released: { heir: "d", identity: "d_1", ring: four },
    };
    ring.seen(expired, now - 60_000);
    expect(await holds.take("a", expired, new AbortController().signal, ringOf(["b", "c"], "b"))).toBe(true);
    expect(written).toEqual([releasedRecord("a", four)]);
    // Without a release, the sharder's own ring.
    const plain: RingLease = { name: "c", resourceVersion: "4", record: record("c_9") };
    ring.seen(plain, now - 60_000);
    await holds.take("c", plain, new AbortController().signal, ringOf(["a", "b"], "b"));
    expect(written[1]).toEqual(ringOf(["a", "b"], "b"));
  });
});

describe("a replica's hand-over write", () => {
  const client = (fail?: Error) =>
    ({
      request: async () => {
        if (fail) throw fail;
        return {};
      },
    }) as unknown as KubeClient;
  const write = (fail?: Error) =>
    handOverLabels(
      client(fail),
      { namespace: "ns", name: "a" },
      "5",
      { [OWNER_LABEL]: "d" },
      new AbortController().signal,
    );

  it("is written, lost to a newer version, gone, or refused (known not written)", async () => {
    expect(await write()).toBe("written");
    expect(await write(apiErrorFrom(409, {}, "PATCH"))).toBe("conflict");
    expect(await write(apiErrorFrom(404, {}, "PATCH"))).toBe("gone");
    for (const status of [400, 403, 422])
      expect(await write(apiErrorFrom(status, {}, "PATCH"))).toBe("refused");
  });

  it("rejects when it may have been made (a timeout, a throttle, a server error, no answer)", async () => {
    for (const status of [408, 429, 500, 503])
      await expect(write(apiErrorFrom(status, {}, "PATCH"))).rejects.toThrow(`HTTP ${status}`);
    await expect(write(new Error("socket hang up"))).rejects.toThrow("socket hang up");
  });
});

describe("a released resource's claim", () => {
  // The release gives the newcomer the resources by their claim (`heirOf(claimOf(…))`, on both
  // sides): were a claim to change while the release lasts, a resource would move between owner
  // and newcomer by the ring meanwhile. It cannot: namespace and name are fixed by Kubernetes,
  // and the CRD's transition rules refuse every update that changes the service name or the
  // connection (against a real API server: test/integration/crd-validation.test.ts). Here: the
  // rules refuse exactly the updates that change the claim, as the API server evaluates them.
  const env = new Environment({ unlistedVariablesAreDyn: true, homogeneousAggregateLiterals: false });
  const cel = (v: unknown): unknown =>
    Array.isArray(v)
      ? v.map(cel)
      : v !== null && typeof v === "object"
        ? new Map(Object.entries(v).map(([k, x]) => [k, cel(x)]))
        : v;
  type Node = { properties?: Record<string, Node>; "x-kubernetes-validations"?: { rule: string }[] };
  const root = openApiSchema() as Node;
  const spec = root.properties?.spec as Node;
  const ref = spec.properties?.connectionRef as Node;
  /** Whether a transition rule of the CRD refuses the update from `old` to `next`. */
  const refused = (old: Claimant, next: Claimant): boolean =>
    (
      [
        [root, old, next],
        [spec, old.spec, next.spec],
        [ref, old.spec.connectionRef, next.spec.connectionRef],
      ] as const
    ).some(
      ([node, o, n]) =>
        o !== undefined &&
        n !== undefined &&
        (node["x-kubernetes-validations"] ?? [])
          .filter((r) => /\boldSelf\b/.test(r.rule))
          .some((r) => env.parse(r.rule)({ self: cel(n), oldSelf: cel(o) }) !== true),
    );
  const at = (spec: Partial<DeploymentSpec>): Claimant => ({
    metadata: { namespace: "team", name: "web" },
    spec: { source: "internal_docker", ...spec } as DeploymentSpec,
  });
  const own = { kind: "ServiceConnection", name: "tenant" } as const;
  const specs: Partial<DeploymentSpec>[] = [
    {},
    { name: "web" },
    { name: "api" },
    { connectionRef: own },
    { connectionRef: own, name: "api" },
    { connectionRef: { ...own, name: "other" } },
    { connectionRef: { kind: "ClusterServiceConnection", name: "tenant" } },
  ];

  it("cannot change on an update: the CRD refuses every update that changes it, and no other", () => {
    let changes = 0;
    for (const from of specs)
      for (const to of specs) {
        const old = at(from);
        const next = at(to);
        const changed = claimOf(old) !== claimOf(next);
        if (changed) changes += 1;
        expect(refused(old, next), `${JSON.stringify(from)} → ${JSON.stringify(to)}`).toBe(changed);
      }
    expect(changes).toBeGreaterThan(30);
  });
});
