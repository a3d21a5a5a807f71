/**
 * What a status needs from the service besides what the reconcile decided: the latest revision's
 * status (revision tracking, `service/revisions.ts`) and the rollout's evidence: its timing (when
 * it started, whether it ran past `spec.rolloutTimeout`, decided here, pure) and, for a revision
 * that failed or is slow, the tail of its log (when it is read is decided here; how it is shown,
 * `failure-evidence.ts`; the read, `service/revision-log-reader.ts`). One reader, which owns the revision's one Warning
 * (`RevisionFailed` or `RolloutTimeout`) and its note: with the log's tail when it was read now,
 * else the tracker's, the first time the revision is seen failed.
 */
import type { LogType } from "../api/revision-logs.ts";
import { formatTime } from "../crd/kstatus.ts";
import {
  DEFAULT_ROLLOUT_TIMEOUT,
  type DeploymentResourceStatus,
  type DeploymentSpec,
} from "../crd/schema.ts";
import { isZeroDuration, parseDuration } from "../duration.ts";
import {
  type EvidenceReason,
  evidenceHeadline,
  excerptOf,
  type FailedRevisionLog,
  fitNote,
  formatTail,
  TAIL_REDACTION_MS,
} from "./failure-evidence.ts";
import { readSecretsOf, reconcileRequestedAt } from "./inputs.ts";
import {
  isBeingDeleted,
  isFailedRevision,
  lookedWithoutCall,
  type RevisionObservation,
  stuckPart,
} from "./live-revision.ts";
import type { EventNote } from "./ports.ts";
import { REASON } from "./reasons.ts";
import { targetStatusView, targetView } from "./revision-history.ts";
import type { Connected, Decided, ReconcileDeps, Run } from "./run.ts";
import type { RevisionLook } from "./service/revisions.ts";
import { type Deployment, isUuid } from "./service-types.ts";

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
  const look: RevisionLook =
    lookedWithoutCall(observed.deployment, previous, requested) ??
    (await run.session.revisions.look(observed.deployment, previous, requested, signal));
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

/**
 * What the failure evidence gives the status: `rolloutStartedAt` and `failedRevisionLog` to
 * write (each absent: cleared), and the `spec.rolloutTimeout` text when the rollout has run past it.
 */
export interface RolloutEvidence {
  startedAt?: string | undefined;
  log?: DeploymentResourceStatus["failedRevisionLog"] | undefined;
  timedOutAfter?: string | undefined;
}

/**
 * Reads of one revision's log, for one reason, when they fail for a reason that may pass: the
 * first and two more. A tail is worth a few calls; a service that stays down is not worth more.
 */
export const MAX_LOG_READS = 3;

/**
 * Least time between two reads of one revision's log: a reconcile in between (a poll, a resync,
 * an edit) does not read it again, so the reads are spread over minutes, not one burst.
 */
export const LOG_RETRY_MS = 60_000;

/**
 * Which log tells why a revision with `status` failed or is slow: the deploy log once it reached
 * the deploy (`DEPLOY_FAILED`, `AWAITING_DEPLOY`, `DEPLOYING`), else the build log. A revision
 * that failed to be created (`CREATE_FAILED`) gets the build log too: resolving and fetching its
 * source is the first step of its build, the only log such a revision can have (an empty answer
 * just shows no tail).
 */
export function logTypeFor(status: string | undefined): LogType {
  return status?.includes("DEPLOY") ? "deploy" : "build";
}

/** {@link DEFAULT_ROLLOUT_TIMEOUT} in ms, read once rather than at every reconcile that sets none. */
const DEFAULT_ROLLOUT_TIMEOUT_MS = parseDuration(DEFAULT_ROLLOUT_TIMEOUT) as number;

/**
 * `spec.rolloutTimeout` in ms: the default (30m) when unset, undefined (disabled) when it is a
 * duration of no length at all, however written (`0`, `0s`, `0m0s`, `0.0h`: the CRD's pattern
 * admits them all, and each says "no timeout" as plainly as `0`). A value the CRD would have
 * refused is read as the default: the check is the API server's.
 */
