// Failure evidence at unit speed: how log entries are read (tolerantly), how a tail is ordered,
// redacted, cut and fitted into an Event's 1 KiB and the Stalled message, when a log is read
// (once per revision and reason), and when a rollout has timed out.
import { describe, expect, it } from "vitest";
import {
  entryTimeMs,
  type LogEntry,
  MAX_LOG_LIMIT,
  readLogEntry,
  readLogPage,
} from "../../src/api/revision-logs.ts";
import type { Deployment } from "../../src/api/wire.ts";
import { defaultLogType, formatEntry } from "../../src/commands/logs.ts";
import type { DeploymentResourceStatus } from "../../src/crd/schema.ts";
import { ROLLOUT_TIMEOUT_PATTERN } from "../../src/crd/spec-policies.ts";
import { parseDuration } from "../../src/duration.ts";
import { NOTE_LIMIT_BYTES } from "../../src/kube/events.ts";
import { evidenceAt } from "../../src/reconcile/conclude.ts";
import { logTypeFor } from "../../src/reconcile/evidence.ts";
import {
  EVENT_NOTE_BYTES,
  EXCERPT_CHARS,
  evidenceDue,
  excerptOf,
  type FailedRevisionLog,
  fitNote,
  formatTail,
  LINE_CHARS,
  MAX_LOG_READS,
  readAgainPending,
  TAIL_LINES,
  tailOf,
} from "../../src/reconcile/failure-evidence.ts";
import { rolloutStart, rolloutTimedOut, rolloutTimeoutMs } from "../../src/reconcile/live-revision.ts";
import type { StoredResource } from "../../src/reconcile/ports.ts";
import type { Decided, Run } from "../../src/reconcile/run.ts";
import { statusFrom } from "../../src/reconcile/status.ts";
import { ACTIVE, LATEST, rolloutDeployment } from "../support/failed-rollout.ts";

/** One entry as the tail of one entry's log shows it. */
const formatLine = (entry: LogEntry, secrets: readonly string[]) => formatTail([entry], secrets)?.[0] ?? "";

const T0 = new Date("2030-01-01T00:00:00Z");
const deployment = rolloutDeployment;

describe("reading log entries tolerantly", () => {
  it.each<[string, unknown, LogEntry | undefined]>([
    [
      "message, timestamp, level",
      { message: "m", timestamp: "2030-01-01T00:00:00Z", level: "INFO" },
      { message: "m", time: "2030-01-01T00:00:00Z", level: "INFO" },
    ],
    ["msg and time", { msg: "m", time: "t" }, { message: "m", time: "t" }],
    ["text", { text: "m" }, { message: "m" }],
    [
      "log, severity, epoch seconds",
      { log: "m", severity: "ERROR", timestamp: 1_893_456_000 },
      { message: "m", level: "ERROR", time: "1893456000" },
    ],
    ["message wins over msg", { message: "a", msg: "b" }, { message: "a" }],
    ["a plain string", "just a line", { message: "just a line" }],
    ["an empty message is still a line", { message: "" }, { message: "" }],
    ["no message", { timestamp: "t", level: "INFO" }, undefined],
    ["a message that is not a string", { message: 42 }, undefined],
    ["null", null, undefined],
    ["a number", 7, undefined],
    ["an array", ["m"], undefined],
    ["odd time and level are left out", { message: "m", time: { at: 1 }, level: null }, { message: "m" }],
  ])("%s", (_name, item, expected) => {
    expect(readLogEntry(item)).toEqual(expected);
  });

  it("reads a page, skips odd items, and takes the cursor as a string", () => {
    expect(readLogPage({ logs: [{ message: "a" }, 3, { msg: "b" }], next_offset: "2" })).toEqual({
      entries: [{ message: "a" }, { message: "b" }],
      nextOffset: "2",
      skipped: 1,
    });
    expect(readLogPage({ logs: [], next_offset: 40 })?.nextOffset).toBe("40");
    expect(readLogPage({ logs: [], next_offset: "" })?.nextOffset).toBeNull();
    expect(readLogPage({ logs: [] })?.nextOffset).toBeNull();
    expect(readLogPage([{ message: "bare" }])?.entries).toEqual([{ message: "bare" }]);
    expect(readLogPage({ entries: [] })).toBeUndefined();
    expect(readLogPage("logs")).toBeUndefined();
  });

  it("reads at most MAX_LOG_LIMIT items of an answer that ignored its limit: its two ends, where the newest are", () => {
    // ~300,000 entries fit the response bound; a tail of 20 needs none of the middle.
    const n = 300_000;
    const answer = Array.from({ length: n }, (_, i) => ({
      message: `line ${i}`,
      time: String(1_893_456_000 + i),
    }));
    const page = readLogPage({ logs: answer });
    expect(page?.entries).toHaveLength(MAX_LOG_LIMIT);
    expect(page?.skipped).toBe(n - MAX_LOG_LIMIT);
    // Oldest first (a service that ignored `order` too) or newest first: the tail is the newest.
    expect(tailOf(page?.entries ?? []).at(-1)?.message).toBe(`line ${n - 1}`);
    expect(tailOf(readLogPage({ logs: [...answer].reverse() })?.entries ?? []).at(-1)?.message).toBe(
      `line ${n - 1}`,
    );
  });

  it.each<[string | undefined, number | undefined]>([
    ["2030-01-01T00:00:00Z", T0.getTime()],
    ["1893456000", T0.getTime()],
    ["1893456000000", T0.getTime()],
    ["1893456000.5", T0.getTime() + 500],
    ["yesterday", undefined],
    [undefined, undefined],
  ])("the time %s", (time, ms) => {
    expect(entryTimeMs({ message: "m", ...(time === undefined ? {} : { time }) })).toBe(ms);
  });
});

