/**
 * The sharder: run by the elected leader, it keeps every Deployment resource labelled with the
 * replica the ring gives it, moving resources only as {@link nextAction} allows. Membership is
 * read from the replicas' Leases as client-go's leader election reads one: a Lease is live while
 * its record changed less than its duration ago by THIS process's clock (no comparison of clocks
 * between machines). A replica that stopped renewing has its Lease taken (held by the sharder,
 * under a resourceVersion precondition) before its resources move, so it cannot come back and
 * write while they do; once none is left, the Lease is deleted.
 */
import type { Logger } from "pino";
import type { Clock } from "../runtime/clock.ts";
import type { LeaseRecord } from "../runtime/leader.ts";
import { type MemberState, nextAction, type RingView, type ShardLabels } from "./assignment.ts";
import { DRAIN_ANY, DRAIN_LABEL, isReplicaName, OWNER_LABEL, SHARDER_HOLDER_PREFIX } from "./labels.ts";
import { ownerOf, ringShares, SHARDER_REPLICA_SHARE } from "./ring.ts";

/** A replica's Lease as the sharder reads it. */
export interface RingLease {
  name: string;
  resourceVersion: string;
  record: LeaseRecord;
}

/**
 * A Deployment resource as the sharder reads it: its shard labels as fields (the owner label's
 * value, undefined when absent or empty; whether the drain label is set). The store's records are
 * read in place, a pass allocating nothing per resource that needs no write.
 */
export interface ShardedResource extends ShardLabels {
  readonly uid: string;
  readonly metadata: { readonly resourceVersion: string };
  readonly owner: string | undefined;
  readonly drain: boolean;
  /**
   * What the resource claims: its service name on its connection. The ring places resources by
   * it, so that rivals for one name are always judged by one replica.
   */
  readonly claim: string;
  /**
   * The sharder's note of the ring's choice for this record (see {@link Sharder}): a number it
   * alone reads and writes, 0 or absent until it chose. Kept on the record, not in a map by claim:
   * a pass over 30,000 resources hashes each claim once per membership at the cost of a field.
   */
  ringChoice?: number;
}

/**
 * Thrown by {@link SharderPorts.setLabels} when the API server denied the write (HTTP 403): by
 * `policy`, a ValidatingAdmissionPolicy that does not admit this process's ServiceAccount, else
 * by RBAC. The sharder reports it once per pass, with the fix, instead of once per resource.
 */
export class ShardLabelsDenied extends Error {
  override readonly name = "ShardLabelsDenied";
  readonly byPolicy: boolean;
  constructor(message: string, byPolicy: boolean, options?: ErrorOptions) {
    super(message, options);
    this.byPolicy = byPolicy;
  }
}

/** The one line a pass logs for its denied label writes: what denied them and the fix. */
export function deniedMessage(denied: ShardLabelsDenied): string {
  return denied.byPolicy
    ? `the shard-label policy does not admit this service account: ${denied.message}. Name the operator's ServiceAccount (system:serviceaccount:<namespace>:<name>) in the policy's matchConditions (manifests/components/sharding/shard-label-policy.yaml), or turn the policy off`
    : `this service account may not patch Deployment resources: ${denied.message}. Grant it patch on deployments.dms.dev (the operator's ClusterRole)`;
}

