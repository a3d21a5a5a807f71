/**
 * The sharder: run by the elected leader, it keeps every Deployment resource labelled with the
 * replica the ring gives it, moving resources only as {@link nextAction} allows. Membership is
 * read from the replicas' Leases as client-go's leader election reads one: a Lease is live while
 * its record changed less than its duration ago by THIS process's clock (no comparison of clocks
 * between machines). A replica that stopped renewing has its Lease taken (held by the sharder,
 * under a resourceVersion precondition) before its resources move, so it cannot come back and
 * write while they do; once none is left, the Lease is deleted.
 *
 * A pass is four phases, each a module of its own with its own tests: the walk over every resource
 * (`pass-walk.ts`), the choice of moves and drains (`pass-choose.ts`), the label writes
 * (`pass-write.ts`), and the Leases held (`holds.ts`).
 */
import type { Logger } from "pino";
import type { Clock } from "../runtime/clock.ts";
import type { MemberState, RingView, ShardLabels } from "./assignment.ts";
import { abandoned, LeaseHolds, type LeaseWrites } from "./holds.ts";
import { heirOf, type Inheritance, sameInheritance } from "./inheritance.ts";
import { DRAIN_LABEL, OWNER_LABEL, SHARDER_HOLDER_PREFIX } from "./labels.ts";
import { type RingLease, RingMembership } from "./membership.ts";
import { ringOf } from "./moving-by.ts";
import {
  MAX_TAKES_PER_PASS,
  type PassReport,
  type PlannedWrite,
  type ShardedResource,
  WriteBudget,
} from "./pass.ts";
import { chooseMoves } from "./pass-choose.ts";
import { walk } from "./pass-walk.ts";
import { orderWrites, runWrites, type ShardLabelsDenied, type WriteResult } from "./pass-write.ts";
import { GoneOwners } from "./recreated.ts";
import { SHARDER_REPLICA_SHARE } from "./ring.ts";
import { RingChoices } from "./ring-choices.ts";

/** What the sharder reads and writes (the Kubernetes adapters implement it). */
export interface SharderPorts<R extends ShardedResource = ShardedResource> extends LeaseWrites {
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
  /** The ring's key (the install key): every sharder of the ring must be given the same. */
  ringSeed?: Uint8Array;
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

/**
 * Passes between two sweeps of {@link Sharder}'s memory of resources that are gone, while it
 * remembers any (a removed resource is forgotten when the store says so; the sweep covers a
 * store that missed it).
 */
const SWEEP_EVERY_PASSES = 32;

/** Whether two sorted member lists are the same. */
function sameMembers(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((m, i) => m === b[i]);
}

/** See the module comment. {@link pass} is one reconciliation of every resource. */
export class Sharder<R extends ShardedResource = ShardedResource> {
  readonly #opts: SharderOptions<R>;
  readonly #ring: RingMembership;
  readonly #holds: LeaseHolds;
  readonly #choices: RingChoices;
  /**
   * The shard labels (by uid) of the resources whose labels changed since this sharder last read
   * them, as it last read or wrote them. A resource not in it has the labels it last read: in a
   * steady ring the map is empty, not one entry per resource.
   */
  readonly #before = new Map<string, ShardLabels>();
  readonly #states = new LabelStates();
  #passes = 0;
  /** The ring this sharder places by, and since when (its clock): see `RingView.movesItself`. */
  #placing: { ring: Inheritance; since: number } | undefined;
  /** The resources (uids) whose label write failed in the last pass: tried after the others. */
  #failed: ReadonlySet<string> = new Set();
  /** Who had the resources deleted a moment ago: one created again in its place goes there first. */
  readonly #gone: GoneOwners;
  readonly #unsubscribe: () => void;