describe("the tail", () => {
  const at = (s: number, message = `line ${s}`) => ({
    message,
    time: new Date(T0.getTime() + s * 1000).toISOString(),
  });

  it("is oldest first: sorted by time when every entry has one", () => {
    expect(tailOf([at(3), at(1), at(2)]).map((e) => e.message)).toEqual(["line 1", "line 2", "line 3"]);
  });

  it("is the answer reversed (asked newest first) when some entry has no time", () => {
    expect(tailOf([{ message: "c" }, at(9, "b"), { message: "a" }]).map((e) => e.message)).toEqual([
      "a",
      "b",
      "c",
    ]);
  });

  it(`keeps the last ${TAIL_LINES} lines of a longer answer`, () => {
    const many = Array.from({ length: 50 }, (_, i) => at(50 - i));
    const tail = tailOf(many);
    expect(tail).toHaveLength(TAIL_LINES);
    expect(tail.at(-1)?.message).toBe("line 50");
    expect(tail[0]?.message).toBe(`line ${51 - TAIL_LINES}`);
  });

  it("formats a line as time level message, on one line, redacted, then cut", () => {
    expect(formatLine({ message: "a\n  b\r\nc", time: "T", level: "ERROR" }, [])).toBe("T ERROR a b c");
    expect(formatLine({ message: "token=hunter2-secret!" }, ["hunter2-secret!"])).toBe("token=***");
    const long = formatLine({ message: "x".repeat(10_000) }, []);
    expect(long).toHaveLength(LINE_CHARS);
    expect(long.endsWith("…")).toBe(true);
  });

  it("never shows part of a secret value that straddles the cut", () => {
    const secret = "S3CRET-VALUE-0123456789";
    const message = `${"x".repeat(LINE_CHARS - 10)}${secret} and more`;
    const line = formatLine({ message }, [secret]);
    expect(line).not.toContain("S3CRET");
    expect(line.length).toBeLessThanOrEqual(LINE_CHARS);
  });

  it("the event note budget is the API server's", () => {
    expect(EVENT_NOTE_BYTES).toBe(NOTE_LIMIT_BYTES);
  });

  it.each([
    ["ASCII lines", "x".repeat(60)],
    ["multi-byte lines", "é€😀".repeat(15)],
  ])("fits a note of %s in 1 KiB, keeping the newest lines", (_name, text) => {
    const lines = Array.from({ length: 20 }, (_, i) => `${i} ${text}`);
    const note = fitNote("revision r BUILD_FAILED; last build log lines:", lines);
    expect(Buffer.byteLength(note)).toBeLessThanOrEqual(1024);
    const shown = note.split("\n").slice(1);
    expect(shown.at(-1)).toBe(lines.at(-1));
    expect(shown.length).toBeGreaterThan(1);
    expect(lines.slice(-shown.length)).toEqual(shown);
  });

  it("cuts the newest line when even it alone does not fit, and a header longer than a note", () => {
    const note = fitNote("header:", ["é".repeat(2000)]);
    expect(Buffer.byteLength(note)).toBeLessThanOrEqual(1024);
    expect(note.startsWith("header:\né")).toBe(true);
    expect(note.endsWith("…")).toBe(true);
    const long = fitNote("h".repeat(5000), ["line"]);
    expect(Buffer.byteLength(long)).toBeLessThanOrEqual(1024);
  });

  it("the excerpt is the last three lines, cut from the start", () => {
    expect(excerptOf(["a", "b", "c", "d"])).toBe("b | c | d");
    const cut = excerptOf(["a".repeat(200), "b".repeat(200), "error: the end"]);
    expect(cut).toHaveLength(EXCERPT_CHARS);
    expect(cut.startsWith("…")).toBe(true);
    expect(cut.endsWith("error: the end")).toBe(true);
  });
});

