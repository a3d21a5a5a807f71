// The rollout gate as the reconciler uses it: one PATCH plan in, what to send now and what to
// hold (with its message and when to look again) out, so that there is one PATCH path.
import { describe, expect, it } from "vitest";
import type { PatchPlan } from "../../src/reconcile/plan.ts";
import type { RolloutWindowSpec } from "../../src/reconcile/rollout/rollout-windows.ts";
import { gatePatch, windowsInEffect } from "../../src/reconcile/rollout-gate.ts";

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
/**
 * The search's time budget read on a counter that stands still: these are the gate's decisions,
 * which a loaded machine (a worker beside this one, a GC pause) must not change; the budget has
 * its tests in rollout-windows-hostile.test.ts.
 */
const STILL = { counter: () => 0 };

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
    expect(gatePatch(scaleOnly, { ...STILL, windows, now: AFTERNOON })).toEqual({ send: scaleOnly });
  });

  it("sends all of it inside a window", () => {
    expect(gatePatch(both, { ...STILL, windows, now: NIGHT })).toEqual({ send: both, viaRolloutNow: false });
  });

  it("outside, sends what makes no revision and holds the rest until the window opens", () => {
    const gated = gatePatch(both, { ...STILL, windows, now: AFTERNOON });
    expect(gated.send?.body).toEqual({ source_config: { resource_spec: { min_scale: 3 } } });
    expect(gated.send?.newRevision).toBe(false);
    expect(gated.held?.wakeAt).toBe(OPENS);
    expect(gated.held?.message).toContain("(sourceRevisionConfig.imageUri) is held");
  });

  it("outside, sends nothing when all of it makes a revision", () => {
    const gated = gatePatch(revisionOnly, { ...STILL, windows, now: AFTERNOON });
    expect(gated.send).toBeUndefined();
    expect(gated.held?.wakeAt).toBe(OPENS);
  });

  it("dms.dev/rollout-now sends all of it once, and says so", () => {
    expect(gatePatch(both, { ...STILL, windows, now: AFTERNOON, rolloutNow: "1" })).toEqual({
      send: both,
      viaRolloutNow: true,
    });
    const acted = gatePatch(both, {
      ...STILL,
      windows,
      now: AFTERNOON,
      rolloutNow: "1",
      handledRolloutNow: "1",
    });
    expect(acted.held).toBeDefined();
  });
});

/** A freeze: denies every instant (it starts each day and lasts one). */
const FROZEN: RolloutWindowSpec = { kind: "deny", schedule: "0 0 * * *", duration: "24h" };
const CONNECTION = "ClusterServiceConnection freeze";
const ADMINS = "cluster admins";
const advisory = (windows: RolloutWindowSpec[]) => ({ windows, from: CONNECTION });
const binding = (windows: RolloutWindowSpec[]) => ({
  windows,
  from: CONNECTION,
  binding: { liftedBy: ADMINS },
});

