/**
 * A sharded replica's hand-offs (`replica.ts`): its member, which reconciles its share and lets go
 * of what leaves it, and its moves by the ring (`ring-moves.ts`), among them a joined replica's
 * share released whole (`release.ts`), each written as one label write against the version cached.
 */
import type { Logger } from "pino";
import type { Clock } from "../runtime/clock.ts";
import { keyOfMeta, parseObjectKey } from "../runtime/queue-records.ts";
import { sameInheritance } from "./inheritance.ts";
import { DRAIN_LABEL, handoverTo, mayLetGo, OWNER_LABEL } from "./labels.ts";
import { FENCE_MARGIN_MS, HOLD_RECHECK_MS, ShardMember } from "./member.ts";
import { heldByReplica, released, takenBySharder } from "./membership.ts";
import { encodeMovingBy, ringOf } from "./moving-by.ts";
import { LABELS_UNHEARD_MS, podOfIdentity, type Release } from "./release.ts";
import type { CachedResource, ReplicaCache, ShardedReplicaOptions } from "./replica-parts.ts";
import { RingMoves } from "./ring-moves.ts";
import type { RingLeases, ShardRecord } from "./sharder-loop.ts";

/** Options of {@link replicaHandOffs}: the replica's own, and what it learns as it runs. */
export interface HandOffOptions {
  name: string;
  leases: RingLeases;
  leaseDurationMs: number;
  patchLabels: ShardedReplicaOptions<ShardRecord>["patchLabels"];
  /** The live members, by this process's Lease watch. */
  live(): string[];
  /** The leader's replica as last observed. */
  leader(): string | undefined;
  /** Whether the ring is keyed (its key is read before joining). */
  keyed: boolean;
  /** The ring's key once read. */
  ringKey(): Uint8Array | undefined;
  /** The replica's cache, the claimants of a cached resource, and its queue, once attached. */
  cache(): ReplicaCache | undefined;
  claimants(): ((obj: CachedResource) => readonly CachedResource[]) | undefined;
  enqueue(): ((key: string) => void) | undefined;
  /** A hand-over's label write was made. */
  acknowledged(): void;
  clock: Clock;
  logger: Logger;
}

/** A replica's member and moves, joined (see the module comment). */
export interface HandOffs {
  member: ShardMember;
  moves: RingMoves;
  /** The ring this replica moves its own resources by, as its Lease shows it. */
  view(): ReturnType<typeof ringOf>;
  /** The release to write on this replica's Lease now, if any (`RingMoves.announce`). */
  announce(): Release | undefined;
  /** Looked at again on every Lease event and when the leader changes (see `view`). */
  agree(): void;
}

