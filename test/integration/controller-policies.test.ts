// What the user steers: ObserveOnly (never a write to the service), the pause annotation (no
// call at all, deletion still works), two resources claiming one service name (the older keeps
// it; the younger takes over once the older is gone), spec.driftPolicy Report (a change made on
// the service recorded, nothing written), spec.displayName (a PATCH after the create, which
// does not take it) and an empty spec.secrets a service keeps (sent once, never in a loop).
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

  it("driftPolicy Report records a change made on the service and writes nothing; Correct puts it back", async () => {
    const s = await scenarios.start("ctl-report");
    // The simulator refuses a create carrying display_name, as the service does: the PATCH after it sends it.
    await s.user.create(
      s.namespace,
      "reported",
      spec(2, { driftPolicy: "Report", displayName: "Reported agent" }),
    );
    const ready = await s.user.waitReady(s.namespace, "reported");
    const id = ready.status?.deploymentId ?? "";
    expect(s.sim.store.get(id)?.display_name).toBe("Reported agent");
    s.sim.store.drift(id, { source_config: { resource_spec: { min_scale: 1, max_scale: 9 } } });
    const before = serviceWrites(s);
    await s.user.annotate(s.namespace, "reported", { "dms.dev/reconcile-requested-at": "look" });
    const drifted = await s.user.waitFor(
      s.namespace,
      "reported",
      (o) => hasCondition(o, "Synced", "False", "Drifted"),
      "Synced=False Drifted",
    );
    const message = conditionOf(drifted, "Synced")?.message ?? "";
    expect(message).toMatch(
      /^spec\.driftPolicy is Report: .*sourceConfig\.resourceSpec\.maxScale.*nothing is written/,
    );
    expect(message).not.toContain("9");
    expect(serviceWrites(s)).toEqual(before);
    expect(s.sim.store.get(id)?.source_config.resource_spec?.max_scale).toBe(9);
    // The team decides: Correct puts the spec's value back.
    await s.user.patch(s.namespace, "reported", { spec: { driftPolicy: "Correct" } });
    const corrected = await s.user.waitForEvent(s.namespace, "reported", "Updated");
    expect(corrected.note).toContain("maxScale");
    await waitFor(() => s.sim.store.get(id)?.source_config.resource_spec?.max_scale === 2, {
      description: "maxScale put back",
    });
  });

  it("sends an empty secrets list once to a service that keeps the secrets, and says so instead of sending it again", async () => {
    const s = await scenarios.start("ctl-empty-secrets", { sim: { emptySecretsOnUpdate: "unchanged" } });
    await s.user.create(s.namespace, "keeper", spec(2, { secrets: [{ name: "API_KEY", value: "sk-1" }] }));
    const ready = await s.user.waitReady(s.namespace, "keeper");
    const id = ready.status?.deploymentId ?? "";
    await s.user.patch(s.namespace, "keeper", { spec: { secrets: [] } });
    const refused = await s.user.waitFor(
      s.namespace,
      "keeper",
      (o) => hasCondition(o, "Synced", "False", "CannotClearSecrets"),
      "Synced=False CannotClearSecrets",
    );
    expect(hasCondition(refused, "Stalled", "True", "CannotClearSecrets")).toBe(true);
    expect(conditionOf(refused, "Synced")?.message).toMatch(
      /API_KEY.*"unchanged".*remove them on the service/,
    );
    const event = await s.user.waitForEvent(s.namespace, "keeper", "CannotClearSecrets");
    expect(event.type).toBe("Warning");
    // Looked at again: the list is not sent again.
    const patches = () =>
      s.sim.requests({ method: "PATCH" }).filter((r) => r.url === `/v2/deployments/${id}`);
    const sent = patches().length;
    await s.user.annotate(s.namespace, "keeper", { "dms.dev/reconcile-requested-at": "again" });
    await s.user.waitFor(
      s.namespace,
      "keeper",
      (o) => o?.status?.lastHandledReconcileAt === "again",
      "a later reconcile",
    );
    expect(patches()).toHaveLength(sent);
    expect(s.sim.store.get(id)?.secrets.map((x) => x.name)).toEqual(["API_KEY"]);
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
