/**
 * Failure evidence: "why did my build fail" answered where users look. When the latest revision
 * failed (`CREATE_FAILED`, `BUILD_FAILED`, `DEPLOY_FAILED`) or has not gone live within
 * `spec.rolloutTimeout`, the reconcile reads the tail of its build or deploy log once, and shows
 * it, redacted of every secret value the resource sends, in a Warning event (as much as an
 * Event's note holds) and a short excerpt in the `Stalled` condition. `status.failedRevisionLog`
 * remembers which revision's log was read, and why, so that neither a later poll nor a restart
 * reads or reports it again. A read that failed for a reason that may pass (the network, a
 * timeout, a 5xx, a rate limit) is tried again on a later reconcile, `LOG_RETRY_MS` apart and
 * `MAX_LOG_READS` reads in all, as the record's `failedReads` counts.
 *
 * Pure: whether a revision's log is due to be read, or read again ({@link evidenceDue}), the
 * Warning's headline, how a tail is shown (its lines redacted, cut, fitted to an Event's note,
 * its excerpt), and the `Stalled` condition of a failed revision or a rollout past its timeout.
 * `evidence.ts` sequences the read (`RevisionLogReader`'s, revision-log-reader.ts) and the one
 * Warning; none of this runs for a rollout that neither failed nor timed out.
 */

import { cutToBytes as cutBytes, stripToLine } from "../api/printable.ts";
import { REDACT_BUDGET_MS, RedactionBudget, RedactionBudgetError } from "../api/redact/budget.ts";
import { partsCoverage } from "../api/redact/parts.ts";
import { applyCoverage, redactAndTruncate } from "../api/redact.ts";
import { entryTimeMs, type LogEntry } from "../api/revision-logs.ts";
import type { DeploymentResourceStatus } from "../crd/schema.ts";
import { type ConditionValues, REASON, stuck } from "./reasons.ts";
import type { Deployment } from "./service-types.ts";

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

/** `status.failedRevisionLog`: whose log was read, why, and what it showed. */
export type FailedRevisionLog = NonNullable<DeploymentResourceStatus["failedRevisionLog"]>;

