/**
 * Failure evidence: "why did my build fail" answered where users look. When the latest revision
 * failed (`CREATE_FAILED`, `BUILD_FAILED`, `DEPLOY_FAILED`) or has not gone live within
 * `spec.rolloutTimeout`, the reconcile reads the tail of its build or deploy log once, and shows
 * it, redacted of every secret value the resource sends, in a Warning event (as much as an
 * Event's note holds) and a short excerpt in the `Stalled` condition. `status.failedRevisionLog`
 * remembers which revision's log was read, and why, so that neither a later poll nor a restart
 * reads or reports it again. A read that failed for a reason that may pass (the network, a
 * timeout, a 5xx, a rate limit) is tried again on a later reconcile, {@link LOG_RETRY_MS} apart
 * and {@link MAX_LOG_READS} reads in all, as the record's `failedReads` counts.
 *
 * Pure: decisions and formatting. The reading is `RevisionLogReader`'s (revision-log-reader.ts),
 * the sequencing and the one Warning `evidence.ts`'s.
 */

import { cutToBytes as cutBytes } from "../api/cut-text.ts";
import { stripToLine } from "../api/printable.ts";
import {
  applyCoverage,
  partsCoverage,
  REDACT_BUDGET_MS,
  RedactionBudget,
  RedactionBudgetError,
  redactAndTruncate,
  UNSEARCHED,
} from "../api/redact.ts";
import { entryTimeMs, type LogEntry, type LogType } from "../api/revision-logs.ts";
import { formatTime } from "../conditions/kstatus.ts";
import {
  DEFAULT_ROLLOUT_TIMEOUT,
  type DeploymentResourceStatus,
  type DeploymentSpec,
} from "../crd/schema.ts";
import { isZeroDuration, parseDuration } from "../duration.ts";
import type { Deployment } from "./service-types.ts";
import { isBeingDeleted, type REASON, stuckPart } from "./status.ts";

/** Entries asked of the service: the tail a person needs to see why it failed. */
export const TAIL_LINES = 20;
/** Characters one log line shows at most (redacted first, then cut). */
export const LINE_CHARS = 240;
/**
 * Characters of a message a line is made from: more than a line shows, for the whitespace folded
 * and the escape sequences taken out of it. The rest of a longer message is never shown.
 */
export const MESSAGE_CHARS = 4096;
/**
 * Characters of a message searched for secret values: what a line is made from and as far again,
 * so that a value printed from within {@link MESSAGE_CHARS} is found whole when its printed form
 * is no longer than that (a value is also found by its lines).
 */
export const MESSAGE_SEARCH_CHARS = 2 * MESSAGE_CHARS;
/** Characters of an entry's time and level kept (an RFC 3339 time is 20 to 35). */
const FIELD_CHARS = 64;
/**
 * Wall-clock time the redaction of one tail may take; past it the tail is not shown. An ordinary
 * tail takes a few milliseconds: only crafted values and logs come near it, once per revision.
 */
export const TAIL_REDACTION_MS = REDACT_BUDGET_MS;
/** Lines of the excerpt in the `Stalled` condition's message. */
export const EXCERPT_LINES = 3;
/** Characters of that excerpt at most (its end is kept: the error is the last line). */
export const EXCERPT_CHARS = 300;
/**
 * Bytes of an Event's note: the API server refuses more (the recorder's `NOTE_LIMIT_BYTES`,
 * repeated here because this module must not import the Kubernetes side).
 */
export const EVENT_NOTE_BYTES = 1024;

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

/** `status.failedRevisionLog`: whose log was read, why, and what it showed. */
export type FailedRevisionLog = NonNullable<DeploymentResourceStatus["failedRevisionLog"]>;

/** Why a revision's log is read. */
export type EvidenceReason = typeof REASON.RevisionFailed | typeof REASON.RolloutTimeout;

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
 * The first sentence of the Warning a revision's evidence gives (`RevisionFailed` or
 * `RolloutTimeout`): which revision of which deployment, and what became of it. The one text of
 * both, whether the revision's log was read with it or not.
 */