export function rolloutTimeoutMs(spec: Pick<DeploymentSpec, "rolloutTimeout">): number | undefined {
  if (spec.rolloutTimeout === undefined) return DEFAULT_ROLLOUT_TIMEOUT_MS;
  const text = spec.rolloutTimeout.trim();
  if (isZeroDuration(text)) return undefined;
  return parseDuration(text) ?? DEFAULT_ROLLOUT_TIMEOUT_MS;
}

/**
 * `status.rolloutStartedAt` after observing `observed` at `now`: set to `now` when a new latest
 * revision is first seen not active, kept while the rollout has not finished, cleared once it
 * has (or there is no revision). A rollout finishes when its revision is active AND the service
 * reports the deployment READY: a first rollout whose revision went live while the deployment is
 * still `AWAITING_DATABASE` (or any status but READY) is still running. A deployment being
 * deleted has no rollout.
 */
export function rolloutStart(
  previous: DeploymentResourceStatus,
  observed: Deployment,
  now: Date,
): string | undefined {
  const latest = observed.latest_revision_id;
  if (!latest || isBeingDeleted(observed.status)) return undefined;
  const carried =
    previous.latestRevisionId === latest && previous.rolloutStartedAt ? previous.rolloutStartedAt : undefined;
  if (latest !== observed.active_revision_id) return carried ?? formatTime(now);
  // The revision is live: the rollout it started runs on while the deployment is not READY.
  return observed.status === "READY" ? undefined : carried;
}

/**
 * Whether the rollout of `observed`'s latest revision has run past its timeout at `now`: it
 * started `timeoutMs` or more ago and has not finished, whatever status the service reports
 * for the deployment (`AWAITING_DATABASE` included): its revision is not live (and not known to
 * have failed: RevisionFailed says that), or it is and the deployment is not READY. Which of
 * the two is stuck: {@link stuckPart}.
 */
export function rolloutTimedOut(
  observed: Deployment,
  revisionStatus: string | undefined,
  startedAt: string | undefined,
  timeoutMs: number | undefined,
  now: Date,
): boolean {
  if (stuckPart(observed, revisionStatus) === undefined) return false;
  if (startedAt === undefined || timeoutMs === undefined) return false;
  const started = Date.parse(startedAt);
  return !Number.isNaN(started) && now.getTime() - started >= timeoutMs;
}

/**
 * Why the log of `revisionId` must be read at `now`, if it must: its status failed, or its
 * rollout timed out, and `recorded` (the status's `failedRevisionLog`) does not already hold it
 * for that revision and reason, or holds a read that failed and is due again
 * ({@link readAgainDue}). Once per revision and reason otherwise: never on every poll.
 */
export function evidenceDue(
  recorded: FailedRevisionLog | undefined,
  revisionId: string,
  reason: EvidenceReason | undefined,
  now: Date,
): EvidenceReason | undefined {
  if (reason === undefined) return undefined;
  if (recorded?.revisionId !== revisionId || recorded.reason !== reason) return reason;
  return readAgainDue(recorded, now) ? reason : undefined;
}

/**
 * Whether `recorded` is a read that failed for a reason that may pass and may be tried again:
 * fewer than {@link MAX_LOG_READS} failed (whatever comes next, it will be read again).
 */
export function readAgainPending(recorded: FailedRevisionLog | undefined): boolean {
  const failed = recorded?.failedReads;
  return failed !== undefined && failed < MAX_LOG_READS;
}

/** Whether {@link readAgainPending}, and {@link LOG_RETRY_MS} have passed since the last read. */
export function readAgainDue(recorded: FailedRevisionLog, now: Date): boolean {
  if (!readAgainPending(recorded)) return false;
  const last = Date.parse(recorded.failedReadAt ?? "");
  return Number.isNaN(last) || now.getTime() - last >= LOG_RETRY_MS;
}
