// Rollout windows a tenant writes to stall the operator: schedules that never fire, allow/deny
// pairs that ping-pong the search, sixteen windows, zones whose clocks skip the times named. Each
// is decided (refused, or held and looked at again later) within a bound on the event loop,
// where the search bounded by steps alone took 0.3 to 8 s per reconcile. The bounds are shown by
// what stops the work and with what answer, on counters the tests drive (one that stands still:
// the steps stop the search; one that jumps: its time budget does), never by how fast this
// machine runs it.
import { Cron, CronDate } from "croner";
import { afterEach, describe, expect, it, vi } from "vitest";
import { InvalidSpecError } from "../../src/crd/errors.ts";
import { BoundedMemo } from "../../src/reconcile/rollout/bounded-memo.ts";
import { FIRE_HORIZON_DAYS, firesWithin } from "../../src/reconcile/rollout/fire-check.ts";
import {
  MAX_OPENING_STEPS,
  nextOpening,
  OPENING_BUDGET_MS,
  OPENING_HORIZON_MS,
  UNTIMED_STEPS,
} from "../../src/reconcile/rollout/next-opening.ts";
import { compileWindows, type RolloutWindowSpec } from "../../src/reconcile/rollout/rollout-windows.ts";
import {
  gateRollout,
  SLOW_SEARCH_MAX_RETRY_MS,
  SLOW_SEARCH_RETRY_MS,
  slowSearchRetryMs,
  windowsInEffect,
} from "../../src/reconcile/rollout-gate.ts";

