// Rollout window arithmetic at fixed instants: when a window is active, whether a rollout is
// allowed, and when the next one opens, across time zones, daylight-saving changes, windows
// crossing midnight, overlapping allow and deny windows, and windows longer than their period.
import { describe, expect, it } from "vitest";
import { InvalidSpecError } from "../../src/crd/errors.ts";
import type { PatchPlan } from "../../src/reconcile/plan.ts";
import { isActive, nextOpening, rolloutAllowed } from "../../src/reconcile/rollout/next-opening.ts";
import { compileWindows, type RolloutWindowSpec } from "../../src/reconcile/rollout/rollout-windows.ts";
import { localTime } from "../../src/reconcile/rollout/zones.ts";
import { gateRollout, splitPatch, windowsInEffect } from "../../src/reconcile/rollout-gate.ts";

const at = (iso: string) => Date.parse(iso);
const iso = (ms: number) => new Date(ms).toISOString().replace(".000Z", "Z");
const compile = (...specs: RolloutWindowSpec[]) => compileWindows(specs, "spec.rolloutWindows");

/** Weekday nights in Berlin: 22:00 to 06:00 the next morning, Monday to Friday evenings. */
const NIGHTS: RolloutWindowSpec = {
  kind: "allow",
  schedule: "0 22 * * 1-5",
  duration: "8h",
  timeZone: "Europe/Berlin",
};
/** A year-end freeze: 24 to 27 December (UTC). */
const FREEZE: RolloutWindowSpec = { kind: "deny", schedule: "0 0 24 12 *", duration: "72h" };

const STILL = () => 0;

/** When the next opening is, as RFC 3339, or `now` / `none`. */
function opening(specs: RolloutWindowSpec[], from: string): string {
  // A counter that stands still: the arithmetic is under test, not the machine's load.
  const found = nextOpening(compile(...specs), at(from), { counter: STILL });
  if (found.kind === "at") return iso(found.at);
  return found.kind === "none" ? `none${found.exhausted ? ` (out of ${found.exhausted})` : ""}` : "now";
}