/** What the sharder reads and writes (the Kubernetes adapters implement it). */
export interface SharderPorts<R extends ShardedResource = ShardedResource> {
  leases(): readonly RingLease[];
  /** Every resource; walked synchronously (a pass never waits in the middle of the walk). */
  resources(): Iterable<R>;
  /**
   * Calls `updated` after a resource's record was replaced by a newer one (same namespace and
   * name), `deleted` after it was removed; synchronously, before the next read of
   * {@link resources}. Returns the unsubscribe. The sharder learns from it which resources'
   * labels changed since it last read them, and remembers only those.
   */
  subscribe(handlers: { updated(old: R, next: R): void; deleted(resource: R): void }): () => void;
  /**
   * Merge-patches the shard labels of `resource` if it is still at its resourceVersion; false
   * when it lost the race; rejects with {@link ShardLabelsDenied} when admission denied it.
   */
  setLabels(resource: R, labels: Record<string, string | null>, signal: AbortSignal): Promise<boolean>;
  /**
   * Writes `record` on the Lease `name`: creates it when `resourceVersion` is undefined, else
   * updates it if still at that version. Resolves the new resourceVersion, undefined when it lost
   * the race.
   */
  writeLease(
    name: string,
    resourceVersion: string | undefined,
    record: LeaseRecord,
    signal: AbortSignal,
  ): Promise<string | undefined>;
  /** Deletes the Lease `name` if still at `resourceVersion`. */
  deleteLease(name: string, resourceVersion: string, signal: AbortSignal): Promise<boolean>;
}

/** Options of {@link Sharder}. */
export interface SharderOptions<R extends ShardedResource = ShardedResource> {
  ports: SharderPorts<R>;
  /** This process's identity: the sharder's holder name is `sharder/<identity>`. */
  identity: string;
  /**
   * The replica (member name) this sharder runs in: while it is live, the ring gives it a share
   * of {@link SHARDER_REPLICA_SHARE} against 1 for each other member, which leaves room for the sharder's own
   * record of every resource. Without it every member's share is equal.
   */
  self?: string;
  /** How long a Lease the sharder takes lasts (the replicas' lease duration). */
  leaseDurationMs: number;
  /** Moves under a taken Lease stop this long before it could expire (≥ a Kubernetes request). */
  holdMarginMs: number;
  /** Label writes at once. */
  concurrency?: number;
  clock: Clock;
  logger: Logger;
  /**
   * The membership this process keeps from its Lease watch (see {@link RingMembership}): given,
   * a sharder started on a new leader inherits what the replica watched before it led. Default:
   * a new one, which watches every Lease a whole duration before calling it expired.
   */
  membership?: RingMembership;
  /** Called after each pass with the ring's live members and each member's resource count. */
  onPass?(live: readonly string[], owned: ReadonlyMap<string, number>): void;
}

/**
 * Leases taken in one pass at most: an owner label naming a replica that is not live costs a
 * Lease write, and whoever may label resources (a tenant, without the admission policy) must not
 * make one pass write thousands.
 */
export const MAX_TAKES_PER_PASS = 16;

/**
 * Label writes in one pass at most: a first pass over 30,000 unassigned resources reports, and
 * reads the Leases and the resources' versions again, every thousand writes.
 */
export const MAX_WRITES_PER_PASS = 1_000;

/** The outcome of one pass, for tests and logs. */
export interface PassReport {
  live: string[];
  assigned: number;
  drained: number;
  waiting: number;
  held: string[];
  deleted: string[];
  /** Resources whose move waits for a rival (same claim) to be let go by another replica. */
  deferred: number;
  /** Label writes admission denied. */
  denied: number;
  /** Label writes that lost a race (the resource changed since it was read): tried again next pass. */
  lost: number;
  /** Label writes due but left for the next pass (more than {@link MAX_WRITES_PER_PASS}). */
  later: number;
}

/** The replica that holds a resource now: its owner label, or the previous one if removed unacknowledged. */
function effectiveOwner(labels: ShardLabels, before: ShardLabels | undefined): string | undefined {
  if (labels.owner !== undefined) return labels.owner;
  return before?.owner !== undefined && !before.drain ? before.owner : undefined;
}

/**
 * Shard labels as the sharder remembers them: one shared object per (owner, drain) pair, so that
 * remembering 30,000 resources costs a map entry each, not an object each.
 */
