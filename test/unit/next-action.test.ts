// The requeue policy after a reconcile concluded, as a table: what was concluded in, what the
// controller does next out (kube-rs's `error_policy` beside its `reconcile`).
import { describe, expect, it } from "vitest";
import type { DeploymentResourceStatus } from "../../src/crd/schema.ts";
import { type Concluded, MAX_WAKE_MS, nextAction, TIMED_OUT_LOOK_MS } from "../../src/reconcile/conclude.ts";

const NOW = Date.parse("2026-11-24T12:00:00Z");
const POLL = 5_000;
const T = "2026-11-24T11:00:00Z";

const condition = (type: string, status: "True" | "False", reason: string) => ({
  type,
  status,
  reason,
  message: "",
  lastTransitionTime: T,
});
const READY: DeploymentResourceStatus = { conditions: [condition("Ready", "True", "Ready")] };
const ROLLING: DeploymentResourceStatus = {
  conditions: [
    condition("Ready", "False", "RolloutInProgress"),
    condition("Reconciling", "True", "RolloutInProgress"),
  ],
};
/** Held by a rollout window: Reconciling by waiting, while the service is idle. */
const HELD: DeploymentResourceStatus = {
  conditions: [condition("Ready", "True", "Ready"), condition("Reconciling", "True", "OutsideRolloutWindow")],
};
const SERVICE_BUSY_ONLY: DeploymentResourceStatus = { conditions: [condition("Ready", "False", "Creating")] };
const CREATE_PENDING: DeploymentResourceStatus = { ...READY, createRequestedAt: T };
const LOG_RETRY = {
  revisionId: "r",
  reason: "RevisionFailed" as const,
  type: "build" as const,
  failedReads: 1,
  failedReadAt: T,
};
const LOG_GIVEN_UP = { ...LOG_RETRY, failedReads: 3 };

const base: Concluded = { sync: "synced", status: READY, now: NOW, pollMs: POLL };

describe("nextAction", () => {
  it.each<{ case: string; concluded: Partial<Concluded>; next: ReturnType<typeof nextAction> }>([
    { case: "steady: done", concluded: {}, next: { kind: "done" } },
    {
      case: "steady with its own interval: done, with it",
      concluded: { intervalMs: 120_000 },
      next: { kind: "done", intervalMs: 120_000 },
    },
    { case: "rolling out: polled", concluded: { status: ROLLING }, next: { kind: "requeueAfter", ms: POLL } },
    {
      case: "a create not listed yet: polled",
      concluded: { status: CREATE_PENDING },
      next: { kind: "requeueAfter", ms: POLL },
    },
    {
      case: "failed while rolling: not polled (the backoff retries)",
      concluded: { sync: "failed", status: ROLLING },
      next: { kind: "done" },
    },
    {
      case: "timed out: looked at a minute apart",
      concluded: { timedOutAfter: "30m", status: ROLLING },
      next: { kind: "requeueAfter", ms: TIMED_OUT_LOOK_MS },
    },
    {
      case: "timed out, with a poll interval longer than a minute: at the poll interval",
      concluded: { timedOutAfter: "30m", pollMs: 90_000 },
      next: { kind: "requeueAfter", ms: 90_000 },
    },
    {
      case: "timed out but failed: not looked at",
      concluded: { timedOutAfter: "30m", sync: "failed" },
      next: { kind: "done" },
    },
    {
      case: "held, the service idle: woken at the opening",
      concluded: { sync: "held", wakeAt: NOW + 3_600_000, status: HELD },
      next: { kind: "requeueAfter", ms: 3_600_000 },
    },
    {
      case: "held, the service at work: polled",
      concluded: { sync: "held", wakeAt: NOW + 3_600_000, status: SERVICE_BUSY_ONLY },
      next: { kind: "requeueAfter", ms: POLL },
    },
    {
      case: "held, the opening past: no sooner than the poll interval",
      concluded: { sync: "held", wakeAt: NOW - 1_000 },
      next: { kind: "requeueAfter", ms: POLL },
    },
    {
      case: "held, the opening a year away: a day at most",
      concluded: { sync: "held", wakeAt: NOW + 365 * 86_400_000 },
      next: { kind: "requeueAfter", ms: MAX_WAKE_MS },
    },
    {
      case: "held, its own interval sooner: at the interval",
      concluded: { sync: "held", wakeAt: NOW + 3_600_000, intervalMs: 600_000 },
      next: { kind: "requeueAfter", ms: 600_000 },
    },
    {
      case: "a log read that may pass: read again after a minute",
      concluded: { log: LOG_RETRY },
      next: { kind: "requeueAfter", ms: 60_000 },
    },
    {
      case: "a log read given up: done",
      concluded: { log: LOG_GIVEN_UP },
      next: { kind: "done" },
    },
    {
      case: "a failed outcome with a log read that may pass: read again",
      concluded: { sync: "failed", log: LOG_RETRY },
      next: { kind: "requeueAfter", ms: 60_000 },
    },
  ])("$case", ({ concluded, next }) => {
    expect(nextAction({ ...base, ...concluded })).toEqual(next);
  });
});
