/**
 * The work queue's flows and their seats (queue.ts): which ready key goes next, round robin over
 * the flows and their parts below their caps, borrowing with a fair share, reclaiming borrowed
 * seats that ran the bound, and the accounting when a key ends. The contract is `WorkQueue`'s.
 */
import type { Clock } from "./clock.ts";
import {
  FOLLOW_UP,
  FRESH,
  IDLE,
  IN_FLIGHT,
  type KeyRecord,
  type Line,
  LinePool,
  lineOf,
  type Part,
  type Place,
  READY,
  RESYNC,
  type Seats,
} from "./queue-records.ts";

/**
 * Whose work a key is (API Priority and Fairness's flow): `flow` (a tenant, say), and within it,
 * when the flow is shared by several parties, the `part` the key belongs to (a namespace of a
 * connection many namespaces use, or one of a namespace's own connections). Keys of one flow share
 * its cap; keys of one part share the part's cap too. `label`: what the part's keys waiting at a
 * cap are counted under (`waitingAtCap`) while the part holds seats, else (and by default) the
 * flow; the same for every key of a part.
 */
export interface KeyFlow {
  flow: string;
  part?: string;
  label?: string;
}

/** The flow of a key; `undefined`: the one flow of keys that name none (`""`). */
export type FlowOf = (key: string) => KeyFlow | undefined;

/**
 * How long a flow's keys may take in flight for it to borrow workers beyond its cap, by default:
 * 5 s. A worker lent to a flow at its cap is given back when the borrowed key ends: another flow's
 * key finds the one worker never lent at once, and its next keys wait for a borrowed seat at most
 * about this long (each borrowed key's flow ended its recent keys sooner, and none in flight has
 * run this long), in expectation the borrowing flow's time per key over the seats it borrowed (a
 * pass of ~20 ms keys on 11 borrowed seats: ~2 ms; creates of 0.5 s each on a loaded machine:
 * ~50 ms). Long enough that a lone flow's keys on a busy machine (a third of them over 1 s at
 * load 25) keep borrowing; a slow service's reads (~10 s each, up to the deadline) never do.
 */
export const BORROW_MS = 5_000;

/** The flow of keys whose {@link FlowOf} names none. */
const SHARED: KeyFlow = { flow: "" };

/** One flow: its parts in round-robin order, and how many of its keys are in flight. */
interface Flow extends Seats {
  parts: Map<string, Part>;
  /** The part known to be last in `parts` (none: not known), not moved again when served again. */
  lastPart: Part | undefined;
  /** How long its keys were in flight lately, in ms (a moving average; 0 before the first). */
  workMs: number;
}

/** The weight of the latest key's time in flight in its flow's moving average. */
const WORK_WEIGHT = 0.2;

/** What {@link Flows} is told of the queue. Times are the queue's (ms since it started). */
export interface FlowsOptions {
  clock: Pick<Clock, "setTimer">;
  now: () => number;
  cap: number;
  borrowMs: number;
  workers: number | undefined;
  /** Called when a borrowed seat is reclaimed (a worker may be handed a key then). */
  reclaimed: () => void;
}

/** The flows holding ready or in-flight keys, and the keys in flight. */
export class Flows {
  readonly #o: FlowsOptions;
  /** The flows holding ready or in-flight keys, in round-robin order (the one served last is last). */
  readonly #flows = new Map<string, Flow>();
  /** The flow known to be last in `#flows` (none: not known). */
  #lastFlow: Flow | undefined;
  /** Flows that ended a key lately and hold none now: when each ended its last (see {@link #active}). */
  readonly #endedAt = new Map<string, number>();
  /** Whether a flow or part is below its cap (one function for every take). */
  readonly #below = (seats: Seats) => seats.inFlight < this.#o.cap;
  readonly #pool = new LinePool();
  /** The records in flight (each knows its index: removed by swapping the last in). */
  readonly running: KeyRecord[] = [];

  constructor(options: FlowsOptions) {
    this.#o = options;
  }