describe("rollout windows: allowed and next opening", () => {
  const cases: {
    reason: string;
    windows: RolloutWindowSpec[];
    from: string;
    allowed: boolean;
    opens: string;
  }[] = [
    {
      reason: "no windows: roll out any time",
      windows: [],
      from: "2026-11-24T12:00:00Z",
      allowed: true,
      opens: "now",
    },
    {
      reason: "inside a weekday-night allow window (Tuesday 22:30 in Berlin)",
      windows: [NIGHTS],
      from: "2026-11-24T21:30:00Z",
      allowed: true,
      opens: "now",
    },
    {
      reason: "Tuesday afternoon: the window opens at 22:00 Berlin time (21:00Z in winter)",
      windows: [NIGHTS],
      from: "2026-11-24T12:00:00Z",
      allowed: false,
      opens: "2026-11-24T21:00:00Z",
    },
    {
      reason: "a window opens exactly at its start",
      windows: [NIGHTS],
      from: "2026-11-24T21:00:00Z",
      allowed: true,
      opens: "now",
    },
    {
      reason: "a window ends just before start + duration (06:00 Berlin is outside)",
      windows: [NIGHTS],
      from: "2026-11-25T05:00:00Z",
      allowed: false,
      opens: "2026-11-25T21:00:00Z",
    },
    {
      reason: "crossing midnight: Friday's window still runs at 05:30 Saturday",
      windows: [NIGHTS],
      from: "2026-11-28T04:30:00Z",
      allowed: true,
      opens: "now",
    },
    {
      reason: "the weekend: nothing until Monday 22:00",
      windows: [NIGHTS],
      from: "2026-11-28T12:00:00Z",
      allowed: false,
      opens: "2026-11-30T21:00:00Z",
    },
    {
      reason: "only a deny window, outside it: allowed",
      windows: [{ kind: "deny", schedule: "0 9 * * 1-5", duration: "9h" }],
      from: "2026-11-23T08:00:00Z",
      allowed: true,
      opens: "now",
    },
    {
      reason: "only a deny window, inside it: allowed when it ends",
      windows: [{ kind: "deny", schedule: "0 9 * * 1-5", duration: "9h" }],
      from: "2026-11-23T10:00:00Z",
      allowed: false,
      opens: "2026-11-23T18:00:00Z",
    },
    {
      reason: "deny wins over an allow window active at the same time; allowed when the deny ends",
      windows: [
        { kind: "allow", schedule: "0 0 * * *", duration: "24h" },
        { kind: "deny", schedule: "0 12 * * *", duration: "2h" },
      ],
      from: "2026-11-24T12:30:00Z",
      allowed: false,
      opens: "2026-11-24T14:00:00Z",
    },
    {
      reason:
        "an allow window that opens inside a freeze: first allowed when the freeze ends, if still inside an allow window",
      windows: [NIGHTS, FREEZE],
      from: "2026-12-24T01:00:00Z",
      allowed: false,
      opens: "2026-12-28T21:00:00Z",
    },
    {
      reason: "before a freeze the allow window opens as usual",
      windows: [NIGHTS, FREEZE],
      from: "2026-12-23T12:00:00Z",
      allowed: false,
      opens: "2026-12-23T21:00:00Z",
    },
    {
      reason:
        "a deny window longer than its schedule's period chains its instances (hourly 08:00-17:00, 90 min each)",
      windows: [{ kind: "deny", schedule: "0 8-17 * * *", duration: "90m" }],
      from: "2026-11-24T09:15:00Z",
      allowed: false,
      opens: "2026-11-24T18:30:00Z",
    },
    {
      reason: "two deny windows back to back: the search passes both",
      windows: [
        { kind: "deny", schedule: "0 9 * * *", duration: "1h" },
        { kind: "deny", schedule: "0 10 * * *", duration: "30m" },
      ],
      from: "2026-11-24T09:10:00Z",
      allowed: false,
      opens: "2026-11-24T10:30:00Z",
    },
    {
      reason: "several allow windows: the earliest start wins",
      windows: [
        { kind: "allow", schedule: "0 22 * * *", duration: "1h" },
        { kind: "allow", schedule: "0 5 * * *", duration: "1h", timeZone: "Asia/Tokyo" },
      ],
      from: "2026-11-24T12:00:00Z",
      allowed: false,
      opens: "2026-11-24T20:00:00Z",
    },
    {
      reason: "an allow schedule that never fires (30 February): no window opens within the year",
      windows: [{ kind: "allow", schedule: "0 0 30 2 *", duration: "1h" }],
      from: "2026-11-24T12:00:00Z",
      allowed: false,
      opens: "none",
    },
    {
      reason: "a deny window always on (each 1 January for 366 days): no window opens within the year",
      windows: [{ kind: "deny", schedule: "0 0 1 1 *", duration: "8784h" }],
      from: "2026-11-24T12:00:00Z",
      allowed: false,
      opens: "none",
    },
    {
      reason: "a deny window always on in steps of a minute: the search stops at its step budget",
      windows: [{ kind: "deny", schedule: "* * * * *", duration: "1m" }],
      from: "2026-11-24T12:00:00Z",
      allowed: false,
      opens: "none (out of steps)",
    },
  ];
  it.each(cases)("$reason", ({ windows, from, allowed, opens }) => {
    expect(rolloutAllowed(compile(...windows), at(from))).toBe(allowed);
    expect(opening(windows, from)).toBe(opens);
  });
});