describe("a connection's binding windows (spec.rolloutWindowsPolicy: Binding)", () => {
  it("Advisory: the resource's own list, even empty, replaces the connection's; rollout-now lifts them", () => {
    const replaced = windowsInEffect([], advisory([FROZEN]), AFTERNOON);
    expect(gatePatch(revisionOnly, { ...STILL, windows: replaced, now: AFTERNOON })).toEqual({
      send: revisionOnly,
      viaRolloutNow: false,
    });
    const inherited = windowsInEffect(undefined, advisory([FROZEN]), AFTERNOON);
    expect(gatePatch(revisionOnly, { ...STILL, windows: inherited, now: AFTERNOON }).held).toBeDefined();
    expect(
      gatePatch(revisionOnly, { ...STILL, windows: inherited, now: AFTERNOON, rolloutNow: "1" }),
    ).toEqual({
      send: revisionOnly,
      viaRolloutNow: true,
    });
  });

  it("Binding: an empty list on the resource lifts nothing, and the message says who can", () => {
    const windows = windowsInEffect([], binding([FROZEN]), AFTERNOON);
    const gated = gatePatch(both, { ...STILL, windows, now: AFTERNOON });
    expect(gated.send?.body).toEqual({ source_config: { resource_spec: { min_scale: 3 } } });
    expect(gated.held?.message).toContain(
      `outside the rollout windows (spec.rolloutWindows of ${CONNECTION}, binding: spec.rolloutWindowsPolicy Binding)`,
    );
    expect(gated.held?.message).toContain(
      `dms.dev/rollout-now does not let it out: the windows of ${CONNECTION} are binding: only an edit of ${CONNECTION} lifts them (its spec.rolloutWindows, or spec.rolloutWindowsPolicy: Advisory), which ${ADMINS} may make`,
    );
    // Left out, the resource's own windows are none: the connection's hold it all the same.
    const inherited = windowsInEffect(undefined, binding([FROZEN]), AFTERNOON);
    expect(gatePatch(both, { ...STILL, windows: inherited, now: AFTERNOON }).held?.message).toBe(
      gated.held?.message,
    );
  });

  it("Binding: dms.dev/rollout-now does not lift them, and says so", () => {
    const windows = windowsInEffect([], binding([FROZEN]), AFTERNOON);
    const gated = gatePatch(revisionOnly, { ...STILL, windows, now: AFTERNOON, rolloutNow: "1" });
    expect(gated.send).toBeUndefined();
    expect(gated.held?.message).toContain(
      `dms.dev/rollout-now lifts this resource's own windows only: the windows of ${CONNECTION} are binding`,
    );
  });

  it("Binding: rollout-now lifts the resource's own windows where the connection's allow it", () => {
    const windows = windowsInEffect([FROZEN], binding([NIGHTS]), NIGHT);
    const gated = gatePatch(revisionOnly, { ...STILL, windows, now: NIGHT });
    expect(gated.held?.message).toContain(
      `outside the rollout windows (spec.rolloutWindows, and spec.rolloutWindows of ${CONNECTION}, binding`,
    );
    expect(gated.held?.message).toContain(
      `set the annotation dms.dev/rollout-now to a new value to roll it out now (the binding windows of ${CONNECTION} allow it now)`,
    );
    expect(gatePatch(revisionOnly, { ...STILL, windows, now: NIGHT, rolloutNow: "1" })).toEqual({
      send: revisionOnly,
      viaRolloutNow: true,
    });
  });

  it("Binding: the resource's windows only narrow the connection's: it goes out when both allow it", () => {
    // The connection's nights open at 21:00Z; the resource's own window runs 23:00Z to 00:00Z.
    const late: RolloutWindowSpec = { kind: "allow", schedule: "0 23 * * *", duration: "1h" };
    const narrowed = windowsInEffect([late], binding([NIGHTS]), AFTERNOON);
    const gated = gatePatch(revisionOnly, { ...STILL, windows: narrowed, now: AFTERNOON });
    expect(gated.held?.wakeAt).toBe(Date.parse("2026-11-24T23:00:00Z"));
    expect(gated.held?.message).toContain("when allow window [0] (0 23 * * * for 1h, UTC) opens");
    // A resource's window wider than the connection's waits for the connection's.
    const early: RolloutWindowSpec = { kind: "allow", schedule: "0 20 * * *", duration: "3h" };
    const widened = windowsInEffect([early], binding([NIGHTS]), AFTERNOON);
    const waited = gatePatch(revisionOnly, { ...STILL, windows: widened, now: AFTERNOON });
    expect(waited.held?.wakeAt).toBe(OPENS);
    expect(waited.held?.message).toContain(`when allow window [0] of ${CONNECTION} (0 22 * * 1-5 for 8h`);
    // Inside both: out now.
    expect(
      gatePatch(revisionOnly, { ...STILL, windows: narrowed, now: Date.parse("2026-11-24T23:30:00Z") }),
    ).toEqual({
      send: revisionOnly,
      viaRolloutNow: false,
    });
  });

  it("Binding without windows binds nothing; a connection's window that cannot be read names the connection", () => {
    expect(windowsInEffect([], binding([]), AFTERNOON)).toEqual({
      windows: [],
      source: "spec.rolloutWindows",
    });
    expect(() =>
      windowsInEffect([], binding([{ kind: "deny", schedule: "0 0 30 2 *", duration: "1h" }]), AFTERNOON),
    ).toThrow(
      /^ClusterServiceConnection freeze spec\.rolloutWindows\[0\]\.schedule: .*fix the connection, whose windows are binding/,
    );
  });
});
