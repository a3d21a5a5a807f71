// The gauges of the Deployment resources' state (src/gauges/resource-metrics.ts), computed at
// scrape time from the watch cache: by Ready/Synced, rollouts in progress, failed and held, the
// age of the longest-held change, and the resources Stalled by reason, with the label values
// bounded and exported even when no resource has them.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import {
  type ConditionsOf,
  OTHER_REASON,
  RESOURCE_METRICS,
  registerResourceMetrics,
} from "../../src/gauges/resource-metrics.ts";
import { RuntimeMetrics } from "../../src/runtime/metrics.ts";
import { metricsText } from "../../src/serving/health.ts";
import {
  EXTERNAL_CHANGES_METRIC,
  externalChangeCounter,
  STALLED_REASONS,
} from "../../src/wiring/operator-metrics.ts";

const c = (type: string, status: string, reason = "R", lastTransitionTime?: string) => ({
  type,
  status,
  reason,
  ...(lastTransitionTime === undefined ? {} : { lastTransitionTime }),
});
const NOW = Date.parse("2026-11-27T12:00:00Z");

/** A registry with the resource gauges over `current()`, its clock at {@link NOW}, and how often it listed. */
function gauges(current: () => ConditionsOf[], stalledReasons: readonly string[] = STALLED_REASONS) {
  const metrics = new RuntimeMetrics({ processMetrics: false });
  const listed = { count: 0 };
  registerResourceMetrics(
    metrics.registry,
    () => {
      listed.count++;
      return current();
    },
    { stalledReasons, now: () => NOW },
  );
  return { registry: metrics.registry, listed };
}

/** A resource whose change that makes a revision is held since `synced` (Reconciling since `reconciling`). */
const held = (synced: string | undefined, reconciling?: string): ConditionsOf => ({
  status: {
    conditions: [
      c("Ready", "True", "Available", "2026-11-01T00:00:00Z"),
      c("Synced", "False", "OutsideRolloutWindow", synced),
      ...(reconciling === undefined ? [] : [c("Reconciling", "True", "OutsideRolloutWindow", reconciling)]),
    ],
  },
});

