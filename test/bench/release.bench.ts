/**
 * What a join's share released whole (`src/sharding/release.ts`) costs its owner at each renewal
 * of its Lease: the owner's real parts (`replicaHandOffs`: its member and its moves by the ring,
 * joined to a cache of Deployment resources by `followCache`, claims by `claimOf`), keyed with a
 * 32-byte install key, N resources of its own and N/2 reconciled for a dead replica, in a ring of
 * three that a fourth replica joins. Each figure is one renewal's `announce` (what the owner
 * writes on its Lease), run on the event loop in one go:
 *
 * - quiet, share here: the release written, none of its labels landed yet (the walk of the own
 *   share finds a released resource left);
 * - share gone, one left for another: every released resource of its own labelled away, one of
 *   those reconciled for the dead replica that the release gives the newcomer still labelled for
 *   that replica, last in the cache (the own share walked whole, then the others' until it);
 * - the last renewal: none of either left, the release ends.
 *
 * Also the join itself (the ring agreed: the release begun and the share looked at again), once;
 * and a round of the owner's acknowledgements while its release waits for its labels (the
 * newcomer has not listed the share): each released resource is tried again every second
 * (`member.ts`), sleeping on the replica's stop signal meanwhile. That owner's N resources are
 * all in its share (the ring of three gives them to it), so what the join releases, about N/4,
 * is all that waits; a round is timed from that second's timers firing (the clock's own, fired
 * at once) until every one of them sleeps again.
 * Reported, never asserted: `npm run bench -- release --owned 10000,30000`.
 */
import { randomBytes } from "node:crypto";
import pino from "pino";
import type { DeploymentSpec } from "../../src/crd/schema.ts";
import { claimOf } from "../../src/reconcile/inputs.ts";
import { keyOfMeta, type ObjectRef } from "../../src/runtime/queue-records.ts";
import { followCache } from "../../src/sharding/follow-cache.ts";
import { heirOf } from "../../src/sharding/inheritance.ts";
import { OWNER_LABEL } from "../../src/sharding/labels.ts";
import { ACK_RETRY_MS } from "../../src/sharding/member.ts";
import { ringOf } from "../../src/sharding/moving-by.ts";
import { replicaHandOffs } from "../../src/sharding/replica-handoff.ts";
import type { CachedResource } from "../../src/sharding/replica-parts.ts";
import type { WatchHandlers } from "../../src/sharding/sharder-loop.ts";
import { ManualClock } from "../support/manual-clock.ts";
import { leaseRecord, RingLeaseStore } from "../support/ring-lease-store.ts";
import type { Benchmark } from "./harness.ts";

const LEASE_MS = 15_000;
/** Renewals timed per figure (the median and the longest are shown). */
const ROUNDS = 15;
const BEFORE = ringOf(["a", "b", "c"], "b");
const AFTER = ringOf(["a", "b", "c", "d"], "b");

interface Resource extends CachedResource {
  readonly spec: DeploymentSpec;
}

/** A resource `ns-<i % 50>/svc-<i>` on a connection of its namespace, labelled for `owner`. */
function resource(i: number, owner: string): Resource {
  const namespace = `ns-${i % 50}`;
  return {
    metadata: {
      namespace,
      name: `svc-${i}`,
      resourceVersion: String(i + 1),
      creationTimestamp: "2026-12-01T00:00:00Z",
      labels: { [OWNER_LABEL]: owner },
    },
    spec: { connectionRef: { name: "prod" } } as DeploymentSpec,
  };
}

/**
 * The owner "a" with `n` resources of its own and `n / 2` labelled for the dead replica "e"; with
 * `inShare`, `n` of its own that the ring of three gives it, and none for another.
 */
function owner(n: number, inShare = false) {
  const clock = new ManualClock({ start: 1_000_000 });
  const leases = new RingLeaseStore();
  const seed = new Uint8Array(randomBytes(32));
  const cached = new Map<string, Resource>();
  for (let i = 0; cached.size < n; i++) {
    const r = resource(i, "a");
    if (!inShare || heirOf(claimOf(r), BEFORE, seed) === "a") cached.set(keyOfMeta(r), r);
  }
  for (let i = n; !inShare && i < n + n / 2; i++) {
    const r = resource(i, "e");
    cached.set(keyOfMeta(r), r);
  }
  const watchers: WatchHandlers<Resource>[] = [];
  const cache = {
    get: (ref: ObjectRef) => cached.get(`${ref.namespace}/${ref.name}`),
    list: () => [...cached.values()],
    get size() {
      return cached.size;
    },
    subscribe: (handlers: WatchHandlers<Resource>) => watchers.push(handlers),
  };
  let live = BEFORE.members;
  const h = replicaHandOffs({
    name: "a",
    leases,
    leaseDurationMs: LEASE_MS,
    patchLabels: async () => "conflict",
    live: () => [...live],
    leader: () => "b",
    keyed: true,
    ringKey: () => seed,
    cache: () => cache,
    claimants: () => (obj) => [obj],
    enqueue: () => () => {},
    acknowledged: () => {},
    clock,
    logger: pino({ level: "silent" }),
  });
  leases.put("b", leaseRecord("b_1", LEASE_MS, clock.now()), { movingBy: BEFORE });
  followCache(h.moves, {
    self: "a",
    cache,
    claimOf: (ref) => {
      const o = cache.get(ref);
      return o === undefined ? undefined : claimOf(o);
    },
    claimants: (obj) => [obj],
    changed: (key) => h.member.changed(key),
  });
  h.agree();
  /** The newcomer "d" joins: its Lease, and the leader's showing the ring with it. */
  const join = () => {
    live = AFTER.members;
    leases.put("d", leaseRecord("d_1", LEASE_MS, clock.now()));
    leases.put("b", leaseRecord("b_1", LEASE_MS, clock.now()), { movingBy: AFTER });
  };
  /** `key` labelled away: it leaves the owner's cache. */
  const remove = (key: string) => {
    const old = cached.get(key);
    cached.delete(key);
    for (const w of watchers) if (old) w.onDelete?.(old);
  };
  const released = (o: Resource) => heirOf(claimOf(o), AFTER, seed) === "d";
  return { h, clock, cached, join, remove, released };
}

