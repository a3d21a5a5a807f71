/**
 * A reconcile's errors, and what the controller does after one (controller.ts): the errors a
 * reconciler throws ({@link TerminalError}; `DeferredError`, clock.ts's, beside the deadline it
 * answers) or is aborted with ({@link ReconcileTimeoutError}), and the key's next schedule and its
 * log line after each. controller-runtime's contract, service-agnostic.
 */
import type { Logger } from "pino";
import { DeferredError } from "./clock.ts";
import { reconcileFields } from "./log.ts";
import type { FlowOf, WorkQueue } from "./queue.ts";
import { parseObjectKey } from "./queue-records.ts";

/**
 * An error that cannot succeed by retrying (a rejected spec, say): the key is not requeued and
 * waits for the next change of the object or pass. Throw it from a reconciler; `said`: its
 * reconciler logged it already (once, not at each pass that finds it again): not logged here.
 */
export class TerminalError extends Error {
  override readonly name = "TerminalError";
  readonly said: boolean;
  constructor(message: string, said = false) {
    super(message);
    this.said = said;
  }
}

/** Aborts a reconcile's signal when it ran longer than the controller's reconcile timeout. */
export class ReconcileTimeoutError extends Error {
  override readonly name = "ReconcileTimeoutError";
}

/** What {@link scheduleAfterError} is told of the controller. */
export interface AfterError {
  queue: WorkQueue;
  /** The controller's logger. */
  log: Logger;
  flowOf: FlowOf | undefined;
  /** The controller's keys deferred and not picked up since, and the flow of each. */
  deferred: Map<string, string>;
  /** The metrics hook of an error returned by a reconcile (`terminal`: a {@link TerminalError}). */
  errored(terminal: boolean): void;
}

/**
 * Schedules `key` after its reconcile threw `error`, and logs it once: a {@link DeferredError}
 * comes again when its wait is over, a {@link TerminalError} waits for a change, any other error
 * is retried after the key's backoff (no sooner than its `retryAfterMs`); `halted`: the
 * controller's halt aborted it (abandoned, nothing scheduled).
 */
export function scheduleAfterError(after: AfterError, key: string, error: unknown, halted: boolean): void {
  const { queue } = after;
  if (error instanceof DeferredError && !halted) {
    // Not a failure: the worker was given back; the key comes again when its wait is over.
    queue.addAfter(key, Math.max(0, error.afterMs), { followUp: true });
    const keyFlow = after.flowOf?.(key);
    after.deferred.set(key, keyFlow?.label ?? keyFlow?.flow ?? "");
    reconcileLog(after.log, key).debug({ afterMs: error.afterMs }, error.message);
    return;
  }
  const terminal = error instanceof TerminalError;
  after.errored(terminal);
  if (halted) {
    // Leadership lost or shutdown deadline: the abort is ours, not the reconcile's failure.
    reconcileLog(after.log, key).warn("reconcile abandoned");
    return;
  }
  if (terminal) {
    queue.forget(key);
    if (!error.said)
      reconcileLog(after.log, key).error({ err: error }, "reconcile failed terminally; waiting for a change");
    return;
  }
  const delay = queue.addRateLimited(key, retryAfterMs(error));
  reconcileLog(after.log, key).error(
    { err: error, retryInMs: delay, failures: queue.numRequeues(key) },
    "reconcile failed",
  );
}

/** The controller's logger bound to `key`'s reconcile (its id too, whatever logger was given). */
function reconcileLog(log: Logger, key: string): Logger {
  const fields = reconcileFields();
  const { namespace, name } = fields ?? parseObjectKey(key);
  return log.child({ namespace, name, ...(fields ? { reconcileID: fields.reconcileID } : {}) });
}

function retryAfterMs(error: unknown): number {
  if (typeof error !== "object" || error === null || !("retryAfterMs" in error)) return 0;
  const value = error.retryAfterMs;
  return typeof value === "number" && Number.isFinite(value) && value > 0 ? value : 0;
}