class LabelStates {
  readonly #states = new Map<string, ShardLabels>();
  of(labels: ShardLabels): ShardLabels {
    const key = `${labels.drain ? "d" : "o"}${labels.owner ?? ""}`;
    let state = this.#states.get(key);
    if (state === undefined) {
      state = Object.freeze({ owner: labels.owner, drain: labels.drain });
      // Owner values are bounded (a label value each) but a tenant may write many: forget them all
      // rather than grow without bound; the next lookups make them again.
      if (this.#states.size >= 1_024) this.#states.clear();
      this.#states.set(key, state);
    }
    return state;
  }
}

const recordKey = (r: LeaseRecord) =>
  `${r.holderIdentity}|${r.renewTime?.getTime() ?? ""}|${r.leaseDurationSeconds}|${r.leaseTransitions}`;

/**
 * Which replicas are live, from their Leases, by this process's clock: a Lease held by a replica
 * (not released, not taken by a sharder) whose record changed less than its duration ago. A
 * Lease first seen counts as changed then (client-go's rule: a newcomer never declares anyone
 * dead before watching them for a whole duration).
 *
 * Every replica keeps one, fed by its Lease watch from the start ({@link seen} on each event), not
 * only the leader: a replica that becomes the leader inherits what it watched, so a replica that
 * stopped renewing is called gone a duration after its last renewal was SEEN by this process,
 * however recently this process began to lead. Times are this process's only: clocks of other
 * machines are never read, so skew between them is harmless.
 */
export class RingMembership {
  /** When each Lease's record last changed, by this process's clock. */
  readonly #observed = new Map<string, { key: string; at: number }>();

  /** The Lease `lease` was seen (an event of the watch, or a reading) at `now`. */
  seen(lease: RingLease, now: number): void {
    const key = recordKey(lease.record);
    const seen = this.#observed.get(lease.name);
    if (!seen || seen.key !== key) this.#observed.set(lease.name, { key, at: now });
  }

  /** Notes which records changed since the last call (and forgets Leases gone); returns `leases`. */
  observe(leases: readonly RingLease[], now: number): readonly RingLease[] {
    const names = new Set<string>();
    for (const lease of leases) {
      names.add(lease.name);
      this.seen(lease, now);
    }
    for (const name of this.#observed.keys()) if (!names.has(name)) this.#observed.delete(name);
    return leases;
  }

  /** Not changed for its duration, by our clock (or released). */
  expired(lease: RingLease, now: number): boolean {
    if (lease.record.holderIdentity === "") return true;
    return this.#expiresAt(lease, now) <= now;
  }

  #expiresAt(lease: RingLease, now: number): number {
    const at = this.#observed.get(lease.name)?.at ?? now;
    return at + lease.record.leaseDurationSeconds * 1000;
  }

  /**
   * The earliest time after `now` at which one of `leases` (held, not yet expired) would expire
   * if it is not renewed first; undefined when none would.
   */
  nextExpiry(leases: readonly RingLease[], now: number): number | undefined {
    let next: number | undefined;
    for (const lease of leases) {
      if (lease.record.holderIdentity === "") continue;
      const at = this.#expiresAt(lease, now);
      if (at > now && (next === undefined || at < next)) next = at;
    }
    return next;
  }

  isLive(lease: RingLease, now: number): boolean {
    const holder = lease.record.holderIdentity;
    return (
      isReplicaName(lease.name) &&
      holder !== "" &&
      !holder.startsWith(SHARDER_HOLDER_PREFIX) &&
      !this.expired(lease, now)
    );
  }

  /** The live members among `leases` (observed first), sorted. */
  live(leases: readonly RingLease[], now: number): string[] {
    return this.observe(leases, now)
      .filter((l) => this.isLive(l, now))
      .map((l) => l.name)
      .sort();
  }

