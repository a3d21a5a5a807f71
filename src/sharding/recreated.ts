/**
 * A resource deleted and created again under the same namespace and name goes first to the
 * replica that had the deleted one. That replica's reconcile of the deleted resource, or a write
 * of it the service never answered, may still run there, and the new resource is the same
 * deployment by name: placed by the ring at once, it could be reconciled meanwhile by another
 * replica (a newcomer, while its owner releases a joined share to it). Given back, it is treated
 * as a resource whose owner label vanished (`nextAction`): its owner hands it over by the ring,
 * or releases it, only once that work ended, as every move or release of its key waits for
 * (`member.ts`, `ring-moves.ts`). The sharder remembers each deletion for
 * {@link RECREATED_WITHIN_MS} (at least twice a Lease duration), and reads the resources for
 * it only while it remembers one: one look at each unlabelled resource.
 */
import { keyOfMeta } from "../runtime/queue-records.ts";
import type { ShardLabels } from "./assignment.ts";
import type { ShardedResource } from "./pass.ts";

/**
 * How long, at least, a deletion is remembered: longer than a write the service never answered
 * may still run after it began (twice its timeout, at most a Lease duration) and than the API
 * server's own request timeout (a minute), which a reconcile's other requests wait for.
 */
export const RECREATED_WITHIN_MS = 90_000;

/** Deletions remembered at most (a namespace deleted: the oldest are forgotten first). */
export const MAX_REMEMBERED_GONE = 10_000;

/** The replicas that had the resources deleted a moment ago, by namespace/name (see the module comment). */
export class GoneOwners {
  readonly #withinMs: number;
  /** By namespace/name, oldest first: the replica, the deleted resource's uid and claim, and when. */
  readonly #gone = new Map<string, { owner: string; uid: string; claim: string; at: number }>();

  constructor(leaseDurationMs: number) {
    this.#withinMs = Math.max(RECREATED_WITHIN_MS, 2 * leaseDurationMs);
  }

  /**
   * `resource` left the store at `now` (deleted, or replaced by a new object of its name): its
   * labels as the sharder last read or wrote them (`before`, else its own) are forgotten there,
   * and its owner remembered here.
   */
  removed(resource: ShardedResource, before: Map<string, ShardLabels>, now: number): void {
    const owner = resource.owner ?? before.get(resource.uid)?.owner;
    before.delete(resource.uid);
    if (owner === undefined) return;
    const key = keyOfMeta(resource);
    this.#gone.delete(key);
    if (this.#gone.size >= MAX_REMEMBERED_GONE) {
      const oldest = this.#gone.keys().next();
      if (!oldest.done) this.#gone.delete(oldest.value);
    }
    this.#gone.set(key, { owner, uid: resource.uid, claim: resource.claim, at: now });
  }

  /**
   * Each resource without an owner label that took the place of one deleted less than the time
   * remembered ago while labelled for a `live` replica, and claims what that one claimed, is read,
   * in `before`, as labelled for that replica a moment ago, undrained (`shared` gives the one
   * record of those labels). Not when another resource of its claim is labelled for another
   * replica (rivals are judged by one replica: the sharder moves them together, as before).
   */
  recreated(
    resources: Iterable<ShardedResource>,
    live: readonly string[],
    now: number,
    before: Map<string, ShardLabels>,
    shared: (labels: ShardLabels) => ShardLabels,
  ): void {
    if (this.#gone.size === 0) return;
    for (const [key, gone] of this.#gone) {
      if (now - gone.at < this.#withinMs) break;
      this.#gone.delete(key);
    }
    if (this.#gone.size === 0) return;
    // The replica each remembered claim goes back to; null: none (its resources are split).
    const claims = new Map<string, string | null>();
    for (const { claim, owner } of this.#gone.values()) {
      const other = claims.get(claim);
      claims.set(claim, other === undefined || other === owner ? owner : null);
    }
    const unlabelled: ShardedResource[] = [];
    for (const resource of resources) {
      const owner = resource.uid === "" ? undefined : claims.get(resource.claim);
      if (owner === undefined) continue;
      const labelled = resource.owner ?? before.get(resource.uid)?.owner;
      if (labelled === undefined) unlabelled.push(resource);
      else if (labelled !== owner) claims.set(resource.claim, null);
    }
    for (const resource of unlabelled) {
      const key = keyOfMeta(resource);
      const gone = this.#gone.get(key);
      if (gone === undefined || gone.uid === resource.uid) continue;
      this.#gone.delete(key);
      const owner = claims.get(resource.claim);
      if (gone.claim === resource.claim && owner === gone.owner && live.includes(owner))
        before.set(resource.uid, shared({ owner, drain: false }));
    }
  }
}
