/** A replica's cache as `RingMoves` reads it, for the unit tests of an owner's moves and releases. */
import type { RingMovesCache } from "../../src/sharding/ring-moves.ts";

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
  };
}
