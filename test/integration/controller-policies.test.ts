// What the user steers: ObserveOnly (never a write to the service), the pause annotation (no
// call at all, deletion still works), and two resources claiming one service name (the older
// keeps it; the younger takes over once the older is gone).
import { describe, expect, it } from "vitest";
import type { DeploymentSpec } from "../../src/crd/schema.ts";
import { waitFor } from "../support/cluster.ts";
import { conditionOf, hasCondition } from "../support/resources.ts";
import { type Scenario, useScenarios } from "../support/scenario.ts";

const spec = (maxScale: number, extra: Partial<DeploymentSpec> = {}): DeploymentSpec => ({
  source: "internal_docker",
  sourceConfig: { resourceSpec: { minScale: 1, maxScale } },
  sourceRevisionConfig: { imageUri: "registry.example.com/agent:1" },
  ...extra,
});

const SEEDED = "7c1e2d3f-4a5b-4c6d-8e7f-9a0b1c2d3e4f";

/** Calls that change something on the service. */
function serviceWrites(s: Scenario): Record<string, Record<string, number>> {
  return Object.fromEntries(Object.entries(s.sim.counters()).filter(([route]) => !route.startsWith("GET ")));
}

describe("controller: policies", () => {
  const scenarios = useScenarios();

  it("ObserveOnly mirrors the service, reports the drift, and never writes to it", async () => {
    const s = await scenarios.start("ctl-observe", {
      sim: {
        seed: {
          deployments: [
            {
              id: SEEDED,
              name: "watched",
              source: "internal_docker",
              source_config: { resource_spec: { min_scale: 1, max_scale: 2 } },
              source_revision_config: { image_uri: "registry.example.com/agent:1" },
              secrets: [{ name: "TOKEN", value: "seeded-token-value" }],
            },
          ],
        },
      },
    });
    const observeOnly = { managementPolicy: "ObserveOnly", deletionPolicy: "Delete" } as const;
    // The service masks secret values: ObserveOnly can compare their names, never their values.
    await s.user.putSecret(s.namespace, "tokens", { token: "declared-token-value" });
    const token = { name: "TOKEN", valueFrom: { secretKeyRef: { name: "tokens", key: "token" } } };
    await s.user.create(s.namespace, "watched", spec(3, { ...observeOnly, secrets: [token] }));
    await s.user.create(s.namespace, "absent", spec(3, observeOnly));

    const watched = await s.user.waitFor(
      s.namespace,
      "watched",
      (o) => hasCondition(o, "Synced", "False", "Drifted"),
      "Drifted",
    );
    expect(conditionOf(watched, "Synced")?.message).toBe(
      "ObserveOnly: the service differs from the spec: sourceConfig.resourceSpec.maxScale: 2 → 3",
    );
    expect(hasCondition(watched, "Ready", "True", "Available")).toBe(true);
    expect(watched.status?.deploymentId).toBe(SEEDED);
    expect(watched.metadata.finalizers ?? []).not.toContain("dms.dev/finalizer");
    const absent = await s.user.waitFor(
      s.namespace,
      "absent",
      (o) => hasCondition(o, "Synced", "False", "Drifted"),
      "Drifted",
    );
    expect(conditionOf(absent, "Synced")?.message).toContain('no deployment named "absent"');
    expect(hasCondition(absent, "Ready", "False", "NotFound")).toBe(true);

    // Someone brings the service in line: the status follows once the resource is looked at.
    s.sim.store.drift(SEEDED, { source_config: { resource_spec: { min_scale: 1, max_scale: 3 } } });
    await s.user.annotate(s.namespace, "watched", { "dms.dev/reconcile-requested-at": "now-1" });
    await s.user.waitFor(
      s.namespace,
      "watched",
      (o) => hasCondition(o, "Synced", "True", "ObserveOnly"),
      "in line",
    );

    // deletionPolicy Delete does not apply to what the operator does not manage.
    await s.user.delete(s.namespace, "watched");
    await s.user.waitFor(s.namespace, "watched", (o) => o === undefined, "gone");
    expect(s.sim.store.get(SEEDED)).toBeDefined();
    expect(serviceWrites(s)).toEqual({});
  });

  it("makes no call while paused, applies the change when resumed, and still deletes", async () => {
    const s = await scenarios.start("ctl-pause");
    await s.user.create(s.namespace, "pausable", spec(2, { deletionPolicy: "Delete" }));
    const ready = await s.user.waitReady(s.namespace, "pausable");
    const id = ready.status?.deploymentId ?? "";

    await s.user.annotate(s.namespace, "pausable", { "dms.dev/paused": "true" });
    await s.user.waitFor(
      s.namespace,
      "pausable",
      (o) => hasCondition(o, "Synced", "False", "Paused"),
      "Paused",
    );
    s.sim.resetCounters();
    await s.user.patch(s.namespace, "pausable", {
      spec: { sourceConfig: { resourceSpec: { maxScale: 4 } } },
    });
    const paused = await s.user.waitFor(
      s.namespace,
      "pausable",
      (o) => o?.status?.observedGeneration === 2,
      "generation 2 seen while paused",
    );
    expect(conditionOf(paused, "Synced")?.message).toContain("dms.dev/paused=true");
    expect(s.sim.counters()).toEqual({});

    await s.user.annotate(s.namespace, "pausable", { "dms.dev/paused": null });
    await s.user.waitReady(s.namespace, "pausable");
    expect(s.sim.store.get(id)?.source_config.resource_spec?.max_scale).toBe(4);

    await s.user.annotate(s.namespace, "pausable", { "dms.dev/paused": "true" });
    await s.user.waitFor(
      s.namespace,
      "pausable",
      (o) => hasCondition(o, "Synced", "False", "Paused"),
      "Paused",
    );
    await s.user.delete(s.namespace, "pausable");
    await s.user.waitFor(s.namespace, "pausable", (o) => o === undefined, "gone");
    expect(s.sim.store.get(id)).toBeUndefined();
  });

  it("stalls the younger of two resources claiming one name, until the older is gone", async () => {
    const s = await scenarios.start("ctl-conflict");
    await s.user.create(s.namespace, "older", spec(2, { name: "shared-name" }));
    const older = await s.user.waitReady(s.namespace, "older");
    s.sim.resetCounters();

    await s.user.create(s.namespace, "younger", spec(3, { name: "shared-name" }));

    const stalled = await s.user.waitFor(
      s.namespace,
      "younger",
      (o) => hasCondition(o, "Stalled", "True", "NameConflict"),
      "NameConflict",
    );
    expect(conditionOf(stalled, "Synced")?.message).toContain(`older resource ${s.namespace}/older`);
    const warning = await s.user.waitForEvent(s.namespace, "younger", "NameConflict");
    expect(warning.type).toBe("Warning");
    expect(s.sim.counters()).toEqual({});

    // The older goes (Orphan: its deployment stays), and the younger takes the name over.
    await s.user.delete(s.namespace, "older");
    const tookOver = await s.user.waitReady(s.namespace, "younger");
    expect(tookOver.status?.deploymentId).toBe(older.status?.deploymentId);
    await s.user.waitForEvent(s.namespace, "younger", "Adopted");
    await waitFor(() => s.sim.store.getByName("shared-name")?.source_config.resource_spec?.max_scale === 3, {
      description: "the younger's spec applied",
    });
    expect(serviceWrites(s)).toEqual({ "PATCH /v2/deployments/{deployment_id}": { "200": 1 } });
  });
});