export function evidenceHeadline(
  reason: EvidenceReason,
  revisionId: string,
  deploymentId: string,
  revisionStatus: string | undefined,
  timedOutAfter?: string,
  stuck?: { part: "revision" | "deployment" | "both"; deploymentStatus: string },
): string {
  if (reason === "RevisionFailed")
    return `revision ${revisionId} of the service's deployment ${deploymentId} ${revisionStatus}: it will not go live`;
  if (stuck?.part === "deployment")
    return `revision ${revisionId} is live, but the service has reported its deployment ${deploymentId} ${stuck.deploymentStatus} for longer than spec.rolloutTimeout ${timedOutAfter}: the deployment is stuck, not the revision`;
  const also =
    stuck?.part === "both" ? ` and the service still reports the deployment ${stuck.deploymentStatus}` : "";
  return `revision ${revisionId} of the service's deployment ${deploymentId} has not gone live within spec.rolloutTimeout ${timedOutAfter}${revisionStatus ? ` (${revisionStatus})` : ""}${also}`;
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

/**
 * The last {@link TAIL_LINES} of an answer asked for newest first, oldest first: sorted by time
 * when every entry has one (a service that ignored `order` is read right), else reversed.
 */
export function tailOf(entries: readonly LogEntry[]): LogEntry[] {
  const times = entries.map(entryTimeMs);
  if (times.every((t) => t !== undefined)) {
    const sorted = entries.map((entry, i) => ({ entry, at: times[i] ?? 0 }));
    sorted.sort((a, b) => a.at - b.at);
    return sorted.slice(-TAIL_LINES).map((s) => s.entry);
  }
  return entries.slice(0, TAIL_LINES).reverse();
}

/**
 * The lines of a tail (oldest first) as `time level message`, redacted of `secretValues`, or
 * undefined when that took more than `budgetMs` (the tail is then not shown at all).
 *
 * Order, so that no form of a value shows: the messages are searched as they were written, joined
 * as one text with and without line breaks between them (a value printed over several entries is
 * found, split at its line breaks or mid-value, and one whose newline a build dropped), before
 * anything is folded or cut; each entry's part is then taken out of that text, its escape sequences, controls and line breaks taken out ({@link stripToLine}), its whitespace
 * folded, and the line searched once more (a value a color change or a line break interrupted is
 * whole again now) before it is cut to {@link LINE_CHARS}. Bounds: {@link TAIL_LINES} entries of
 * at most {@link MESSAGE_SEARCH_CHARS} characters searched, {@link MESSAGE_CHARS} of each shown.
 */
export function formatTail(
  entries: readonly LogEntry[],
  secretValues: readonly string[],
  budgetMs = TAIL_REDACTION_MS,
): string[] | undefined {
  const tail = entries.slice(-TAIL_LINES);
  const parts = tail.map((entry) => entry.message.slice(0, MESSAGE_SEARCH_CHARS));
  const joined = parts.join("\n");
  const budget = new RedactionBudget(budgetMs);
  try {
    const covered = partsCoverage(parts, "\n", secretValues, budget);
    let at = 0;
    return tail.map((entry, i) => {
      const part = parts[i] ?? "";
      const shown = Math.min(part.length, MESSAGE_CHARS);
      const cut = entry.message.length > shown ? "…" : "";
      const message = applyCoverage(joined, covered, at, at + shown) + cut;
      at += part.length + 1;
      const field = (text: string | undefined) =>
        text === undefined ? undefined : stripToLine(text.slice(0, FIELD_CHARS)).trim();
      const text = [field(entry.time), field(entry.level), fold(message)]
        .filter((part) => part !== undefined && part !== "")
        .join(" ");
      return redactAndTruncate(text, secretValues, LINE_CHARS, undefined, budget);
    });
  } catch (error) {
    if (error instanceof RedactionBudgetError) return undefined;
    throw error;
  }
}

/** `text` on one line, its escape sequences and controls out, each run of whitespace one space. */
function fold(text: string): string {
  return stripToLine(text).replace(/\s+/g, " ").trim();
}

/**
 * One entry as `time level message` on one line, redacted of `secretValues` and then cut to
 * {@link LINE_CHARS} (see {@link formatTail}, of which this is the tail of one entry).
 */
export function formatLine(entry: LogEntry, secretValues: readonly string[]): string {
  return formatTail([entry], secretValues)?.[0] ?? UNSEARCHED;
}

/**
 * An Event note of `header` and as many of the last `lines` (already redacted) as fit in
 * {@link EVENT_NOTE_BYTES}, one per line, the oldest dropped first; the newest one is cut to fit
 * when even it alone does not.
 */
export function fitNote(header: string, lines: readonly string[], maxBytes = EVENT_NOTE_BYTES): string {
  const head = cutBytes(header, maxBytes);
  let used = Buffer.byteLength(head);
  const kept: string[] = [];
  for (let i = lines.length - 1; i >= 0; i--) {
    const line = lines[i] ?? "";
    const size = Buffer.byteLength(line) + 1;
    if (used + size > maxBytes) {
      if (kept.length === 0 && maxBytes - used > 8) kept.unshift(cutBytes(line, maxBytes - used - 1));
      break;
    }
    kept.unshift(line);
    used += size;
  }
  return kept.length === 0 ? head : `${head}\n${kept.join("\n")}`;
}

/**
 * The excerpt for the `Stalled` message: the last {@link EXCERPT_LINES} lines (already redacted)
 * joined with ` | `, cut from the start to {@link EXCERPT_CHARS} (the error is at the end).
 */
export function excerptOf(lines: readonly string[]): string {
  const text = lines.slice(-EXCERPT_LINES).join(" | ");
  if (text.length <= EXCERPT_CHARS) return text;
  let start = text.length - (EXCERPT_CHARS - 1);
  const code = text.charCodeAt(start);
  if (code >= 0xdc00 && code <= 0xdfff) start += 1;
  return `…${text.slice(start)}`;
}
