// The rollout gate as the reconciler uses it: one PATCH plan in, what to send now and what to
// hold (with its message and when to look again) out, so that there is one PATCH path.
import { describe, expect, it } from "vitest";
import type { PatchPlan } from "../../src/reconcile/plan.ts";
import { gatePatch, windowsInEffect } from "../../src/reconcile/rollout-gate.ts";
import type { RolloutWindowSpec } from "../../src/reconcile/rollout-windows.ts";

const NIGHTS: RolloutWindowSpec = {
  kind: "allow",
  schedule: "0 22 * * 1-5",
  duration: "8h",
  timeZone: "Europe/Berlin",
};
const AFTERNOON = Date.parse("2026-11-24T12:00:00Z");
const NIGHT = Date.parse("2026-11-24T22:00:00Z");
const OPENS = Date.parse("2026-11-24T21:00:00Z");
const windows = windowsInEffect([NIGHTS], undefined, AFTERNOON);

const scale = {
  group: "source_config" as const,
  field: "sourceConfig.resourceSpec.minScale",
  line: "minScale: 1 → 3",
};
const image = {
  group: "source_revision_config" as const,
  field: "sourceRevisionConfig.imageUri",
  line: "imageUri",
};
const both: PatchPlan = {
  action: "patch",
  body: {
    source_config: { resource_spec: { min_scale: 3 } },
    source_revision_config: { image_uri: "repo/a:2" },
  },
  newRevision: true,
  summary: [],
  changes: [scale, image],
  problems: [],
};
const revisionOnly: PatchPlan = {
  ...both,
  body: { source_revision_config: { image_uri: "repo/a:2" } },
  changes: [image],
};
const scaleOnly: PatchPlan = { ...both, body: { source_config: {} }, newRevision: false, changes: [scale] };

describe("gatePatch", () => {
  it("sends all of a change that makes no revision, windows or not", () => {
    expect(gatePatch(scaleOnly, { windows, now: AFTERNOON })).toEqual({ send: scaleOnly });
  });

  it("sends all of it inside a window", () => {
    expect(gatePatch(both, { windows, now: NIGHT })).toEqual({ send: both, viaRolloutNow: false });
  });

  it("outside, sends what makes no revision and holds the rest until the window opens", () => {
    const gated = gatePatch(both, { windows, now: AFTERNOON });
    expect(gated.send?.body).toEqual({ source_config: { resource_spec: { min_scale: 3 } } });
    expect(gated.send?.newRevision).toBe(false);
    expect(gated.held?.wakeAt).toBe(OPENS);
    expect(gated.held?.message).toContain("(sourceRevisionConfig.imageUri) is held");
  });

  it("outside, sends nothing when all of it makes a revision", () => {
    const gated = gatePatch(revisionOnly, { windows, now: AFTERNOON });
    expect(gated.send).toBeUndefined();
    expect(gated.held?.wakeAt).toBe(OPENS);
  });

  it("dms.dev/rollout-now sends all of it once, and says so", () => {
    expect(gatePatch(both, { windows, now: AFTERNOON, rolloutNow: "1" })).toEqual({
      send: both,
      viaRolloutNow: true,
    });
    const acted = gatePatch(both, { windows, now: AFTERNOON, rolloutNow: "1", handledRolloutNow: "1" });
    expect(acted.held).toBeDefined();
  });
});