describe("when a log is read", () => {
  const recorded: FailedRevisionLog = { revisionId: LATEST, reason: "RevisionFailed", type: "build" };
  it.each<
    [
      string,
      FailedRevisionLog | undefined,
      string,
      "RevisionFailed" | "RolloutTimeout" | undefined,
      string | undefined,
    ]
  >([
    ["a failure first seen", undefined, LATEST, "RevisionFailed", "RevisionFailed"],
    ["the same failure again", recorded, LATEST, "RevisionFailed", undefined],
    [
      "a timed-out revision that then failed",
      { ...recorded, reason: "RolloutTimeout" },
      LATEST,
      "RevisionFailed",
      "RevisionFailed",
    ],
    ["another revision's failure", recorded, ACTIVE, "RevisionFailed", "RevisionFailed"],
    ["a timeout first seen", undefined, LATEST, "RolloutTimeout", "RolloutTimeout"],
    ["nothing wrong", undefined, LATEST, undefined, undefined],
    [
      "a read that failed a minute ago, for a reason that may pass",
      { ...recorded, failedReads: 1, failedReadAt: "2029-12-31T23:59:00Z" },
      LATEST,
      "RevisionFailed",
      "RevisionFailed",
    ],
    [
      "a read that failed less than a minute ago: not yet",
      { ...recorded, failedReads: 1, failedReadAt: "2029-12-31T23:59:30Z" },
      LATEST,
      "RevisionFailed",
      undefined,
    ],
    [
      "two failed reads: a third",
      { ...recorded, failedReads: 2, failedReadAt: "2029-12-31T23:50:00Z" },
      LATEST,
      "RevisionFailed",
      "RevisionFailed",
    ],
    [
      "three failed reads: given up",
      { ...recorded, failedReads: 3, failedReadAt: "2029-12-31T23:50:00Z" },
      LATEST,
      "RevisionFailed",
      undefined,
    ],
    [
      "a failed read whose time cannot be read: read again, still counted",
      { ...recorded, failedReads: 1, failedReadAt: "yesterday" },
      LATEST,
      "RevisionFailed",
      "RevisionFailed",
    ],
    [
      "a failed read of another reason does not count for this one",
      { ...recorded, reason: "RolloutTimeout", failedReads: 3, failedReadAt: "2029-12-31T23:59:59Z" },
      LATEST,
      "RevisionFailed",
      "RevisionFailed",
    ],
    [
      "a failed read when nothing is wrong any more",
      { ...recorded, failedReads: 1, failedReadAt: "2029-12-31T23:00:00Z" },
      LATEST,
      undefined,
      undefined,
    ],
  ])("%s", (_name, previous, revisionId, reason, expected) => {
    expect(evidenceDue(previous, revisionId, reason, T0)).toBe(expected);
  });

  it.each<[string, FailedRevisionLog | undefined, boolean]>([
    ["no record", undefined, false],
    ["a read done", recorded, false],
    ["one failed read", { ...recorded, failedReads: 1 }, true],
    ["two failed reads", { ...recorded, failedReads: 2 }, true],
    [`${MAX_LOG_READS} failed reads`, { ...recorded, failedReads: MAX_LOG_READS }, false],
    ["a count past the bound (a status written by hand)", { ...recorded, failedReads: 1e9 }, false],
  ])("%s: read again pending %s", (_name, record, pending) => {
    expect(readAgainPending(record)).toBe(pending);
  });

  it.each<[string | undefined, "build" | "deploy"]>([
    ["BUILD_FAILED", "build"],
    ["CREATE_FAILED", "build"],
    ["DEPLOY_FAILED", "deploy"],
    ["BUILDING", "build"],
    ["QUEUED", "build"],
    ["AWAITING_DEPLOY", "deploy"],
    ["DEPLOYING", "deploy"],
    [undefined, "build"],
  ])("a revision %s: the %s log", (status, type) => {
    expect(logTypeFor(status)).toBe(type);
  });

  it.each<[string | undefined, "build" | "deploy"]>([
    ["BUILD_FAILED", "build"],
    ["CREATE_FAILED", "build"],
    ["BUILDING", "build"],
    ["DEPLOYING", "deploy"],
    ["DEPLOYED", "deploy"],
    ["missing", "deploy"],
    [undefined, "deploy"],
  ])("logs shows by default for %s the %s log", (status, type) => {
    expect(defaultLogType(status)).toBe(type);
  });

  it("logs prints an entry as time level message", () => {
    expect(formatEntry({ time: "T", level: "INFO", message: "m" })).toBe("T INFO m");
    expect(formatEntry({ message: "m" })).toBe("m");
  });
});

