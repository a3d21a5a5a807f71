// The operator across a restart of the API server (as in a control-plane upgrade): every watch
// is cut and requests fail for a while; afterwards it follows new changes, Secrets included, as
// before. This file runs a control plane of its own, because restarting the shared one would
// disturb the other files.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { DeploymentSpec } from "../../src/crd/schema.ts";
import type { RunningSimulator } from "../../src/simulator/server.ts";
import { ControlPlane } from "../controlplane/harness.ts";
import { startOperator, startTestSimulator, type TestOperator } from "../support/operator.ts";
import { ClusterUser } from "../support/resources.ts";

const spec = (image: string): DeploymentSpec => ({
  source: "internal_docker",
  sourceRevisionConfig: { imageUri: image },
  secrets: [{ name: "TOKEN", valueFrom: { secretKeyRef: { name: "tokens", key: "token" } } }],
});

describe("controller: API server restart", () => {
  const namespace = "restart";
  let plane: ControlPlane;
  let sim: RunningSimulator;
  let op: TestOperator;
  let user: ClusterUser;

  beforeAll(async () => {
    plane = await ControlPlane.start();
    await plane.installCrds();
    const created = await plane.kubectl(["create", "namespace", namespace]);
    if (created.code !== 0) throw new Error(created.stderr);
    user = new ClusterUser(plane.kubeconfigPath);
    sim = await startTestSimulator();
    op = startOperator({ simulator: sim, namespaces: [namespace], kubeconfig: plane.kubeconfigPath });
  });

  afterAll(async () => {
    await op?.stop();
    await sim?.close();
    await plane?.stop();
  });

  it("keeps reconciling changes, new resources and Secret rotations after the restart", async () => {
    await user.putSecret(namespace, "tokens", { token: "first-token-value" });
    await user.create(namespace, "survivor", spec("registry.example.com/agent:1"));
    const before = await user.waitReady(namespace, "survivor");

    await plane.restartApiServer();

    await user.patch(namespace, "survivor", {
      spec: { sourceRevisionConfig: { imageUri: "registry.example.com/agent:2" } },
    });
    await user.create(namespace, "newcomer", spec("registry.example.com/agent:1"));
    const changed = await user.waitFor(
      namespace,
      "survivor",
      (o) =>
        o?.status?.observedGeneration === 2 && o.status.latestRevisionId !== before.status?.latestRevisionId,
      "the change after the restart",
      45_000,
    );
    await user.waitReady(namespace, "newcomer", 45_000);
    expect(sim.store.get(before.status?.deploymentId ?? "")?.source_revision_config.image_uri).toBe(
      "registry.example.com/agent:2",
    );

    await user.putSecret(namespace, "tokens", { token: "second-token-value" });
    await user.waitFor(
      namespace,
      "survivor",
      (o) => o?.status?.appliedSecretsHash !== changed.status?.appliedSecretsHash,
      "the rotated Secret applied",
      45_000,
    );
    expect(sim.counters()["POST /v2/deployments"]).toEqual({ "201": 2 });
  });
});
