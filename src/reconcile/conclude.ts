/**
 * The conclusion of a reconcile, pure: {@link settle} joins what was decided (`decide.ts`) with
 * what `execute` wrote (the write's own events first: the note of what a PATCH changed written
 * here, those of a drift it corrected or a revision it redeployed in `notes.ts`);
 * {@link evidenceAt} tells what else a status needs of the service when it takes no call, or that
 * it takes a read (`evidence.ts`: not for an edit whose new revision is first seen now);
 * {@link conclude} draws from that and the evidence the status to write, the revision's event, and
 * when to look at the resource again: the reconcile's requeue policy (kube-rs's `error_policy`
 * beside its `reconcile`). The table of the requeue's cases is test/unit/next-action.test.ts,
 * settle's is part of test/unit/decide.test.ts.
 */

import { connectionLabel } from "../crd/conventions.ts";
import type { DeploymentResourceStatus } from "../crd/schema.ts";
import { Action, type ReconcileResult } from "../runtime/controller.ts";
import { statusEqual } from "../runtime/json.ts";
import { settleCreated } from "./create.ts";
import { generationApplied, observedAs } from "./decide.ts";
import { type FailedRevisionLog, LOG_RETRY_MS, readAgainPending } from "./failure-evidence.ts";
import { outcomeFromProblems } from "./failures.ts";
import { handledValue, reconcileInterval, reconcileRequestedAt } from "./inputs.ts";
import {
  lookedWithoutCall,
  type RevisionObservation,
  type RolloutEvidence,
  rolloutState,
} from "./live-revision.ts";
import { driftCorrectedNote, redeploySaid } from "./notes.ts";
import type { PatchPlan } from "./plan.ts";
import { keptSecretsProblem } from "./plan-secrets.ts";
import type { EventNote, StoredResource } from "./ports.ts";
import { CONDITION, REASON, type SyncOutcome } from "./reasons.ts";
import { intentSettled, withRebuild } from "./rebuild.ts";
import { pendingRedeploy } from "./revision-history.ts";
import { switchingBack } from "./revision-reuse.ts";
import type { Connected, Decided, DecidedEvent, DecideSpec, Decision, Executed, Run } from "./run.ts";
import type { Deployment } from "./service-types.ts";
import { statusFrom } from "./status.ts";
import { revisionMadeSince } from "./unconfirmed-rebuild.ts";

/**
 * `decision` with what was `executed` of its write (none when it had none): the conclusion's
 * input, and the events to record now, the write's own first.
 */
export function settle(
  spec: DecideSpec,
  status: NonNullable<StoredResource["status"]>,
  decision: Decision,
  executed: Executed | undefined,
): { decided: Decided; events: DecidedEvent[] } {
  const settled = settleWrite(spec, status, decision, executed);
  const done = executed?.rebuilt ? withRebuild(spec, status, settled, decision, executed.rebuilt) : settled;
  // A revision of this reconcile's own ends the wait of a rebuild whose answer was lost.
  const before = decision.write?.kind === "send" ? decision.write.deployment : undefined;
  const made = status.unconfirmedRebuild && executed ? revisionMadeSince(done, executed, before) : done;
  return executed?.written ? intentSettled(made, status) : made;
}

