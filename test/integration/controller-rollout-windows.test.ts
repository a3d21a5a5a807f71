// Rollout windows on the real control plane: a deny window holds a new image (Synced=False,
// OutsideRolloutWindow, Reconciling) while a replica change goes through at once; the
// dms.dev/rollout-now annotation releases the held change in one PATCH and is acknowledged in
// status; and a window that ends lets the held change out by itself, with no annotation, at its
// end. A ClusterServiceConnection's freeze under spec.rolloutWindowsPolicy Binding is lifted
// neither by the resource's `rolloutWindows: []` nor by rollout-now, and is once the policy is
// Advisory. What the API server refuses of a window is in crd-validation.test.ts.
import { randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import type { RolloutWindowSpec } from "../../src/crd/rollout-windows-schema.ts";
import type { DeploymentSpec } from "../../src/crd/schema.ts";
import { kubectl, kubectlOk } from "../support/cluster.ts";
import { TEST_API_KEY } from "../support/operator.ts";
import { conditionOf, hasCondition } from "../support/resources.ts";
import { type Scenario, useScenarios } from "../support/scenario.ts";

const PATCH = "PATCH /v2/deployments/{deployment_id}";
/** The windows' search on a counter that stands still: what is held must not depend on the machine. */
const STILL = { searchCounter: () => 0 };
const patches = (s: Scenario) => Object.values(s.sim.counters()[PATCH] ?? {}).reduce((a, b) => a + b, 0);

/** Denies every instant: it starts each 1 January and lasts 366 days. */
const FROZEN: RolloutWindowSpec = { kind: "deny", schedule: "0 0 1 1 *", duration: "8784h" };

const spec: DeploymentSpec = {
  source: "internal_docker",
  sourceConfig: { resourceSpec: { minScale: 1, maxScale: 4 } },
  sourceRevisionConfig: { imageUri: "registry.example.com/agent:1" },
};
/** A new image and one more replica, in one edit. */
const imageAndReplicas = (tag: string, minScale: number, windows?: RolloutWindowSpec[]) => ({
  spec: {
    sourceRevisionConfig: { imageUri: `registry.example.com/agent:${tag}` },
    sourceConfig: { resourceSpec: { minScale, maxScale: 4 } },
    ...(windows ? { rolloutWindows: windows } : {}),
  },
});

/**
 * A deny window active now that ends `leftMs` from now: it starts at the current minute (UTC),
 * every day, and lasts until then (a duration in milliseconds).
 */
function denyEndingIn(leftMs: number): RolloutWindowSpec {
  const now = new Date();
  const start = Date.UTC(
    now.getUTCFullYear(),
    now.getUTCMonth(),
    now.getUTCDate(),
    now.getUTCHours(),
    now.getUTCMinutes(),
  );
  return {
    kind: "deny",
    schedule: `${now.getUTCMinutes()} ${now.getUTCHours()} * * *`,
    duration: `${now.getTime() - start + leftMs}ms`,
    timeZone: "UTC",
  };
}

/** Waits until `agent`'s current generation is held outside its rollout windows. */
const waitHeld = (s: Scenario, description: string) =>
  s.user.waitFor(
    s.namespace,
    "agent",
    (o) =>
      hasCondition(o, "Synced", "False", "OutsideRolloutWindow") &&
      o?.status?.observedGeneration === o?.metadata.generation,
    description,
  );

/**
 * Checks that the edit of {@link imageAndReplicas} to 2 replicas was split: the replicas sent in
 * one PATCH since `before`, the image held; returns the OutsideRolloutWindow event.
 */
async function expectImageHeld(s: Scenario, id: string, before: number) {
  expect(s.sim.store.get(id)?.source_config.resource_spec).toMatchObject({ min_scale: 2 });
  expect(s.sim.store.get(id)?.source_revision_config.image_uri).toBe("registry.example.com/agent:1");
  expect(patches(s) - before).toBe(1);
  return s.user.waitForEvent(s.namespace, "agent", "OutsideRolloutWindow");
}

/**
 * Sets `dms.dev/rollout-now: release-1` on `agent` and waits until the operator acknowledged it
 * (`status.lastHandledRolloutNow`) with the condition given.
 */
async function rolloutNowActedOn(
  s: Scenario,
  type: string,
  status: "True" | "False",
  reason: string | undefined,
  description: string,
) {
  await s.user.annotate(s.namespace, "agent", { "dms.dev/rollout-now": "release-1" });
  return s.user.waitFor(
    s.namespace,
    "agent",
    (o) => o?.status?.lastHandledRolloutNow === "release-1" && hasCondition(o, type, status, reason),
    description,
  );
}

describe("controller: rollout windows", () => {
  const scenarios = useScenarios();

  it("a deny window holds the new image while the replica change goes through; rollout-now releases it in one PATCH", async () => {
    const s = await scenarios.start("rollout-hold", { op: STILL });
    await s.user.create(s.namespace, "agent", spec);
    const ready = await s.user.waitReady(s.namespace, "agent");
    const id = ready.status?.deploymentId ?? "";
    const before = patches(s);

    await s.user.patch(s.namespace, "agent", imageAndReplicas("2", 2, [FROZEN]));
    const held = await waitHeld(s, "held outside the rollout windows");
    expect(hasCondition(held, "Reconciling", "True", "OutsideRolloutWindow")).toBe(true);
    expect(held.status?.conditions?.some((c) => c.type === "Stalled")).toBe(false);
    expect(conditionOf(held, "Synced")?.message).toContain(
      "the change that makes a new revision (sourceRevisionConfig.imageUri) is held",
    );
    expect(conditionOf(held, "Synced")?.message).toContain("no window opens within 366 days");
    const event = await expectImageHeld(s, id, before);
    expect(event.type).toBe("Normal");

    const released = await rolloutNowActedOn(
      s,
      "Synced",
      "True",
      undefined,
      "released by dms.dev/rollout-now",
    );
    expect(patches(s) - before).toBe(2);
    expect(s.sim.store.get(id)?.source_revision_config.image_uri).toBe("registry.example.com/agent:2");
    expect(released.status?.conditions?.some((c) => c.reason === "OutsideRolloutWindow")).toBe(false);
    await s.user.waitReady(s.namespace, "agent");

    // The value acted on lets no later change through.
    await s.user.patch(s.namespace, "agent", imageAndReplicas("3", 2));
    await waitHeld(s, "the next change held");
    expect(s.sim.store.get(id)?.source_revision_config.image_uri).toBe("registry.example.com/agent:2");
    expect(patches(s) - before).toBe(2);
  });

  it("when the deny window ends, the held change goes out by itself in one PATCH", async () => {
    const s = await scenarios.start("rollout-opens", { op: STILL });
    await s.user.create(s.namespace, "agent", spec);
    const ready = await s.user.waitReady(s.namespace, "agent");
    const id = ready.status?.deploymentId ?? "";
    const before = patches(s);

    await s.user.patch(s.namespace, "agent", imageAndReplicas("2", 1, [denyEndingIn(8_000)]));
    const held = await s.user.waitFor(
      s.namespace,
      "agent",
      (o) => hasCondition(o, "Synced", "False", "OutsideRolloutWindow"),
      "held until the deny window ends",
    );
    expect(conditionOf(held, "Synced")?.message).toMatch(
      /it goes out at \S+Z \(.* UTC \(GMT[^)]*\)\), when deny window \[0\]/,
    );
    expect(patches(s)).toBe(before);

    const done = await s.user.waitReady(s.namespace, "agent", 30_000);
    expect(s.sim.store.get(id)?.source_revision_config.image_uri).toBe("registry.example.com/agent:2");
    expect(done.status?.activeRevisionId).toBe(done.status?.latestRevisionId);
    expect(patches(s) - before).toBe(1);
  });

  it("a ClusterServiceConnection's Binding freeze holds against rolloutWindows: [] and rollout-now, and Advisory lifts it", async () => {
    const s = await scenarios.start("rollout-binding", { op: { ...STILL, clusterConnections: true } });
    const name = `freeze-${randomBytes(3).toString("hex")}`;
    await s.user.putSecret(s.namespace, "freeze", { "api-key": TEST_API_KEY });
    await kubectlOk(["apply", "-f", "-"], {
      input: JSON.stringify({
        apiVersion: "dms.dev/v1alpha1",
        kind: "ClusterServiceConnection",
        metadata: { name },
        spec: {
          baseUrl: s.sim.url,
          apiKeySecretRef: { name: "freeze", key: "api-key", namespace: s.namespace },
          rolloutWindows: [FROZEN],
          rolloutWindowsPolicy: "Binding",
        },
      }),
    });
    scenarios.defer(async () => {
      await kubectl(["delete", "deployments.dms.dev", "--all", "-n", s.namespace, "--wait=false"]);
      await kubectl(["delete", "clusterserviceconnection", name, "--wait=false"]);
    });
    const connectionRef = { kind: "ClusterServiceConnection" as const, name };
    // A create is never held: nothing runs yet that a revision could cancel.
    await s.user.create(s.namespace, "agent", { ...spec, connectionRef });
    const ready = await s.user.waitReady(s.namespace, "agent");
    const id = ready.status?.deploymentId ?? "";
    const before = patches(s);

    // The tenant's own empty list does not lift the connection's windows.
    await s.user.patch(s.namespace, "agent", imageAndReplicas("2", 2, []));
    const held = await waitHeld(s, "held by the connection's binding windows");
    const message = conditionOf(held, "Synced")?.message ?? "";
    expect(message).toContain(
      `outside the rollout windows (spec.rolloutWindows of ClusterServiceConnection ${name}, binding: spec.rolloutWindowsPolicy Binding)`,
    );
    expect(message).toContain("only an edit of");
    expect(message).toContain(
      "which cluster admins (a team's roles do not write ClusterServiceConnections) may make",
    );
    const event = await expectImageHeld(s, id, before);
    expect(event.note).toContain("binding");

    // Nor does rollout-now: acknowledged, and the change stays held, saying why.
    const refused = await rolloutNowActedOn(
      s,
      "Synced",
      "False",
      "OutsideRolloutWindow",
      "rollout-now acknowledged and the change still held",
    );
    expect(conditionOf(refused, "Synced")?.message).toContain(
      `dms.dev/rollout-now lifts this resource's own windows only: the windows of ClusterServiceConnection ${name} are binding`,
    );
    expect(s.sim.store.get(id)?.source_revision_config.image_uri).toBe("registry.example.com/agent:1");
    expect(patches(s) - before).toBe(1);

    // Who may edit the connection lifts it: Advisory, and the resource's empty list rules.
    await kubectlOk([
      "patch",
      "clusterserviceconnection",
      name,
      "--type",
      "merge",
      "-p",
      JSON.stringify({ spec: { rolloutWindowsPolicy: "Advisory" } }),
    ]);
    await s.user.waitReady(s.namespace, "agent");
    expect(s.sim.store.get(id)?.source_revision_config.image_uri).toBe("registry.example.com/agent:2");
    expect(patches(s) - before).toBe(2);
  });
});
