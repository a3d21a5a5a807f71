// The service as it really answers, on the real control plane: a status the spec does not list
// is shown as is and stops nothing (the resync listing still serves every other resource); nulls
// in nested fields never cause a PATCH; an edit whose first PATCH got a 429 is reported as
// Updated, not DriftCorrected; a value holding a bidi control is left unset, Synced saying which.
import { describe, expect, it } from "vitest";
import type { ResourceSpec } from "../../src/api/wire.ts";
import type { DeploymentSpec } from "../../src/crd/schema.ts";
import { conditionOf, hasCondition } from "../support/resources.ts";
import { useScenarios, waitForPasses } from "../support/scenario.ts";

const PATCH = "PATCH /v2/deployments/{deployment_id}";
const spec: DeploymentSpec = {
  source: "internal_docker",
  sourceConfig: { resourceSpec: { minScale: 1, maxScale: 2 } },
  sourceRevisionConfig: { imageUri: "registry.example.com/agent:1" },
};

describe("controller: the service's looser answers", () => {
  const scenarios = useScenarios();

  it("a status the spec does not list shows raw, is not ready and not failed, and stops no listing", async () => {
    const s = await scenarios.start("loose-status", { op: { resyncMs: 1_500 } });
    await s.user.create(s.namespace, "finishing", spec);
    await s.user.create(s.namespace, "neighbour", spec);
    const finishing = await s.user.waitReady(s.namespace, "finishing");
    const neighbour = await s.user.waitReady(s.namespace, "neighbour");

    s.sim.store.drift(finishing.status?.deploymentId ?? "", { status: "AWAITING_FINAL_DELETE" });
    // The neighbour drifts too: only a resync listing that got past the odd item corrects it.
    const neighbourId = neighbour.status?.deploymentId ?? "";
    s.sim.store.drift(neighbourId, { source_config: { resource_spec: { min_scale: 1, max_scale: 7 } } });

    const odd = await s.user.waitFor(
      s.namespace,
      "finishing",
      (o) => o?.status?.remoteStatus === "AWAITING_FINAL_DELETE",
      "the raw status",
    );
    expect(hasCondition(odd, "Ready", "False", "UnrecognizedStatus")).toBe(true);
    expect(conditionOf(odd, "Ready")?.message).toContain("AWAITING_FINAL_DELETE");
    expect(hasCondition(odd, "Synced", "True")).toBe(true);
    expect(odd.status?.conditions?.some((c) => c.type === "Stalled")).toBe(false);

    const corrected = await s.user.waitForEvent(s.namespace, "neighbour", "DriftCorrected");
    expect(corrected.note).toContain("sourceConfig.resourceSpec.maxScale differed from the spec");
    expect(s.sim.store.get(neighbourId)?.source_config.resource_spec?.max_scale).toBe(2);
  });

  it("a status and an image version holding a bidi control are left unset, Synced saying which; Ready's message escapes it", async () => {
    const s = await scenarios.start("loose-bidi", { op: { resyncMs: 1_500 } });
    await s.user.create(s.namespace, "hostile", spec);
    const ready = await s.user.waitReady(s.namespace, "hostile");
    expect(ready.status?.remoteStatus).toBe("READY");
    s.sim.store.drift(ready.status?.deploymentId ?? "", {
      status: "READ\u202eY",
      image_version: "1.0\u200b",
    });

    const unset = await s.user.waitFor(
      s.namespace,
      "hostile",
      (o) => o?.status?.remoteStatus === undefined,
      "the status left unset",
    );
    expect(unset.status?.imageVersion).toBeUndefined();
    expect(unset.status?.deploymentId).toBe(ready.status?.deploymentId);
    expect(hasCondition(unset, "Ready", "False", "UnrecognizedStatus")).toBe(true);
    expect(conditionOf(unset, "Ready")?.message).toContain("READ\ufffdY");
    expect(hasCondition(unset, "Synced", "True", "ReconcileSuccess")).toBe(true);
    const synced = conditionOf(unset, "Synced")?.message ?? "";
    expect(synced).toContain("status.remoteStatus as the service gave it holds U+202E");
    expect(synced).toContain("status.imageVersion as the service gave it holds U+200B");
    expect(JSON.stringify(unset.status)).not.toMatch(/[\u202e\u200b]/u);
  });

  it("nulls in nested fields of the service's answer never cause a PATCH", async () => {
    const s = await scenarios.start("loose-nulls", {
      sim: {
        seed: {
          deployments: [
            {
              name: "with-nulls",
              source: "internal_docker",
              source_config: {
                resource_spec: {
                  min_scale: 1,
                  sidecars: [{ name: "proxy", image: "envoy:1", env: null, resources: null, args: null }],
                  labels: null,
                } as ResourceSpec,
              },
              source_revision_config: { image_uri: "registry.example.com/agent:1" },
            },
          ],
        },
      },
      op: { resyncMs: 1_000 },
    });
    await s.user.create(s.namespace, "with-nulls", {
      source: "internal_docker",
      sourceConfig: { resourceSpec: { minScale: 1, sidecars: [{ name: "proxy", image: "envoy:1" }] } },
      sourceRevisionConfig: { imageUri: "registry.example.com/agent:1" },
    });
    await s.user.waitReady(s.namespace, "with-nulls");
    // Adopted, then several resync periods: never a PATCH.
    await s.user.waitForEvent(s.namespace, "with-nulls", "Adopted");
    await waitForPasses(s.sim, 3, Date.now());
    expect(s.sim.counters()[PATCH]).toBeUndefined();
  });

  it("an edit whose first PATCH got a 429 is reported as Updated, not DriftCorrected", async () => {
    const s = await scenarios.start("loose-429");
    await s.user.create(s.namespace, "edited", spec);
    await s.user.waitReady(s.namespace, "edited");
    s.sim.faults.set({ script: [{ route: PATCH, count: 1, status: 429, retryAfterSeconds: 1 }] });

    await s.user.patch(s.namespace, "edited", { spec: { sourceConfig: { resourceSpec: { maxScale: 5 } } } });

    const updated = await s.user.waitForEvent(s.namespace, "edited", "Updated");
    expect(updated.note).toContain("sourceConfig.resourceSpec.maxScale: 2 → 5");
    expect(s.sim.counters()[PATCH]).toEqual({ "429": 1, "200": 1 });
    const events = await s.user.events(s.namespace, "edited");
    expect(events.map((e) => e.reason)).not.toContain("DriftCorrected");
  });
});