/** {@link settle} of the write alone. */
function settleWrite(
  spec: DecideSpec,
  status: NonNullable<StoredResource["status"]>,
  decision: Decision,
  executed: Executed | undefined,
): { decided: Decided; events: DecidedEvent[] } {
  const { outcome, observed, record, wakeAt, history, externalRevision, externalChanges } = decision;
  const decided: Decided = {
    outcome,
    observed,
    record,
    ...(wakeAt === undefined ? {} : { wakeAt }),
    ...(history ? { history } : {}),
    ...(externalRevision ? { externalRevision } : {}),
    ...(externalChanges ? { externalChanges } : {}),
  };
  const write = decision.write;
  if (!executed || !write || executed.kind === "none") return { decided, events: decision.after };
  if (executed.kind === "created") return settleCreated(decided, executed, decision.after);
  if (write.kind !== "send") throw new Error("a create was answered as a PATCH");
  const { sent } = executed;
  const sending = write.plan;
  const reuse = {
    ...(sent.history ? { history: sent.history } : {}),
    ...(sent.known ? { known: sent.known } : {}),
  };
  const events: DecidedEvent[] = [];
  const { revision } = sent;
  // Someone changed the service since this spec was applied: the event names the fields, never
  // the values someone else set, and the change is counted (never the operator's own rebuild's).
  const corrected =
    !write.back &&
    !write.reapplied &&
    updateReason({ ...spec, status }, sending, write.adopted) === "DriftCorrected";
  // A redeploy says itself, in its event and in Synced's message (notes.ts).
  const redeployed = revision.kind === "redeployed" ? redeploySaid(revision, sending, corrected) : undefined;
  if (redeployed) events.push(redeployed.event);
  else if (
    !write.back &&
    (revision.kind !== "pending" || sending.changes.some((c) => c.group !== "source_revision_config"))
  ) {
    // A redeploy sent before and not live yet sends nothing for it again: no event for it.
    events.push(
      corrected
        ? { type: "Normal", reason: "DriftCorrected", note: driftCorrectedNote(sending) }
        : { type: "Normal", reason: "Updated", note: updateNote(sending) },
    );
  }
  const counted = corrected && events.some((e) => e.reason === "DriftCorrected");
  const changes = counted ? { externalChanges: [...(externalChanges ?? []), "fields" as const] } : {};
  const message = write.redeployMessage ? redeployed?.message : undefined;
  const said = message !== undefined ? { outcome: { kind: "synced", message } as const } : {};
  // An empty secrets list the service answered with its secrets kept: it reads such a list as
  // "unchanged". Said now; the next plans send it no more (plan-secrets.ts).
  const kept = sending.body.secrets?.length === 0 ? sent.deployment.secrets.map((s) => s.name) : [];
  const refused = kept.length > 0 ? keptSecretsProblem([...new Set(kept)].sort()) : undefined;
  const stalled = refused ? { outcome: outcomeFromProblems([refused]) ?? decided.outcome } : {};
  const warning: DecidedEvent[] = refused
    ? [{ type: "Warning", reason: REASON.CannotClearSecrets, note: refused.message }]
    : [];
  return {
    decided: { ...decided, observed: observedAs(sent.deployment), ...reuse, ...said, ...changes, ...stalled },
    events: [...events, ...warning, ...decision.after],
  };
}

/** Note of the event of a PATCH: what changed, and whether it made a new revision. */
function updateNote(decision: PatchPlan): string {
  const revision = decision.newRevision ? " (new revision)" : "";
  return `updated the service's deployment${revision}: ${decision.summary.join("; ")}`;
}

/**
 * Reason of the event of a PATCH: `DriftCorrected` when this generation of the spec was already
 * applied ({@link generationApplied}: someone changed the service since), `Updated` otherwise. A
 * secrets-only PATCH is a rotation of a Kubernetes Secret, hence `Updated`.
 */
export function updateReason(obj: StoredResource, decision: PatchPlan, adopted: boolean): string {
  if (adopted) return "Updated";
  const secretsOnly = decision.changes.every((c) => c.group === "secrets");
  return generationApplied(obj) && !secretsOnly ? "DriftCorrected" : "Updated";
}

/** What the service said of the observed deployment's latest revision and its rollout. */
export interface Evidence {
  revision?: RevisionObservation | undefined;
  rollout?: RolloutEvidence | undefined;
  /** The revision's one event (with its log tail when one was read). */
  event?: EventNote | undefined;
}

/** What `readEvidence` (evidence.ts) reads for: the deployment a connected reconcile observed. */
export interface EvidenceRead {
  run: Connected;
  deployment: Deployment;
  /** A reconcile asked by annotation (`dms.dev/reconcile-requested-at`) and not handled yet. */
  requested: boolean;
  /** The latest revision's status when it was told without a look (`lookedWithoutCall`). */
  look?: { revision?: RevisionObservation } | undefined;
}

/**
 * The evidence a status needs besides `decided` when it takes no call (`known`): none without a
 * deployment found or a usable connection, nor while it is deleted; else the latest revision's
 * status told without a look, and where the rollout stands when no log of it is due to be read
 * (an edit whose new revision is first seen now). Otherwise what `readEvidence` must `read`.
 */
