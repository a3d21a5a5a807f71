/**
 * The reconcile's error policy (kube-rs's `error_policy` beside its `reconcile`): a failure at any
 * step of `reconciler.ts` is carried here as a value, reported on the version of the resource last
 * written, as a condition and an event, then retried with backoff or not, as `failures.ts`
 * classifies it. Entered only when a reconcile failed.
 */
import type { Clock } from "../runtime/clock.ts";
import { Action, type ReconcileResult } from "../runtime/controller.ts";
import { ReconcileTimeoutError, TerminalError } from "../runtime/reconcile-errors.ts";
import { deletesOnService, heldDeletion } from "./cleanup.ts";
import { EVENT_NOTE_BYTES } from "./failure-evidence.ts";
import { type Failure, failureOf } from "./failures.ts";
import { readSecretsOf } from "./inputs.ts";
import { CONDITION, type StatusRecord } from "./reasons.ts";
import type { RevisionHistoryEntry } from "./revision-history.ts";
import type { Decided, DecidedEvent, ReconcileDeps, Run } from "./run.ts";

/**
 * A reconcile that failed, as a value: the error, reported on `on` (the version of the resource
 * this reconcile last wrote), with the history a redeploy made before it.
 */
export interface Failed {
  kind: "failed";
  error: unknown;
  on: Run;
  history?: RevisionHistoryEntry[];
  /** What the failure's status records besides (a rebuild's intent undone). */
  record?: StatusRecord;
}

/** What the error policy reports with: the reconciler's ports, its clock, and its own steps. */
export interface ErrorPolicyDeps {
  deps: Pick<ReconcileDeps, "resources" | "secrets" | "maxSecretBytes">;
  clock: Clock;
  /** Records an event on the run's object. */
  record(run: Run, e: Pick<DecidedEvent, "type" | "reason" | "note">): void;
  /** Concludes the run with `decided` and writes its status (the reconciler's conclusion). */
  conclude(run: Run, decided: Decided, signal: AbortSignal): Promise<ReconcileResult>;
}

/** How long the status write reporting a timed-out reconcile may take. */
const STATUS_AFTER_TIMEOUT_MS = 5_000;

/**
 * Turns `failed` into a condition and an event, then tells the controller how to retry. Its
 * object is the version this reconcile last wrote (a status written on an older one would only
 * conflict); its `history`: what a redeploy made before the failure, which the status records so
 * that the retry does not redeploy again; its `record`: a rebuild's intent undone (the service
 * refused the call: the retry sends it). A halt (leadership lost, shutdown deadline) is not the
 * resource's failure: it is rethrown unreported, for the controller to abandon. A timeout is
 * reported like any failure, its status written under a short signal of its own (the
 * reconcile's has aborted).
 */
export async function errorPolicy(
  policy: ErrorPolicyDeps,
  { on: run, error, history, record: undone = {} }: Failed,
  signal: AbortSignal,
): Promise<ReconcileResult> {
  const { deps } = policy;
  if (deps.resources.isConflict(error)) return Action.retry();
  if (signal.aborted && !(signal.reason instanceof ReconcileTimeoutError)) throw error;
  // The connection's listing failed (a 503, a 401): every resource of the connection reports it
  // with no call, and the resync's next listing (tried again within a minute, `resync.ts`)
  // enqueues each of them again, failed or not. Not retried on its own backoff besides, and
  // said once: a thousand resources would otherwise log, write an Event and wake again each,
  // for as long as the service is down.
  const listing = run.session?.snapshot.listingFailure();
  const ofListing = listing?.kind === "failed" && listing.error === error;
  const synced = run.obj.status?.conditions?.find((c) => c.type === CONDITION.Synced);
  // Said already, word for word: the status shows nothing a read of the values would scrub.
  const said = ofListing && synced?.message === failureMessage(run, failureOf(error, []));
  // What the report must not show includes the values this reconcile did not read.
  if (run.seen.unread && !said)
    await readSecretsOf(deps, run, AbortSignal.timeout(STATUS_AFTER_TIMEOUT_MS)).catch(() => undefined);
  const failure = failureOf(error, run.seen.secrets.values);
  const again = synced?.reason === failure.outcome.reason;
  const note = failureMessage(run, failure, EVENT_NOTE_BYTES, failure.note);
  failure.outcome.message = failureMessage(run, failure);
  if (!(ofListing && again)) policy.record(run, { type: "Warning", reason: failure.outcome.reason, note });
  const record = { ...undone, ...(failure.createRefused ? { createRequestedAt: null } : {}) };
  const writeWindow = new AbortController();
  const cancel = signal.aborted
    ? policy.clock.setTimer(STATUS_AFTER_TIMEOUT_MS, () => writeWindow.abort(signal.reason))
    : () => {};
  try {
    // A redeploy that went out before the failure is recorded with it.
    const decided = { outcome: failure.outcome, record, ...(history ? { history } : {}) };
    await policy.conclude(run, decided, signal.aborted ? writeWindow.signal : signal);
  } catch (statusError) {
    if (!deps.resources.isConflict(statusError))
      run.log.warn(
        { err: failureOf(statusError, run.seen.secrets.values).outcome.message },
        "could not write status",
      );
  } finally {
    cancel();
  }
  if (failure.rethrow && !ofListing) throw failure.rethrow;
  // Not retried: logged when it starts, not at every resync that finds it failing the same way
  // (a tenant's thousand resources reading a missing Secret would log a thousand lines a pass).
  if (!again) run.log.warn({ reason: failure.outcome.reason }, failure.outcome.message);
  // Still a failed reconcile, as the error metrics (and the alert on them) count it.
  if (ofListing) throw new TerminalError(failure.outcome.message, true);
  return Action.done();
}

/**
 * The message of `failure` on `run`'s resource (an Event's note within `maxBytes`, from the
 * failure's `note` where it has one): a failure of a cleanup holds the deletion, and says how to
 * stop waiting.
 */
function failureMessage(
  run: Run,
  failure: Failure,
  maxBytes?: number,
  message = failure.outcome.message,
): string {
  return run.obj.metadata.deletionTimestamp && deletesOnService(run.obj)
    ? heldDeletion(run.obj, message, maxBytes)
    : message;
}