  constructor(options: SharderOptions<R>) {
    this.#opts = options;
    this.#choices = new RingChoices(options.ringSeed);
    this.#ring = options.membership ?? new RingMembership();
    this.#gone = new GoneOwners(options.leaseDurationMs);
    const { ports } = options;
    this.#holds = new LeaseHolds({
      holder: `${SHARDER_HOLDER_PREFIX}${options.identity}`,
      ring: this.#ring,
      leaseDurationMs: options.leaseDurationMs,
      holdMarginMs: options.holdMarginMs,
      ports,
      clock: options.clock,
      logger: options.logger,
    });
    this.#unsubscribe = ports.subscribe({
      // Remembers the labels as last read before they first change (a change after that keeps them).
      updated: (old, next) => {
        if (old.uid !== next.uid) this.#removed(old);
        else if ((old.owner !== next.owner || old.drain !== next.drain) && !this.#before.has(old.uid))
          this.#before.set(old.uid, this.#states.of(old));
      },
      deleted: (resource) => this.#removed(resource),
    });
  }

  /**
   * When the next pass should run at the latest, from `now`: the moment a Lease not renewed by
   * then would expire (a dead member's resources move at once, not at the next period).
   */
  nextExpiry(now: number): number | undefined {
    return this.#ring.nextExpiry(this.#opts.ports.leases(), now);
  }

  /**
   * Whether `resource` is labelled for the member the last pass's ring places it on, with no
   * drain: nothing a pass would write. A change that leaves a resource so (an owner handing it
   * over by the ring) needs no pass of its own (`asksPass`).
   */
  placed(resource: R): boolean {
    return (
      !resource.drain && resource.owner !== undefined && resource.owner === this.#choices.desired(resource)
    );
  }

  /** Stops listening to the store (at the end of a leadership term). */
  close(): void {
    this.#unsubscribe();
  }

  /** How many resources' labels it remembers (those changed since it last read them). */
  get remembered(): number {
    return this.#before.size;
  }

  /**
   * Takes the Leases of the members that stopped renewing (at most {@link MAX_TAKES_PER_PASS}),
   * each with the ring its share moves by, as a first pass would, before the store has listed a
   * resource: a new leader elected in a failover frees the dead leader's share for its heirs
   * without waiting for its listing of every resource in scope. A Lease another holder took and
   * still holds is left to it (`take` refuses it until it expires). Resolves the Leases taken.
   */
  async takeDown(signal: AbortSignal): Promise<string[]> {
    const now = this.#opts.clock.now();
    const all = this.#opts.ports.leases();
    const live = this.#ring.live(all, now);
    const inheritance = this.#inheritance(live);
    const held: string[] = [];
    for (const lease of all) {
      if (held.length >= MAX_TAKES_PER_PASS || signal.aborted) break;
      if (this.#holds.state(lease.name, lease, now) !== "down") continue;
      if (await this.#holds.take(lease.name, lease, signal, inheritance)) held.push(lease.name);
    }
    return held;
  }

  /** The ring a dead member's share moves by, written on its Lease: the `live` members and this replica. */
  #inheritance(live: readonly string[]): Inheritance {
    return { members: live, leader: this.#opts.self };
  }

  /** `resource` left the store (deleted, or replaced by a new object of its name): see `recreated.ts`. */
  #removed(resource: R): void {
    this.#gone.removed(resource, this.#before, this.#opts.clock.now());
  }

  /** One pass: walk, choose moves and drains, write, then the holds (see the module comment). */
  async pass(signal: AbortSignal): Promise<PassReport> {
    const { ports, clock } = this.#opts;
    const now = clock.now();
    const all = ports.leases();
    const live = this.#ring.live(all, now);
    // A resource taking the place of one deleted a moment ago goes back where it was (`recreated.ts`).
    this.#gone.recreated(ports.resources(), live, now, this.#before, (l) => this.#states.of(l));
    const leases = new Map(all.map((l) => [l.name, l]));
    this.#choices.use(live, this.#opts.self);
    const ring = this.#view(live, leases, now);
    const budget = new WriteBudget(this.#failed);
    const found = walk({
      resources: ports.resources(),
      before: this.#before,
      ring,
      desired: (resource) => this.#choices.desired(resource),
      budget,
    });
    this.#forget(found.forget);
    const chosen = chooseMoves(found, ports.resources(), this.#before, ring, budget);
    this.#forget(chosen.forget);
    this.#sweep(found.seen);
    const toHold = new Set(found.toHold);
    for (const name of abandoned(
      leases.values(),
      found.owners,
      live,
      (n) => this.#holds.has(n),
      this.#ring,
      now,
    ))
      toHold.add(name);
    const { ordered, later } = orderWrites([...found.writes, ...chosen.writes], this.#failed);
    // Leases first: a replica that stopped renewing has nobody reconciling its share, which must
    // not wait behind this pass's writes (a new leader's first pass drains its own share down to
    // the sharder's, up to a thousand writes). A pass that took one writes nothing more: the next
    // starts at once and moves that replica's resources before its drains (`chooseMoves`).
    // A name with resources and no Lease is no replica that stopped (a replica holds its Lease
    // before it reconciles): an owner label written by hand, or by a tenant where no label policy
    // holds the labels, or a live replica's Lease deleted by hand (its resources are drained, not
    // moved, for a Lease duration: `memberState`). Its Lease is taken to fence a replica of that name that may yet
    // start, after the replicas' (a tenant's names do not spend the takes a dead replica needs),
    // with no ring (nobody inherits what nobody reconciled: no replica watches its share), and
    // the pass's writes go on: a tenant naming a new owner before every pass holds none back.
    const held: string[] = [];
    let replicaTaken = false;
    // The ring the share moves by, written on the Lease: the survivors reconcile by it at once.
    const inheritance = this.#inheritance(live);
    const takes = [...toHold].sort((x, y) => Number(leases.has(y)) - Number(leases.has(x)));
    for (const name of takes.slice(0, MAX_TAKES_PER_PASS)) {
      const lease = leases.get(name);
      if (!(await this.#holds.take(name, lease, signal, lease && inheritance))) continue;
      held.push(name);
      // A Lease no resource names (`abandoned`) is taken to be deleted: nothing waits on it.
      if (lease !== undefined && found.toHold.has(name)) replicaTaken = true;
    }
    // Writes planned by a ring that changed meanwhile (a member joined or expired) are not made:
    // each would place a resource where the next pass may place it elsewhere, a second write.
    let stale = 0;
    const ringChanged = () => stale > 0 || !sameMembers(this.#ring.live(ports.leases(), clock.now()), live);
    const written = replicaTaken
      ? undefined
      : await runWrites(ordered, {
          write: async (planned, s) => {
            if (!ringChanged()) return this.#write(planned, live, leases, s);
            stale += 1;
            return "skipped";
          },
          concurrency: this.#opts.concurrency ?? 8,
          signal,
          logger: this.#opts.logger,
        });
    if (written) this.#failed = written.failed;
    const deleted = await this.#holds.settle(leases, found.owners, signal);
    this.#opts.onPass?.(live, found.owners);
    return {
      live,
      assigned: written?.assigned ?? 0,
      drained: written?.drained ?? 0,
      waiting: found.waiting + chosen.deferred + chosen.byOwners,
      held,
      deleted,
      deferred: chosen.deferred,
      denied: written?.denied ?? 0,
      lost: written?.lost ?? 0,
      later: found.later + budget.later + later + (written ? stale : ordered.length),
      ringChanged: stale > 0,
    };
  }

  /** The ring as this pass sees it: a member's state is the same for all its resources. */
  #view(live: readonly string[], leases: ReadonlyMap<string, RingLease>, now: number): RingView {
    const states = new Map<string, MemberState>();
    const current = this.#inheritance(live);
    const rings = new Map<string, Inheritance | null>();
    // Owners move by the ring their Lease shows (`ring-moves.ts`); one that shows an older ring
    // gets a Lease duration to show this one (its next renewals) before its resources are drained.
    const placing = ringOf(live, this.#opts.self);
    if (this.#placing === undefined || !sameInheritance(this.#placing.ring, placing))
      this.#placing = { ring: placing, since: now };
    const settling = now - this.#placing.since < this.#opts.leaseDurationMs;
    return {
      live,
      movesItself: (member) => {
        const shown = leases.get(member)?.movingBy;
        return shown !== undefined && (settling || sameInheritance(shown, placing));
      },
      heir: (member, claim) => {
        let ring = rings.get(member);
        if (ring === undefined) {
          const record = leases.get(member)?.inheritance;
          // The ring's choice now is the heir when the members are the record's: no hash again.
          ring = record === undefined || sameInheritance(record, current) ? null : record;
          rings.set(member, ring);
        }
        return ring === null ? undefined : heirOf(claim, ring, this.#opts.ringSeed);
      },
      state: (member) => {
        let state = states.get(member);
        if (state === undefined) {
          state = this.#holds.state(member, leases.get(member), now);
          states.set(member, state);
        }
        return state;
      },
    };
  }

  #forget(uids: readonly string[]): void {
    for (const uid of uids) this.#before.delete(uid);
  }

  /**
   * Forgets resources gone that the store did not report: at once when fewer are seen than
   * remembered, else now and then.
   */
  #sweep(seen: number): void {
    this.#passes += 1;
    if (this.#before.size === 0 || (this.#before.size <= seen && this.#passes % SWEEP_EVERY_PASSES !== 0))
      return;
    const uids = new Set<string>();
    for (const resource of this.#opts.ports.resources()) uids.add(resource.uid);
    for (const uid of this.#before.keys()) if (!uids.has(uid)) this.#before.delete(uid);
  }

  /** One label write; an assign off a member that is not live only while its Lease is held. */
  async #write(
    planned: PlannedWrite<R>,
    live: readonly string[],
    leases: ReadonlyMap<string, RingLease>,
    signal: AbortSignal,
  ): Promise<WriteResult> {
    const { resource } = planned;
    let labels: Record<string, string | null>;
    let after: ShardLabels;
    if (planned.kind === "drain") {
      labels = { [DRAIN_LABEL]: planned.value };
      after = { owner: resource.owner, drain: true };
    } else {
      const { from, to } = planned;
      // The hold is checked at the write: moves off a taken Lease only while the hold lasts.
      if (from !== undefined && from !== to && !live.includes(from)) {
        if (this.#holds.state(from, leases.get(from), this.#opts.clock.now()) !== "held") return "skipped";
      }
      labels = { [OWNER_LABEL]: to, [DRAIN_LABEL]: null };
      after = { owner: to, drain: false };
    }
    if (!(await this.#opts.ports.setLabels(resource, labels, signal))) return "lost";
    this.#before.set(resource.uid, this.#states.of(after));
    return "written";
  }
}