/** Why a revision's log is read. */
export type EvidenceReason = typeof REASON.RevisionFailed | typeof REASON.RolloutTimeout;

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
function readAgainDue(recorded: FailedRevisionLog, now: Date): boolean {
  if (!readAgainPending(recorded)) return false;
  const last = Date.parse(recorded.failedReadAt ?? "");
  return Number.isNaN(last) || now.getTime() - last >= LOG_RETRY_MS;
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
 * undefined when that took more than `budget` (milliseconds of the thread's CPU time, or the
 * caller's own {@link RedactionBudget}): the tail is then not shown at all.
 *
 * Order, so that no form of a value shows: the messages are searched as they were written, joined
 * as one text with and without line breaks between them (a value printed over several entries is
 * found, split at its line breaks or mid-value, and one whose newline a build dropped), before
 * anything is folded or cut; each entry's part is then taken out of that text, its escape sequences, controls and line breaks taken out ({@link stripToLine}), its whitespace
 * folded, the folded messages searched as parts again (a value split over two entries with a
 * line ending, a color change or a space at the split is whole across them again), and the line
 * searched once more (a value a color change or a line break interrupted is whole again now)
 * before it is cut to {@link LINE_CHARS}. Bounds: {@link TAIL_LINES} entries of
 * at most {@link MESSAGE_SEARCH_CHARS} characters searched, {@link MESSAGE_CHARS} of each shown.
 */
export function formatTail(
  entries: readonly LogEntry[],
  secretValues: readonly string[],
  budget: number | RedactionBudget = TAIL_REDACTION_MS,
): string[] | undefined {
  const tail = entries.slice(-TAIL_LINES);
  const parts = tail.map((entry) => entry.message.slice(0, MESSAGE_SEARCH_CHARS));
  const joined = parts.join("\n");
  const spent = budget instanceof RedactionBudget ? budget : new RedactionBudget(budget);
  try {
    const covered = partsCoverage(parts, "\n", secretValues, spent);
    let at = 0;
    const folded = tail.map((entry, i) => {
      const part = parts[i] ?? "";
      const shown = Math.min(part.length, MESSAGE_CHARS);
      const cut = entry.message.length > shown ? "…" : "";
      const message = applyCoverage(joined, covered, at, at + shown) + cut;
      at += part.length + 1;
      return foldLines(message);
    });
    // Folded, the messages' lines are searched as parts once more: a value split over two
    // entries, or two lines of one entry, by what folding takes out at the split (a line break,
    // a color reset, a space, a zero-width character) has its two halves side by side again, one
    // at each line's edge.
    const foldedJoined = folded.map((lines) => lines.join("\n")).join("\n");
    const coveredFolded = partsCoverage(folded.flat(), "\n", secretValues, spent);
    at = 0;
    return tail.map((entry, i) => {
      const length = folded[i]?.join("\n").length ?? 0;
      // The entry's lines, shown on one line as folding shows them.
      const message = applyCoverage(foldedJoined, coveredFolded, at, at + length).replace(/\n/g, " ");
      at += length + 1;
      const field = (text: string | undefined) =>
        text === undefined ? undefined : stripToLine(text.slice(0, FIELD_CHARS)).trim();
      const text = [field(entry.time), field(entry.level), message]
        .filter((part) => part !== undefined && part !== "")
        .join(" ");
      return redactAndTruncate(text, secretValues, LINE_CHARS, undefined, spent);
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

/** Line breaks: CR LF, LF, CR, VT, FF, NEL, LS, PS. */
const LINE_BREAK = /\r\n|[\n\r\v\f\x85\u2028\u2029]/;

/** The lines of `text`, each folded, the empty ones left out; one empty line when none is left. */
function foldLines(text: string): string[] {
  const lines = text
    .split(LINE_BREAK)
    .map(fold)
    .filter((line) => line !== "");
  return lines.length === 0 ? [""] : lines;
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

/** The sentence a `Stalled` message ends with for the log read of `revisionId` for `reason`. */
export function excerptSentence(
  log: FailedRevisionLog | undefined,
  revisionId: string,
  reason: string,
): string {
  if (!log?.excerpt || log.revisionId !== revisionId || log.reason !== reason) return "";
  return ` Last ${log.type ?? "build"} log lines: ${log.excerpt}`;
}

/** Stalled: the latest revision failed, it will never go live; its log's excerpt once read. */
export function revisionFailedStall(
  revision: { id: string; status: string },
  active: string | null | undefined,
  log: FailedRevisionLog | undefined,
): ConditionValues {
  return stuck(
    REASON.RevisionFailed,
    `revision ${revision.id} ${revision.status}: it will not go live; ${active ? `revision ${active} stays active` : "no revision is active"}. Change the spec (a new revision) or set dms.dev/reconcile-requested-at to look again.${excerptSentence(log, revision.id, REASON.RevisionFailed)}`,
  );
}

/**
 * Stalled: the rollout of revision `latest` did not end within `spec.rolloutTimeout`
 * (`timedOutAfter`). The message says what is stuck (`part`, `stuckPart` in live-revision.ts).
 */
export function rolloutTimeoutStall(
  observed: Pick<Deployment, "status" | "active_revision_id">,
  latest: string,
  revisionStatus: string | undefined,
  part: "revision" | "deployment" | "both",
  timedOutAfter: string,
  log: FailedRevisionLog | undefined,
): ConditionValues {
  const { status, active_revision_id: active } = observed;
  const within = `spec.rolloutTimeout ${timedOutAfter}`;
  const message =
    part === "deployment"
      ? `revision ${latest} is live, but the service has reported the deployment ${status} for longer than ${within}: the deployment is stuck, not the revision. Nothing is sent again: this ends when the service reports it READY.`
      : `revision ${latest}${revisionStatus === undefined ? "" : ` (${revisionStatus})`} has not gone live within ${within}${part === "both" ? ` and the service still reports the deployment ${status}` : ""}; ${active ?? "no revision"} is active. Nothing is sent again: this ends when the revision goes live or fails.`;
  return stuck(REASON.RolloutTimeout, `${message}${excerptSentence(log, latest, REASON.RolloutTimeout)}`);
}
