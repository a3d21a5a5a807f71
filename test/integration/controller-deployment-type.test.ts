// spec.sourceConfig.deploymentType through the operator against a real API server and the
// simulator: sent on create, so the service's deployment has that type (not the service's
// default, prod), and one resource that leaves it out gets the default and stays in sync; a type
// that differs from the service's deployment (at adoption, or set later) is refused with
// DeploymentTypeMismatch, never PATCHed.
import { describe, expect, it } from "vitest";
import type { DeploymentSpec } from "../../src/crd/schema.ts";
import { conditionOf, hasCondition } from "../support/resources.ts";
import { useScenarios } from "../support/scenario.ts";

const spec = (deploymentType?: "dev_zero" | "dev"): DeploymentSpec => ({
  source: "internal_docker",
  sourceConfig: deploymentType === undefined ? {} : { deploymentType },
  sourceRevisionConfig: { imageUri: "registry.example.com/agent:1" },
});

describe("controller: spec.sourceConfig.deploymentType", () => {
  const scenarios = useScenarios();

  it("creates the service's deployment with the type the spec sets, and with the service's default without one", async () => {
    const s = await scenarios.start("ctl-type");
    await s.user.create(s.namespace, "typed", spec("dev_zero"));
    await s.user.create(s.namespace, "untyped", spec());
    await s.user.waitReady(s.namespace, "typed");
    await s.user.waitReady(s.namespace, "untyped");
    expect(s.sim.store.getByName("typed")?.source_config.deployment_type).toBe("dev_zero");
    expect(s.sim.store.getByName("untyped")?.source_config.deployment_type).toBe("prod");
    const creates = s.sim.requests({ route: "POST /v2/deployments" });
    expect(creates.map((r) => r.status)).toEqual(["201", "201"]);
    // Nothing else was written: the type the service answers is the one the spec asked for.
    expect(s.sim.requests({ route: "PATCH /v2/deployments/{deployment_id}" })).toEqual([]);
  });

  it("refuses a type that differs from the service's deployment, at adoption and once set later, with no write", async () => {
    const id = "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4e";
    const s = await scenarios.start("ctl-type-mismatch", {
      sim: {
        seed: {
          deployments: [
            {
              id,
              name: "found",
              source: "internal_docker",
              source_config: { deployment_type: "prod" },
              source_revision_config: { image_uri: "registry.example.com/agent:1" },
            },
          ],
        },
      },
    });
    const mismatch = (o: Parameters<typeof conditionOf>[0]) =>
      hasCondition(o, "Synced", "False") && conditionOf(o, "Synced")?.reason === "DeploymentTypeMismatch";

    // At adoption: the deployment of that name is of another type, so it is not this resource's.
    await s.user.create(s.namespace, "found", spec("dev"));
    const refused = await s.user.waitFor(
      s.namespace,
      "found",
      mismatch,
      "Synced=False DeploymentTypeMismatch",
    );
    expect(conditionOf(refused, "Stalled")?.reason).toBe("DeploymentTypeMismatch");
    expect(conditionOf(refused, "Synced")?.message).toMatch(
      /spec\.sourceConfig\.deploymentType is dev .*prod.*a new type means a new deployment/,
    );
    expect(refused.status?.deploymentId).toBeUndefined();

    // Set later on a resource whose deployment has the service's default type.
    await s.user.create(s.namespace, "later", spec());
    await s.user.waitReady(s.namespace, "later");
    await s.user.patch(s.namespace, "later", { spec: { sourceConfig: { deploymentType: "dev" } } });
    const later = await s.user.waitFor(
      s.namespace,
      "later",
      (o) => o?.status?.observedGeneration === 2 && mismatch(o),
      "generation 2 refused with DeploymentTypeMismatch",
    );
    expect(conditionOf(later, "Synced")?.message).toContain("has the type prod");

    // No PATCH, and the only create is the untyped resource's.
    expect(s.sim.requests({ route: "PATCH /v2/deployments/{deployment_id}" })).toEqual([]);
    expect(s.sim.requests({ route: "POST /v2/deployments" })).toHaveLength(1);
    expect(s.sim.store.get(id)?.source_config.deployment_type).toBe("prod");
    expect(s.sim.store.getByName("later")?.source_config.deployment_type).toBe("prod");
  });
});
