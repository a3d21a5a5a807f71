/**
 * The V8 flags `run --optimize-for-size` (on by default) sets for its process. Node refuses them
 * in `NODE_OPTIONS`, so `run` sets them itself at start, before the cache fills; V8 reads both as
 * it goes. Pretenuring decisions V8 made while the modules loaded stay (29 sites with the whole
 * graph loaded); from the start of `run` on it makes none. What each saves is measured in
 * docs/benchmarks.md ("Memory", and "27 November 2026, later: the pass's garbage was allocated
 * old"). With the same setting, {@link QuietCollector} collects a burst's garbage once the work
 * goes quiet.
 */
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import type { Clock } from "./clock.ts";
import type { Runnable } from "./manager.ts";

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

/**
 * V8's full collection that also gives memory back, for this process: `--expose-gc` set at run
 * time, the `gc` function read from a context made after it (the main one was made before).
 * The `last-resort` flavour compacts and releases the pages it emptied, where a regular one keeps
 * them committed for the heap's next growth (a synthetic 190 MiB of garbage over 4 MiB live: 134
 * MiB committed after a regular collection, 6 after this one). Undefined where V8 refuses.
 */
export function exposeGc(): (() => void) | undefined {
  try {
    setFlagsFromString("--expose-gc");
    const gc: unknown = runInNewContext("gc");
    if (typeof gc !== "function") return undefined;
    return () => gc({ type: "major", execution: "sync", flavor: "last-resort" });
  } catch {
    return undefined;
  }
}

/** Options of {@link QuietCollector}. Times in ms. */
export interface QuietCollectorOptions {
  /** A full collection (see {@link exposeGc}). */
  gc: () => void;
  clock: Pick<Clock, "now" | "sleep">;
  /** The CPU time this process has used (`process.cpuUsage`, user and system, by default). */
  cpuMs?: () => number;
  /** How often the CPU time is read while work is under way or a collection due. Default 1 s. */
  checkMs?: number;
  /**
   * While nothing is due (the last interval quiet, less than `minWorkCpuMs` since the last
   * collection), the checks space out, each twice the one before, up to this. Default 8 s.
   */
  idleCheckMs?: number;
  /** The most CPU time a second of a check's interval may have used and still be quiet. Default 50 (5 %). */
  quietCpuMs?: number;
  /** The CPU time since the last collection that makes one worth it. Default 1,000. */
  minWorkCpuMs?: number;
  /** The least time between two collections. Default 30 s. */
  minIntervalMs?: number;
}

/**
 * One full collection when the process goes quiet after a burst of work (a resync pass, a start,
 * many edits at once): a pass over 10,000 resources leaves ~6 MiB of garbage in the old
 * generation, and V8 collects it only when the heap grows again, since Node never tells it the
 * process is idle; until then it is resident, and so are the pages a collection emptied.
 * Collected in the quiet moment after the burst, the pass's garbage and its pages leave before
 * the next pass: at 10,000 resources the steady RSS went from 113 to 108 MiB (docs/benchmarks.md,
 * "Memory"). The collection holds the event loop ~0.1 s at that size (~42 MiB live; 49 ms for a
 * regular one), at most once per {@link QuietCollectorOptions.minIntervalMs}, and only after an
 * interval in which the process used less than {@link QuietCollectorOptions.quietCpuMs} of CPU a
 * second. A burst is {@link QuietCollectorOptions.minWorkCpuMs} of CPU since the last collection (a
 * resync pass over 10,000 resources takes ~1.5 s): a small operator's few reconciles never cost a
 * collection of their own. Work is read as the process's CPU time, so nothing on the reconcile's
 * path counts it: once a second while work is under way or a collection due, and every 2, 4, then
 * 8 s while nothing is (an idle operator's timer wakes it every 8 s, and an edit rarely meets it).
 */
export class QuietCollector implements Runnable {
  readonly name = "heap-collector";
  readonly needLeaderElection = false;
  readonly #o: Required<QuietCollectorOptions>;
  #cpuAtCheck: number;
  #checkedAt: number;
  #cpuAtCollection: number;
  #collectedAt = Number.NEGATIVE_INFINITY;
  /** The wait before the next check. */
  #nextMs: number;

  constructor(options: QuietCollectorOptions) {
    this.#o = {
      cpuMs: processCpuMs,
      checkMs: 1_000,
      idleCheckMs: 8_000,
      quietCpuMs: 50,
      minWorkCpuMs: 1_000,
      minIntervalMs: 30_000,
      ...options,
    };
    this.#cpuAtCheck = this.#o.cpuMs();
    this.#checkedAt = this.#o.clock.now();
    this.#cpuAtCollection = this.#cpuAtCheck;
    this.#nextMs = this.#o.checkMs;
  }

  /**
   * One check: collects when the interval since the previous check was quiet, a burst was
   * worked since the last collection and that collection is old enough. Returns whether it
   * collected.
   */
  check(): boolean {
    const cpu = this.#o.cpuMs();
    const now = this.#o.clock.now();
    const seconds = Math.max(1, (now - this.#checkedAt) / 1_000);
    const quiet = cpu - this.#cpuAtCheck <= this.#o.quietCpuMs * seconds;
    this.#cpuAtCheck = cpu;
    this.#checkedAt = now;
    const due = cpu - this.#cpuAtCollection >= this.#o.minWorkCpuMs;
    // Idle, nothing due: the next check waits longer (an idle operator wakes every few seconds).
    this.#nextMs = quiet && !due ? Math.min(this.#o.idleCheckMs, 2 * this.#nextMs) : this.#o.checkMs;
    if (!quiet || !due) return false;
    if (now - this.#collectedAt < this.#o.minIntervalMs) return false;
    this.#o.gc();
    // The collection's own CPU time is no work to collect after.
    this.#cpuAtCollection = this.#o.cpuMs();
    this.#collectedAt = now;
    this.#nextMs = Math.min(this.#o.idleCheckMs, 2 * this.#o.checkMs);
    return true;
  }

  /** The wait before the next check: `checkMs`, or longer while nothing is due (`idleCheckMs`). */
  get nextCheckMs(): number {
    return this.#nextMs;
  }

  async start(signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      try {
        await this.#o.clock.sleep(this.#nextMs, signal);
      } catch {
        return;
      }
      this.check();
    }
  }
}

/** The CPU time this process has used, in ms. */
function processCpuMs(): number {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1_000;
}

/**
 * With `optimizeForSize`, a {@link QuietCollector}'s runnable; none without (or where V8
 * refuses).
 */
export function quietCollection(
  optimizeForSize: boolean | undefined,
  clock: Pick<Clock, "now" | "sleep">,
): Runnable[] {
  const gc = optimizeForSize ? exposeGc() : undefined;
  return gc ? [new QuietCollector({ gc, clock })] : [];
}
