/**
 * A replica's moves by the ring joined to its cache: the resources labelled for the replica are
 * the share {@link RingMoves} looks at, and each change of one of them makes it look again at the
 * resources of that one's claim.
 */
import { keyOfMeta, type ObjectRef, parseObjectKey } from "../runtime/queue-records.ts";
import { DRAIN_LABEL, OWNER_LABEL } from "./labels.ts";
import { createdSeconds } from "./pass.ts";
import type { RingMoves } from "./ring-moves.ts";

/** A resource of the replica's cache, as {@link followCache} reads it. */
export interface FollowedResource {
  readonly metadata: {
    readonly namespace?: string | undefined;
    readonly name: string;
    readonly creationTimestamp?: string | undefined;
    readonly labels?: Readonly<Record<string, string>> | undefined;
  };
}

/** Options of {@link followCache}. */
export interface FollowCacheOptions<C extends FollowedResource> {
  /** This replica's name: its own resources carry it as their owner label. */
  self: string;
  cache: {
    get(ref: ObjectRef): C | undefined;
    list(): readonly C[];
    subscribe(handlers: {
      onAdd?(obj: C): void;
      onUpdate?(old: C, obj: C): void;
      onDelete?(obj: C): void;
    }): unknown;
  };
  /** What the cached resource `ref` claims. */
  claimOf(ref: ObjectRef): string | undefined;
  /** The cached resources claiming what `obj` claims (itself included, when cached). */
  claimants(obj: C): readonly C[];
  /** The member is told of each key that may start or stop moving, or be let go. */
  changed(key: string): void;
}

/**
 * Joins `moves` to the replica's cache: it reads the replica's own resources there, and each
 * change of one refreshes its claim's resources (a claim with rivals here is not moved by the
 * ring; a rival left alone once the other one left may be).
 */
export function followCache<C extends FollowedResource>(moves: RingMoves, o: FollowCacheOptions<C>): void {
  const { cache, claimants } = o;
  const own = (obj: C | undefined): obj is C => obj?.metadata.labels?.[OWNER_LABEL] === o.self;
  const get = (key: string) => cache.get(parseObjectKey(key));
  moves.attach({
    ownKeys: () => cache.list().filter(own).map(keyOfMeta),
    claimOf: (key) => (own(get(key)) ? o.claimOf(parseObjectKey(key)) : undefined),
    drained: (key) => get(key)?.metadata.labels?.[DRAIN_LABEL] !== undefined,
    created: (key) => createdSeconds(get(key)?.metadata.creationTimestamp),
    hasRivals: (key) => {
      const obj = get(key);
      return obj !== undefined && claimants(obj).length > 1;
    },
    othersKeys: () =>
      cache
        .list()
        .filter((obj) => !own(obj))
        .map(keyOfMeta),
    anyClaimOf: (key) => (get(key) ? o.claimOf(parseObjectKey(key)) : undefined),
  });
  const refresh = (obj: C, deleted: boolean) => {
    if (deleted) moves.forget(keyOfMeta(obj));
    for (const rival of claimants(obj)) {
      const key = keyOfMeta(rival);
      moves.refresh(key);
      if (rival !== obj) o.changed(key);
    }
    if (!deleted) o.changed(keyOfMeta(obj));
  };
  cache.subscribe({
    onAdd: (obj) => refresh(obj, false),
    // A status write changes nothing a move depends on: its claim's resources are looked at again
    // only when its shard labels changed (no hashing on every watch event of the share).
    onUpdate: (old, obj) => {
      const was = old.metadata.labels;
      const is = obj.metadata.labels;
      if (was?.[OWNER_LABEL] !== is?.[OWNER_LABEL] || was?.[DRAIN_LABEL] !== is?.[DRAIN_LABEL])
        refresh(obj, false);
      else o.changed(keyOfMeta(obj));
    },
    onDelete: (obj) => refresh(obj, true),
  });
}