export function evidenceAt(
  run: Run,
  { outcome, observed }: Decided,
): { known: Evidence } | { read: EvidenceRead } {
  if (observed?.kind !== "found" || !isConnected(run) || outcome.kind === "deleting") return { known: {} };
  const { obj, now } = run;
  const requested =
    (reconcileRequestedAt(obj) ?? null) !== (handledValue(obj.status?.lastHandledReconcileAt) ?? null);
  const deployment = observed.deployment;
  // A switch back not live yet: the revision switched back to is read (`RevisionTracker.look`).
  const history = obj.status?.revisionHistory;
  const switching = !!pendingRedeploy(history) && switchingBack(deployment, history) !== undefined;
  const look = switching ? undefined : lookedWithoutCall(deployment, obj.status, requested);
  if (look === undefined) return { read: { run, deployment, requested } };
  const rollout = rolloutState(obj.status, obj.spec, deployment, look.revision, now);
  if (rollout.due !== undefined) return { read: { run, deployment, requested, look } };
  return { known: { revision: look.revision, rollout: rollout.status, event: undefined } };
}

/** Whether `run`'s connection is usable. */
function isConnected(run: Run): run is Connected {
  return run.session !== undefined;
}

/** What a conclusion is drawn from. */
export interface ConclusionInput {
  obj: StoredResource;
  decided: Decided;
  evidence: Evidence;
  /** The reconcile's clock reading. */
  now: Date;
  /** The secret values every message is scrubbed of. */
  secretValues: readonly string[];
  /** The poll interval (`--poll-interval`). */
  pollMs: number;
}

/** The status to write (`changed`: it differs from the one read) and what the controller does next. */
export interface Conclusion {
  status: DeploymentResourceStatus;
  changed: boolean;
  next: ReconcileResult;
}

/** Concludes a reconcile (see the module comment). */
export function conclude(input: ConclusionInput): Conclusion {
  const { obj, decided, evidence, now } = input;
  const { outcome: sync, observed, record = {}, wakeAt, history, known, externalRevision } = decided;
  const previous = obj.status;
  const status = statusFrom({
    previous,
    generation: obj.metadata.generation ?? 0,
    observed: observed === undefined ? undefined : observed.kind === "found" ? observed.deployment : null,
    sync,
    now,
    record: { connection: connectionLabel(obj.spec.connectionRef), ...record },
    secretValues: input.secretValues,
    revision: evidence.revision,
    rollout: evidence.rollout,
    ...(history ? { revisionHistory: history } : {}),
    ...(known ? { knownRevision: known } : {}),
    ...(externalRevision ? { externalRevision } : {}),
    createdUnlisted: observed?.kind === "createdUnlisted",
  });
  // A create not listed yet: the id it answered with stays known while the listing catches up.
  if (observed?.kind === "createdUnlisted" && previous?.deploymentId)
    status.deploymentId = previous.deploymentId;
  const next = nextAction({
    sync: sync.kind,
    status,
    timedOutAfter: evidence.rollout?.timedOutAfter,
    log: evidence.rollout?.log,
    wakeAt,
    now: now.getTime(),
    pollMs: input.pollMs,
    intervalMs: reconcileInterval(obj),
  });
  return { status, changed: !statusEqual(previous, status), next };
}

/**
 * How often a rollout past its `spec.rolloutTimeout` is looked at again (at least the poll
 * interval): it is Stalled, so not polled, but it ends when the revision goes live or fails.
 */
export const TIMED_OUT_LOOK_MS = 60_000;

/**
 * Longest requeue a held change asks for: a timer of 2^31 ms or more fires at once, and the
 * periodic pass brings the resource back meanwhile anyway.
 */
export const MAX_WAKE_MS = 24 * 3_600_000;

/** What the requeue depends on. */
export interface Concluded {
  /** The kind of the sync outcome the reconcile concluded. */
  sync: SyncOutcome["kind"];
  /** The status as concluded (written, or unchanged). */
  status: DeploymentResourceStatus;
  /** The rollout ran past `spec.rolloutTimeout` (the evidence says after how long). */
  timedOutAfter?: string | undefined;
  /** The failure evidence's log record (`status.failedRevisionLog` as concluded). */
  log?: FailedRevisionLog | undefined;
  /** A held change's window opens at this instant (ms since the epoch). */
  wakeAt?: number | undefined;
  /** The reconcile's clock reading (ms since the epoch). */
  now: number;
  /** The poll interval (`--poll-interval`). */
  pollMs: number;
  /** The resource's own `dms.dev/reconcile-interval`, if any. */
  intervalMs?: number | undefined;
}