/** Builds a replica's member and moves (see {@link HandOffs}). */
export function replicaHandOffs(o: HandOffOptions): HandOffs {
  const { name, leases, clock, logger } = o;
  const member: ShardMember = new ShardMember({
    name,
    leaseDurationMs: o.leaseDurationMs,
    owned: (key) => {
      const ref = parseObjectKey(key);
      const cache = o.cache();
      const obj = cache?.get(ref);
      // Between two watches (one started again by a new ring): looked at again until it is back.
      if (!obj) return cache?.inTransit?.(ref) ? { drain: false, holdMs: HOLD_RECHECK_MS } : undefined;
      // Labelled for another replica: inherited from a dead one or released to this one as it
      // joined (only those are in the cache), whose drain label nobody answers (the sharder or
      // that owner labels the resource for this replica). Parked while this replica's own release
      // gives it to its heir, which reconciles it the moment that label lands: thousands may be,
      // each queued again by a watch event or by the release's early end (`RingMoves.end`).
      const labels = obj.metadata.labels;
      if (labels?.[OWNER_LABEL] !== name)
        return moves.passesOn(key) ? { drain: false, parked: true } : { drain: false };
      if (labels[DRAIN_LABEL] !== undefined || moves.stopped(key, obj.metadata.resourceVersion))
        return { drain: true };
      // A younger rival of a claim handed over a moment ago waits (see `ring-moves.ts`).
      const holdMs = moves.heldMs(key);
      return holdMs > 0 ? { drain: false, holdMs } : { drain: false };
    },
    acknowledge: async (key, signal) => {
      const ref = parseObjectKey(key);
      const obj = o.cache()?.get(ref);
      const claimants = o.claimants();
      if (!obj || !claimants) return true;
      /**
       * Writes `labels` against the cached version, its claim's younger resources here held
       * meanwhile (see `ring-moves.ts`); true once written or the resource is gone, false when it
       * changed (tried again). Refused (known not written) rejects, said by the member's retry.
       */
      const handOver = async (labels: Record<string, string | null>): Promise<boolean> => {
        const rv = obj.metadata.resourceVersion;
        moves.handing(key, rv);
        const outcome = await o.patchLabels(ref, rv, labels, signal);
        if (outcome === "written") o.acknowledged();
        else if (outcome === "conflict" || outcome === "refused") moves.notHanded(key);
        if (outcome === "refused")
          throw new Error(`the API server refused the shard labels ${JSON.stringify(labels)} of ${key}`);
        return outcome !== "conflict";
      };
      const rivals = claimants(obj).filter((r) => keyOfMeta(r) !== key);
      const drain = obj.metadata.labels?.[DRAIN_LABEL];
      const released = moves.releasedTo(key);
      if (released !== undefined) {
        // Released whole to a joined replica (`release.ts`): labelled for it, rivals and drains
        // alike, once the release is quiet (the joined replica may be reconciling it already) and
        // the joined replica has listed it (the labels would share the API server with that list).
        if (!mayLabel(released.release, released.quietAt)) return false;
        return handOver({ [OWNER_LABEL]: released.release.heir, [DRAIN_LABEL]: null });
      }
      if (drain === undefined) {
        // A move by the ring (`ring-moves.ts`), to its choice; a claim with rivals is left to
        // the sharder's drain, and a resource the ring keeps here now is reconciled again.
        const to = moves.target(key);
        if (to === undefined || rivals.length > 0) {
          moves.refresh(key);
          return true;
        }
        return handOver({ [OWNER_LABEL]: to });
      }
      // Tried again shortly while a rival here may still be reconciled (see `mayLetGo`).
      if (!mayLetGo(rivals, name, (r) => member.reconciling(keyOfMeta(r)))) return false;
      const labels = {
        // Other resources here claiming the same name: rivals move together, by the sharder.
        [OWNER_LABEL]: handoverTo(drain, name, rivals.length),
        [DRAIN_LABEL]: null,
      };
      // Its claim's other resources here wait while it is away (see `ring-moves.ts`): a drain
      // lifted by a ring that came back would leave a younger rival alone here.
      return handOver(labels);
    },
    clock,
    logger,
  });
  const leaseOf = (replica: string) => leases.list().find((l) => l.metadata.name === replica);
  /** The process holding the Lease of `replica` (not released, not a sharder's). */
  const holderOf = (replica: string) => {
    const lease = leaseOf(replica);
    const holder = lease?.record.holderIdentity;
    return lease && heldByReplica(lease) && holder && podOfIdentity(holder) === replica ? holder : undefined;
  };
  const moves = new RingMoves({
    self: name,
    seed: o.ringKey,
    now: () => clock.now(),
    changed: (key) => member.changed(key),
    // A move or a release called off: nothing else queues the resource it had turned away.
    resumed: (key) => o.enqueue()?.(key),
    identityOf: holderOf,
  });
  /**
   * Since when, by this process's clock, the Lease of the heir of this replica's release has been
   * seen not held by the process released to (gone, without a holder, or another's); undefined
   * while it is (see `releaseGoes`). Kept with the release it was seen for.
   */
  let heirLost: { release: Release; since: number } | undefined;
  /**
   * Whether this replica's release can no longer be taken up, the heir's process no longer able
   * to write: its Lease released by it (its writes settled), taken by a sharder (which takes a
   * Lease only once it is released or expired), or not held by that process for a Lease duration
   * since this process first saw it so. A Lease edited by hand (`kubectl edit lease`: its holder
   * cleared or another named, its duration or renewal changed) or deleted is no sign that the
   * process stopped: it writes until a Lease duration after its last renewal, which came before
   * the edit was seen. The share is then reconciled here again.
   */
  const releaseGoes = (release: Release): boolean => {
    const lease = leaseOf(release.heir);
    if (lease?.record.holderIdentity === release.identity) {
      heirLost = undefined;
      return false;
    }
    if (lease !== undefined && (released(lease) || takenBySharder(lease))) return true;
    if (heirLost?.release !== release) heirLost = { release, since: clock.now() };
    return clock.now() - heirLost.since >= o.leaseDurationMs;
  };
  /**
   * Whether the labels of `release`, quiet since `quietAt`, may be written: once its heir's Lease,
   * held by the process released to, names this replica among the shares it has listed, or
   * {@link LABELS_UNHEARD_MS} after it became quiet.
   */
  const mayLabel = (release: Release, quietAt: number | undefined): boolean => {
    if (quietAt === undefined) return false;
    const lease = leaseOf(release.heir);
    const listed =
      lease?.record.holderIdentity === release.identity && lease.holding?.includes(name) === true;
    return listed || clock.now() - quietAt >= LABELS_UNHEARD_MS;
  };
  /** Whether no reconcile or write of `key` may still run (a released resource, before its release is written). */
  const quiet = (key: string) =>
    !member.reconciling(key) && member.mayRunUntil(key) + FENCE_MARGIN_MS <= clock.now();
  /**
   * The ring this replica moves its own resources by: its view, while the leader's Lease shows the
   * same and the ring's key is read (see `ring-moves.ts`). Looked at again on every Lease event
   * (each member renews every retry period) and when the leader changes.
   */
  const view = () => ringOf(o.live(), o.leader());
  const agree = () => {
    const release = moves.release;
    if (release !== undefined && releaseGoes(release)) {
      logger.info(
        { to: release.heir },
        "the replica this replica's joined share was released to cannot take it up: reconciling it here again",
      );
      heirLost = undefined;
      moves.end();
    }
    if (o.keyed && o.ringKey() === undefined) return moves.agree(undefined);
    const own = view();
    const leader = o.leader();
    const shown =
      leader === undefined ? undefined : leases.list().find((l) => l.metadata.name === leader)?.movingBy;
    const before = moves.ring;
    const releasing = moves.release;
    moves.agree(shown !== undefined && sameInheritance(shown, own) ? own : undefined);
    if (releasing === undefined && moves.release !== undefined)
      logger.info(
        { to: moves.release.heir, ring: encodeMovingBy(moves.release.ring) },
        "a replica joined: releasing the share the ring gives it whole, its labels written in the background",
      );
    if (moves.ring !== undefined && !sameInheritance(before, moves.ring) && moves.moving > 0)
      logger.info(
        { ring: encodeMovingBy(moves.ring), moving: moves.moving },
        "the ring places some of this replica's resources elsewhere: handing them over",
      );
  };
  leases.subscribe({ onAdd: agree, onUpdate: agree, onDelete: agree });
  const announce = () => moves.announce(quiet, member.busyKeys());
  return { member, moves, view, announce, agree };
}
