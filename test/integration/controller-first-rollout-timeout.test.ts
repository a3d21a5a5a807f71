// spec.rolloutTimeout covers a first rollout on the real control plane: a new deployment whose
// first build never leaves BUILDING while the service reports it AWAITING_DATABASE is Stalled
// (RolloutTimeout) past the timeout, Synced staying True, and the message says that both the
// revision and the deployment are stuck.
import { afterEach, describe, expect, it } from "vitest";
import { conditionOf, hasCondition } from "../support/resources.ts";
import { type Scenario, startScenario } from "../support/scenario.ts";

const DAY = 86_400_000;

describe("controller: a first rollout past spec.rolloutTimeout", () => {
  const running: Scenario[] = [];
  afterEach(async () => {
    for (const s of running.splice(0)) await s.stop();
  });

  it("AWAITING_DATABASE and a build that never ends: Stalled RolloutTimeout, naming both", async () => {
    const s = await startScenario("first-rollout", {
      sim: { timing: { readyAfterMs: DAY, revisionActiveAfterMs: DAY, deleteAfterMs: 300 } },
    });
    running.push(s);
    await s.user.create(s.namespace, "slow", {
      source: "external_docker",
      sourceRevisionConfig: { imageUri: "registry.example.com/agent:1" },
      rolloutTimeout: "3s",
    });
    await s.user.waitFor(
      s.namespace,
      "slow",
      (o) => hasCondition(o, "Ready", "False", "AwaitingDatabase"),
      "AwaitingDatabase first",
    );
    const stalled = await s.user.waitFor(
      s.namespace,
      "slow",
      (o) => hasCondition(o, "Stalled", "True", "RolloutTimeout"),
      "Stalled RolloutTimeout",
      30_000,
    );
    expect(hasCondition(stalled, "Synced", "True")).toBe(true);
    expect(stalled.status?.remoteStatus).toBe("AWAITING_DATABASE");
    expect(conditionOf(stalled, "Stalled")?.message).toMatch(
      /has not gone live within spec\.rolloutTimeout 3s and the service still reports the deployment AWAITING_DATABASE; no revision is active/,
    );
  });
});
