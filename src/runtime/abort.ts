/** Waiting on something until an AbortSignal says to stop. */

/** Resolves when `promise` does or `signal` aborts, whichever comes first; rejects if `promise` does first. */
export function untilAborted(promise: Promise<unknown>, signal: AbortSignal): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    if (signal.aborted) return resolve();
    const onAbort = () => resolve();
    signal.addEventListener("abort", onAbort, { once: true });
    promise.then(
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

/** A signal of its own that follows another; see {@link followSignal}. */
export interface FollowedSignal {
  readonly signal: AbortSignal;
  /** Aborts `signal` with `reason` (a timeout of the caller's); nothing once it is aborted. */
  abort(reason: unknown): void;
  /** Stops following: removes the listener from the parent. Call it once the work ended. */
  release(): void;
}

/**
 * A signal that aborts when `parent` does (with its reason) or when the caller aborts it, linked
 * by one listener on `parent` that `release` removes.
 *
 * Not `AbortSignal.any`: a composite signal, once anything listens to it, registers itself with
 * each of its sources (a WeakRef in the source's set of dependants, and two FinalizationRegistry
 * entries), and these go only after a full collection found it dead. For a long-lived parent (the
 * controller's halt, a reconcile's signal under each of its requests) that is a few hundred bytes
 * per reconcile and per request, all of which outlive the young generation: 4–5 % of what a
 * resync pass left for the old generation to collect, measured with `scale --profile`.
 */
export function followSignal(parent: AbortSignal | undefined): FollowedSignal {
  const own = new AbortController();
  const abort = (reason: unknown) => own.abort(reason);
  if (parent === undefined || parent.aborted) {
    if (parent?.aborted) own.abort(parent.reason);
    return { signal: own.signal, abort, release() {} };
  }
  const onAbort = () => own.abort(parent.reason);
  parent.addEventListener("abort", onAbort, { once: true });
  return { signal: own.signal, abort, release: () => parent.removeEventListener("abort", onAbort) };
}
