/**
 * What a status needs from the service besides what the reconcile decided: the latest revision's
 * status (revision tracking, `revisions.ts`) and the rollout's failure evidence (its timing, and
 * the log tail of a revision that failed or is slow: `failure-evidence.ts` decides and formats,
 * `revision-log-reader.ts` reads). One reader, which owns the revision's one Warning
 * (`RevisionFailed` or `RolloutTimeout`) and its note: with the log's tail when it was read now,
 * else the tracker's, the first time the revision is seen failed.
 */
import type { LogType } from "../api/revision-logs.ts";
import { formatTime } from "../conditions/kstatus.ts";
import { DEFAULT_ROLLOUT_TIMEOUT } from "../crd/schema.ts";
import {
  evidenceDue,
  evidenceHeadline,
  excerptOf,
  fitNote,
  formatTail,
  logTypeFor,
  readAgainPending,
  rolloutStart,
  rolloutTimedOut,
  rolloutTimeoutMs,
  TAIL_REDACTION_MS,
} from "./failure-evidence.ts";
import { readSecretsOf, reconcileRequestedAt } from "./inputs.ts";
import type { EventNote } from "./ports.ts";
import { targetStatusView, targetView } from "./revision-history.ts";
import type { Connected, Decided, ReconcileDeps, Run } from "./run.ts";
import { type Deployment, isUuid } from "./service-types.ts";
import {
  isBeingDeleted,
  isFailedRevision,
  REASON,
  type RevisionObservation,
  type RolloutEvidence,
  stuckPart,
} from "./status.ts";

/** What the service said of the observed deployment's latest revision and its rollout. */
export interface Evidence {
  revision?: RevisionObservation | undefined;
  rollout?: RolloutEvidence | undefined;
  /** The revision's one event (with its log tail when one was read). */
  event?: EventNote | undefined;
}

/** Why a revision's log tail is not shown (`note`), and whether a later read may show it. */
interface LogGap {
  note: string;
  passing: boolean;
}

/**
 * The latest revision's status and the rollout's evidence of the deployment `decided` observed
 * (none while it is being deleted, nor without a connection): the service calls a status write
 * needs.
 */
export async function readEvidence(
  deps: ReconcileDeps,
  run: Run,
  { outcome, observed }: Decided,
  signal: AbortSignal,
): Promise<Evidence> {
  if (observed?.kind !== "found" || !isConnected(run) || outcome.kind === "deleting") return {};
  const previous = run.obj.status;
  // Revision tracking: the latest revision's status, and a Warning the first time it failed.
  const requested = (reconcileRequestedAt(run.obj) ?? null) !== (previous?.lastHandledReconcileAt ?? null);
  const look = await run.session.revisions.look(observed.deployment, previous, requested, signal);
  const rollout = await rolloutEvidence(deps, run, observed.deployment, look.revision, signal);
  // The evidence's Warning, when it read a log, is the revision's one event (with its tail).
  return { revision: look.revision, rollout: rollout.status, event: rollout.event ?? look.event };
}

/**
 * The rollout's timing and failure evidence for the status, and the Warning to record when the
 * latest revision's log was read now: once per revision and reason (failed, or timed out), as
 * `status.failedRevisionLog` remembers (see failure-evidence.ts), and again, a minute apart and
 * three reads at most, when a read failed for a reason that may pass.
 */
