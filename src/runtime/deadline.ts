/**
 * The time a reconcile has left, told to whatever waits inside it. The controller runs each
 * reconcile {@link withinDeadline}; a wait that may be long and is this process's own (a token of
 * a connection's rate limit) asks {@link currentDeadline} first, and rather than hold the
 * reconcile's worker until the deadline it gives the worker back and has the key come again when
 * the wait would be over ({@link DeferredError}), holding what it waited for under the
 * deadline's `holder` (the reconcile's key) meanwhile.
 */
import { AsyncLocalStorage } from "node:async_hooks";

/** A reconcile's deadline: how long it has left, and who it is for (its key). */
export interface Deadline {
  timeLeft(): number;
  holder: string;
  /**
   * Whether the reconcile has ended: work it started that outlives it (a connection's resync
   * loop, started by the connection's check) is then outside any deadline, not past this one.
   */
  ended?(): boolean;
}

const current = new AsyncLocalStorage<Deadline>();

/**
 * A reconcile that gave its worker back before its work was done, because what it would wait for
 * comes later than its deadline (a token of its connection's rate limit): the key comes again
 * after `afterMs` as a follow-up, with no backoff and no failure counted. Throw it from a
 * reconciler ({@link timeLeftMs} says how long a reconcile has left).
 */
export class DeferredError extends Error {
  override readonly name: string = "DeferredError";
  readonly afterMs: number;
  constructor(message: string, afterMs: number) {
    super(message);
    this.afterMs = afterMs;
  }
}

/** Runs `work` with `deadline` as the answer of {@link currentDeadline} inside it. */
export function withinDeadline<T>(deadline: Deadline, work: () => T): T {
  return current.run(deadline, work);
}

/** The deadline of the work under way; undefined outside any (or once its reconcile ended). */
export function currentDeadline(): Deadline | undefined {
  const deadline = current.getStore();
  return deadline?.ended?.() ? undefined : deadline;
}

/** The ms the work under way has left before its deadline; undefined outside any. */
export function timeLeftMs(): number | undefined {
  return currentDeadline()?.timeLeft();
}