describe("rollout windows: the next look is always later than now", () => {
  const EVERY_MINUTE_DENY: RolloutWindowSpec = { kind: "deny", schedule: "* * * * *", duration: "1m" };
  const cases: { reason: string; windows: RolloutWindowSpec[]; from: string; maxSteps?: number }[] = [
    {
      reason: "a deny window of a minute every minute (the budget runs out inside the cover)",
      windows: [EVERY_MINUTE_DENY],
      from: "2026-11-24T12:00:00Z",
    },
    {
      reason: "the same, asked in the middle of a minute",
      windows: [EVERY_MINUTE_DENY],
      from: "2026-11-24T12:00:30.250Z",
    },
    {
      reason: "two overlapping deny windows chaining each other for a year",
      windows: [
        { kind: "deny", schedule: "0 0 * * *", duration: "13h" },
        { kind: "deny", schedule: "0 12 * * *", duration: "13h" },
      ],
      from: "2026-11-24T12:00:00Z",
    },
    {
      reason: "deny windows of a minute every minute in several time zones",
      windows: [
        EVERY_MINUTE_DENY,
        { ...EVERY_MINUTE_DENY, timeZone: "Europe/Berlin" },
        { ...EVERY_MINUTE_DENY, timeZone: "Asia/Kolkata" },
      ],
      from: "2026-11-24T12:00:00Z",
    },
    {
      reason: "allow windows of a minute every minute under a deny window of a minute every minute",
      windows: [{ kind: "allow", schedule: "* * * * *", duration: "1m" }, EVERY_MINUTE_DENY],
      from: "2026-11-24T12:00:00Z",
    },
    {
      reason: "allow windows of a second every minute, each under a deny window of 30 seconds",
      windows: [
        { kind: "allow", schedule: "* * * * *", duration: "1s" },
        { kind: "deny", schedule: "* * * * *", duration: "30s" },
      ],
      from: "2026-11-24T12:00:00Z",
    },
    {
      reason: "an active deny window with a budget of one step",
      windows: [{ kind: "deny", schedule: "0 * * * *", duration: "30m" }],
      from: "2026-11-24T12:10:00Z",
      maxSteps: 1,
    },
    {
      reason: "an allow window a minute away with a budget of one step",
      windows: [{ kind: "allow", schedule: "1 12 * * *", duration: "1m" }],
      from: "2026-11-24T12:00:00Z",
      maxSteps: 1,
    },
  ];
  it.each(cases)("$reason", ({ windows, from, maxSteps }) => {
    const compiled = compile(...windows);
    const found = nextOpening(compiled, at(from), {
      counter: STILL,
      ...(maxSteps === undefined ? {} : { maxSteps }),
    });
    expect(found.kind).not.toBe("now");
    const wake = found.kind === "at" ? found.at : found.kind === "none" ? found.searchedUntil : at(from);
    expect(wake).toBeGreaterThan(at(from));
    // Nothing it passed over is allowed: the look again at `wake` misses no opening.
    for (const t of [at(from), Math.floor((at(from) + wake) / 2), wake - 1])
      expect(rolloutAllowed(compiled, t)).toBe(false);
    // A counter that stands still: the step budget is what these cases hold, whatever the load.
    const gate = gateRollout({
      windows: windowsInEffect(windows, undefined, at(from)),
      now: at(from),
      held: [{ group: "source_revision_config", field: "sourceRevisionConfig.imageUri", line: "x" }],
      counter: () => 0,
    });
    expect(gate.kind === "held" && gate.wakeAt).toBeGreaterThan(at(from));
  });

  it("a deny window of a minute every minute: the look again is where the budget left the cover", () => {
    const found = nextOpening(compile(EVERY_MINUTE_DENY), at("2026-11-24T12:00:00Z"), {
      maxSteps: 10,
      counter: STILL,
    });
    // One step finds the start, nine more walk the cover a minute each.
    expect(found).toEqual({ kind: "none", searchedUntil: at("2026-11-24T12:10:00Z"), exhausted: "steps" });
  });
});

/**
 * One allow window of `schedule` for `duration` in `timeZone`: whether a rollout is allowed at
 * an instant, when the next window opens from one (as {@link opening} says it), and an instant
 * in the zone's local time.
 */
function allowWindow(schedule: string, duration: string, timeZone: string) {
  const spec: RolloutWindowSpec = { kind: "allow", schedule, duration, timeZone };
  const windows = compile(spec);
  return {
    windows,
    allowed: (instant: string) => rolloutAllowed(windows, at(instant)),
    opens: (from: string) => opening([spec], from),
    local: (instant: string) => localTime(at(instant), timeZone),
  };
}

describe("rollout windows: daylight-saving changes", () => {
  it("a 02:30 schedule on the spring-forward day in Europe/Berlin starts at 03:00 CEST", () => {
    const window = allowWindow("30 2 * * *", "1h", "Europe/Berlin");
    expect(window.opens("2026-03-28T12:00:00Z")).toBe("2026-03-29T01:00:00Z");
    expect(window.local("2026-03-29T01:00:00Z")).toBe("2026-03-29 03:00 Europe/Berlin (GMT+02:00)");
    // It lasts one elapsed hour from there, and the next day it is 02:30 again.
    expect(window.allowed("2026-03-29T01:59:00Z")).toBe(true);
    expect(window.allowed("2026-03-29T02:00:00Z")).toBe(false);
    expect(window.opens("2026-03-29T02:00:00Z")).toBe("2026-03-30T00:30:00Z");
  });

  it("a 01:30 schedule on the fall-back day in America/New_York starts once, at 01:30 EDT", () => {
    const window = allowWindow("30 1 * * *", "1h", "America/New_York");
    expect(window.opens("2026-10-31T12:00:00Z")).toBe("2026-11-01T05:30:00Z");
    expect(window.local("2026-11-01T05:30:00Z")).toBe("2026-11-01 01:30 America/New_York (GMT-04:00)");
    // The second 01:30 (EST, 06:30Z) starts no window: closed at 06:45Z, open again the next night.
    expect(window.allowed("2026-11-01T06:45:00Z")).toBe(false);
    expect(window.opens("2026-11-01T06:45:00Z")).toBe("2026-11-02T06:30:00Z");
  });

  it("a duration is elapsed time: 2h from 01:00 EDT on the fall-back night ends at 02:00 EST", () => {
    const window = allowWindow("0 1 * * *", "2h", "America/New_York");
    expect(window.allowed("2026-11-01T06:59:00Z")).toBe(true);
    expect(window.allowed("2026-11-01T07:00:00Z")).toBe(false);
  });

  it("a window starting every hour skips the hour a spring-forward day lacks", () => {
    const [w] = allowWindow("0 * * * *", "10m", "Europe/Berlin").windows;
    if (!w) throw new Error("no window");
    // 01:00 CET (00:00Z) fires; 02:00 does not exist; the next is 03:00 CEST (01:00Z).
    expect(isActive(w, at("2026-03-29T00:05:00Z"))).toBe(true);
    expect(isActive(w, at("2026-03-29T01:05:00Z"))).toBe(true);
    expect(iso(w.cron.nextRun(new Date(at("2026-03-29T00:05:00Z")))?.getTime() ?? 0)).toBe(
      "2026-03-29T01:00:00Z",
    );
  });
});

