// The conditions both kinds write, from one module: a condition's lastTransitionTime moves only
// with its status, each carries the generation it was computed from, and a verdict says the
// kstatus trio (Ready, Reconciling, Stalled) the same way for a Deployment and a connection.
import { describe, expect, it } from "vitest";
import {
  type ConditionValue,
  formatTime,
  kstatusOf,
  putConditions,
  setCondition,
  type Verdict,
} from "../../src/crd/conventions.ts";
import type { Condition } from "../../src/crd/schema.ts";

const T0 = "2025-01-01T00:00:00Z";
const T1 = new Date("2025-06-01T10:05:00.000Z");

describe("formatTime", () => {
  it("writes whole seconds, as metav1.Time reads back", () => {
    expect(formatTime(new Date("2025-06-01T10:05:00.123Z"))).toBe("2025-06-01T10:05:00Z");
  });
});

describe("setCondition", () => {
  const ready = (status: Condition["status"], reason: string) => ({
    type: "Ready",
    status,
    reason,
    message: "",
    observedGeneration: 1,
  });
  const cases = [
    {
      reason: "a new condition gets now as its transition time",
      before: [],
      next: ready("True", "A"),
      time: "2025-06-01T10:05:00Z",
    },
    {
      reason: "same status, other reason or message: the transition time stays",
      before: [{ ...ready("True", "A"), lastTransitionTime: "2025-01-01T00:00:00Z" }],
      next: ready("True", "B"),
      time: "2025-01-01T00:00:00Z",
    },
    {
      reason: "the status moves: the transition time moves",
      before: [{ ...ready("True", "A"), lastTransitionTime: "2025-01-01T00:00:00Z" }],
      next: ready("False", "A"),
      time: "2025-06-01T10:05:00Z",
    },
  ];
  it.each(cases)("$reason", ({ before, next, time }) => {
    const after = setCondition(before, next, T1);
    expect(after).toHaveLength(1);
    expect(after[0]).toEqual({ ...next, lastTransitionTime: time });
  });

  it("keeps the other conditions, their order and times, and leaves the given list as it was", () => {
    const others: Condition[] = [
      {
        type: "Synced",
        status: "True",
        reason: "X",
        message: "",
        lastTransitionTime: "2025-01-01T00:00:00Z",
      },
      { type: "Ready", status: "True", reason: "A", message: "", lastTransitionTime: "2025-01-01T00:00:00Z" },
    ];
    const given = structuredClone(others);
    const after = setCondition(others, { type: "Ready", status: "False", reason: "B", message: "" }, T1);
    expect(after.map((c) => c.type)).toEqual(["Synced", "Ready"]);
    // The other condition keeps its lastTransitionTime: a user reading it sees when *it* changed.
    expect(after[0]).toEqual(given[0]);
    // The conditions given are left as they were: the reconciler compares the previous status with
    // the next to decide whether to write, and a mutated previous would hide the change.
    expect(others).toEqual(given);
  });
});

describe("kstatusOf: the trio a verdict says", () => {
  const cases: { verdict: Verdict; said: ReturnType<typeof kstatusOf>; reason: string }[] = [
    {
      reason: "ok: Ready True with its reason, neither Reconciling nor Stalled",
      verdict: { ok: true, reason: "Connected", message: "accepted" },
      said: { ready: { status: "True", reason: "Connected", message: "accepted" } },
    },
    {
      reason: "a transient failure: Ready False, Reconciling True and saying it retries",
      verdict: { ok: false, reason: "Unreachable", message: "no route", transient: true },
      said: {
        ready: { status: "False", reason: "Unreachable", message: "no route" },
        reconciling: { status: "True", reason: "Unreachable", message: "retrying: no route" },
      },
    },
    {
      reason: "a failure that waits for a change: Ready False and Stalled True, not Reconciling",
      verdict: { ok: false, reason: "Unauthorized", message: "key refused", transient: false },
      said: {
        ready: { status: "False", reason: "Unauthorized", message: "key refused" },
        stalled: { status: "True", reason: "Unauthorized", message: "key refused" },
      },
    },
  ];
  it.each(cases)("$reason", ({ verdict, said }) => {
    expect(kstatusOf(verdict)).toEqual(said);
  });
});

describe("putConditions", () => {
  const old = (type: string, status: Condition["status"], reason = "Old"): Condition => ({
    type,
    status,
    reason,
    message: "before",
    observedGeneration: 1,
    lastTransitionTime: T0,
  });
  const value = (status: Condition["status"], reason: string, message = "now"): ConditionValue => ({
    status,
    reason,
    message,
  });
  const cases: {
    reason: string;
    before: Condition[];
    wanted: { type: string; value: ConditionValue | undefined }[];
    after: Condition[];
  }[] = [
    {
      reason: "an unchanged status keeps its lastTransitionTime; the generation and reason are refreshed",
      before: [old("Ready", "False")],
      wanted: [{ type: "Ready", value: value("False", "New") }],
      after: [{ ...old("Ready", "False", "New"), message: "now", observedGeneration: 7 }],
    },
    {
      reason: "a status that moves refreshes lastTransitionTime",
      before: [old("Ready", "False")],
      wanted: [{ type: "Ready", value: value("True", "New") }],
      after: [
        {
          ...old("Ready", "True", "New"),
          message: "now",
          observedGeneration: 7,
          lastTransitionTime: "2025-06-01T10:05:00Z",
        },
      ],
    },
    {
      reason: "a condition without a value is removed; one not wanted is kept as it was",
      before: [old("Ready", "True"), old("Reconciling", "True"), old("Synced", "True")],
      wanted: [{ type: "Reconciling", value: undefined }],
      after: [old("Ready", "True"), old("Synced", "True")],
    },
    {
      reason: "new conditions are appended in the order wanted, at now",
      before: [],
      wanted: [
        { type: "Ready", value: value("False", "A") },
        { type: "Stalled", value: value("True", "A") },
      ],
      after: [
        {
          ...old("Ready", "False", "A"),
          message: "now",
          observedGeneration: 7,
          lastTransitionTime: "2025-06-01T10:05:00Z",
        },
        {
          ...old("Stalled", "True", "A"),
          message: "now",
          observedGeneration: 7,
          lastTransitionTime: "2025-06-01T10:05:00Z",
        },
      ],
    },
  ];
  it.each(cases)("$reason", ({ before, wanted, after }) => {
    const given = structuredClone(before);
    expect(putConditions(before, wanted, { now: T1, observedGeneration: 7 })).toEqual(after);
    expect(before).toEqual(given);
  });

  it("cleans each message it sets with the kind's own rule (redaction, a length limit)", () => {
    const [ready] = putConditions([], [{ type: "Ready", value: value("False", "A", "key=s3cret") }], {
      now: T1,
      observedGeneration: 1,
      message: (text) => text.replace("s3cret", "[redacted]"),
    });
    expect(ready?.message).toBe("key=[redacted]");
  });
});
