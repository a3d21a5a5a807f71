/**
 * The time a reconcile has left, told to whatever waits inside it. The controller runs each
 * reconcile {@link withinDeadline}; a wait that may be long and is this process's own (a token of
 * a connection's rate limit) asks {@link timeLeftMs} first, and rather than hold the reconcile's
 * worker until the deadline it gives the worker back and has the key come again when the wait
 * would be over (`DeferredError`, controller.ts).
 */
import { AsyncLocalStorage } from "node:async_hooks";

const left = new AsyncLocalStorage<() => number>();

/** Runs `work` with `timeLeft` as the answer of {@link timeLeftMs} inside it. */
export function withinDeadline<T>(timeLeft: () => number, work: () => T): T {
  return left.run(timeLeft, work);
}

/** The ms the work under way has left before its deadline; undefined outside any. */
export function timeLeftMs(): number | undefined {
  return left.getStore()?.();
}
