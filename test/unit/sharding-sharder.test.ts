import { type Logger, pino } from "pino";
import { describe, expect, it } from "vitest";
import { KubeApiError } from "../../src/kube/errors.ts";
import { decodeLease } from "../../src/kube/shards.ts";
import type { LeaseRecord } from "../../src/runtime/leader.ts";
import { heirOf, type Inheritance } from "../../src/sharding/inheritance.ts";
import { DRAIN_ANY, DRAIN_LABEL, drainTarget, handoverTo, OWNER_LABEL } from "../../src/sharding/labels.ts";
import { ShardMember } from "../../src/sharding/member.ts";
import {
  FINGERPRINT_ANNOTATION,
  type RingLease,
  RingMembership,
  ringFingerprint,
  STRANGER,
  scopeOf,
} from "../../src/sharding/membership.ts";
import { MAX_TAKES_PER_PASS, MAX_WRITES_PER_PASS, type ShardedResource } from "../../src/sharding/pass.ts";
import { RIVALS_PER_PASS } from "../../src/sharding/pass-choose.ts";
import { deniedMessage, ShardLabelsDenied } from "../../src/sharding/pass-write.ts";
import { GoneOwners, MAX_REMEMBERED_GONE, RECREATED_WITHIN_MS } from "../../src/sharding/recreated.ts";
import { ownerOf, SHARDER_REPLICA_SHARE } from "../../src/sharding/ring.ts";
import { Sharder } from "../../src/sharding/sharder.ts";
import { ManualClock } from "../support/manual-clock.ts";

const logger = pino({ level: "silent" });
const LEASE_MS = 10_000;

/** A resource of the {@link World}: what the sharder reads, with its key and labels. */
interface Resource extends ShardedResource {
  key: string;
  labels: Record<string, string> | undefined;
}

function resource(
  key: string,
  uid: string,
  resourceVersion: string,
  labels: Record<string, string> | undefined,
  claim: string,
): Resource {
  const owner = labels?.[OWNER_LABEL];
  return {
    key,
    uid,
    metadata: { resourceVersion, name: key },
    created: 0,
    labels,
    owner: owner === "" ? undefined : owner,
    drain: labels?.[DRAIN_LABEL] !== undefined,
    drainTo: drainTarget(labels?.[DRAIN_LABEL]),
    claim,
  };
}