const median = (values: readonly number[]) => [...values].sort((a, b) => a - b)[values.length >> 1] ?? 0;
const round2 = (ms: number) => Math.round(ms * 100) / 100;

/** `fn` timed `rounds` times: the median and the longest, ms. */
function timed(fn: () => unknown, rounds = ROUNDS): { median: number; max: number } {
  const times: number[] = [];
  for (let i = 0; i < rounds; i++) {
    const start = performance.now();
    fn();
    times.push(performance.now() - start);
  }
  return { median: round2(median(times)), max: round2(Math.max(...times)) };
}

/**
 * The acknowledgement rounds of an owner of `n` resources in its share, joined: how many wait
 * (one sleep each), and each round timed from the clock's advance by {@link ACK_RETRY_MS} until
 * as many sleep again.
 */
async function ackRounds(n: number): Promise<{ waiting: number; ms: { median: number; max: number } }> {
  const o = owner(n, true);
  o.join();
  const turn = () => new Promise((resolve) => setImmediate(resolve));
  // Every released resource is tried once at the join, then sleeps; the release is written.
  let waiting = -1;
  while (o.clock.pending !== waiting) {
    waiting = o.clock.pending;
    await turn();
  }
  if (o.h.announce()?.heir !== "d") throw new Error("the release was not said");
  const times: number[] = [];
  for (let i = 0; i < ROUNDS; i++) {
    const start = performance.now();
    o.clock.advance(ACK_RETRY_MS);
    while (o.clock.pending < waiting) await turn();
    times.push(performance.now() - start);
  }
  return { waiting, ms: { median: round2(median(times)), max: round2(Math.max(...times)) } };
}

/** See the module comment. */
export const benchmark: Benchmark = {
  name: "release",
  description:
    "ms of one renewal's work, and of a round of acknowledgements, while an owner releases a joined replica's share (N own, N/2 for another)",
  options: { owned: { description: "the owner's own resources, comma separated", default: "10000,30000" } },
  async run({ args }) {
    const sizes = (args.owned ?? "10000,30000").split(",").map(Number);
    const rows: Array<Array<string | number>> = [];
    const figures: Array<Record<string, unknown>> = [];
    for (const n of sizes) {
      const o = owner(n);
      const start = performance.now();
      o.join();
      const joinMs = round2(performance.now() - start);
      if (o.h.moves.release?.heir !== "d") throw new Error("the join began no release");
      // The first renewal finds the share quiet (nothing runs): the release is written.
      const first = timed(() => o.h.announce(), 1);
      if (o.h.announce()?.heir !== "d") throw new Error("the release was not said");
      const quiet = timed(() => o.h.announce());
      // Every released resource of its own labelled away; of those reconciled for "e", all but
      // the last one the release gives the newcomer.
      const all = [...o.cached.values()];
      const own = all.filter((r) => r.metadata.labels?.[OWNER_LABEL] === "a" && o.released(r));
      const others = all.filter((r) => r.metadata.labels?.[OWNER_LABEL] !== "a" && o.released(r));
      for (const r of [...own, ...others.slice(0, -1)]) o.remove(keyOfMeta(r));
      const left = timed(() => o.h.announce());
      if (o.h.announce()?.heir !== "d") throw new Error("the release ended with one left");
      const last = others.at(-1);
      if (last !== undefined) o.remove(keyOfMeta(last));
      const end = timed(() => o.h.announce(), 1);
      if (o.h.moves.release !== undefined) throw new Error("the release did not end");
      const acks = await ackRounds(n);
      const row = {
        n,
        others: n / 2,
        joinMs,
        firstMs: first.median,
        quietMs: quiet,
        leftMs: left,
        lastMs: end.median,
        acksWaiting: acks.waiting,
        ackRoundMs: acks.ms,
      };
      figures.push(row);
      rows.push([
        n,
        n / 2,
        joinMs,
        first.median,
        `${quiet.median} (${quiet.max})`,
        `${left.median} (${left.max})`,
        end.median,
        acks.waiting,
        `${acks.ms.median} (${acks.ms.max})`,
      ]);
    }
    return {
      rows: [],
      table: {
        head: [
          "own N",
          "for another",
          "join ms",
          "first renewal ms",
          "quiet, share here ms (max)",
          "one left for another ms (max)",
          "last renewal ms",
          "acks waiting",
          "ack round ms (max)",
        ],
        rows,
      },
      details: { figures },
    };
  },
};
