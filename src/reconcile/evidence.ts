/**
 * The reads of the service a status may need besides what the reconcile decided, when where the
 * rollout stands (`live-revision.ts`, pure) cannot be told without them: a look at the latest
 * revision's status (revision tracking, `service/revisions.ts`), and, for a revision that failed
 * or is slow, the tail of its log (when it is read is decided there; how it is shown,
 * `failure-evidence.ts`; the read, `service/revision-log-reader.ts`). `evidenceAt` (conclude.ts)
 * says whether a reconcile needs them: an edit whose new revision is first seen now does not. One
 * reader, which owns the revision's one Warning (`RevisionFailed` or `RolloutTimeout`) and its
 * note: with the log's tail when it was read now, else the tracker's, the first time the revision
 * is seen failed.
 */
import type { LogType } from "../api/revision-logs.ts";
import { formatTime } from "../crd/conventions.ts";
import type { Evidence, EvidenceRead } from "./conclude.ts";
import {
  evidenceHeadline,
  excerptOf,
  fitNote,
  formatTail,
  readAgainPending,
  TAIL_REDACTION_MS,
} from "./failure-evidence.ts";
import { readSecretsOf } from "./inputs.ts";
import { type RevisionObservation, type RolloutEvidence, rolloutState, stuckPart } from "./live-revision.ts";
import type { EventNote } from "./ports.ts";
import type { Connected, ReconcileDeps } from "./run.ts";
import type { RevisionLook } from "./service/revisions.ts";
import type { Deployment } from "./service-types.ts";

/** Why a revision's log tail is not shown (`note`), and whether a later read may show it. */
interface LogGap {
  note: string;
  passing: boolean;
}

/** The latest revision's status and the rollout's evidence of the deployment `read` names. */
export async function readEvidence(
  deps: ReconcileDeps,
  read: EvidenceRead,
  signal: AbortSignal,
): Promise<Evidence> {
  const { run, deployment, requested } = read;
  // Revision tracking: the latest revision's status, and a Warning the first time it failed.
  const look: RevisionLook =
    read.look ?? (await run.session.revisions.look(deployment, run.obj.status, requested, signal));
  const rollout = await rolloutEvidence(deps, run, deployment, look.revision, signal);
  // The evidence's Warning, when it read a log, is the revision's one event (with its tail).
  return { revision: look.revision, rollout: rollout.status, event: rollout.event ?? look.event };
}

/**
 * The rollout's timing and failure evidence for the status (`rolloutState`), and the Warning to
 * record when the latest revision's log was read now: once per revision and reason (failed, or
 * timed out), as `status.failedRevisionLog` remembers (see failure-evidence.ts), and again, a
 * minute apart and three reads at most, when a read failed for a reason that may pass.
 */
async function rolloutEvidence(
  deps: ReconcileDeps,
  run: Connected,
  deployment: Deployment,
  revision: RevisionObservation | undefined,
  signal: AbortSignal,
): Promise<{ status: RolloutEvidence; event?: EventNote }> {
  const { status, observed, revisionStatus, due } = rolloutState(
    run.obj.status,
    run.obj.spec,
    deployment,
    revision,
    run.now,
  );
  const latest = observed.latest_revision_id;
  if (due === undefined || !latest) return { status };
  const recorded = run.obj.status?.failedRevisionLog;
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