  forget(name: string): void {
    this.#observed.delete(name);
  }
}

/**
 * Passes between two sweeps of {@link Sharder}'s memory of resources that are gone, while it
 * remembers any (a removed resource is forgotten when the store says so; the sweep covers a
 * store that missed it).
 */
const SWEEP_EVERY_PASSES = 32;

/** The members of a ring choice note ({@link ShardedResource.ringChoice}): index + 1 below it. */
const CHOICE_SLOTS = 4_096;
/** Membership generations a note tells apart before they wrap (a note is a small integer). */
const CHOICE_GENERATIONS = Math.floor(2 ** 30 / CHOICE_SLOTS);
/**
 * The last generation given to a membership, by any sharder of this process: a sharder of a new
 * leadership term (with a new store) never reads a note of the last one as its own.
 */
let choiceGenerations = 0;

/**
 * Moves and drains a pass considers at most (a few times the writes it makes: a move deferred for
 * a rival, which writes nothing, must not take a drain's place).
 */
const CANDIDATES_PER_PASS = 4 * MAX_WRITES_PER_PASS;

/** See the module comment. {@link pass} is one reconciliation of every resource. */
export class Sharder<R extends ShardedResource = ShardedResource> {
  readonly #opts: SharderOptions<R>;
  readonly #holder: string;
  readonly #ring: RingMembership;
  /**
   * The Leases this sharder holds: when its last write of each began, the resourceVersion that
   * write was based on (undefined: created) and the one it produced. The Lease watch may not show
   * the write yet: a cached Lease at either version is this hold.
   */
  readonly #holds = new Map<string, { since: number; basedOn: string | undefined; rv: string }>();
  /**
   * The shard labels (by uid) of the resources whose labels changed since this sharder last read
   * them, as it last read or wrote them. A resource not in it has the labels it last read: in a
   * steady ring the map is empty, not one entry per resource.
   */
  readonly #before = new Map<string, ShardLabels>();
  readonly #states = new LabelStates();
  #passes = 0;
  /** The live members the ring choice notes on the records are for, and their generation. */
  #members = "";
  #generation = 0;
  /** The resources (uids) whose label write failed in the last pass: tried after the others. */
  #failed = new Set<string>();
  readonly #unsubscribe: () => void;

  constructor(options: SharderOptions<R>) {
    this.#opts = options;
    this.#holder = `${SHARDER_HOLDER_PREFIX}${options.identity}`;
    this.#ring = options.membership ?? new RingMembership();
    this.#unsubscribe = options.ports.subscribe({
      // Remembers the labels as last read before they first change (a change after that keeps them).
      updated: (old, next) => {
        if (old.uid !== next.uid) this.#before.delete(old.uid);
        else if ((old.owner !== next.owner || old.drain !== next.drain) && !this.#before.has(old.uid))
          this.#before.set(old.uid, this.#states.of(old));
      },
      deleted: (resource) => {
        this.#before.delete(resource.uid);
      },
    });
  }

  /**
   * When the next pass should run at the latest, from `now`: the moment a Lease not renewed by
   * then would expire (a dead member's resources move at once, not at the next period).
   */
  nextExpiry(now: number): number | undefined {
    return this.#ring.nextExpiry(this.#opts.ports.leases(), now);
  }

  /** Stops listening to the store (at the end of a leadership term). */
  close(): void {
    this.#unsubscribe();
  }

  /** How many resources' labels it remembers (those changed since it last read them). */
  get remembered(): number {
    return this.#before.size;
  }

  /** The live members now (sorted). */
  liveMembers(): string[] {
    return this.#ring.live(this.#opts.ports.leases(), this.#opts.clock.now());
  }