const at = (iso: string) => Date.parse(iso);
const NOW = at("2026-11-24T12:00:00Z");
const ZONES = ["Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "America/Santiago"];
const HELD = [
  { group: "source_revision_config" as const, field: "sourceRevisionConfig.imageUri", line: "x" },
];

type Decision =
  | { kind: "refused"; field: string; message: string }
  | { kind: "held" | "open"; when?: string };

/** What a reconcile of a held change decides under `windows`: the check, then the gate. */
function decide(windows: RolloutWindowSpec[], counter: () => number, now = NOW): Decision {
  try {
    const gate = gateRollout({ windows: windowsInEffect(windows, undefined, now), now, held: HELD, counter });
    return gate.kind === "held" ? { kind: "held", when: gate.when } : { kind: "open" };
  } catch (error) {
    if (!(error instanceof InvalidSpecError)) throw error;
    return { kind: "refused", field: error.field, message: error.message };
  }
}

/**
 * A counter that stands still: only the steps can stop a search timed on it. It throws once read
 * far more often than a search of {@link MAX_OPENING_STEPS} evaluations reads it (once or twice
 * each), so a search the steps no longer bound fails here instead of walking its whole horizon.
 */
function standingStill(): () => number {
  let reads = 0;
  return () => {
    reads += 1;
    if (reads > 4 * MAX_OPENING_STEPS) throw new Error(`the search went on past ${MAX_OPENING_STEPS} steps`);
    return 0;
  };
}

/** A counter a millisecond later at each reading: the time budget ends after ~40 readings. */
function jumping(): () => number {
  let reads = 0;
  return () => reads++;
}

/** What stopped a search: its steps, its time budget, or its horizon. */
const BY = {
  steps: `no opening was found within ${MAX_OPENING_STEPS} steps of the schedules`,
  time: `finding when they next allow a rollout took more than ${OPENING_BUDGET_MS} ms`,
  horizon: `no window opens within ${OPENING_HORIZON_MS / 86_400_000} days`,
};

const pair = (schedule: string, timeZone?: string): RolloutWindowSpec[] => [
  { kind: "allow", schedule, duration: "1m", ...(timeZone ? { timeZone } : {}) },
  { kind: "deny", schedule, duration: "1m", ...(timeZone ? { timeZone } : {}) },
];

afterEach(() => {
  vi.restoreAllMocks();
});

describe("hostile rollout windows: each refused by the fire check, or held by a bound of the search", () => {
  const rows: {
    reason: string;
    windows: RolloutWindowSpec[];
    /**
     * The field a refusal names, or what stopped the search of windows accepted and held: on a
     * counter that stands still, and on one that jumps.
     */
    expect: { refused: string } | { still: keyof typeof BY; jumping: keyof typeof BY };
  }[] = [
    {
      reason: "16 allow windows on dates that do not exist (31 February, 31 April...) in four zones",
      windows: Array.from({ length: 16 }, (_, i) => ({
        kind: "allow",
        schedule: i % 2 ? `${i} 0 31 2 *` : `${i} 0 31 4,6,9,11 *`,
        duration: "1h",
        timeZone: ZONES[i % 4] ?? "UTC",
      })),
      expect: { refused: "spec.rolloutWindows[0].schedule" },
    },
    {
      reason: "an allow/deny pair at */2 ping-ponging the search beside 14 deny windows on 31 February",
      windows: [
        ...pair("*/2 * * * *"),
        ...Array.from({ length: 14 }, (_, i) => ({
          kind: "deny" as const,
          schedule: i % 2 ? "0 0 31 2 *" : "0 0 31 4,6,9,11 *",
          duration: "1h",
          timeZone: ZONES[i % 4] ?? "UTC",
        })),
      ],
      expect: { refused: "spec.rolloutWindows[2].schedule" },
    },
    {
      reason: "15 windows on 29 February (every four years) before one on 30 February",
      windows: [
        ...Array.from({ length: 15 }, (_, i) => ({
          kind: "deny" as const,
          schedule: `${i} 1 29 2 *`,
          duration: "1h",
          timeZone: ZONES[i % 4] ?? "UTC",
        })),
        { kind: "allow", schedule: "0 0 30 2 *", duration: "1h", timeZone: "Europe/Berlin" },
      ],
      expect: { refused: "spec.rolloutWindows[15].schedule" },
    },
    {
      reason: "16 windows whose only times are ones a spring-forward gap skips",
      windows: [
        ...Array.from({ length: 8 }, (_, i) => ({
          kind: "allow" as const,
          schedule: `${i}-59/${10 + i} 2 * 3 0L`,
          duration: "1h",
          timeZone: "Europe/Berlin",
        })),
        ...Array.from({ length: 8 }, (_, i) => ({
          kind: "allow" as const,
          schedule: `${i},${i + 15} 2 * 10 0#1`,
          duration: "1h",
          timeZone: "Australia/Lord_Howe",
        })),
      ],
      expect: { refused: "spec.rolloutWindows[0].schedule" },
    },
    {
      reason: "8 allow/deny pairs at */2 and 1-59/2 ping-ponging in four zones",
      windows: Array.from({ length: 8 }, (_, i) =>
        pair(i % 2 ? "1-59/2 * * * *" : "*/2 * * * *", ZONES[i % 4]),
      ).flat(),
      expect: { still: "steps", jumping: "time" },
    },
    {
      reason: "an allow/deny pair at */2 beside 14 deny windows on 29 February in zones with gaps",
      windows: [
        ...pair("*/2 * * * *", "America/New_York"),
        ...Array.from({ length: 14 }, (_, i) => ({
          kind: "deny" as const,
          schedule: `${i} 2 29 2 *`,
          duration: "1h",
          timeZone: ZONES[i % 4] ?? "UTC",
        })),
      ],
      expect: { still: "steps", jumping: "time" },
    },
    {
      reason: "16 allow windows on 29 February: the next opening is more than a year away",
      windows: Array.from({ length: 16 }, (_, i) => ({
        kind: "allow" as const,
        schedule: `${i} 3 29 2 *`,
        duration: "1h",
        timeZone: ZONES[i % 4] ?? "UTC",
      })),
      // Two evaluations reach the horizon: neither budget comes into it.
      expect: { still: "horizon", jumping: "horizon" },
    },
  ];

  it.each(rows)("$reason", ({ windows, expect: expected }) => {
    if ("refused" in expected) {
      // Refused by the day-by-day fire check, without asking croner for a run (its search of up
      // to 400 years is what the check is there to spare).
      const runs = [
        vi.spyOn(Cron.prototype, "nextRun"),
        vi.spyOn(Cron.prototype, "nextRuns"),
        vi.spyOn(Cron.prototype, "previousRuns"),
      ];
      const value = decide(windows, standingStill());
      expect(value).toMatchObject({ kind: "refused", field: expected.refused });
      expect(value.kind === "refused" && value.message).toMatch(/never starts a window within 8 years/);
      expect(runs.map((run) => run.mock.calls.length)).toEqual([0, 0, 0]);
      return;
    }
    // A search cut for time is not kept: the one after it searches again. Accepted windows are
    // never refused for the search's time (it depends on the machine): held, saying what stopped it.
    expect(decide(windows, jumping())).toEqual({
      kind: "held",
      when: expect.stringContaining(BY[expected.jumping]),
    });
    expect(decide(windows, standingStill())).toEqual({
      kind: "held",
      when: expect.stringContaining(BY[expected.still]),
    });
  });
});

describe("the search's time budget", () => {
  // 8 pairs that never open: the search runs until a budget stops it.
  const windows = Array.from({ length: 8 }, (_, i) => pair("*/2 * * * *", ZONES[i % 4])).flat();

  it("stops the search when the counter passes the budget, whatever the steps left", () => {
    let reads = 0;
    // Each reading of the counter is a millisecond later: the budget ends after ~40 readings,
    // read after each evaluation past the first UNTIMED_STEPS.
    const counter = () => reads++;
    const found = nextOpening(compileWindows(windows, "spec.rolloutWindows"), NOW, { counter, budgetMs: 40 });
    expect(found).toMatchObject({ kind: "none", exhausted: "time" });
    expect(found.kind === "none" && found.searchedUntil).toBeGreaterThan(NOW);
    // The steps were far from their own budget.
    expect(reads).toBeGreaterThanOrEqual(40);
    expect(reads).toBeLessThan(80);
  });

  it("under a connection's binding windows: two searches at most, each stopped by its budget", () => {
    let reads = 0;
    // As above: a millisecond per reading, so each search ends after ~40 readings.
    const counter = () => reads++;
    const binding = {
      windows: windows.slice(0, 8),
      from: "ClusterServiceConnection c",
      binding: { liftedBy: "x" },
    };
    const input = { windows: windowsInEffect(windows.slice(8), binding, NOW), now: NOW, held: HELD, counter };
    // The two lists together, then the connection's alone (whether rollout-now could let it out).
    expect(gateRollout(input)).toMatchObject({
      kind: "held",
      when: expect.stringContaining("took more than"),
    });
    expect(reads).toBeGreaterThanOrEqual(80);
    expect(reads).toBeLessThan(160);
    // Without windows of its own, the connection's alone hold it: one search.
    reads = 0;
    const alone = { ...input, windows: windowsInEffect([], binding, NOW) };
    expect(gateRollout(alone)).toMatchObject({ kind: "held" });
    expect(reads).toBeLessThan(80);
  });

  it("holds the change when the search runs out of time, keeps no answer, and looks again with a backoff", () => {
    let reads = 0;
    const counter = () => (reads += 10);
    const input = { windows: windowsInEffect(windows, undefined, NOW), now: NOW, held: HELD, counter };
    // A search cut for time is no verdict on the spec: a pause or a busy machine cuts it too.
    const first = gateRollout(input);
    expect(first).toMatchObject({ kind: "held", wakeAt: NOW + SLOW_SEARCH_RETRY_MS });
    expect(first.kind === "held" && first.message).toMatch(
      /^the change that makes a new revision \(sourceRevisionConfig\.imageUri\) is held: outside the rollout windows \(spec\.rolloutWindows\), and finding when they next allow a rollout took more than 40 ms, the most the operator spends on it at once \(nothing opens before 2026-11-24T12:\d\d:00Z\); it looks again in 10s .*set the annotation dms\.dev\/rollout-now/,
    );
    // Not kept: the next gate searches again (the counter is read), and waits twice as long.
    const before = reads;
    const second = gateRollout({ ...input, now: NOW + 1_000 });
    expect(reads).toBeGreaterThan(before);
    expect(second).toMatchObject({ kind: "held", wakeAt: NOW + 1_000 + 2 * SLOW_SEARCH_RETRY_MS });
    // dms.dev/rollout-now still lets the change through, without a search.
    expect(gateRollout({ ...input, rolloutNow: "1" })).toEqual({ kind: "open", viaRolloutNow: true });
    // A search that ends in time answers, and the backoff starts again.
    const calm = gateRollout({ ...input, counter: () => 0 });
    if (calm.kind !== "held") throw new Error("expected held");
    expect(calm.wakeAt).toBeGreaterThan(NOW);
    const later = calm.wakeAt;
    expect(gateRollout({ ...input, now: later })).toMatchObject({ wakeAt: later + SLOW_SEARCH_RETRY_MS });
  });

  it("the backoff doubles up to its ceiling", () => {
    expect([1, 2, 3].map(slowSearchRetryMs)).toEqual([10_000, 20_000, 40_000]);
    expect(slowSearchRetryMs(100)).toBe(SLOW_SEARCH_MAX_RETRY_MS);
  });

  it("a search shorter than UNTIMED_STEPS is never cut for time: a zone's first use may be slow", () => {
    let reads = 0;
    // A counter far past any budget at each reading.
    const counter = () => (reads += 1_000);
    const nights: RolloutWindowSpec[] = [
      { kind: "allow", schedule: "0 22 * * 1-5", duration: "8h", timeZone: "Asia/Kolkata" },
      { kind: "deny", schedule: "0 0 24 12 *", duration: "72h", timeZone: "Asia/Kolkata" },
    ];
    const found = nextOpening(compileWindows(nights, "spec.rolloutWindows"), NOW, { counter });
    expect(found).toMatchObject({ kind: "at", at: at("2026-11-24T16:30:00Z") });
    expect(UNTIMED_STEPS).toBeLessThan(MAX_OPENING_STEPS);
  });

  it("an opening found is kept until it passes, then searched again", () => {
    const nights: RolloutWindowSpec[] = [
      { kind: "allow", schedule: "0 22 * * 1-5", duration: "8h", timeZone: "Europe/Vienna" },
    ];
    let reads = 0;
    const counter = () => reads++;
    const input = { windows: windowsInEffect(nights, undefined, NOW), held: HELD, counter };
    const first = gateRollout({ ...input, now: NOW });
    expect(first).toMatchObject({ kind: "held", until: "2026-11-24T21:00:00Z" });
    const searched = reads;
    expect(searched).toBeGreaterThan(0);
    expect(gateRollout({ ...input, now: at("2026-11-24T20:59:00Z") })).toEqual(first);
    expect(reads).toBe(searched);
    // Inside the window: a new question, answered by a search.
    expect(gateRollout({ ...input, now: at("2026-11-24T21:30:00Z") })).toEqual({
      kind: "open",
      viaRolloutNow: false,
    });
    expect(reads).toBeGreaterThan(searched);
    // Before the instant it was found at, a kept answer is not used.
    const earlier = gateRollout({ ...input, now: at("2026-11-23T12:00:00Z") });
    expect(earlier).toMatchObject({ kind: "held", until: "2026-11-23T21:00:00Z" });
  });
});

describe("schedules that start no window within eight years", () => {
  // Each verdict against croner's own next run (searched up to 400 years: slow, hence only here).
  const cases: { schedule: string; zone: string; fires: boolean }[] = [
    { schedule: "0 0 31 2 *", zone: "UTC", fires: false },
    { schedule: "0 0 30 2 *", zone: "Europe/Berlin", fires: false },
    { schedule: "0 0 31 4,6,9,11 *", zone: "America/New_York", fires: false },
    { schedule: "0 0 30W 2 *", zone: "UTC", fires: false },
    { schedule: "0 0 29 2 *", zone: "UTC", fires: true },
    { schedule: "0 0 L 2 *", zone: "Asia/Tokyo", fires: true },
    // Day of month AND day of week: 29 February on a Monday, next in 2044.
    { schedule: "0 0 29 2 +1", zone: "UTC", fires: false },
    // Day of month OR day of week (Vixie cron): every Monday of February as well.
    { schedule: "0 0 29 2 1", zone: "UTC", fires: true },
    // Berlin's clocks skip 02:00-03:00 on the last Sunday of March: an interval schedule skips too.
    { schedule: "*/30 2 * 3 0L", zone: "Europe/Berlin", fires: false },
    { schedule: "*/30 2 * 3 0L", zone: "Europe/London", fires: true },
    { schedule: "*/10 1 * 3 0L", zone: "Europe/London", fires: false },
    // A fixed time in the gap starts at the first valid time after it (croner's rule).
    { schedule: "30 2 * 3 0L", zone: "Europe/Berlin", fires: true },
    // Lord Howe skips 02:00-02:30 on the first Sunday of October: 02:45 exists, 02:15 does not.
    { schedule: "15,45 2 * 10 0#1", zone: "Australia/Lord_Howe", fires: true },
    { schedule: "0,15 2 * 10 0#1", zone: "Australia/Lord_Howe", fires: false },
    // Santiago skips midnight to 01:00 on the first Sunday of September, except when it is the 1st.
    { schedule: "*/5 0 * 9 0#1", zone: "America/Santiago", fires: true },
    { schedule: "0,30 2 8-14 3 +0", zone: "America/New_York", fires: false },
    // Every month a candidate, no day a match (the fifth Friday is never the 13th): all days tried.
    { schedule: "0 0 13 * +5#5", zone: "Europe/Berlin", fires: false },
    { schedule: "@yearly", zone: "Europe/Berlin", fires: true },
  ];
  it.each(cases)("$schedule in $zone: $fires", ({ schedule, zone, fires }) => {
    // The days it matches: at most the horizon's and the day before `now`. Past them the match
    // throws, so a check without that bound fails here instead of matching days for centuries.
    const match = CronDate.prototype.match;
    const limit = FIRE_HORIZON_DAYS + 2;
    let days = 0;
    vi.spyOn(CronDate.prototype, "match").mockImplementation(function (this: CronDate, ...args) {
      days += 1;
      if (days > limit) throw new Error(`matched more than ${limit} days`);
      return match.apply(this, args);
    });
    // Nor does it ask croner for a run: croner's own search goes up to 400 years.
    const runs = vi.spyOn(Cron.prototype, "nextRun");
    const value = firesWithin(schedule, zone, NOW);
    expect(runs).not.toHaveBeenCalled();
    // Croner's own answer below, unwatched.
    vi.restoreAllMocks();
    expect(value).toBe(fires);
    expect(days).toBeLessThanOrEqual(limit);
    const cron = new Cron(schedule, {
      ...(zone === "UTC" ? { utcOffset: 0 } : { timezone: zone }),
      paused: true,
    });
    const next = cron.nextRun(new Date(NOW))?.getTime();
    expect(next !== undefined && next < NOW + FIRE_HORIZON_DAYS * 86_400_000).toBe(fires);
  });

  it("is refused where the resource is checked, naming the item and the fix", () => {
    const windows: RolloutWindowSpec[] = [
      { kind: "allow", schedule: "0 22 * * 1-5", duration: "8h" },
      { kind: "deny", schedule: "0 0 31 4 *", duration: "1h", timeZone: "Europe/Paris" },
    ];
    expect(() => windowsInEffect(windows, undefined, NOW)).toThrow(
      'spec.rolloutWindows[1].schedule: "0 0 31 4 *" never starts a window within 8 years in Europe/Paris: its day of month does not exist in its months (February has 28 or 29 days; April, June, September and November 30), or its times are ones the clocks skip there; use a date that exists, such as "0 0 L 2 *" for the last day of February, or "0 0 28 2 *"',
    );
    // Without an instant (nothing to search from) only the reading is checked.
    expect(windowsInEffect(windows, undefined, undefined).windows).toHaveLength(2);
  });

  it("a connection's window is refused in each resource that uses it, naming the connection", () => {
    const inherited = {
      windows: [{ kind: "allow" as const, schedule: "0 0 31 9 *", duration: "1h" }],
      from: "ClusterServiceConnection shared",
    };
    expect(() => windowsInEffect(undefined, inherited, NOW)).toThrow(
      /^ClusterServiceConnection shared spec\.rolloutWindows\[0\]\.schedule: "0 0 31 9 \*" never starts a window within 8 years in UTC: .*; fix the connection, or give this resource spec\.rolloutWindows of its own/,
    );
  });
});

describe("BoundedMemo", () => {
  it("keeps the most recently used entries up to its size", () => {
    const memo = new BoundedMemo<string, number>(2);
    memo.set("a", 1);
    memo.set("b", 2);
    expect(memo.get("a")).toBe(1);
    memo.set("c", 3);
    // b was the least recently used.
    expect([memo.get("a"), memo.get("b"), memo.get("c"), memo.size]).toEqual([1, undefined, 3, 2]);
  });
});
