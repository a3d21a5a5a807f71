// leader_election_master_status as a replica exports it from its start: DmsOperatorNoLeader
// fires on every replica reporting 0, so one campaigning (its Lease held by another, or never
// won: RBAC, an API server refusing it) must say 0, not nothing.
import pino from "pino";
import { describe, expect, it } from "vitest";
import type { KubeClient } from "../../src/kube/client.ts";
import { systemClock } from "../../src/runtime/clock.ts";
import { RuntimeMetrics } from "../../src/runtime/metrics.ts";
import { leaderElection } from "../../src/wiring/leader-election.ts";

const CONFIG = {
  enabled: true,
  namespace: "dms-system",
  name: "dms-operator-leader",
  leaseDurationMs: 15_000,
  renewDeadlineMs: 10_000,
  retryPeriodMs: 2_000,
};

/** The elector `enabled` gives (none when off), and the text of its metrics; no call is made. */
async function elected(enabled: boolean) {
  const metrics = new RuntimeMetrics({ processMetrics: false });
  const { elector } = leaderElection(
    { ...CONFIG, enabled },
    {
      client: {} as KubeClient,
      namespace: undefined,
      identity: "dms-operator-0",
      metrics,
      logger: pino({ level: "silent" }),
      clock: systemClock,
    },
  );
  return { elector, text: await metrics.registry.metrics() };
}

describe("leader_election_master_status", () => {
  it("is 0 for a replica that has not led yet, before its first campaign", async () => {
    const { elector, text } = await elected(true);
    expect(elector?.isLeader()).toBe(false);
    expect(text).toContain('leader_election_master_status{name="dms-operator-leader"} 0');
  });

  it("is not exported without leader election (the chart drops DmsOperatorNoLeader then)", async () => {
    const { elector, text } = await elected(false);
    expect(elector).toBeUndefined();
    expect(text).not.toContain("leader_election_master_status{");
  });
});