describe("the rollout timeout", () => {
  it.each<[string | undefined, number | undefined]>([
    [undefined, 30 * 60_000],
    ["30m", 30 * 60_000],
    ["1h30m", 90 * 60_000],
    ["90s", 90_000],
    ["1.5h", 90 * 60_000],
    ["0", undefined],
    ["00", undefined],
    ["0s", undefined],
    ["0ms", undefined],
    ["0m0s", undefined],
    ["0.0h", undefined],
    ["0h0m0.000s", undefined],
    [" 0s ", undefined],
    ["1ms", 1],
    ["0m1s", 1_000],
    ["0.5s", 500],
    ["nonsense", 30 * 60_000],
    ["0x", 30 * 60_000],
  ])("spec.rolloutTimeout %s", (text, ms) => {
    expect(rolloutTimeoutMs(text === undefined ? {} : { rolloutTimeout: text })).toBe(ms);
  });

  it.each<[string, boolean, number | undefined]>([
    ["30m", true, 30 * 60_000],
    ["1h30m", true, 90 * 60_000],
    ["1.5h", true, 90 * 60_000],
    ["90s", true, 90_000],
    ["1500ms", true, 1_500],
    ["1ms", true, 1],
    ["0", true, undefined],
    ["0s", true, undefined],
    ["0m0s", true, undefined],
    ["0.0h", true, undefined],
    ["30", false, undefined],
    ["-1m", false, undefined],
    ["1d", false, undefined],
    ["30 m", false, undefined],
    ["", false, undefined],
  ])(
    "the CRD's pattern takes %s: %s, and the operator reads it as %s ms (undefined: disabled)",
    (text, valid, ms) => {
      expect(new RegExp(ROLLOUT_TIMEOUT_PATTERN).test(text)).toBe(valid);
      if (!valid) return;
      expect(rolloutTimeoutMs({ rolloutTimeout: text })).toBe(ms);
      if (ms !== undefined) expect(parseDuration(text)).toBe(ms);
    },
  );

  it("starts when a new revision is first seen, holds while it rolls out, ends once it is live", () => {
    const later = new Date(T0.getTime() + 60_000);
    expect(rolloutStart({}, deployment(), T0)).toBe("2030-01-01T00:00:00Z");
    const started = { latestRevisionId: LATEST, rolloutStartedAt: "2030-01-01T00:00:00Z" };
    expect(rolloutStart(started, deployment(), later)).toBe("2030-01-01T00:00:00Z");
    expect(rolloutStart({ ...started, latestRevisionId: ACTIVE }, deployment(), later)).toBe(
      "2030-01-01T00:01:00Z",
    );
    expect(rolloutStart(started, deployment({ active_revision_id: LATEST }), later)).toBeUndefined();
    expect(rolloutStart(started, deployment({ latest_revision_id: null }), later)).toBeUndefined();
  });

  it("a first rollout runs on while its revision is live and the deployment is not READY yet", () => {
    const later = new Date(T0.getTime() + 60_000);
    const started = { latestRevisionId: LATEST, rolloutStartedAt: "2030-01-01T00:00:00Z" };
    const first = { status: "AWAITING_DATABASE", active_revision_id: null };
    expect(rolloutStart({}, deployment(first), T0)).toBe("2030-01-01T00:00:00Z");
    const liveNotReady = deployment({ status: "AWAITING_DATABASE", active_revision_id: LATEST });
    expect(rolloutStart(started, liveNotReady, later)).toBe("2030-01-01T00:00:00Z");
    // Not a rollout when none was started: a settled deployment that turns UNUSED later.
    expect(
      rolloutStart({}, deployment({ status: "UNUSED", active_revision_id: LATEST }), later),
    ).toBeUndefined();
    expect(
      rolloutStart(started, deployment({ status: "READY", active_revision_id: LATEST }), later),
    ).toBeUndefined();
    expect(rolloutStart(started, deployment({ status: "AWAITING_DELETE" }), later)).toBeUndefined();
  });

  const start = "2030-01-01T00:00:00Z";
  const after = (ms: number) => new Date(T0.getTime() + ms);
  it.each<
    [string, Partial<Deployment>, string | undefined, string | undefined, number | undefined, number, boolean]
  >([
    ["building past the timeout", {}, "BUILDING", start, 60_000, 60_000, true],
    ["status unknown past the timeout", {}, undefined, start, 60_000, 61_000, true],
    ["within the timeout", {}, "BUILDING", start, 60_000, 59_999, false],
    ["failed: RevisionFailed says it", {}, "BUILD_FAILED", start, 60_000, 120_000, false],
    ["skipped: done", {}, "SKIPPED", start, 60_000, 120_000, false],
    ["live", { active_revision_id: LATEST }, "DEPLOYED", start, 60_000, 120_000, false],
    // A first rollout is covered whatever the deployment's status: the revision, the deployment or both stuck.
    [
      "a revision building past the timeout while the database is still provisioned",
      { status: "AWAITING_DATABASE", active_revision_id: null },
      "BUILDING",
      start,
      60_000,
      120_000,
      true,
    ],
    [
      "a live revision while the deployment stays AWAITING_DATABASE past the timeout",
      { status: "AWAITING_DATABASE", active_revision_id: LATEST },
      "DEPLOYED",
      start,
      60_000,
      60_000,
      true,
    ],
    ["any status but READY", { status: "UNUSED" }, "QUEUED", start, 60_000, 60_000, true],
    [
      "AWAITING_DATABASE within the timeout",
      { status: "AWAITING_DATABASE" },
      "QUEUED",
      start,
      60_000,
      59_999,
      false,
    ],
    ["being deleted: no rollout", { status: "AWAITING_DELETE" }, "BUILDING", start, 60_000, 120_000, false],
    [
      "a failed revision while AWAITING_DATABASE: RevisionFailed says it",
      { status: "AWAITING_DATABASE" },
      "BUILD_FAILED",
      start,
      60_000,
      120_000,
      false,
    ],
    ["disabled", {}, "BUILDING", start, undefined, 120_000, false],
    ["no start recorded", {}, "BUILDING", undefined, 60_000, 120_000, false],
  ])("%s", (_name, over, status, startedAt, timeoutMs, elapsed, expected) => {
    expect(rolloutTimedOut(deployment(over), status, startedAt, timeoutMs, after(elapsed))).toBe(expected);
  });
});

