/**
 * What the reconciler knows of the service's deployments, and how it looks one up.
 *
 * The service has no watch, so drift is found by polling. Polling each resource on its own would
 * cost N calls per resync; instead a resync tick lists every deployment once (ceil(N/100) calls
 * with pages of 100) into a snapshot, and the reconciles of that tick read from it. Reconciles
 * caused by a change of the resource (or any reconcile when the snapshot is old) look the
 * deployment up live, and every write refreshes the snapshot's entry with the service's answer.
 */

import type { Deployment } from "../api/wire.ts";
import type { Clock } from "../runtime/clock.ts";
import type { DeploymentsPort } from "./ports.ts";

/** One listing under way, shared by every caller that asked for it meanwhile. */
interface Flight {
  done: Promise<void>;
  /** Aborts the listing: done once every caller waiting for it has given up. */
  abort: AbortController;
  waiting: number;
}

/** A listing of all deployments taken at one instant, indexed by id and by name. */
export class RemoteSnapshot {
  readonly #port: DeploymentsPort;
  readonly #clock: Clock;
  readonly #maxAgeMs: number;
  #byId = new Map<string, Deployment>();
  #takenAt = Number.NEGATIVE_INFINITY;
  #flight: Flight | undefined;
  /** Counts writes to the snapshot, to tell a write made while a listing was under way. */
  #writes = 0;
  /** The latest write per id (null: forgotten), with its count; pruned as listings supersede it. */
  readonly #written = new Map<string, { at: number; deployment: Deployment | null }>();

  /**
   * @param maxAgeMs how long a listing may answer for the service: long enough to cover the
   *   spread of one resync tick's reconciles, short enough that an edit on the service is seen
   *   by the next tick.
   */
  constructor(port: DeploymentsPort, clock: Clock, maxAgeMs: number) {
    this.#port = port;
    this.#clock = clock;
    this.#maxAgeMs = maxAgeMs;
  }

  /**
   * Lists everything once; concurrent callers share the same listing. Each caller's `signal`
   * ends its own wait (rejecting with its reason) without failing the others; the listing itself
   * is aborted only once every caller waiting for it has given up.
   */
  refresh(signal: AbortSignal): Promise<void> {
    if (signal.aborted) return Promise.reject(signal.reason);
    const flight = this.#flight ?? this.#takeOff();
    flight.waiting += 1;
    return new Promise<void>((resolve, reject) => {
      const onAbort = () => {
        flight.waiting -= 1;
        if (flight.waiting === 0) {
          // Nobody waits for it any more: a new caller starts a listing of its own.
          if (this.#flight === flight) this.#flight = undefined;
          flight.abort.abort(signal.reason);
        }
        reject(signal.reason);
      };
      signal.addEventListener("abort", onAbort, { once: true });
      flight.done.then(
        () => {
          signal.removeEventListener("abort", onAbort);
          resolve();
        },
        (error: unknown) => {
          signal.removeEventListener("abort", onAbort);
          reject(error);
        },
      );
    });
  }

  #takeOff(): Flight {
    const abort = new AbortController();
    const flight: Flight = { abort, waiting: 0, done: Promise.resolve() };
    // Set before the listing starts: its `finally` must see it, however soon it settles.
    this.#flight = flight;
    flight.done = (async () => {
      try {
        const startedAt = this.#clock.now();
        const writesBefore = this.#writes;
        const all = await this.#port.listAll(abort.signal);
        if (abort.signal.aborted) return;
        const byId = new Map(all.map((d) => [d.id, d]));
        // A write answered after the listing started is newer than what the listing shows.
        for (const [id, write] of this.#written) {
          if (write.at <= writesBefore) this.#written.delete(id);
          else if (write.deployment) byId.set(id, write.deployment);
          else byId.delete(id);
        }
        this.#byId = byId;
        this.#takenAt = startedAt;
      } finally {
        if (this.#flight === flight) this.#flight = undefined;
      }
    })();
    flight.done.catch(() => {});
    return flight;
  }

  /** True while the last listing may still answer for the service. */
  isFresh(): boolean {
    return this.#clock.now() - this.#takenAt <= this.#maxAgeMs;
  }

  /**
   * The snapshot's answer for `id`: the deployment, `null` when the fresh listing did not have it,
   * or `undefined` when the snapshot is too old to say.
   */
  byId(id: string): Deployment | null | undefined {
    if (!this.isFresh()) return undefined;
    return this.#byId.get(id) ?? null;
  }

  /** Records what a write returned, so the next reconcile of this tick sees it. */
  remember(deployment: Deployment): void {
    this.#byId.set(deployment.id, deployment);
    this.#written.set(deployment.id, { at: ++this.#writes, deployment });
  }

  /** Forgets a deployment that the service no longer has. */
  forget(id: string): void {
    this.#byId.delete(id);
    this.#written.set(id, { at: ++this.#writes, deployment: null });
  }
}
