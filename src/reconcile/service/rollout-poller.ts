/**
 * How the operator follows rollouts without a watch on the service: one runnable that polls the
 * snapshots of `snapshot.ts` for the resources in progress.
 */
import type { Logger } from "pino";
import { loggedError } from "../../api/errors.ts";
import type { Clock } from "../../runtime/clock.ts";
import type { Runnable } from "../../runtime/manager.ts";
import type { RemoteSnapshot } from "./snapshot.ts";

/** Options of {@link RolloutPoller}. */
export interface RolloutPollerOptions {
  /**
   * The deployment ids of the resources in progress now (the cache's poll index, in
   * `wiring/indexes.ts`), with the snapshot of the connection each is reached through.
   */
  targets: () => { snapshot: RemoteSnapshot; ids: string[] }[];
  periodMs: number;
  clock: Clock;
  logger: Logger;
}

/**
 * Re-reads the deployments of every resource in progress once per period, a hundred per call,
 * into the snapshot; their reconciles (requeued at the same period) read it from there. Polling
 * R rollouts costs ceil(R/100) calls per period instead of R.
 */
export class RolloutPoller implements Runnable {
  readonly name = "rollout-poller";
  readonly needLeaderElection = true;
  readonly #o: RolloutPollerOptions;

  constructor(options: RolloutPollerOptions) {
    this.#o = options;
  }

  async start(signal: AbortSignal): Promise<void> {
    const { clock, periodMs, logger } = this.#o;
    // Each connection's poll in its own rate limit, and on its own: a connection still answering
    // its last poll (a service that hangs) is skipped, and never holds back the others'.
    const polling = new Map<RemoteSnapshot, Promise<void>>();
    while (!signal.aborted) {
      try {
        await clock.sleep(periodMs, signal);
      } catch {
        break;
      }
      for (const { snapshot, ids } of this.#o.targets()) {
        if (polling.has(snapshot)) continue;
        // A failed poll is not the resources' failure: their reconciles then look up live.
        const poll = snapshot
          .poll(ids, signal)
          .catch((error: unknown) => {
            if (!signal.aborted) logger.debug({ err: loggedError(error) }, "rollout poll failed");
          })
          .finally(() => polling.delete(snapshot));
        polling.set(snapshot, poll);
      }
    }
    await Promise.all(polling.values());
  }
}