  async pass(signal: AbortSignal): Promise<PassReport> {
    const now = this.#opts.clock.now();
    const all = this.#opts.ports.leases();
    const live = this.#ring.live(all, now);
    const leases = new Map(all.map((l) => [l.name, l]));
    // The sharder's own replica takes a smaller share, while it is a live member.
    const share = ringShares(live, this.#opts.self);
    const members = `${live.join(",")}${share ? `;${this.#opts.self}` : ""}`;
    if (this.#members !== members) {
      this.#members = members;
      choiceGenerations = (choiceGenerations % CHOICE_GENERATIONS) + 1;
      this.#generation = choiceGenerations;
      // The generations wrapped (or this is the process's first): no note made before may match.
      if (choiceGenerations === 1) for (const r of this.#opts.ports.resources()) r.ringChoice = 0;
    }
    const generation = this.#generation * CHOICE_SLOTS;
    const noted = live.length < CHOICE_SLOTS;
    // A member's state is the same for all its resources within one pass.
    const states = new Map<string, MemberState>();
    const ring: RingView = {
      live,
      state: (m) => {
        let state = states.get(m);
        if (state === undefined) {
          state = this.#state(m, leases.get(m), now);
          states.set(m, state);
        }
        return state;
      },
    };
    // The ring's choice for a resource, from its note while the members are the same.
    const desired = (resource: R): string | undefined => {
      const note = resource.ringChoice ?? 0;
      if (note > generation && note <= generation + live.length) return live[note - generation - 1];
      const owner = ownerOf(resource.claim, live, share);
      if (owner !== undefined && noted) resource.ringChoice = generation + live.indexOf(owner) + 1;
      return owner;
    };
    const report: PassReport = {
      live,
      assigned: 0,
      drained: 0,
      waiting: 0,
      held: [],
      deleted: [],
      deferred: 0,
      denied: 0,
      lost: 0,
      later: 0,
    };
    const owners = new Map<string, number>();
    const toHold = new Set<string>();
    const writes: { uid: string; write: () => Promise<void> }[] = [];
    // Room for writes in this pass, taken when a write is queued: a first pass over 30,000
    // unassigned resources makes a thousand writes, not 30,000 (the rest wait for the next pass,
    // which their writes' events start). Writes that failed last pass have room of their own, so
    // they cannot crowd out the others.
    const failedBefore = this.#failed;
    let fresh = 0;
    let retried = 0;
    const room = (uid: string): boolean => {
      const failed = failedBefore.has(uid);
      if ((failed ? retried : fresh) >= MAX_WRITES_PER_PASS) {
        report.later += 1;
        return false;
      }
      if (failed) retried += 1;
      else fresh += 1;
      return true;
    };
    // Moves onto a new owner and drains: made after the walk, once each claim's holders are known.
    const moves: { resource: R; owner: string | undefined; to: string }[] = [];
    const drains: { resource: R; to: string }[] = [];
    const assign = (resource: R, to: string, owner: string | undefined) => {
      writes.push({
        uid: resource.uid,
        write: async () => {
          // Off a member that is not live only while its Lease is held (checked at the write).
          if (owner !== undefined && owner !== to && !live.includes(owner) && !holdValid(owner)) return;
          const ok = await this.#opts.ports.setLabels(
            resource,
            { [OWNER_LABEL]: to, [DRAIN_LABEL]: null },
            signal,
          );
          if (ok) {
            this.#before.set(resource.uid, this.#states.of({ owner: to, drain: false }));
            report.assigned += 1;
          } else report.lost += 1;
        },
      });
    };
    // Remembers the labels seen (forgets what it remembered before: the record holds them), but
    // an owner removed by someone else until it is written back.
    const remember = (uid: string, labels: ShardLabels, before: ShardLabels | undefined) => {
      const removed = labels.owner === undefined && before?.owner !== undefined && !before.drain;
      if (!removed && before !== undefined) this.#before.delete(uid);
    };
    // The walk reads each record in place and allocates only for resources that need a write.
    let count = 0;
    for (const resource of this.#opts.ports.resources()) {
      if (resource.uid === "") continue;
      count += 1;
      const before = this.#before.get(resource.uid);
      const action = nextAction(resource.claim, resource, before, ring, desired(resource));
      const owner = resource.owner ?? before?.owner;
      if (owner !== undefined) owners.set(owner, (owners.get(owner) ?? 0) + 1);
      if (action.kind === "assign" && action.to !== effectiveOwner(resource, before)) {
        if (moves.length < CANDIDATES_PER_PASS) moves.push({ resource, owner, to: action.to });
        else report.later += 1;
        continue;
      }
      if (action.kind !== "assign" && action.kind !== "drain") remember(resource.uid, resource, before);
      switch (action.kind) {
        case "none":
          break;
        case "wait":
          report.waiting += 1;
          break;
        case "hold":
          toHold.add(action.member);
          break;
        case "assign":
          if (room(resource.uid)) assign(resource, action.to, owner);
          break;
        case "drain":
          if (drains.length < CANDIDATES_PER_PASS) drains.push({ resource, to: action.to });
          else report.later += 1;
          break;
      }
    }
    if (moves.length > 0 || drains.length > 0) {
      // Who holds each moving claim, and how many resources share each drained one.
      const holders = new Map<string, Set<string>>(moves.map((m) => [m.resource.claim, new Set()]));
      const sharing = new Map<string, number>(drains.map((d) => [d.resource.claim, 0]));
      for (const resource of this.#opts.ports.resources()) {
        if (resource.uid === "") continue;
        const held = holders.get(resource.claim);
        if (held !== undefined) {
          const owner = effectiveOwner(resource, this.#before.get(resource.uid));
          if (owner !== undefined) held.add(owner);
        }
        const shared = sharing.get(resource.claim);
        if (shared !== undefined) sharing.set(resource.claim, shared + 1);
      }
      // A drain names the next owner when the resource has no rival: the owner then hands it over
      // in the write that lets it go (one write and no second pass per move). Rivals are let go
      // without a name and move together below, once none is held.
      for (const { resource, to } of drains) {
        if (!room(resource.uid)) continue;
        const value = sharing.get(resource.claim) === 1 ? to : DRAIN_ANY;
        writes.push({
          uid: resource.uid,
          write: async () => {
            const ok = await this.#opts.ports.setLabels(resource, { [DRAIN_LABEL]: value }, signal);
            if (ok) {
              this.#before.set(resource.uid, this.#states.of({ owner: resource.owner, drain: true }));
              report.drained += 1;
            } else report.lost += 1;
          },
        });
      }
      // A resource moves to `to` only while no rival of its claim is held by another replica that
      // may still write (not one whose Lease the sharder holds): the rival must be let go first, or
      // two replicas would each judge the claim with one of the rivals only.
      for (const { resource, owner, to } of moves) {
        const others = [...(holders.get(resource.claim) ?? [])];
        if (others.some((other) => other !== to && ring.state(other) !== "held")) {
          report.deferred += 1;
          report.waiting += 1;
          remember(resource.uid, resource, this.#before.get(resource.uid));
        } else if (room(resource.uid)) assign(resource, to, owner);
      }
    }
    // Forgets resources gone that the store did not report: at once when fewer are seen than
    // remembered, else now and then.
    this.#passes += 1;
    if (this.#before.size > 0 && (this.#before.size > count || this.#passes % SWEEP_EVERY_PASSES === 0)) {
      const uids = new Set<string>();
      for (const resource of this.#opts.ports.resources()) uids.add(resource.uid);
      for (const uid of this.#before.keys()) if (!uids.has(uid)) this.#before.delete(uid);
    }
    // Leases no resource names that nobody renews (a replica gone for good): taken, then deleted.
    for (const lease of leases.values()) {
      const name = lease.name;
      if (
        !owners.has(name) &&
        !live.includes(name) &&
        !this.#holds.has(name) &&
        this.#ring.expired(lease, now)
      )
        toHold.add(name);
    }
    // Moves off a taken Lease only while the hold lasts: the replica cannot be back before.
    const holdValid = (name: string) =>
      this.#state(name, leases.get(name), this.#opts.clock.now()) === "held";
    // Writes that failed last pass go last: a head of failing writes does not starve the rest.
    const ordered = [
      ...writes.filter((w) => !failedBefore.has(w.uid)),
      ...writes.filter((w) => failedBefore.has(w.uid)),
    ];
    if (ordered.length > MAX_WRITES_PER_PASS) {
      report.later += ordered.length - MAX_WRITES_PER_PASS;
      ordered.length = MAX_WRITES_PER_PASS;
    }
    this.#failed = new Set();
    let denial: ShardLabelsDenied | undefined;
    await this.#run(
      ordered.map((w) => async () => {
        if (signal.aborted) return;
        try {
          await w.write();
        } catch (err) {
          this.#failed.add(w.uid);
          if (!(err instanceof ShardLabelsDenied)) throw err;
          report.denied += 1;
          denial ??= err;
        }
      }),
    );
    if (denial !== undefined) this.#opts.logger.error({ denied: report.denied }, deniedMessage(denial));
    for (const name of [...toHold].slice(0, MAX_TAKES_PER_PASS))
      if (await this.#take(name, leases.get(name), signal)) report.held.push(name);
    // Holds: renewed while resources still name the replica, deleted once none does.
    for (const [name, hold] of [...this.#holds]) {
      if (!this.#isHold(hold, leases.get(name))) {
        this.#holds.delete(name);
        continue;
      }
      const current: RingLease | undefined = {
        name,
        resourceVersion: hold.rv,
        record: this.#holdRecord(leases.get(name), true, new Date(hold.since)),
      };
      if ((owners.get(name) ?? 0) === 0 && holdValid(name)) {
        if (await this.#opts.ports.deleteLease(name, hold.rv, signal)) {
          report.deleted.push(name);
          this.#holds.delete(name);
          this.#ring.forget(name);
        }
      } else if (this.#opts.clock.now() - hold.since > this.#opts.holdMarginMs / 2) {
        await this.#take(name, current, signal);
      }
    }
    this.#opts.onPass?.(live, owners);
    return report;
  }

  #state(member: string, lease: RingLease | undefined, now: number): MemberState {
    // No replica can bear a name that is not a Lease name and a label value: nothing to wait for.
    if (!isReplicaName(member)) return "held";
    if (!lease) return "down";
    const hold = this.#holds.get(member);
    if (hold && this.#isHold(hold, lease))
      return now + this.#opts.holdMarginMs < hold.since + this.#opts.leaseDurationMs ? "held" : "down";
    if (!lease) return "down";
    return this.#ring.isLive(lease, now) ? "live" : "down";
  }

  /** Whether the cached `lease` is `hold`'s write, or the version it was based on (a watch lagging). */
  #isHold(hold: { basedOn: string | undefined; rv: string }, lease: RingLease | undefined): boolean {
    if (!lease) return hold.basedOn === undefined;
    return lease.resourceVersion === hold.rv || lease.resourceVersion === hold.basedOn;
  }

  #holdRecord(lease: RingLease | undefined, ours: boolean, at: Date): LeaseRecord {
    return {
      holderIdentity: this.#holder,
      leaseDurationSeconds: Math.ceil(this.#opts.leaseDurationMs / 1000),
      acquireTime: ours ? (lease?.record.acquireTime ?? at) : at,
      renewTime: at,
      leaseTransitions: (lease?.record.leaseTransitions ?? 0) + (ours ? 0 : 1),
    };
  }

  /** Takes (or renews the hold of) the Lease `name`: only when absent, released, expired or ours. */
  async #take(name: string, lease: RingLease | undefined, signal: AbortSignal): Promise<boolean> {
    if (!isReplicaName(name)) return false;
    const now = this.#opts.clock.now();
    const ours = lease?.record.holderIdentity === this.#holder;
    if (lease && !ours && !this.#ring.expired(lease, now)) return false;
    const record = this.#holdRecord(lease, ours, new Date(now));
    let rv: string | undefined;
    try {
      rv = await this.#opts.ports.writeLease(name, lease?.resourceVersion, record, signal);
    } catch (err) {
      this.#opts.logger.warn({ err, lease: name }, "could not take a replica's Lease");
      return false;
    }
    if (rv === undefined) return false;
    if (!ours)
      this.#opts.logger.info({ lease: name }, "took the Lease of a replica that stopped renewing it");
    this.#holds.set(name, { since: now, basedOn: lease?.resourceVersion, rv });
    return true;
  }

  async #run(tasks: (() => Promise<void>)[]): Promise<void> {
    const concurrency = this.#opts.concurrency ?? 8;
    let next = 0;
    const worker = async () => {
      while (next < tasks.length) {
        const task = tasks[next++];
        try {
          await task?.();
        } catch (err) {
          this.#opts.logger.warn({ err }, "shard label write failed; retried next pass");
        }
      }
    };
    await Promise.all(Array.from({ length: Math.min(concurrency, tasks.length) }, worker));
  }
}