describe("the status with failure evidence", () => {
  const log: FailedRevisionLog = {
    revisionId: LATEST,
    reason: "RolloutTimeout",
    type: "build",
    excerpt: "Step 3/4 : RUN pip install",
  };

  it("a timed-out rollout is Stalled RolloutTimeout, with the revision's status and the excerpt", () => {
    const status = statusFrom({
      generation: 1,
      observed: deployment(),
      sync: { kind: "synced" },
      now: T0,
      revision: { id: LATEST, status: "BUILDING" },
      rollout: { startedAt: start(), log, timedOutAfter: "30m" },
    });
    const stalled = status.conditions?.find((c) => c.type === "Stalled");
    expect(stalled?.reason).toBe("RolloutTimeout");
    expect(stalled?.message).toBe(
      `revision ${LATEST} (BUILDING) has not gone live within spec.rolloutTimeout 30m; ${ACTIVE} is active. Nothing is sent again: this ends when the revision goes live or fails. Last build log lines: Step 3/4 : RUN pip install`,
    );
    expect(status.conditions?.some((c) => c.type === "Reconciling")).toBe(false);
    expect(status.rolloutStartedAt).toBe(start());
    expect(status.failedRevisionLog).toEqual(log);
  });

  it("a timed-out rollout with the change that replaces it held by a rollout window: Reconciling, not Stalled", () => {
    const status = statusFrom({
      generation: 2,
      observed: deployment(),
      sync: { kind: "held", message: "sourceRevisionConfig.imageUri is held until the window opens" },
      now: T0,
      revision: { id: LATEST, status: "BUILDING" },
      rollout: { startedAt: start(), log, timedOutAfter: "30m" },
    });
    const said = Object.fromEntries(
      (status.conditions ?? []).map((c) => [c.type, `${c.status}/${c.reason}`]),
    );
    expect(said).toEqual({
      Ready: "False/RolloutTimeout",
      Synced: "False/OutsideRolloutWindow",
      Reconciling: "True/OutsideRolloutWindow",
    });
  });

  it("a first rollout past the timeout is Stalled whatever the deployment's status, naming what is stuck", () => {
    const stalled = (over: Partial<Deployment>, revisionStatus: string) =>
      statusFrom({
        generation: 1,
        observed: deployment(over),
        sync: { kind: "synced" },
        now: T0,
        revision: { id: LATEST, status: revisionStatus },
        rollout: { startedAt: start(), timedOutAfter: "10s" },
      }).conditions?.filter((c) => c.type === "Stalled" || c.type === "Ready" || c.type === "Reconciling");
    expect(stalled({ status: "AWAITING_DATABASE", active_revision_id: null }, "BUILDING")).toEqual([
      expect.objectContaining({ type: "Ready", status: "False", reason: "RolloutTimeout" }),
      expect.objectContaining({
        type: "Stalled",
        status: "True",
        reason: "RolloutTimeout",
        message: `revision ${LATEST} (BUILDING) has not gone live within spec.rolloutTimeout 10s and the service still reports the deployment AWAITING_DATABASE; no revision is active. Nothing is sent again: this ends when the revision goes live or fails.`,
      }),
    ]);
    expect(stalled({ status: "AWAITING_DATABASE", active_revision_id: LATEST }, "DEPLOYED")).toEqual([
      expect.objectContaining({ type: "Ready", status: "False", reason: "RolloutTimeout" }),
      expect.objectContaining({
        type: "Stalled",
        reason: "RolloutTimeout",
        message: `revision ${LATEST} is live, but the service has reported the deployment AWAITING_DATABASE for longer than spec.rolloutTimeout 10s: the deployment is stuck, not the revision. Nothing is sent again: this ends when the service reports it READY.`,
      }),
    ]);
    // Not timed out: AWAITING_DATABASE is in progress, as before.
    const inProgress = statusFrom({
      generation: 1,
      observed: deployment({ status: "AWAITING_DATABASE", active_revision_id: null }),
      sync: { kind: "synced" },
      now: T0,
      rollout: { startedAt: start() },
    });
    expect(inProgress.conditions?.find((c) => c.type === "Reconciling")?.reason).toBe("AwaitingDatabase");
  });

  it("a failed revision's message ends with its excerpt, only the one read for that failure", () => {
    const failed = (rolloutLog: FailedRevisionLog) =>
      statusFrom({
        generation: 1,
        observed: deployment(),
        sync: { kind: "synced" },
        now: T0,
        revision: { id: LATEST, status: "BUILD_FAILED" },
        rollout: { startedAt: start(), log: rolloutLog },
      }).conditions?.find((c) => c.type === "Stalled")?.message;
    expect(failed({ ...log, reason: "RevisionFailed" })).toMatch(
      /look again\. Last build log lines: Step 3\/4/,
    );
    expect(failed(log)).toMatch(/look again\.$/);
  });

  it("keeps the evidence when the deployment was not looked at, clears it when it is gone", () => {
    const previous = { rolloutStartedAt: start(), failedRevisionLog: log };
    const kept = statusFrom({
      generation: 1,
      previous,
      observed: undefined,
      sync: { kind: "paused" },
      now: T0,
    });
    expect(kept).toMatchObject(previous);
    const gone = statusFrom({ generation: 1, previous, observed: null, sync: { kind: "synced" }, now: T0 });
    expect(gone.rolloutStartedAt).toBeUndefined();
    expect(gone.failedRevisionLog).toBeUndefined();
  });

  function start() {
    return "2030-01-01T00:00:00Z";
  }
});

