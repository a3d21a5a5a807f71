/**
 * The V8 flags `run --optimize-for-size` (on by default) sets for its process. Node refuses them
 * in `NODE_OPTIONS`, so `run` sets them itself at start, before the cache fills; V8 reads both as
 * it goes. Pretenuring decisions V8 made while the modules loaded stay (29 sites with the whole
 * graph loaded); from the start of `run` on it makes none. What each saves is measured in
 * docs/benchmarks.md ("Memory", and "27 November 2026, later: the pass's garbage was allocated
 * old").
 */
import { setFlagsFromString } from "node:v8";

export const SIZE_V8_FLAGS = [
  // The old generation collected and compacted closer to what is live.
  "--optimize-for-size",
  // No allocation site pretenured. A reconcile's objects outlive a scavenge or two while it
  // waits for an answer, so V8 learns to allocate them straight into the old generation (it
  // pretenures only with a new space of 8 MiB or more, or of its maximum: 1 MiB here); a resync
  // pass then left ~10 MiB of garbage there at once, the process's RSS peak at 10,000
  // resources. Allocated young, they die young.
  "--no-allocation-site-pretenuring",
] as const;

/** Sets {@link SIZE_V8_FLAGS} (process-wide) through `set`, V8's own by default. */
export function tuneHeapForSize(set: (flag: string) => void = setFlagsFromString): void {
  for (const flag of SIZE_V8_FLAGS) set(flag);
}
