// One deployment the service lists in a shape the operator cannot read never stops the others,
// and never makes the operator create a duplicate of it: its resource says so and waits.
import { describe, expect, it } from "vitest";
import type { DeploymentSpec } from "../../src/crd/schema.ts";
import { conditionOf, hasCondition } from "../support/resources.ts";
import { useScenarios } from "../support/scenario.ts";

const spec: DeploymentSpec = {
  source: "internal_docker",
  sourceConfig: { resourceSpec: { minScale: 1, maxScale: 2 } },
  sourceRevisionConfig: { imageUri: "registry.example.com/agent:1" },
};

const seeded = (id: string, name: string, quirks?: { omit: string[] }) => ({
  id,
  name,
  source: "internal_docker" as const,
  source_config: { resource_spec: { min_scale: 1, max_scale: 2 } },
  source_revision_config: { image_uri: "registry.example.com/agent:1" },
  ...(quirks ? { quirks } : {}),
});

describe("controller: a deployment it cannot read", () => {
  const scenarios = useScenarios();

  it("reports it on its resource instead of creating a duplicate, and adopts the readable ones", async () => {
    const s = await scenarios.start("ctl-unreadable", {
      sim: {
        seed: {
          deployments: [
            // Listed without an id: the operator cannot tell which deployment it is.
            seeded("5d4c3b2a-1f0e-4d9c-8b7a-6f5e4d3c2b1a", "hidden", { omit: ["id"] }),
            seeded("6e5d4c3b-2a1f-4e0d-9c8b-7a6f5e4d3c2b", "visible"),
          ],
        },
      },
    });
    await s.user.create(s.namespace, "hidden", spec);
    await s.user.create(s.namespace, "visible", spec);

    const visible = await s.user.waitReady(s.namespace, "visible");
    expect(visible.status?.deploymentId).toBe("6e5d4c3b-2a1f-4e0d-9c8b-7a6f5e4d3c2b");
    const hidden = await s.user.waitFor(
      s.namespace,
      "hidden",
      (o) => hasCondition(o, "Synced", "False", "UnreadableDeployment"),
      "Synced=False UnreadableDeployment",
    );
    expect(conditionOf(hidden, "Synced")?.message).toContain('"hidden"');
    expect(conditionOf(hidden, "Synced")?.message).toContain("id");
    expect(hidden.status?.deploymentId).toBeUndefined();
    expect(s.sim.counters()["POST /v2/deployments"]).toBeUndefined();
  });
});