  /** Work in flight at `now`: summed and longest age in seconds. */
  inFlight(now: number): { count: number; unfinishedSeconds: number; longestSeconds: number } {
    let total = 0;
    let longest = 0;
    for (const { startedAt } of this.running) {
      const age = (now - startedAt) / 1000;
      total += age;
      longest = Math.max(longest, age);
    }
    return { count: this.running.length, unfinishedSeconds: total, longestSeconds: longest };
  }

  /** The part a key of `keyFlow` waits in, made if missing (a flow made goes last). */
  #part(keyFlow: KeyFlow | undefined): Part {
    const { flow: flowName, part: partName = "" } = keyFlow ?? SHARED;
    let flow = this.#flows.get(flowName);
    if (!flow) {
      flow = { inFlight: 0, parts: new Map(), lastPart: undefined, workMs: 0, shortRun: 0 };
      this.#flows.set(flowName, flow);
      this.#lastFlow = flow;
    }
    let part = flow.parts.get(partName);
    if (!part) {
      part = {
        place: { flow: flowName, part: partName, label: keyFlow?.label ?? flowName },
        inFlight: 0,
        fresh: this.#pool.take(FRESH),
        followUps: this.#pool.take(FOLLOW_UP),
        resyncs: this.#pool.take(RESYNC),
        tookFollowUp: false,
        shortRun: 0,
      };
      flow.parts.set(partName, part);
      flow.lastPart = part;
    }
    return part;
  }

  /** Puts `record` last in `line` of its part (made if missing), ready from now. */
  enqueue(record: KeyRecord, keyFlow: KeyFlow | undefined, line: Line): void {
    const part = this.#part(keyFlow);
    record.state = READY;
    record.line = line;
    record.place = part.place;
    record.readyAt = this.#o.now();
    lineOf(part, line).push(record);
  }

  /** Takes a ready record out of its line (to move it to another); false if its part is gone. */
  unready(record: KeyRecord): boolean {
    const place = record.place as Place;
    const part = this.#flows.get(place.flow)?.parts.get(place.part);
    if (!part) return false;
    lineOf(part, record.line).drop(record);
    record.state = IDLE;
    return true;
  }

  /**
   * The next record: of the first flow in round-robin order below its cap with a ready key in a
   * part below its cap (the flow then goes last, and so does the part within it); within the part,
   * from each line in turn while both hold keys, else from the one that does (fresh work's turn:
   * its events' keys, then its resyncs). None: the same among the flows that may borrow, a part
   * below its cap before one at it, if `waitingBesides` (the workers idle besides the one taking)
   * leaves a cap's worth idle after it.
   */
  take(waitingBesides: number): KeyRecord | undefined {
    const free = this.#freeSeats();
    if (free <= 0) return undefined;
    const idleBesides = Math.min(waitingBesides, free - 1);
    const { cap, borrowMs } = this.#o;
    const below = this.#below;
    const record = this.#takeFirst(below, below);
    if (record !== undefined || cap === Number.POSITIVE_INFINITY || idleBesides < cap) return record;
    // No flow below its cap has a key: lend the worker to one at its cap whose keys are short.
    const now = this.#o.now();
    const long = new Set<string>();
    for (const { place, startedAt } of this.running)
      if (place && now - startedAt >= borrowMs) long.add(place.flow).add(`${place.flow}\u0000${place.part}`);
    const mayBorrow = (seats: Seats, name: string) =>
      seats.inFlight < cap || (seats.inFlight - cap < seats.shortRun && !long.has(name));
    // A flow whose keys took the bound on average lately borrows nothing either (a slow service
    // whose failures come at once between its slow reads); none beyond its share of the workers.
    const share = Math.max(
      cap,
      Math.floor((this.#o.workers ?? this.running.length + idleBesides + 1) / this.#active(now)),
    );
    const flowMay = (flow: Flow, name: string) =>
      flow.inFlight < cap || (mayBorrow(flow, name) && flow.workMs < borrowMs && flow.inFlight < share);
    // A part below its cap first (its flow borrowing), then one at its cap: a part's cap holds
    // while another part of a flow that may borrow has a key.
    return (
      this.#takeFirst(flowMay, below) ??
      this.#takeFirst(flowMay, (part) => mayBorrow(part, `${part.place.flow}\u0000${part.place.part}`))
    );
  }

  /**
   * Ends `record`'s time in flight: its seat is given back, its flow's time per key and its runs
   * of short keys are counted, and its part (then its flow) dropped if it holds no key.
   */
  end(record: KeyRecord): void {
    const last = this.running.pop() as KeyRecord;
    if (last !== record) {
      this.running[record.slot] = last;
      last.slot = record.slot;
    }
    record.slot = -1;
    record.state = IDLE;
    record.reclaim?.();
    record.reclaim = undefined;
    const place = record.place as Place;
    record.place = undefined;
    const flow = this.#flows.get(place.flow);
    const part = flow?.parts.get(place.part);
    if (!flow || !part) return;
    const now = this.#o.now();
    flow.inFlight -= 1;
    part.inFlight -= 1;
    const workMs = now - record.startedAt;
    flow.workMs = flow.workMs === 0 ? workMs : flow.workMs + WORK_WEIGHT * (workMs - flow.workMs);
    const short = workMs < this.#o.borrowMs;
    flow.shortRun = short ? flow.shortRun + 1 : 0;
    part.shortRun = short ? part.shortRun + 1 : 0;
    if (this.#o.cap !== Number.POSITIVE_INFINITY) {
      this.#endedAt.set(place.flow, now);
      // Flows gone for good (a deleted connection) are forgotten even while nothing borrows.
      if (this.#endedAt.size > 2 * this.#flows.size + 16) this.#active(now);
    }
    this.#prune(flow, part);
  }

  /** Drops every ready key (they are IDLE already) and the flows and parts left with none. */
  clear(): void {
    for (const [name, flow] of this.#flows) {
      for (const [partName, part] of flow.parts) {
        part.fresh.clear();
        part.followUps.clear();
        part.resyncs.clear();
        if (part.inFlight === 0) this.#drop(flow, partName, part);
      }
      if (flow.inFlight === 0) this.#dropFlow(name, flow);
    }
    this.#endedAt.clear();
  }

  /** See `WorkQueue.waitingAtCap`. */
  waitingAtCap(): Map<string, number> {
    const out = new Map<string, number>();
    for (const [name, flow] of this.#flows)
      for (const part of flow.parts.values()) {
        const ready = part.fresh.size + part.followUps.size + part.resyncs.size;
        // Under its own label only while it holds seats (as many parts as keys in flight, at most):
        // a tenant's thousand labels of parts that merely wait are counted as one, the flow's.
        const label = part.inFlight > 0 ? part.place.label : name;
        if (ready > 0 && (flow.inFlight >= this.#o.cap || part.inFlight >= this.#o.cap))
          out.set(label, (out.get(label) ?? 0) + ready);
      }
    return out;
  }

  /** See `WorkQueue.waitingSince` (`before` in the queue's time). */
  waitingSince(before: number, slowMs: number): string[] {
    // A flow is slow when its keys lately took `slowMs` each, or one in flight has run that long
    // (a service that never answers ends no reconcile to average).
    const now = this.#o.now();
    const running = new Set<string>();
    for (const { place, startedAt } of this.running)
      if (place && now - startedAt >= slowMs) running.add(place.flow);
    const out: string[] = [];
    for (const [name, flow] of this.#flows) {
      if (flow.workMs < slowMs && !running.has(name)) continue;
      for (const part of flow.parts.values()) {
        if (flow.inFlight < this.#o.cap && part.inFlight < this.#o.cap) continue;
        for (const line of [part.fresh, part.followUps, part.resyncs])
          line.each((record) => {
            if (record.readyAt >= before) return false;
            out.push(record.key);
            return true;
          });
      }
    }
    return out;
  }

  /**
   * The seats free for a key now: `workers` less the keys in flight, those of a flow beyond its cap
   * that were taken beyond it and have run `borrowMs` not counted (reclaimed, see the class
   * contract; a flow's cap's worth always counts). Without `workers`: no limit (the workers
   * waiting in `get` are the seats).
   */
  #freeSeats(): number {
    const { workers, borrowMs, cap } = this.#o;
    if (workers === undefined) return Number.POSITIVE_INFINITY;
    const now = this.#o.now();
    let overdue: Map<string, number> | undefined;
    for (const { place, startedAt, reclaim } of this.running)
      if (place && reclaim !== undefined && now - startedAt >= borrowMs) {
        overdue ??= new Map();
        overdue.set(place.flow, (overdue.get(place.flow) ?? 0) + 1);
      }
    let counted = this.running.length;
    if (overdue)
      for (const [name, keys] of overdue)
        counted -= Math.min(keys, Math.max(0, (this.#flows.get(name)?.inFlight ?? 0) - cap));
    return workers - counted;
  }

  /**
   * The flows active at `now`: those holding a key, ready or in flight, and those that ended one
   * within the last `borrowMs` (forgotten after it: at most one entry per flow, briefly).
   */
  #active(now: number): number {
    let active = this.#flows.size;
    for (const [name, at] of this.#endedAt) {
      if (now - at >= this.#o.borrowMs) this.#endedAt.delete(name);
      else if (!this.#flows.has(name)) active += 1;
    }
    return Math.max(1, active);
  }

  /** The next record of the first flow and part in turn that `flowMay` and `partMay` let take one. */
  #takeFirst(
    flowMay: (flow: Flow, name: string) => boolean,
    partMay: (part: Part) => boolean,
  ): KeyRecord | undefined {
    let found: KeyRecord | undefined;
    let flow: Flow | undefined;
    let part: Part | undefined;
    let followUp = false;
    search: for (const [flowName, candidate] of this.#flows) {
      if (!flowMay(candidate, flowName)) continue;
      for (const inFlow of candidate.parts.values()) {
        if (!partMay(inFlow)) continue;
        const freshWork = inFlow.fresh.size + inFlow.resyncs.size;
        followUp = inFlow.followUps.size > 0 && (freshWork === 0 || !inFlow.tookFollowUp);
        const line = followUp ? inFlow.followUps : inFlow.fresh.size > 0 ? inFlow.fresh : inFlow.resyncs;
        found = line.shift();
        if (found === undefined) continue;
        flow = candidate;
        part = inFlow;
        break search;
      }
    }
    if (found === undefined || flow === undefined || part === undefined) return undefined;
    part.tookFollowUp = followUp;
    // Taken beyond its flow's or its part's cap: a borrowed seat, reclaimed once it has run
    // the bound (a worker comes free for the others then; see the class contract).
    const borrowed = flow.inFlight >= this.#o.cap || part.inFlight >= this.#o.cap;
    part.inFlight += 1;
    flow.inFlight += 1;
    // Served: last in its flow's turn, and the flow last in the queue's (moved only if not last
    // already: a map's entry deleted and set again churns its table).
    if (flow.lastPart !== part) {
      flow.parts.delete(part.place.part);
      flow.parts.set(part.place.part, part);
      flow.lastPart = part;
    }
    if (this.#lastFlow !== flow) {
      this.#flows.delete(part.place.flow);
      this.#flows.set(part.place.flow, flow);
      this.#lastFlow = flow;
    }
    found.state = IN_FLIGHT;
    found.startedAt = this.#o.now();
    found.slot = this.running.length;
    this.running.push(found);
    found.reclaim =
      borrowed && this.#o.workers !== undefined
        ? this.#o.clock.setTimer(this.#o.borrowMs, this.#o.reclaimed)
        : undefined;
    return found;
  }

  /** Drops a part, and then its flow, that holds no key any more. */
  #prune(flow: Flow, part: Part): void {
    if (part.inFlight > 0 || part.fresh.size > 0 || part.followUps.size > 0 || part.resyncs.size > 0) return;
    this.#drop(flow, part.place.part, part);
    if (flow.inFlight === 0 && flow.parts.size === 0) this.#dropFlow(part.place.flow, flow);
  }

  #dropFlow(name: string, flow: Flow): void {
    this.#flows.delete(name);
    if (this.#lastFlow === flow) this.#lastFlow = undefined;
  }

  /** Drops a part, its lines kept for the next parts. */
  #drop(flow: Flow, name: string, part: Part): void {
    flow.parts.delete(name);
    if (flow.lastPart === part) flow.lastPart = undefined;
    this.#pool.give(FRESH, part.fresh);
    this.#pool.give(FOLLOW_UP, part.followUps);
    this.#pool.give(RESYNC, part.resyncs);
  }
}
