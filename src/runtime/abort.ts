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
  /** Stops following the parent. Call it once the work ended. */
  release(): void;
}

/** The signals following a parent and its one listener, kept on the parent (see {@link followSignal}). */
const FOLLOWERS = Symbol("dms.followers");
interface Followers {
  set: Set<AbortController>;
  onAbort: () => void;
}
type Followable = AbortSignal & { [FOLLOWERS]?: Followers };

/** How many signals follow `parent` now (for tests: a released follower no longer counts). */
export function followersOf(parent: AbortSignal): number {
  return (parent as Followable)[FOLLOWERS]?.set.size ?? 0;
}

/**
 * A signal that aborts when `parent` does (with its reason) or when the caller aborts it; `release`
 * ends the link. A parent carries one listener while anything follows it, however many do (a
 * reconcile's requests, every watch under a manager's signal): the followers in flight are a set
 * on the parent that this listener aborts, so no listener count grows with them; the last
 * release removes the listener, so a parent that never aborts is not kept alive by it. A
 * follower is aborted when the parent's listener runs, in the order of the parent's listeners
 * (`AbortSignal.any` marks its composites aborted before any listener runs).
 *
 * Not `AbortSignal.any`: a composite signal, once anything listens to it, registers itself with
 * each of its sources (a WeakRef in the source's set of dependants, and two FinalizationRegistry
 * entries), and these go only after a full collection found it dead. For a long-lived parent (the
 * controller's halt, a reconcile's signal under each of its requests) that is a few hundred bytes
 * per reconcile and per request, all of which outlive the young generation: about 4 % of what a
 * resync pass left for the old generation to collect, measured with `scale --profile`.
 */
export function followSignal(parent: AbortSignal | undefined): FollowedSignal {
  const own = new AbortController();
  const abort = (reason: unknown) => own.abort(reason);
  if (parent === undefined || parent.aborted) {
    if (parent?.aborted) own.abort(parent.reason);
    return { signal: own.signal, abort, release() {} };
  }
  const followable = parent as Followable;
  let followers = followable[FOLLOWERS];
  if (followers === undefined) {
    const set = new Set<AbortController>();
    // Unset by assigning undefined, not by delete, which would turn a long-lived signal's
    // object into a slow dictionary-mode one.
    const onAbort = () => {
      followable[FOLLOWERS] = undefined;
      for (const follower of set) follower.abort(parent.reason);
      set.clear();
    };
    followers = { set, onAbort };
    followable[FOLLOWERS] = followers;
    parent.addEventListener("abort", onAbort, { once: true });
  }
  const current = followers;
  current.set.add(own);
  return {
    signal: own.signal,
    abort,
    release: () => {
      if (!current.set.delete(own) || current.set.size > 0) return;
      parent.removeEventListener("abort", current.onAbort);
      if (followable[FOLLOWERS] === current) followable[FOLLOWERS] = undefined;
    },
  };
}