/**
 * What the controller does next:
 * - a timed-out rollout (Stalled, not polled) is looked at every {@link TIMED_OUT_LOOK_MS};
 * - work in progress (the service's, or a create not listed yet) is polled; a held change is in
 *   progress only by waiting, so only the service's own work is polled then, or its wake comes
 *   first;
 * - a held change wakes at its window's opening ({@link heldWake}), a log read that may pass is
 *   tried again after {@link LOG_RETRY_MS}, whichever first (or the resource's own interval);
 * - otherwise done, with the resource's own interval if it sets one.
 * A failed outcome is never polled: the failure's retry is the controller's backoff.
 */
export function nextAction(c: Concluded): ReconcileResult {
  const failed = c.sync === "failed";
  if (c.timedOutAfter !== undefined && !failed)
    return Action.requeueAfter(Math.max(c.pollMs, TIMED_OUT_LOOK_MS));
  const busy =
    c.sync === "held" ? serviceBusy(c.status) : isReconciling(c.status) || c.status.createRequestedAt;
  const wake = c.wakeAt === undefined ? undefined : heldWake(c.wakeAt - c.now, c.pollMs);
  if (busy && !failed) return Action.requeueAfter(Math.min(c.pollMs, wake ?? Infinity));
  const again = c.log?.failedReads !== undefined && readAgainPending(c.log);
  const reread = again ? Math.max(c.pollMs, LOG_RETRY_MS) : undefined;
  if (wake !== undefined || reread !== undefined)
    return Action.requeueAfter(Math.min(wake ?? Infinity, reread ?? Infinity, c.intervalMs ?? Infinity));
  return Action.done(c.intervalMs);
}

/**
 * How long a held change waits, `untilOpening` ms before its opening (or before where the
 * search stopped): never less than the poll interval, never more than {@link MAX_WAKE_MS}.
 * The floor keeps a resource whose windows leave no opening in sight, or whose clock reading
 * is already past it, from being requeued at once in a loop on the event loop every resource
 * shares; it costs a held change at most one poll interval of lateness, what a rollout's own
 * progress is seen with anyway (and `--poll-interval` is at least 1 s).
 */
function heldWake(untilOpening: number, pollMs: number): number {
  return Math.min(Math.max(untilOpening, pollMs), MAX_WAKE_MS);
}

/** Whether the service is at work on the deployment (creating it, rolling a revision out). */
function serviceBusy(status: DeploymentResourceStatus): boolean {
  const ready = status.conditions?.find((c) => c.type === CONDITION.Ready);
  const working: readonly string[] = [REASON.Creating, REASON.RolloutInProgress, REASON.AwaitingDatabase];
  return ready?.status === "False" && working.includes(ready.reason);
}

/** Whether the status says work is in progress (creation, rollout, deletion, a retry). */
function isReconciling(status: DeploymentResourceStatus): boolean {
  return isTrue(status, CONDITION.Reconciling);
}

/** Whether the condition `type` of `status` is True. */
function isTrue(status: DeploymentResourceStatus, type: string): boolean {
  return (status.conditions ?? []).some((c) => c.type === type && c.status === "True");
}

/** The cache index of resources whose deployment is being polled (see {@link pollIndexer}). */
export const POLL_INDEX = "polled";

/**
 * The index values of {@link POLL_INDEX}: the resources the rollout poller reads for. A resource
 * is polled while its deployment is settling after a successful write (creating, rolling out):
 * Reconciling and Synced both True, and its deployment id known; and while a create of its own
 * keeps its intent (its answer lost: the create's answer clears it, else a read that lists the
 * deployment does). A failing one is not: its
 * retries follow the controller's backoff.
 */
export function pollIndexer(obj: Pick<StoredResource, "status">): string[] {
  const status = obj.status;
  if (!status?.deploymentId) return [];
  if (status.createRequestedAt) return [POLL_INDEX];
  return isReconciling(status) && isTrue(status, CONDITION.Synced) ? [POLL_INDEX] : [];
}