describe("rollout windows: validation", () => {
  const cases: { reason: string; spec: RolloutWindowSpec; field: string; says: RegExp }[] = [
    {
      reason: "a minute out of range",
      spec: { kind: "allow", schedule: "61 * * * *", duration: "1h" },
      field: "spec.rolloutWindows[1].schedule",
      says: /not a cron schedule .*use 5 fields/,
    },
    {
      reason: "six fields (seconds) are not a standard schedule",
      spec: { kind: "allow", schedule: "0 0 22 * * 1-5", duration: "1h" },
      field: "spec.rolloutWindows[1].schedule",
      says: /5 fields/,
    },
    {
      reason: "an unknown time zone",
      spec: { kind: "deny", schedule: "0 0 * * *", duration: "1h", timeZone: "Europe/Berln" },
      field: "spec.rolloutWindows[1].timeZone",
      says: /"Europe\/Berln" is not an IANA time zone.*Europe\/Berlin/,
    },
    {
      reason: "a zero duration",
      spec: { kind: "deny", schedule: "0 0 * * *", duration: "0s" },
      field: "spec.rolloutWindows[1].duration",
      says: /not a duration .*Go duration such as 1h/,
    },
    {
      reason: "a duration longer than a year",
      spec: { kind: "deny", schedule: "0 0 * * *", duration: "9000h" },
      field: "spec.rolloutWindows[1].duration",
      says: /between 1ms and 8784h/,
    },
  ];
  it.each(cases)("$reason", ({ spec, field, says }) => {
    const run = () => compileWindows([NIGHTS, spec], "spec.rolloutWindows");
    expect(run).toThrow(InvalidSpecError);
    try {
      run();
    } catch (error) {
      expect((error as InvalidSpecError).field).toBe(field);
      expect((error as Error).message).toMatch(says);
    }
  });

  it("@daily and names of days are read", () => {
    expect(() => compile({ kind: "allow", schedule: "@daily", duration: "1h" })).not.toThrow();
    expect(() => compile({ kind: "allow", schedule: "0 22 * * MON-FRI", duration: "8h" })).not.toThrow();
  });
});

describe("windowsInEffect", () => {
  const NOW = at("2026-11-24T12:00:00Z");
  const inherited = { windows: [NIGHTS], from: "ServiceConnection team-a/prod" };
  it("a resource's own list replaces its connection's; an empty one means no windows", () => {
    expect(windowsInEffect([], inherited, NOW).windows).toEqual([]);
    expect(windowsInEffect([FREEZE], inherited, NOW).windows.map((w) => w.kind)).toEqual(["deny"]);
    expect(windowsInEffect(undefined, undefined, NOW).windows).toEqual([]);
    const fromConnection = windowsInEffect(undefined, inherited, NOW);
    expect(fromConnection.windows.map((w) => w.schedule)).toEqual(["0 22 * * 1-5"]);
    expect(fromConnection.source).toBe("spec.rolloutWindows of ServiceConnection team-a/prod");
  });

  it("a connection's unreadable window names the connection and both fixes", () => {
    const bad = {
      windows: [{ ...NIGHTS, timeZone: "Mars/Olympus" }],
      from: "ClusterServiceConnection shared",
    };
    expect(() => windowsInEffect(undefined, bad, NOW)).toThrow(
      /^ClusterServiceConnection shared spec\.rolloutWindows\[0\]\.timeZone: "Mars\/Olympus" is not an IANA time zone.*fix the connection, or give this resource spec\.rolloutWindows of its own/,
    );
  });
});

