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

/** A listing of all deployments taken at one instant, indexed by id and by name. */
export class RemoteSnapshot {
  readonly #port: DeploymentsPort;
  readonly #clock: Clock;
  readonly #maxAgeMs: number;
  #byId = new Map<string, Deployment>();
  #takenAt = Number.NEGATIVE_INFINITY;
  #inflight: Promise<void> | undefined;

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

  /** Lists everything once; concurrent callers share the same listing. */
  refresh(signal: AbortSignal): Promise<void> {
    this.#inflight ??= (async () => {
      try {
        const startedAt = this.#clock.now();
        const all = await this.#port.listAll(signal);
        this.#byId = new Map(all.map((d) => [d.id, d]));
        this.#takenAt = startedAt;
      } finally {
        this.#inflight = undefined;
      }
    })();
    return this.#inflight;
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
  }

  /** Forgets a deployment that the service no longer has. */
  forget(id: string): void {
    this.#byId.delete(id);
  }
}
