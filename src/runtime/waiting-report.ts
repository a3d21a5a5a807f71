/**
 * The report of keys held back at their flow's cap (controller.ts's `waiting` option): a flow held
 * back is reported, not silently starved. A timer's work, apart from any reconcile.
 */
import type { Logger } from "pino";
import type { Clock } from "./clock.ts";
import type { WorkQueue } from "./queue.ts";

/**
 * Called every `afterMs` with the keys that have waited longer than that at their flow's cap, in
 * a flow whose reconciles lately took `slowMs` or more each (or one has run that long), not told
 * yet in this wait (told once); `waits(key)` answers, at the report's write, whether the key still
 * waits.
 */
export interface WaitingReport {
  afterMs: number;
  slowMs: number;
  report(keys: string[], waits: WorkQueue["isReady"]): void;
}

/**
 * Every `waiting.afterMs`, tells `waiting.report` the keys of `queue` that have waited longer than
 * that at their flow's cap and were not told yet in this wait (a key is told again only after it
 * was handed out); a report that throws is logged on `log`. Returns the stop.
 */
export function reportWaiting(
  queue: WorkQueue,
  waiting: WaitingReport | undefined,
  clock: Pick<Clock, "now" | "setTimer">,
  log: Logger,
): () => void {
  if (!waiting || !(waiting.afterMs > 0)) return () => {};
  const told = new Set<string>();
  let cancel = () => {};
  const tick = () => {
    const keys = queue.waitingSince(clock.now() - waiting.afterMs, waiting.slowMs);
    const fresh = keys.filter((key) => !told.has(key));
    // A key no longer waiting was handed out (or dropped): its next wait is told again.
    told.clear();
    for (const key of keys) told.add(key);
    if (fresh.length > 0) {
      try {
        waiting.report(fresh, (key) => queue.isReady(key));
      } catch (error) {
        log.warn({ err: error }, "could not report the keys waiting for their flow's share");
      }
    }
    if (!queue.shuttingDown) cancel = clock.setTimer(waiting.afterMs, tick);
  };
  cancel = clock.setTimer(waiting.afterMs, tick);
  return () => cancel();
}
