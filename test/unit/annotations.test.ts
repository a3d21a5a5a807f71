import { describe, expect, it } from "vitest";
import {
  ANNOTATION_REBUILD_REQUESTED_AT,
  ANNOTATION_RECONCILE_REQUESTED_AT,
  ANNOTATION_ROLLOUT_NOW,
} from "../../src/crd/schema.ts";
import {
  keptAnnotationValue,
  MAX_ANNOTATION_VALUE,
  rebuildRequestedAt,
  reconcileRequestedAt,
  rolloutNow,
} from "../../src/reconcile/inputs.ts";
import { keepPrintable } from "../../src/reconcile/status.ts";

// The request annotations' values as the operator keeps them: what the status records once a
// request was handled must be recordable as given, or the request is handled again and again.

const annotated = (key: string, value: string) => ({ metadata: { annotations: { [key]: value } } });

describe("keptAnnotationValue", () => {
  it("keeps a short printable value as given", () => {
    expect(keptAnnotationValue("2026-12-02T01:00:00Z")).toBe("2026-12-02T01:00:00Z");
  });

  it("keeps a value over the bound as its digest", () => {
    expect(keptAnnotationValue("x".repeat(MAX_ANNOTATION_VALUE + 1))).toMatch(/^sha256:[0-9a-f]{64}$/);
  });

  it("keeps a value outside the printable rule as its digest, different for another value", () => {
    const bidi = keptAnnotationValue("2026-12-02T01:00:00Z\u202e");
    const filler = keptAnnotationValue("2026-12-02T01:00:00Z\u3164");
    expect(bidi).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(filler).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(bidi).not.toBe(filler);
    expect(keptAnnotationValue(bidi)).toBe(bidi);
  });

  it("gives each request annotation in the form the status records as given", () => {
    for (const [key, read] of [
      [ANNOTATION_ROLLOUT_NOW, rolloutNow],
      [ANNOTATION_REBUILD_REQUESTED_AT, rebuildRequestedAt],
      [ANNOTATION_RECONCILE_REQUESTED_AT, reconcileRequestedAt],
    ] as const) {
      const kept = read(annotated(key, "now\u200b\u202e"));
      expect(kept, key).toMatch(/^sha256:/);
      // The status sink leaves the value as it is: the request is recorded as handled.
      const status = {
        lastHandledRolloutNow: kept,
        lastHandledRebuildAt: kept,
        lastHandledReconcileAt: kept,
      };
      expect(keepPrintable(status).status, key).toEqual(status);
    }
  });
});