describe("resource state gauges", () => {
  it("count resources by Ready/Synced and rollouts in progress and failed, at scrape time", async () => {
    const resources = [
      { status: { conditions: [c("Ready", "True"), c("Synced", "True")] } },
      { status: { conditions: [c("Ready", "True"), c("Synced", "True")] } },
      { status: { conditions: [c("Ready", "False", "RolloutInProgress"), c("Synced", "True")] } },
      {
        status: {
          conditions: [c("Ready", "False"), c("Synced", "True"), c("Stalled", "True", "RevisionFailed")],
        },
      },
      { status: { conditions: [c("Ready", "Unknown"), c("Synced", "False", "NameConflict")] } },
      {},
    ];
    let current: ConditionsOf[] = [];
    const { registry } = gauges(() => current);
    current = resources;
    const text = await registry.metrics();
    expect(text).toContain('dms_resources{ready="True",synced="True"} 2');
    expect(text).toContain('dms_resources{ready="False",synced="True"} 2');
    expect(text).toContain('dms_resources{ready="Unknown",synced="False"} 1');
    expect(text).toContain('dms_resources{ready="None",synced="None"} 1');
    expect(text).toContain('dms_rollouts{state="in_progress"} 1');
    expect(text).toContain('dms_rollouts{state="failed"} 1');
    expect(text).toContain('dms_rollouts{state="held"} 0');
    current = resources.slice(0, 1);
    const later = await registry.metrics();
    expect(later).toContain('dms_resources{ready="True",synced="True"} 1');
    expect(later).not.toContain('ready="Unknown"');
    expect(later).toContain('dms_rollouts{state="failed"} 0');
  });

  it("count the resources Stalled by reason, every listed reason exported even at 0, the rest as Other", async () => {
    const stalled = (reason: string, status = "True") => ({
      status: { conditions: [c("Ready", "False", reason), c("Stalled", status, reason)] },
    });
    let current: ConditionsOf[] = [
      stalled("RolloutTimeout"),
      stalled("RolloutTimeout"),
      stalled("NameReserved"),
      stalled("RevisionFailed"),
      stalled("SomethingNew"),
      stalled("Immutable", "False"), // not Stalled
      { status: { conditions: [c("Ready", "False", "RateLimited"), c("Synced", "False", "RateLimited")] } },
    ];
    const { registry } = gauges(() => current);
    const text = await registry.metrics();
    expect(text).toContain('dms_resources_stalled{reason="RolloutTimeout"} 2');
    expect(text).toContain('dms_resources_stalled{reason="NameReserved"} 1');
    expect(text).toContain('dms_resources_stalled{reason="RevisionFailed"} 1');
    expect(text).toContain(`dms_resources_stalled{reason="${OTHER_REASON}"} 1`);
    expect(text).toContain('dms_resources_stalled{reason="Immutable"} 0');
    expect(text).not.toContain('reason="SomethingNew"');
    for (const reason of [...STALLED_REASONS, OTHER_REASON])
      expect(text).toMatch(new RegExp(`^dms_resources_stalled\\{reason="${reason}"\\} \\d+$`, "m"));

    // Whatever the statuses say, the label takes only the listed reasons and Other.
    current = Array.from({ length: 500 }, (_, i) => stalled(`Invented${i}`));
    const flooded = await registry.metrics();
    const series = flooded.split("\n").filter((l) => l.startsWith("dms_resources_stalled{"));
    expect(series).toHaveLength(STALLED_REASONS.length + 1);
    expect(flooded).toContain(`dms_resources_stalled{reason="${OTHER_REASON}"} 500`);
    expect(flooded).toContain('dms_resources_stalled{reason="RolloutTimeout"} 0');

    // The bound docs/tenant-inputs.md gives for the label is the one exported.
    const doc = readFileSync(join(import.meta.dirname, "..", "..", "docs", "tenant-inputs.md"), "utf8");
    const bound = /`dms_resources_stalled` takes (\d+) values \((\d+) named, `Other`\)/.exec(doc);
    expect(bound?.slice(1).map(Number)).toEqual([STALLED_REASONS.length + 1, STALLED_REASONS.length]);
  });

  it("count the changes held outside the rollout windows and give the longest hold's age in seconds", async () => {
    let current: ConditionsOf[] = [
      held("2026-11-27T11:00:00Z"), // an hour
      held("2026-11-25T12:00:00Z"), // two days: the oldest
      held("2026-11-27T11:59:30.600Z"), // 29.4 seconds
      {
        status: { conditions: [c("Ready", "True"), c("Synced", "False", "Paused", "2026-01-01T00:00:00Z")] },
      },
    ];
    const { registry } = gauges(() => current);
    let text = await registry.metrics();
    expect(text).toContain('dms_rollouts{state="held"} 3');
    expect(text).toContain(`${RESOURCE_METRICS.heldAge} ${2 * 86_400}\n`);

    // Synced was False (Paused) since long before the hold: the hold's Reconciling time, later, counts.
    current = [held("2026-01-01T00:00:00Z", "2026-11-27T10:00:00Z")];
    text = await registry.metrics();
    expect(text).toContain(`${RESOURCE_METRICS.heldAge} ${2 * 3600}\n`);

    // A time ahead of the clock reads 0, not a negative age; a missing one counts as held only.
    current = [held("2026-11-27T12:05:00Z"), held(undefined)];
    text = await registry.metrics();
    expect(text).toContain('dms_rollouts{state="held"} 2');
    expect(text).toContain(`${RESOURCE_METRICS.heldAge} 0\n`);

    // Nothing held: 0, still exported.
    current = [{ status: { conditions: [c("Ready", "True"), c("Synced", "True")] } }];
    text = await registry.metrics();
    expect(text).toContain('dms_rollouts{state="held"} 0');
    expect(text).toContain(`${RESOURCE_METRICS.heldAge} 0\n`);
  });

  it("make one pass over the resources per scrape, also for /metrics?name= of one gauge", async () => {
    const current: ConditionsOf[] = [held("2026-11-27T11:00:00Z")];
    const { registry, listed } = gauges(() => current);
    await registry.metrics();
    expect(listed.count).toBe(1);
    await registry.metrics();
    expect(listed.count).toBe(2); // the next scrape counts again: never stale

    const one = await metricsText(registry, [RESOURCE_METRICS.heldAge]);
    expect(listed.count).toBe(3);
    expect(one).toContain(`${RESOURCE_METRICS.heldAge} 3600\n`);
    expect(one).not.toContain("dms_rollouts{");
    expect(one).not.toContain("dms_resources_stalled");

    const two = await metricsText(registry, [RESOURCE_METRICS.stalled, RESOURCE_METRICS.rollouts]);
    expect(listed.count).toBe(4);
    expect(two).toContain('dms_rollouts{state="held"} 1');
    expect(two).toContain('dms_resources_stalled{reason="Other"} 0');
    expect(two).not.toContain("dms_resources{");
  });
});

describe("dms_external_changes_total", () => {
  it("counts two namespaces' connections of one name apart, and drops one's series once it is deleted; keeps the default's", async () => {
    // A connection's name is a tenant's: made and deleted under new names, it must not add series for ever.
    const metrics = new RuntimeMetrics({ processMetrics: false });
    let watched = [
      { metadata: { name: "prod", namespace: "team-a" } },
      { metadata: { name: "prod", namespace: "team-b" } },
    ];
    const count = externalChangeCounter(metrics, { all: [{ list: () => watched }] } as never, {
      bound: { overLimit: () => undefined },
    });
    count("ServiceConnection/team-a/prod", "revision");
    count("ServiceConnection/team-b/prod", "revision");
    count("ServiceConnection/team-b/prod", "fields");
    const scraped = async () =>
      (await metrics.registry.getSingleMetricAsString(EXTERNAL_CHANGES_METRIC)).split("\n");
    const before = await scraped();
    expect(before).toContain(
      'dms_external_changes_total{connection="ServiceConnection/team-a/prod",kind="revision"} 1',
    );
    expect(before).toContain(
      'dms_external_changes_total{connection="ServiceConnection/team-b/prod",kind="revision"} 1',
    );
    watched = [{ metadata: { name: "prod", namespace: "team-a" } }];
    const after = await scraped();
    expect(after.filter((l) => l.includes('connection="ServiceConnection/team-b/'))).toEqual([]);
    expect(after).toContain(
      'dms_external_changes_total{connection="ServiceConnection/team-a/prod",kind="revision"} 1',
    );
    expect(after).toContain('dms_external_changes_total{connection="default",kind="fields"} 0');
  });
});
