/** A replica's cache as `RingMoves` reads it, for the unit tests of an owner's moves and releases. */
import { RingMoves, type RingMovesCache } from "../../src/sharding/ring-moves.ts";

/** A replica's cache: its own keys, each claiming its name unless `claims` says otherwise. */
export function cacheOf(
  keys: string[],
  claims: Record<string, string> = {},
): RingMovesCache & { keys: string[] } {
  const claimOf = (key: string) => (keys.includes(key) ? (claims[key] ?? key) : undefined);
  return {
    keys,
    ownKeys: () => keys,
    claimOf,
    drained: () => false,
    // Rivals (`ns/x…`) are younger than the others (`ns/r…`).
    created: (key) => (key.includes("/x") ? 2 : 1),
    hasRivals: (key) => keys.some((k) => k !== key && claimOf(k) === claimOf(key)),
    othersKeys: () => [],
    anyClaimOf: claimOf,
  };
}

/**
 * Replica "a"'s moves over {@link cacheOf}`(keys, claims)`, on a clock at 1,000 ms: the keys
 * reported changed and resumed are collected; `identityOf` names the process holding a replica's
 * Lease (none: no release is ever begun).
 */
export function ownerMoves(
  seed: Uint8Array,
  keys: string[],
  claims?: Record<string, string>,
  identityOf?: (replica: string) => string | undefined,
) {
  const changed: string[] = [];
  const resumed: string[] = [];
  const clock = { now: 1_000 };
  const m = new RingMoves({
    self: "a",
    seed: () => seed,
    now: () => clock.now,
    changed: (key) => changed.push(key),
    resumed: (key) => resumed.push(key),
    ...(identityOf ? { identityOf } : {}),
  });
  const cache = cacheOf(keys, claims);
  m.attach(cache);
  return { m, changed, resumed, cache, clock };
}