describe("gateRollout", () => {
  const windows = windowsInEffect([NIGHTS], undefined, at("2026-11-24T12:00:00Z"));
  const held = [
    { group: "source_revision_config" as const, field: "sourceRevisionConfig.imageUri", line: "x" },
  ];
  const afternoon = at("2026-11-24T12:00:00Z");

  it("holds outside the windows, naming when the next one opens in RFC 3339 and local time", () => {
    const gate = gateRollout({ windows, now: afternoon, held, counter: STILL });
    expect(gate).toMatchObject({
      kind: "held",
      until: "2026-11-24T21:00:00Z",
      local: "2026-11-24 22:00 Europe/Berlin (GMT+01:00)",
      wakeAt: at("2026-11-24T21:00:00Z"),
    });
    expect(gate.kind === "held" && gate.message).toBe(
      "the change that makes a new revision (sourceRevisionConfig.imageUri) is held: outside the rollout windows (spec.rolloutWindows); it goes out at 2026-11-24T21:00:00Z (2026-11-24 22:00 Europe/Berlin (GMT+01:00)), when allow window [0] (0 22 * * 1-5 for 8h, Europe/Berlin) opens; or set the annotation dms.dev/rollout-now to a new value to roll it out now",
    );
  });

  it("dms.dev/rollout-now lets it through once: a value already acted on does not", () => {
    expect(gateRollout({ windows, now: afternoon, held, rolloutNow: "1" })).toEqual({
      kind: "open",
      viaRolloutNow: true,
    });
    expect(gateRollout({ windows, now: afternoon, held, rolloutNow: "1", handledRolloutNow: "1" }).kind).toBe(
      "held",
    );
  });

  it("says so when no window opens within a year", () => {
    // 29 February: the next one is in 2032, beyond the year searched from March 2028.
    const now = at("2028-03-01T12:00:00Z");
    const rare = windowsInEffect([{ kind: "allow", schedule: "0 0 29 2 *", duration: "1h" }], undefined, now);
    const gate = gateRollout({ windows: rare, now, held });
    expect(gate.kind === "held" && gate.when).toBe("no window opens within 366 days");
    expect(gate.kind === "held" && gate.until).toBeUndefined();
    expect(gate.kind === "held" && gate.wakeAt).toBe(at("2029-03-02T12:00:00Z"));
    // Kept for a minute (the same look again), then searched again from the later instant.
    const soon = gateRollout({ windows: rare, now: now + 30_000, held });
    expect(soon.kind === "held" && soon.wakeAt).toBe(at("2029-03-02T12:00:00Z"));
    const later = gateRollout({ windows: rare, now: now + 86_400_000, held });
    expect(later.kind === "held" && later.wakeAt).toBe(at("2029-03-03T12:00:00Z"));
  });
});

describe("splitPatch", () => {
  const plan: PatchPlan = {
    action: "patch",
    body: {
      source_config: { resource_spec: { min_scale: 3 } },
      source_revision_config: { image_uri: "repo/a:2" },
      revision_source: "internal_docker",
      secrets: [{ name: "K", value: "v" }],
    },
    newRevision: true,
    summary: [],
    changes: [
      { group: "source_config", field: "sourceConfig.resourceSpec.minScale", line: "minScale: 1 → 3" },
      {
        group: "source_revision_config",
        field: "sourceRevisionConfig.imageUri",
        line: "imageUri: a:1 → a:2",
      },
      { group: "secrets", field: "secrets", line: "secrets: K changed" },
    ],
    problems: [],
    secretsHash: "f".repeat(64),
  };

  it("sends the scale change now and holds the revision, its source and the secrets", () => {
    const { now, held } = splitPatch(plan);
    expect(now?.body).toEqual({ source_config: { resource_spec: { min_scale: 3 } } });
    expect(now?.newRevision).toBe(false);
    // The secrets are not applied by this part: their hash is not recorded with it.
    expect(now?.secretsHash).toBeUndefined();
    expect(held?.body).toEqual({
      source_revision_config: { image_uri: "repo/a:2" },
      revision_source: "internal_docker",
      secrets: [{ name: "K", value: "v" }],
    });
    expect(held?.summary).toEqual(["imageUri: a:1 → a:2", "secrets: K changed"]);
  });

  it("holds nothing of a change that makes no revision", () => {
    const scaleOnly: PatchPlan = { ...plan, body: { source_config: {} }, changes: plan.changes.slice(0, 1) };
    expect(splitPatch(scaleOnly)).toEqual({ now: scaleOnly });
  });
});