/** The Leases and resources the sharder reads and writes, in memory, with resourceVersions. */
class World {
  readonly leases = new Map<string, RingLease>();
  readonly resources = new Map<string, Resource>();
  /** The sharders' subscriptions: told of every record replaced (as a store's watch tells them). */
  readonly #watchers = new Set<{
    updated(old: Resource, next: Resource): void;
    deleted(r: Resource): void;
  }>();
  #rv = 1;

  /** Replaces the record at `key` (or adds it), telling the sharders. */
  put(key: string, next: Resource): void {
    const old = this.resources.get(key);
    this.resources.set(key, next);
    if (old) for (const w of this.#watchers) w.updated(old, next);
  }
  readonly clock = new ManualClock({ start: 1_000_000 });

  /** Renews `name`'s Lease; `movingBy`: the ring its replica shows it moves its resources by. */
  renew(name: string, holder = `${name}_id`, movingBy?: Inheritance): void {
    const at = new Date(this.clock.now());
    const old = this.leases.get(name)?.record;
    this.leases.set(name, {
      name,
      resourceVersion: String(this.#rv++),
      record: {
        holderIdentity: holder,
        leaseDurationSeconds: LEASE_MS / 1000,
        acquireTime: old?.acquireTime ?? at,
        renewTime: at,
        leaseTransitions: old?.leaseTransitions ?? 0,
      },
      ...(movingBy ? { movingBy } : {}),
    });
  }

  /** Adds `count` resources, each claiming a name of its own unless `claim` names one for all. */
  add(count: number, claim?: string): void {
    for (let i = 0; i < count; i++) {
      const name = `r${this.resources.size}`;
      const key = `ns/${name}`;
      this.resources.set(key, resource(key, `uid-${key}`, String(this.#rv++), undefined, claim ?? name));
    }
  }

  label(key: string, labels: Record<string, string | null>): void {
    const r = this.resources.get(key);
    if (!r) throw new Error(key);
    const next: Record<string, string> = { ...r.labels };
    for (const [k, v] of Object.entries(labels)) {
      if (v === null) delete next[k];
      else next[k] = v;
    }
    this.put(key, resource(key, r.uid, String(this.#rv++), next, r.claim));
  }

  owner(key: string): string | undefined {
    return this.resources.get(key)?.labels?.[OWNER_LABEL];
  }

  /** Deletes the resource at `key`, telling the sharders. */
  remove(key: string): void {
    const old = this.resources.get(key);
    this.resources.delete(key);
    if (old) for (const w of this.#watchers) w.deleted(old);
  }

  /** A new resource (a new uid, no labels) at `key`, claiming `claim`; it replaces any there in one event. */
  create(key: string, claim: string): void {
    this.put(key, resource(key, `uid-${this.#rv}-${key}`, String(this.#rv++), undefined, claim));
  }

  /** What every owner asked to drain does: let go, handing over to the replica the drain names. */
  acknowledgeDrains(): number {
    let n = 0;
    for (const r of [...this.resources.values()])
      if (r.owner !== undefined && r.labels?.[DRAIN_LABEL] !== undefined) {
        this.label(r.key, { [OWNER_LABEL]: handoverTo(r.labels[DRAIN_LABEL], r.owner), [DRAIN_LABEL]: null });
        n += 1;
      }
    return n;
  }

  /** Called before each label write: throws to fail it. */
  beforeWrite: (key: string) => void = () => {};
  /** The keys of the label writes tried, in order. */
  readonly tried: string[] = [];

  sharder(
    membership?: RingMembership,
    identity = "leader_1",
    log: Logger = logger,
    self?: string,
  ): Sharder<Resource> {
    return new Sharder({
      identity,
      ...(self ? { self } : {}),
      ...(membership ? { membership } : {}),
      leaseDurationMs: LEASE_MS,
      holdMarginMs: 3_000,
      clock: this.clock,
      logger: log,
      ports: {
        leases: () => [...this.leases.values()],
        resources: () => this.resources.values(),
        subscribe: (handlers) => {
          this.#watchers.add(handlers);
          return () => this.#watchers.delete(handlers);
        },
        setLabels: async ({ key, metadata }, labels) => {
          this.tried.push(key);
          this.beforeWrite(key);
          if (this.resources.get(key)?.metadata.resourceVersion !== metadata.resourceVersion) return false;
          this.label(key, labels);
          return true;
        },
        writeLease: async (name, rv, record: LeaseRecord, inheritance) => {
          // As the API server: a Lease's name is a DNS-1123 subdomain, or the create is refused.
          if (!/^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/.test(name))
            throw new KubeApiError(422, "Invalid", `Lease "${name}" is invalid: metadata.name`);
          const current = this.leases.get(name);
          if (current?.resourceVersion !== rv) return undefined;
          const written = String(this.#rv++);
          this.leases.set(name, {
            name,
            resourceVersion: written,
            record,
            ...(inheritance ? { inheritance } : {}),
          });
          return written;
        },
        deleteLease: async (name, rv) => {
          if (this.leases.get(name)?.resourceVersion !== rv) return false;
          this.leases.delete(name);
          return true;
        },
      },
    });
  }
}

const signal = new AbortController().signal;

/**
 * Members a, b and c, 300 resources placed by the sharder of "a" (its own replica `self`), and
 * the replica "b" watching the Leases from its start, leading or not (`watch` feeds `watched`).
 */
async function ledByA(self?: string) {
  const w = new World();
  for (const m of ["a", "b", "c"]) w.renew(m);
  w.add(300);
  const watched = new RingMembership();
  const watch = () => {
    for (const lease of w.leases.values()) watched.seen(lease, w.clock.now());
  };
  watch();
  await w.sharder(undefined, "a_1", logger, self).pass(signal);
  const ofA = [...w.resources.values()].filter((r) => w.owner(r.key) === "a").map((r) => r.key);
  return { w, watched, watch, ofA };
}

/** A world of `members` renewing and `count` resources, after the sharder's first pass. */
/** A Lease duration and more in steps of half of it, `members` renewing, a pass after each step. */
async function aLeaseDurationOn(w: World, sharder: Sharder<Resource>, members: readonly string[]) {
  for (let step = 0; step < 3; step++) {
    w.clock.advance(LEASE_MS / 2);
    for (const m of members) w.renew(m);
    await sharder.pass(signal);
  }
}

async function assigned(members: string[], count: number) {
  const w = new World();
  for (const m of members) w.renew(m);
  w.add(count);
  const sharder = w.sharder();
  await sharder.pass(signal);
  return { w, sharder };
}

describe("the sharder", () => {
  it("says a resource is placed when labelled as its last pass's ring places it, undrained", async () => {
    const w = new World();
    for (const m of ["a", "b", "c"]) w.renew(m);
    w.add(30);
    const sharder = w.sharder();
    const [first] = w.resources.values();
    if (!first) throw new Error("no resource");
    const choice = ownerOf(first.claim, ["a", "b", "c"]) ?? "";
    const other = ["a", "b", "c"].find((m) => m !== choice) ?? "";
    // No pass yet: no ring to place by.
    w.label(first.key, { [OWNER_LABEL]: choice });
    expect(sharder.placed(w.resources.get(first.key) as Resource)).toBe(false);
    await sharder.pass(signal);
    const now = () => w.resources.get(first.key) as Resource;
    expect(sharder.placed(now())).toBe(true);
    w.label(first.key, { [OWNER_LABEL]: other });
    expect(sharder.placed(now())).toBe(false);
    w.label(first.key, { [OWNER_LABEL]: choice, [DRAIN_LABEL]: DRAIN_ANY });
    expect(sharder.placed(now())).toBe(false);
    w.label(first.key, { [OWNER_LABEL]: null, [DRAIN_LABEL]: null });
    expect(sharder.placed(now())).toBe(false);
    w.label(first.key, { [OWNER_LABEL]: choice });
    // A member joins: placed by the ring of the next pass, not the last one's.
    w.renew("d");
    const moving = [...w.resources.values()].find((r) => ownerOf(r.claim, ["a", "b", "c", "d"]) === "d");
    if (!moving) throw new Error("no resource the ring gives the new member");
    const at = () => w.resources.get(moving.key) as Resource;
    expect(sharder.placed(at())).toBe(true);
    await sharder.pass(signal);
    // Drained for "d" by that pass, then handed over by its owner.
    expect(sharder.placed(at())).toBe(false);
    w.acknowledgeDrains();
    expect(w.owner(moving.key)).toBe("d");
    expect(sharder.placed(at())).toBe(true);
  });

  it("assigns every unassigned resource to the member the ring names", async () => {
    const w = new World();
    for (const m of ["a", "b", "c"]) w.renew(m);
    w.add(300);
    const report = await w.sharder().pass(signal);
    expect(report.assigned).toBe(300);
    for (const r of w.resources.values()) expect(w.owner(r.key)).toBe(ownerOf(r.claim, ["a", "b", "c"]));
  });

  it("gives its own replica a smaller share while it is live, and moves it back to an even one when it is not", async () => {
    const w = new World();
    for (const m of ["a", "b", "c"]) w.renew(m);
    w.add(900);
    const share = (m: string) => (m === "a" ? SHARDER_REPLICA_SHARE : 1);
    const sharder = w.sharder(undefined, "leader_1", logger, "a");
    await sharder.pass(signal);
    const owned = (m: string) => [...w.resources.values()].filter((r) => w.owner(r.key) === m).length;
    for (const r of w.resources.values())
      expect(w.owner(r.key)).toBe(ownerOf(r.claim, ["a", "b", "c"], share));
    expect(owned("a")).toBeLessThan(owned("b"));
    expect(owned("a")).toBeLessThan(owned("c"));
    // The sharder on another replica (its own, "d", not a member): every share even again.
    const other = w.sharder(undefined, "leader_2", logger, "d");
    await other.pass(signal);
    w.acknowledgeDrains();
    await other.pass(signal);
    for (const r of w.resources.values()) expect(w.owner(r.key)).toBe(ownerOf(r.claim, ["a", "b", "c"]));
  });

  it("stops writing once the ring it planned by changes: a member joining mid-pass gets its share placed once", async () => {
    // Started alone (the others' Leases not seen yet), the pass would label every resource for
    // "a" and the next would drain two thirds of them again.
    const w = new World();
    w.renew("a");
    w.add(300);
    const sharder = w.sharder();
    w.beforeWrite = () => {
      if (w.tried.length === 10) for (const m of ["b", "c"]) w.renew(m);
    };
    const first = await sharder.pass(signal);
    // The ten writes started before the join (the tenth's own included) and those already in flight.
    expect(first.ringChanged).toBe(true);
    expect(first.assigned).toBeLessThan(20);
    expect(first.assigned + first.later).toBe(300);
    const second = await sharder.pass(signal);
    expect(second.live).toEqual(["a", "b", "c"]);
    expect(second.ringChanged).toBe(false);
    w.acknowledgeDrains();
    await sharder.pass(signal);
    for (const r of w.resources.values()) expect(w.owner(r.key)).toBe(ownerOf(r.claim, ["a", "b", "c"]));
    // Every resource written once, but those few of "a"'s first writes that "b" or "c" now own.
    expect(w.tried.length).toBeLessThan(300 + 20);
  });

  it("writes at most a thousand labels per pass, and the next passes go on", async () => {
    const w = new World();
    for (const m of ["a", "b", "c"]) w.renew(m);
    w.add(2_500);
    const sharder = w.sharder();
    // The rest is reported as left for later (the wiring starts the next pass at once).
    const passes = [];
    for (let i = 0; i < 4; i++) {
      const { assigned, later } = await sharder.pass(signal);
      passes.push({ assigned, later });
    }
    expect(passes).toEqual([
      { assigned: MAX_WRITES_PER_PASS, later: 1_500 },
      { assigned: MAX_WRITES_PER_PASS, later: 500 },
      { assigned: 500, later: 0 },
      { assigned: 0, later: 0 },
    ]);
  });

  it("moves more rivals of one claim than a pass writes to a joining member: deferred moves take no write's place", async () => {
    let claim = "c0";
    for (let i = 1; ownerOf(claim, ["a", "b"]) === ownerOf(claim, ["a", "b", "c"]); i++) claim = `c${i}`;
    const w = new World();
    for (const m of ["a", "b"]) w.renew(m);
    w.add(MAX_WRITES_PER_PASS + 1, claim);
    const sharder = w.sharder();
    // A claim's rivals move at most RIVALS_PER_PASS a pass, oldest first.
    const passes = Math.ceil((MAX_WRITES_PER_PASS + 1) / RIVALS_PER_PASS) + 3;
    for (let i = 0; i < passes; i++) await sharder.pass(signal);
    w.renew("c");
    const target = ownerOf(claim, ["a", "b", "c"]);
    for (let i = 0; i < passes + 10; i++) {
      await sharder.pass(signal);
      w.acknowledgeDrains();
    }
    expect([...w.resources.keys()].filter((k) => w.owner(k) !== target)).toEqual([]);
  });

  it("moves more pairs of rivals than a pass writes, the rivals met later in the walk", async () => {
    const claims: string[] = [];
    for (let i = 0; claims.length <= MAX_WRITES_PER_PASS; i++)
      if (ownerOf(`k${i}`, ["a", "b"]) !== ownerOf(`k${i}`, ["a", "b", "c"])) claims.push(`k${i}`);
    const w = new World();
    for (const m of ["a", "b"]) w.renew(m);
    for (const c of claims) w.add(1, c);
    for (const c of claims) w.add(1, c);
    const sharder = w.sharder();
    for (let i = 0; i < 4; i++) await sharder.pass(signal);
    w.renew("c");
    for (let i = 0; i < 12; i++) {
      await sharder.pass(signal);
      w.acknowledgeDrains();
    }
    expect([...w.resources.values()].filter((r) => w.owner(r.key) !== "c")).toEqual([]);
  });

  it("remembers labels only of resources that changed since it read them: nothing per resource in a steady ring", async () => {
    const { w, sharder } = await assigned(["a", "b"], 40);
    // Its own writes, until it read them back.
    expect(sharder.remembered).toBe(40);
    await sharder.pass(signal);
    expect(sharder.remembered).toBe(0);
    const owner = w.owner("ns/r0");
    // Removed by someone, then a status write (no label change) before the pass: the owner it
    // last read is kept, and the resource given back to it.
    w.label("ns/r0", { [OWNER_LABEL]: null });
    w.label("ns/r0", {});
    expect(sharder.remembered).toBe(1);
    await sharder.pass(signal);
    expect(w.owner("ns/r0")).toBe(owner);
    await sharder.pass(signal);
    expect(sharder.remembered).toBe(0);
  });

  it("on a join, drains what moves, and assigns it only once its owner let go", async () => {
    const w = new World();
    for (const m of ["a", "b", "c"]) w.renew(m);
    w.add(400);
    const sharder = w.sharder();
    await sharder.pass(signal);
    w.renew("d");
    const report = await sharder.pass(signal);
    const moving = [...w.resources.values()].filter((r) => ownerOf(r.claim, ["a", "b", "c", "d"]) === "d");
    expect(report.drained).toBe(moving.length);
    expect(moving.length).toBeLessThan(400 / 4 + 40);
    // Nothing is given to the newcomer while its old owner holds it.
    expect([...w.resources.values()].some((r) => w.owner(r.key) === "d")).toBe(false);
    expect((await sharder.pass(signal)).waiting).toBe(moving.length);
    expect(w.acknowledgeDrains()).toBe(moving.length);
    await sharder.pass(signal);
    for (const r of moving) expect(w.owner(r.key)).toBe("d");
  });

  it("places rivals for one claim on one replica, and moves a claim's resources to its new owner only once every one was let go", async () => {
    const w = new World();
    for (const m of ["a", "b", "c"]) w.renew(m);
    // Twenty claims of three rivals each.
    for (let i = 0; i < 20; i++) w.add(3, `conn\nshared-${i}`);
    const sharder = w.sharder();
    await sharder.pass(signal);
    const rivals = (claim: string) => [...w.resources.values()].filter((r) => r.claim === claim);
    for (let i = 0; i < 20; i++)
      expect(new Set(rivals(`conn\nshared-${i}`).map((r) => w.owner(r.key))).size).toBe(1);
    // A join moves some claims; one rival of each moving claim is slow to let go.
    w.renew("d");
    await sharder.pass(signal);
    const moving = [...w.resources.values()].filter((r) => r.labels?.[DRAIN_LABEL] !== undefined);
    expect(moving.length).toBeGreaterThan(0);
    // Rivals are let go without a next owner: they move together, by the sharder.
    for (const r of moving) expect(r.labels?.[DRAIN_LABEL]).toBe(DRAIN_ANY);
    const slow = new Set<string>();
    for (const r of moving)
      if (!slow.has(r.claim)) slow.add(r.claim);
      else w.label(r.key, { [OWNER_LABEL]: null, [DRAIN_LABEL]: null });
    const report = await sharder.pass(signal);
    expect(report.deferred).toBe(moving.length - slow.size);
    // No claim is ever split between two replicas that may write.
    for (const claim of slow) {
      const owners = new Set(
        rivals(claim)
          .map((r) => w.owner(r.key))
          .filter((o) => o !== undefined),
      );
      expect(owners.size).toBe(1);
      expect(owners.has("d")).toBe(false);
    }
    w.acknowledgeDrains();
    await sharder.pass(signal);
    for (const claim of slow) for (const r of rivals(claim)) expect(w.owner(r.key)).toBe("d");
  });

  it("has a joining replica's share handed over by the old owners, one write each: the drain names the new owner", async () => {
    const { w, sharder } = await assigned(["a", "b", "c"], 90);
    w.renew("d");
    const report = await sharder.pass(signal);
    const four = ["a", "b", "c", "d"];
    const moving = [...w.resources.values()].filter((r) => r.drain);
    expect(report.drained).toBe(moving.length);
    expect(moving.length).toBeGreaterThan(10);
    for (const r of moving) expect(r.labels?.[DRAIN_LABEL]).toBe(ownerOf(r.claim, four));
    // Each old owner's acknowledgement writes the named replica as the owner.
    const written = w.tried.length;
    expect(w.acknowledgeDrains()).toBe(moving.length);
    for (const r of moving) expect(w.owner(r.key)).toBe("d");
    // Nothing is left for the sharder: no second write per moved resource.
    const after = await sharder.pass(signal);
    expect(after.assigned + after.drained + after.waiting).toBe(0);
    expect(w.tried.length).toBe(written);
    for (const r of w.resources.values()) expect(w.owner(r.key)).toBe(ownerOf(r.claim, four));
  });

  it("leaves a joining replica's share to the owners whose Leases show the ring it places by, and drains the others' (an owner showing another ring, after a Lease duration)", async () => {
    const { w, sharder } = await assigned(["a", "b", "c"], 120);
    const four = ["a", "b", "c", "d"];
    const shown: Record<string, Inheritance | undefined> = {
      a: { members: four, leader: undefined },
      b: { members: ["a", "b", "c"], leader: undefined },
      c: undefined,
      d: { members: four, leader: undefined },
    };
    const renewAll = () => {
      for (const m of four) w.renew(m, undefined, shown[m]);
    };
    renewAll();
    const moving = (owner: string) =>
      [...w.resources.values()].filter((r) => r.owner === owner && ownerOf(r.claim, four) === "d");
    const [ofA, ofB, ofC] = [moving("a"), moving("b"), moving("c")];
    for (const share of [ofA, ofB, ofC]) expect(share.length).toBeGreaterThan(3);
    // c shows no ring (an older version): drained at once. a shows this ring, b an older one
    // that its next renewal replaces: both left to their owners.
    const first = await sharder.pass(signal);
    expect(first.drained).toBe(ofC.length);
    expect([...w.resources.values()].filter((r) => r.drain).map((r) => r.owner)).toEqual(ofC.map(() => "c"));
    expect(first.waiting).toBe(ofA.length + ofB.length);
    // A Lease duration on, b still shows the older ring: its moves are drained; a's never are.
    w.clock.advance(LEASE_MS);
    renewAll();
    const second = await sharder.pass(signal);
    expect(second.drained).toBe(ofB.length);
    for (const r of [...ofA]) expect(w.resources.get(r.key)?.drain).toBe(false);
    // a hands its share over itself: one write each, and nothing more for the sharder to do.
    for (const r of ofA) w.label(r.key, { [OWNER_LABEL]: "d" });
    w.acknowledgeDrains();
    const written = w.tried.length;
    const third = await sharder.pass(signal);
    expect(third.assigned + third.drained + third.waiting).toBe(0);
    expect(w.tried.length).toBe(written);
    for (const r of w.resources.values()) expect(w.owner(r.key)).toBe(ownerOf(r.claim, four));
  });

  it("moves a resource whose claim changed to the claim's replica, with the drain handshake", async () => {
    const { w, sharder } = await assigned(["a", "b", "c"], 30);
    const key = [...w.resources.keys()].find((k) => {
      const r = w.resources.get(k);
      return r && ownerOf(r.claim, ["a", "b", "c"]) !== ownerOf("renamed", ["a", "b", "c"]);
    });
    const r = w.resources.get(key ?? "");
    if (!key || !r) throw new Error("no resource to rename");
    const before = w.owner(key);
    // A new record, as the store decodes one: without the sharder's note of the ring's choice.
    w.put(key, { ...r, claim: "renamed", ringChoice: undefined });
    expect((await sharder.pass(signal)).drained).toBe(1);
    expect(w.owner(key)).toBe(before);
    w.acknowledgeDrains();
    await sharder.pass(signal);
    expect(w.owner(key)).toBe(ownerOf("renamed", ["a", "b", "c"]));
  });

  it("reports label writes denied by admission once per pass, with the fix", async () => {
    const w = new World();
    for (const m of ["a", "b"]) w.renew(m);
    w.add(50);
    w.beforeWrite = (key) => {
      throw new ShardLabelsDenied(
        `deployments ${key}: HTTP 403 Forbidden: ValidatingAdmissionPolicy 'dms-operator-shard-labels' denied request`,
        true,
      );
    };
    const lines: { level: number; msg: string }[] = [];
    const capture = pino(
      { level: "info" },
      { write: (line: string) => void lines.push(JSON.parse(line) as { level: number; msg: string }) },
    );
    const report = await w.sharder(undefined, "leader_1", capture).pass(signal);
    expect(report.denied).toBe(50);
    expect(lines).toHaveLength(1);
    expect(lines[0]?.msg).toMatch(
      /^the shard-label policy does not admit this service account: deployments ns\/r\d+/,
    );
    expect(lines[0]?.msg).toContain("matchConditions");
    // Denied by RBAC instead: the other fix.
    expect(deniedMessage(new ShardLabelsDenied("HTTP 403 Forbidden: cannot patch", false))).toMatch(
      /^this service account may not patch Deployment resources: .* Grant it patch on deployments\.dms\.dev/,
    );
  });

  it("tries the writes that failed in the last pass after the others", async () => {
    const w = new World();
    for (const m of ["a", "b"]) w.renew(m);
    w.add(MAX_WRITES_PER_PASS + 200);
    const failing = new Set([...w.resources.keys()].slice(0, MAX_WRITES_PER_PASS));
    w.beforeWrite = (key) => {
      if (failing.has(key)) throw new Error("refused");
    };
    const sharder = w.sharder();
    expect((await sharder.pass(signal)).assigned).toBe(0);
    // The 200 behind the failing head are written next pass, not starved by it.
    expect((await sharder.pass(signal)).assigned).toBe(200);
    expect(w.tried.slice(MAX_WRITES_PER_PASS, MAX_WRITES_PER_PASS + 200).every((k) => !failing.has(k))).toBe(
      true,
    );
  });

  it("moves a silent member's resources only after its Lease expired by its own clock and was taken, then deletes it", async () => {
    const w = new World();
    for (const m of ["a", "b", "c"]) w.renew(m);
    w.add(300);
    const sharder = w.sharder();
    await sharder.pass(signal);
    const ofC = [...w.resources.values()].filter((r) => w.owner(r.key) === "c").map((r) => r.key);
    // a and b keep renewing; c stops.
    for (let t = 0; t < 9; t++) {
      w.clock.advance(1_000);
      w.renew("a");
      w.renew("b");
      const report = await sharder.pass(signal);
      expect(report.held).toEqual([]);
      for (const key of ofC) expect(w.owner(key)).toBe("c");
    }
    w.clock.advance(1_100);
    w.renew("a");
    w.renew("b");
    expect((await sharder.pass(signal)).held).toEqual(["c"]);
    expect(w.leases.get("c")?.record.holderIdentity).toBe("sharder/leader_1");
    await sharder.pass(signal);
    for (const key of ofC) expect(["a", "b"]).toContain(w.owner(key));
    const report = await sharder.pass(signal);
    expect(report.deleted).toEqual(["c"]);
    expect(w.leases.has("c")).toBe(false);
  });

  it("writes on a dead member's Lease the ring its share moves by, labels each resource for the heir it names (not the ring's choice after a join), and a new leader keeps it", async () => {
    const w = new World();
    for (const m of ["a", "b", "c"]) w.renew(m);
    w.add(300);
    const sharder = w.sharder(undefined, "a_1", logger, "a");
    await sharder.pass(signal);
    const ofC = [...w.resources.values()].filter((r) => w.owner(r.key) === "c");
    for (let t = 0; t <= LEASE_MS / 1_000; t++) {
      w.clock.advance(1_000);
      w.renew("a");
      w.renew("b");
    }
    expect((await sharder.pass(signal)).held).toEqual(["c"]);
    const ring = w.leases.get("c")?.inheritance;
    expect(ring).toEqual({ members: ["a", "b"], leader: "a" });
    // A replica joins before the share is labelled: the heirs are the record's, not the ring's now.
    w.renew("d");
    await sharder.pass(signal);
    const heirs = new Map(ofC.map((r) => [r.key, ring ? heirOf(r.claim, ring) : undefined]));
    expect(new Set(heirs.values())).toEqual(new Set(["a", "b"]));
    for (const [key, heir] of heirs) expect(w.owner(key)).toBe(heir);
    // A new leader takes the hold over once it expired (by its own clock): the ring is kept.
    const next = w.sharder(undefined, "b_1", logger, "b");
    w.label(ofC[0]?.key ?? "", { [OWNER_LABEL]: "c" });
    let kept: unknown;
    for (let t = 0; t <= LEASE_MS / 1_000 + 1; t++) {
      w.clock.advance(1_000);
      for (const m of ["a", "b", "d"]) w.renew(m);
      await next.pass(signal);
      const lease = w.leases.get("c");
      if (lease?.record.holderIdentity === "sharder/b_1") kept = lease.inheritance;
    }
    expect(kept).toEqual(ring);
    expect(w.owner(ofC[0]?.key ?? "")).toBe(heirs.get(ofC[0]?.key ?? ""));
  });

  it("never declares a member dead before watching it a whole duration (a new sharder)", async () => {
    const w = new World();
    for (const m of ["a", "b"]) w.renew(m);
    w.add(50);
    await w.sharder().pass(signal);
    // The Lease of b says it was renewed long ago, but this sharder has only just started.
    w.clock.advance(60_000);
    w.renew("a");
    const fresh = w.sharder();
    expect((await fresh.pass(signal)).held).toEqual([]);
    w.clock.advance(LEASE_MS + 1);
    w.renew("a");
    expect((await fresh.pass(signal)).held).toEqual(["b"]);
  });

  it("on a new leader, moves a dead member's resources a duration after its last renewal was seen by this replica, whenever it began to lead", async () => {
    const { w, watched, watch, ofA } = await ledByA();
    // "a" (the leader and the sharder) is killed after a renewal; b and c go on renewing.
    w.clock.advance(1_000);
    w.renew("a");
    watch();
    let sharder: Sharder | undefined;
    // The same sharder without the history: it would wait a whole duration from its start.
    let fresh: Sharder | undefined;
    for (let t = 1; t <= LEASE_MS / 500; t++) {
      w.clock.advance(500);
      w.renew("b");
      w.renew("c");
      watch();
      // b becomes the leader 8 s after a's last renewal: its sharder starts then.
      if (t === 16) {
        sharder = w.sharder(watched, "b_1");
        fresh = w.sharder(undefined, "b_2");
      }
      if (!sharder) continue;
      expect((await fresh?.pass(signal))?.held).toEqual([]);
      const report = await sharder.pass(signal);
      // Never before a's Lease went unrenewed a whole duration by b's clock.
      if (t < LEASE_MS / 500) expect(report.held).toEqual([]);
      else expect(report.held).toEqual(["a"]);
      for (const key of ofA) expect(w.owner(key)).toBe("a");
    }
    await sharder?.pass(signal);
    for (const key of ofA) expect(["b", "c"]).toContain(w.owner(key));
  });

  it("takes a dead member's Lease before any other write of the pass, and moves its share before its drains", async () => {
    const { w, watched, watch, ofA } = await ledByA("a");
    // "a", the leader, is killed; "b" watches b and c renew for a whole duration, then leads.
    for (let t = 0; t <= LEASE_MS / 1_000; t++) {
      w.clock.advance(1_000);
      w.renew("b");
      w.renew("c");
      watch();
    }
    const sharder = w.sharder(watched, "b_1", logger, "b");
    w.tried.length = 0;
    // Its first pass has drains to make (its own share shrinks to the sharder's) and a Lease to
    // take: it takes the Lease and writes no label.
    const first = await sharder.pass(signal);
    expect(first.held).toEqual(["a"]);
    expect(first.later).toBeGreaterThan(0);
    expect(w.tried).toEqual([]);
    const second = await sharder.pass(signal);
    expect(second.drained).toBeGreaterThan(0);
    expect(new Set(w.tried.slice(0, ofA.length))).toEqual(new Set(ofA));
    for (const key of ofA) expect(["b", "c"]).toContain(w.owner(key));
  });

  it("takes a dead leader's Lease, with its ring, before its store lists a resource (a failover's new leader), and nothing live or held by another", async () => {
    const { w, watched, watch } = await ledByA("a");
    // "a", the leader, is killed; "b" watches b and c renew for a whole duration, then leads.
    for (let t = 0; t <= LEASE_MS / 1_000; t++) {
      w.clock.advance(1_000);
      w.renew("b");
      w.renew("c");
      watch();
    }
    // "d" was taken by another sharder a moment ago: its hold lasts, and is left to it.
    w.renew("d", "sharder/c_1");
    watch();
    const listed = [...w.resources.values()];
    // The new leader's store has listed nothing yet: what it takes needs only the Leases.
    w.resources.clear();
    const sharder = w.sharder(watched, "b_1", logger, "b");
    w.tried.length = 0;
    expect(await sharder.takeDown(signal)).toEqual(["a"]);
    expect(w.leases.get("a")?.record.holderIdentity).toBe("sharder/b_1");
    expect(w.leases.get("a")?.inheritance).toEqual({ members: ["b", "c"], leader: "b" });
    expect(w.leases.get("d")?.record.holderIdentity).toBe("sharder/c_1");
    expect(w.tried).toEqual([]);
    // Held now: a second call takes nothing, and the first pass moves the share it names.
    expect(await sharder.takeDown(signal)).toEqual([]);
    for (const r of listed) w.resources.set(r.key, r);
    const first = await sharder.pass(signal);
    expect(first.held).toEqual([]);
    expect(first.assigned + first.drained).toBeGreaterThan(0);
  });

  it("calls a Lease free at once only when released (no holder, a second's duration, renewed as acquired), not when edited by hand", async () => {
    const w = new World();
    for (const m of ["a", "b"]) w.renew(m);
    w.add(40);
    const ring = new RingMembership(undefined, undefined, LEASE_MS);
    const sharder = w.sharder(ring, "a_1", logger, "a");
    await sharder.pass(signal);
    const ofB = [...w.resources.keys()].filter((k) => w.owner(k) === "b");
    expect(ofB.length).toBeGreaterThan(0);
    const b = w.leases.get("b") as RingLease;
    const edit = (record: Partial<RingLease["record"]>) =>
      w.leases.set("b", {
        ...b,
        resourceVersion: `${b.resourceVersion}-${Object.keys(record).join()}`,
        record: { ...b.record, ...record },
      });
    // Its holder cleared (`kubectl edit lease`), or its duration cut to a second: b still writes
    // until a Lease duration after its last renewal. Nothing is taken or moved before.
    for (const record of [{ holderIdentity: "" }, { leaseDurationSeconds: 1 }]) {
      edit(record);
      w.clock.advance(2_000);
      w.renew("a");
      const pass = await sharder.pass(signal);
      expect(pass.held).toEqual([]);
      for (const k of ofB) expect(w.owner(k)).toBe("b");
      w.renew("b");
    }
    // Both by hand: its holder cleared and its duration cut to a second, its renewal still after
    // it acquired the Lease (a release writes both at once). Nothing is taken either.
    const renewed = w.leases.get("b") as RingLease;
    expect(renewed.record.renewTime).not.toEqual(renewed.record.acquireTime);
    w.leases.set("b", {
      ...renewed,
      resourceVersion: `${renewed.resourceVersion}-both`,
      record: { ...renewed.record, holderIdentity: "", leaseDurationSeconds: 1 },
    });
    w.clock.advance(2_000);
    w.renew("a");
    expect((await sharder.pass(signal)).held).toEqual([]);
    for (const k of ofB) expect(w.owner(k)).toBe("b");
    w.renew("b");
    // Released by b itself (no holder, a second, acquired and renewed as it released): taken at once.
    const at = new Date(w.clock.now());
    edit({ holderIdentity: "", leaseDurationSeconds: 1, acquireTime: at, renewTime: at });
    w.renew("a");
    expect((await sharder.pass(signal)).held).toEqual(["b"]);
  });

  it("says when the next Lease would expire unrenewed, by this process's clock", () => {
    const w = new World();
    const ring = new RingMembership();
    w.renew("a");
    ring.seen(w.leases.get("a") as RingLease, w.clock.now());
    w.clock.advance(3_000);
    w.renew("b");
    ring.seen(w.leases.get("b") as RingLease, w.clock.now());
    const sharder = w.sharder(ring);
    const now = w.clock.now();
    expect(sharder.nextExpiry(now)).toBe(now - 3_000 + LEASE_MS);
    // A renewal seen later pushes it on; an expired Lease is not "next".
    w.clock.advance(8_000);
    w.renew("b");
    ring.seen(w.leases.get("b") as RingLease, w.clock.now());
    expect(ring.expired(w.leases.get("a") as RingLease, w.clock.now())).toBe(true);
    expect(sharder.nextExpiry(w.clock.now())).toBe(w.clock.now() + LEASE_MS);
  });

  it("gives a resource whose owner label someone removed back to that owner, not to a second replica", async () => {
    const { w, sharder } = await assigned(["a", "b"], 40);
    const key = "ns/r0";
    const owner = w.owner(key);
    w.label(key, { [OWNER_LABEL]: null });
    await sharder.pass(signal);
    expect(w.owner(key)).toBe(owner);
  });

  it("drains back a resource labelled for another live member by someone else, and moves one labelled with a name no replica can bear at once", async () => {
    const { w, sharder } = await assigned(["a", "b"], 40);
    const key = "ns/r0";
    const owner = w.owner(key) ?? "";
    const other = owner === "a" ? "b" : "a";
    w.label(key, { [OWNER_LABEL]: other });
    expect((await sharder.pass(signal)).drained).toBe(1);
    w.acknowledgeDrains();
    await sharder.pass(signal);
    expect(w.owner(key)).toBe(owner);
    w.label("ns/r1", { [OWNER_LABEL]: "Not_A_Pod" });
    await sharder.pass(signal);
    expect(w.owner("ns/r1")).toBe(ownerOf("r1", ["a", "b"]));
    expect(w.leases.has("Not_A_Pod")).toBe(false);
  });

  it("takes at most a bounded number of Leases per pass, whatever names the owner labels carry", async () => {
    const w = new World();
    w.renew("a");
    w.add(100);
    for (let i = 0; i < 100; i++) w.label(`ns/r${i}`, { [OWNER_LABEL]: `ghost-${i}` });
    const sharder = w.sharder();
    expect((await sharder.pass(signal)).held.length).toBe(MAX_TAKES_PER_PASS);
    for (let pass = 0; pass < 20; pass++) await sharder.pass(signal);
    await aLeaseDurationOn(w, sharder, ["a"]);
    for (const r of w.resources.values()) expect(w.owner(r.key)).toBe("a");
    expect([...w.leases.keys()]).toEqual(["a"]);
  });

  it("takes the Lease of an owner that has none before moving its resources (a label naming a replica yet to start, a Lease deleted by hand), and moves them only a Lease duration later", async () => {
    const w = new World();
    w.renew("a");
    w.add(5);
    const sharder = w.sharder();
    w.label("ns/r0", { [OWNER_LABEL]: "zed" });
    const first = await sharder.pass(signal);
    expect(first.held).toEqual(["zed"]);
    expect(w.owner("ns/r0")).toBe("zed");
    // A replica whose Lease was deleted by hand writes until a Lease duration after its last
    // renewal: its resources are drained (it may hand them over), not moved, meanwhile.
    await sharder.pass(signal);
    w.clock.advance(LEASE_MS / 2);
    w.renew("a");
    await sharder.pass(signal);
    expect(w.owner("ns/r0")).toBe("zed");
    expect(w.resources.get("ns/r0")?.labels?.[DRAIN_LABEL]).toBe("a");
    await aLeaseDurationOn(w, sharder, ["a"]);
    expect(w.owner("ns/r0")).toBe("a");
    expect(w.resources.get("ns/r0")?.labels?.[DRAIN_LABEL]).toBeUndefined();
  });

  it("goes on writing labels in a pass that fences a name with no Lease (a tenant naming a new owner before every pass), and writes no ring on that Lease", async () => {
    const { w, sharder } = await assigned(["a", "b"], 40);
    // Ten new resources, each waiting for its first label, and a tenant (no label policy) naming
    // its own resource's owner anew before every pass.
    w.add(10);
    const fresh = [...w.resources.keys()].slice(40);
    for (let pass = 0; pass < 3; pass++) {
      w.label("ns/r0", { [OWNER_LABEL]: `ghost-${pass}` });
      const report = await sharder.pass(signal);
      expect(report.held).toEqual([`ghost-${pass}`]);
      // Fenced only: no survivor inherits what no replica reconciled.
      expect(w.leases.get(`ghost-${pass}`)?.inheritance).toBeUndefined();
    }
    for (const key of fresh) expect(["a", "b"]).toContain(w.owner(key));
    // Each fence Lease is deleted once no resource names it (its resource moved a Lease duration on).
    await aLeaseDurationOn(w, sharder, ["a", "b"]);
    expect([...w.leases.keys()].sort()).toEqual(["a", "b"]);
    expect(w.owner("ns/r0")).toBe(ownerOf("r0", ["a", "b"]));
  });

  it("takes a dead replica's Lease before fencing names no Lease bears, however many its resources name", async () => {
    const { w, sharder } = await assigned(["a", "b"], 40);
    const ofB = [...w.resources.keys()].filter((k) => w.owner(k) === "b");
    // A tenant names 2 × the takes of a pass on resources walked before b's; then b dies.
    const own = [...w.resources.keys()].filter((k) => w.owner(k) === "a");
    const ghosts = own.slice(0, Math.min(own.length, 2 * MAX_TAKES_PER_PASS));
    for (const [i, k] of ghosts.entries()) w.label(k, { [OWNER_LABEL]: `ghost-${i}` });
    w.add(2 * MAX_TAKES_PER_PASS - ghosts.length);
    for (const [i, k] of [...w.resources.keys()].slice(40).entries())
      w.label(k, { [OWNER_LABEL]: `ghost-${ghosts.length + i}` });
    w.clock.advance(LEASE_MS + 1);
    w.renew("a");
    const first = await sharder.pass(signal);
    expect(first.held).toContain("b");
    expect(first.held).toHaveLength(MAX_TAKES_PER_PASS);
    expect(w.leases.get("b")?.inheritance).toEqual({ members: ["a"] });
    // A replica's Lease taken: its share moves first, in the next pass.
    expect(first.assigned + first.drained).toBe(0);
    await sharder.pass(signal);
    for (const k of ofB) expect(w.owner(k)).toBe("a");
  });

  it("moves at once a resource labelled with a name no Lease can bear, taking no Lease: a dead replica's share still moves", async () => {
    const w = new World();
    w.renew("a");
    w.renew("b");
    w.add(40);
    const sharder = w.sharder();
    await sharder.pass(signal);
    const ofB = [...w.resources.keys()].filter((k) => w.owner(k) === "b");
    expect(ofB.length).toBeGreaterThan(0);
    // A tenant (no label policy) labels its own resources with label values no Lease can be named.
    const own = [...w.resources.keys()].filter((k) => w.owner(k) === "a").slice(0, MAX_TAKES_PER_PASS);
    for (const [i, k] of own.entries()) w.label(k, { [OWNER_LABEL]: `x..${i}` });
    // b dies: only a renews.
    for (let p = 0; p < 10; p++) {
      w.clock.advance(LEASE_MS / 2);
      w.renew("a");
      await sharder.pass(signal);
      w.acknowledgeDrains();
    }
    expect([...w.leases.keys()].filter((name) => name.includes(".."))).toEqual([]);
    for (const k of own) expect(w.owner(k)).toBe("a");
    for (const k of ofB) expect(w.owner(k)).toBe("a");
  });
});

describe("a resource deleted and created again under its name", () => {
  const FOUR = ["a", "b", "c", "d"];

  /**
   * Members a, b and c, 200 resources placed; then "d" joins. `key` is one the ring now gives "d",
   * still labelled for `owner`, which may still be reconciling it or waiting for a write's answer
   * (it hands it over, or releases it, only once that ended).
   */
  async function joined() {
    const w = new World();
    for (const m of ["a", "b", "c"]) w.renew(m);
    w.add(200);
    const sharder = w.sharder();
    await sharder.pass(signal);
    w.renew("d");
    const moving = [...w.resources.values()].find((r) => ownerOf(r.claim, FOUR) === "d");
    if (!moving) throw new Error("nothing moves to d");
    const owner = w.owner(moving.key) ?? "";
    expect(owner).not.toBe("d");
    /** Passes, the members renewing and each drain acknowledged, until `key` is labelled for "d" (at most 6). */
    const settle = async () => {
      for (let p = 0; p < 6 && w.owner(moving.key) !== "d"; p++) {
        for (const m of FOUR) w.renew(m);
        await sharder.pass(signal);
        w.acknowledgeDrains();
      }
    };
    return { w, sharder, key: moving.key, claim: moving.claim, owner, settle };
  }

  for (const [what, recreate] of [
    [
      "deleted, then created",
      (w: World, key: string, claim: string) => {
        w.remove(key);
        w.create(key, claim);
      },
    ],
    ["replaced in one event (a relist)", (w: World, key: string, claim: string) => w.create(key, claim)],
  ] as const)
    it(`goes first to the replica that had it, not straight to the one the ring now gives it, and moves on from there: ${what}`, async () => {
      const { w, sharder, key, claim, owner, settle } = await joined();
      recreate(w, key, claim);
      await sharder.pass(signal);
      // The same deployment by name: its old owner may still write it for the deleted resource.
      expect(w.owner(key)).toBe(owner);
      // Moved as any resource of that owner: drained, let go, labelled for the ring's choice.
      await settle();
      expect(w.owner(key)).toBe("d");
    });

  it("goes by the ring when it claims another name, a rival of its claim is labelled for another replica, or it came after the time remembered", async () => {
    const other = await joined();
    const name = Array.from({ length: 50 }, (_, i) => `renamed${i}`).find(
      (c) => ownerOf(c, FOUR) !== other.owner,
    );
    if (!name) throw new Error("no other claim");
    other.w.remove(other.key);
    other.w.create(other.key, name);
    await other.sharder.pass(signal);
    expect(other.w.owner(other.key)).toBe(ownerOf(name, FOUR));

    // A rival already labelled for the newcomer: the claim is judged there, not split over two.
    const rival = await joined();
    rival.w.create("ns/x-rival", rival.claim);
    rival.w.label("ns/x-rival", { [OWNER_LABEL]: "d" });
    rival.w.remove(rival.key);
    rival.w.create(rival.key, rival.claim);
    await rival.sharder.pass(signal);
    expect(rival.w.owner(rival.key)).toBe("d");

    const late = await joined();
    late.w.remove(late.key);
    for (let t = 0; t < RECREATED_WITHIN_MS; t += LEASE_MS / 2) {
      late.w.clock.advance(LEASE_MS / 2);
      for (const m of FOUR) late.w.renew(m);
    }
    late.w.create(late.key, late.claim);
    await late.sharder.pass(signal);
    expect(late.w.owner(late.key)).toBe("d");
  });

  it("goes by the ring when the replica that had it is not live", async () => {
    const { w, sharder, key, claim, owner } = await joined();
    w.remove(key);
    // Its owner stops renewing; the others go on.
    for (let t = 0; t <= 2 * LEASE_MS; t += LEASE_MS / 2) {
      w.clock.advance(LEASE_MS / 2);
      for (const m of FOUR) if (m !== owner) w.renew(m);
      await sharder.pass(signal);
    }
    w.create(key, claim);
    await sharder.pass(signal);
    const live = FOUR.filter((m) => m !== owner);
    expect(w.owner(key)).toBe(ownerOf(claim, live));
  });

  it("is remembered for a bounded number of deletions, the oldest forgotten first", () => {
    const gone = new GoneOwners(LEASE_MS);
    const before = new Map();
    const at = (i: number) => resource(`ns/g${i}`, `old-${i}`, "1", { [OWNER_LABEL]: "a" }, `g${i}`);
    for (let i = 0; i <= MAX_REMEMBERED_GONE; i++) gone.removed(at(i), before, 0);
    const created = [0, 1, MAX_REMEMBERED_GONE].map((i) =>
      resource(`ns/g${i}`, `new-${i}`, "2", undefined, `g${i}`),
    );
    gone.recreated(created, ["a"], 1, before, (labels) => labels);
    expect([...before.keys()]).toEqual([`new-1`, `new-${MAX_REMEMBERED_GONE}`]);
  });
});

describe("a replica", () => {
  const member = (clock: ManualClock, owned: Map<string, { drain: boolean }>, acks: string[]) =>
    new ShardMember({
      name: "a",
      leaseDurationMs: 15_000,
      owned: (key) => owned.get(key),
      acknowledge: async (key) => {
        acks.push(key);
        owned.delete(key);
        return true;
      },
      clock,
      logger,
    });

  it("gives a write only the time left before anyone could declare its Lease expired", () => {
    const clock = new ManualClock({ start: 100_000 });
    const m = member(clock, new Map(), []);
    expect([m.mayWrite(), m.writeWithinMs()]).toEqual([false, 0]);
    m.renewed(clock.now());
    // 15 s Lease, 1 s kept as a margin.
    expect([m.mayWrite(), m.writeWithinMs()]).toEqual([true, 14_000]);
    clock.advance(13_000);
    expect([m.mayWrite(), m.writeWithinMs()]).toEqual([true, 1_000]);
    clock.advance(1);
    expect([m.mayWrite(), m.writeWithinMs()]).toEqual([false, 999]);
    // A renewal counts from when its write was sent, never from an older one.
    m.renewed(clock.now() - 500);
    expect(m.writeWithinMs()).toBe(13_500);
    m.renewed(clock.now() - 5_000);
    expect(m.writeWithinMs()).toBe(13_500);
    m.released();
    expect([m.mayWrite(), m.writeWithinMs()]).toEqual([false, 0]);
  });

  it("reconciles only its own undrained resources, and acknowledges a drain once the reconcile in flight ended", async () => {
    const clock = new ManualClock();
    const owned = new Map([
      ["ns/mine", { drain: false }],
      ["ns/drained", { drain: true }],
    ]);
    const acks: string[] = [];
    const m = member(clock, owned, acks);
    const calls: string[] = [];
    let finish: () => void = () => {};
    const reconcile = m.guard(async (key) => {
      calls.push(key);
      if (key === "ns/mine") await new Promise<void>((resolve) => (finish = resolve));
      return { kind: "done" };
    });
    m.renewed(clock.now());
    expect(await reconcile("ns/other", signal)).toEqual({ kind: "gone" });
    expect(await reconcile("ns/drained", signal)).toEqual({ kind: "gone" });
    await Promise.resolve();
    expect(acks).toEqual(["ns/drained"]);
    const running = reconcile("ns/mine", signal);
    await Promise.resolve();
    owned.set("ns/mine", { drain: true });
    m.changed("ns/mine");
    await Promise.resolve();
    expect(acks).toEqual(["ns/drained"]);
    finish();
    await running;
    await Promise.resolve();
    expect(acks).toEqual(["ns/drained", "ns/mine"]);
    expect(calls).toEqual(["ns/mine"]);
  });
});

describe("a replica whose ring key or scope differs from the leader's", () => {
  const key = new Uint8Array([1, 2, 3]);
  const scope = scopeOf(["team-a"], "tier=web");
  const own = ringFingerprint(key, scope);
  /** Members a and b with the leader's fingerprint, c with `other`'s, d of a version that writes none. */
  const world = (other: string) => {
    const w = new World();
    for (const m of ["a", "b", "c", "d"]) w.renew(m);
    for (const [m, fingerprint] of [
      ["a", own],
      ["b", own],
      ["c", other],
    ] as const) {
      const lease = w.leases.get(m);
      if (lease) w.leases.set(m, { ...lease, fingerprint });
    }
    return w;
  };

  it("is told apart by its Lease's fingerprint, which hides the key", () => {
    expect(own).toMatch(/^[0-9a-f]{16}$/);
    expect(own).toBe(ringFingerprint(key, scopeOf(["team-a", "team-a"], " tier=web ")));
    for (const other of [
      ringFingerprint(new Uint8Array([1, 2, 4]), scope),
      ringFingerprint(undefined, scope),
      ringFingerprint(key, scopeOf([], "tier=web")),
      ringFingerprint(key, scopeOf(["team-a", "team-b"], "tier=web")),
      ringFingerprint(key, scopeOf(["team-a"], undefined)),
    ])
      expect(other).not.toBe(own);
    expect(own).not.toContain(Buffer.from(key).toString("hex"));
  });

  for (const [what, otherKey, otherScope] of [
    ["another ring key", new Uint8Array([9, 9, 9]), scope],
    ["another --namespaces", key, scopeOf(["team-b"], "tier=web")],
  ] as const)
    it(`(${what}) gets no share, has what it holds drained, and keeps its Lease`, async () => {
      const other = ringFingerprint(otherKey, otherScope);
      const w = world(other);
      w.add(200);
      // Some resources labelled for it before (a replica restarted with other settings).
      for (const k of ["ns/r0", "ns/r1", "ns/r2"]) w.label(k, { [OWNER_LABEL]: "c" });
      const warnings: unknown[] = [];
      const log = pino({ level: "warn" }, { write: (line: string) => void warnings.push(JSON.parse(line)) });
      const membership = new RingMembership(scope, log);
      membership.keyed(key);
      expect(membership.fingerprint).toBe(own);
      const sharder = w.sharder(membership, "a_1", logger, "a");
      const first = await sharder.pass(signal);
      expect(first.live).toEqual(["a", "b", "d"]);
      expect(first.held).toEqual([]);
      w.acknowledgeDrains();
      await sharder.pass(signal);
      w.acknowledgeDrains();
      await sharder.pass(signal);
      const owners = new Set([...w.resources.values()].map((r) => w.owner(r.key)));
      expect([...owners].sort()).toEqual(["a", "b", "d"]);
      expect(w.leases.get("c")?.record.holderIdentity).toBe("c_id");
      // Said once, however many passes.
      expect(warnings).toEqual([
        expect.objectContaining({ member: "c", fingerprint: other, own, msg: STRANGER }),
      ]);
      // The other side sees the leader's members as strangers: it moves nothing by its own ring.
      const theirs = new RingMembership(otherScope);
      theirs.keyed(otherKey);
      expect(theirs.live([...w.leases.values()], w.clock.now())).toEqual(["c", "d"]);
    });

  it("reads the fingerprint from a replica's Lease", () => {
    const lease = decodeLease({
      metadata: {
        name: "c",
        namespace: "ops",
        resourceVersion: "3",
        annotations: { [FINGERPRINT_ANNOTATION]: own },
      },
      spec: { holderIdentity: "c_1", leaseDurationSeconds: 15 },
    });
    expect(lease?.fingerprint).toBe(own);
  });
});