async function rolloutEvidence(
  deps: ReconcileDeps,
  run: Connected,
  observed: Deployment,
  revision: RevisionObservation | undefined,
  signal: AbortSignal,
): Promise<{ status: RolloutEvidence; event?: EventNote }> {
  const previous = run.obj.status ?? {};
  // A redeploy that switched the active revision back is what the rollout waits for.
  observed = targetView(observed, previous.revisionHistory);
  const latest = observed.latest_revision_id ?? undefined;
  // The start is carried by the revision waited for: the same view of the previous status.
  const startedAt = rolloutStart(targetStatusView(previous), observed, run.now);
  const revisionStatus = latest !== undefined && revision?.id === latest ? revision.status : undefined;
  const timeoutMs = rolloutTimeoutMs(run.obj.spec);
  const timedOut = rolloutTimedOut(observed, revisionStatus, startedAt, timeoutMs, run.now);
  const status: RolloutEvidence = {
    startedAt,
    // Kept for the revision it was read for while that one is not live; a live one needs none.
    log:
      startedAt !== undefined && previous.failedRevisionLog?.revisionId === latest
        ? previous.failedRevisionLog
        : undefined,
    timedOutAfter: timedOut ? (run.obj.spec.rolloutTimeout ?? DEFAULT_ROLLOUT_TIMEOUT) : undefined,
  };
  const failed = isFailedRevision(revisionStatus) && !isBeingDeleted(observed.status);
  const reason = failed ? REASON.RevisionFailed : timedOut ? REASON.RolloutTimeout : undefined;
  const recorded = previous.failedRevisionLog;
  const due = latest === undefined ? undefined : evidenceDue(recorded, latest, reason, run.now);
  // A revision id that is no uuid cannot be asked about (nor recorded within the status's bounds).
  if (due === undefined || latest === undefined || !isUuid(latest)) return { status };
  const type = logTypeFor(revisionStatus);
  // Reads of this revision's log for this reason that failed before, for a reason that may pass.
  const failedBefore =
    recorded?.revisionId === latest && recorded.reason === due ? (recorded.failedReads ?? 0) : 0;
  const lines = await logTail(deps, run, observed.id, latest, type, signal);
  const failedReads = Array.isArray(lines) || !lines.passing ? undefined : failedBefore + 1;
  status.log = {
    revisionId: latest,
    reason: due,
    type,
    ...(!Array.isArray(lines) || lines.length === 0 ? {} : { excerpt: excerptOf(lines) }),
    ...(failedReads === undefined ? {} : { failedReads, failedReadAt: formatTime(run.now) }),
  };
  // The revision's Warning comes with the first read, and again only with news: the tail a
  // later read got, or that it will not be shown after all. A read that failed between says nothing.
  const again = readAgainPending(status.log);
  if (failedBefore > 0 && again) return { status };
  const part = stuckPart(observed, revisionStatus);
  const stuck = part === undefined ? undefined : { part, deploymentStatus: observed.status };
  const what = evidenceHeadline(due, latest, observed.id, revisionStatus, status.timedOutAfter, stuck);
  const tail = !Array.isArray(lines)
    ? again
      ? `; ${lines.note}; it is read again in a minute`
      : `; ${lines.note}${failedReads === undefined ? "" : `; ${failedReads} reads failed`}`
    : lines.length === 0
      ? `; its ${type} log is empty`
      : `; last ${type} log lines:`;
  const note = fitNote(`${what}${tail}`, Array.isArray(lines) ? lines : []);
  return { status, event: { type: "Warning", reason: due, action: "Rollout", note } };
}

/**
 * The last lines of a revision's `type` log, redacted of every secret value the resource sends
 * (its Secrets are read for that when this reconcile did not), or why there are none.
 */
async function logTail(
  deps: ReconcileDeps,
  run: Connected,
  deploymentId: string,
  revisionId: string,
  type: LogType,
  signal: AbortSignal,
): Promise<string[] | LogGap> {
  const read = await run.session.logs.tail(deploymentId, revisionId, type, signal);
  if (read.kind === "missing") return { note: "the service has no logs route", passing: false };
  if (read.kind === "failed")
    return { note: `its ${type} log is not shown: ${read.why}`, passing: read.passing };
  if (read.entries.length === 0) return [];
  if (run.seen.unread) {
    try {
      await readSecretsOf(deps, run, signal);
    } catch (error) {
      if (signal.aborted) throw error;
      run.seen.unread = true;
      return {
        note: `its ${type} log is not shown: the Secrets whose values must be hidden from it could not be read`,
        passing: true,
      };
    }
  }
  return (
    formatTail(read.entries, run.seen.secrets.values) ?? {
      note: `its ${type} log is not shown: it could not be searched for secret values within ${TAIL_REDACTION_MS} ms`,
      passing: false,
    }
  );
}

/** Whether `run`'s connection is usable. */
function isConnected(run: Run): run is Connected {
  return run.session !== undefined;
}