describe("the evidence a status needs, without a call when it can be told", () => {
  const obj = (status: DeploymentResourceStatus = {}, annotations: Record<string, string> = {}) =>
    ({ metadata: { name: "agent", namespace: "team", annotations }, spec: {}, status }) as StoredResource;
  const run = (resource: StoredResource, connected = true) =>
    ({ obj: resource, now: T0, ...(connected ? { session: {} } : {}) }) as unknown as Run;
  const found = (d: Deployment): Decided => ({
    outcome: { kind: "synced", message: "applied" },
    observed: { kind: "found", deployment: d },
  });
  const started = { latestRevisionId: LATEST, rolloutStartedAt: "2029-12-31T00:00:00Z" };

  it("an edit's new revision, first seen now: known, its rollout started now, no look", () => {
    expect(evidenceAt(run(obj({ latestRevisionId: ACTIVE })), found(deployment()))).toEqual({
      known: { rollout: { startedAt: "2030-01-01T00:00:00Z" }, event: undefined },
    });
  });

  it("no deployment found, no connection, or a delete: nothing to tell", () => {
    expect(evidenceAt(run(obj(), false), found(deployment()))).toEqual({ known: {} });
    expect(evidenceAt(run(obj()), { outcome: { kind: "synced", message: "applied" } })).toEqual({
      known: {},
    });
    const deleting: Decided = { ...found(deployment()), outcome: { kind: "deleting" } };
    expect(evidenceAt(run(obj()), deleting)).toEqual({ known: {} });
  });

  it("a revision seen before and not live, or a reconcile asked by annotation: read, with a look", () => {
    const polled = evidenceAt(run(obj(started)), found(deployment()));
    expect("read" in polled && polled.read.look).toBeUndefined();
    const asked = obj({ latestRevisionId: ACTIVE }, { "dms.dev/reconcile-requested-at": "now" });
    const requested = evidenceAt(run(asked), found(deployment()));
    expect("read" in requested && requested.read).toMatchObject({ requested: true });
  });

  it("a live revision past its timeout whose deployment is not READY: read for its log, no look", () => {
    const live = deployment({ active_revision_id: LATEST, status: "AWAITING_DATABASE" });
    const due = evidenceAt(run(obj(started)), found(live));
    expect("read" in due && due.read.look).toEqual({ revision: { id: LATEST, status: "DEPLOYED" } });
    const recorded = { revisionId: LATEST, reason: "RolloutTimeout", type: "deploy" } as const;
    expect(evidenceAt(run(obj({ ...started, failedRevisionLog: recorded })), found(live))).toMatchObject({
      known: {
        revision: { id: LATEST, status: "DEPLOYED" },
        rollout: { timedOutAfter: "30m", log: recorded },
      },
    });
  });
});
