// spec.sourceConfig.deploymentType through the operator against a real API server and the
// simulator: sent on create, so the service's deployment has that type (not the service's
// default, prod), and one resource that leaves it out gets the default and stays in sync.
import { describe, expect, it } from "vitest";
import type { DeploymentSpec } from "../../src/crd/schema.ts";
import { useScenarios } from "../support/scenario.ts";

const spec = (deploymentType?: "dev_zero"): DeploymentSpec => ({
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
});
