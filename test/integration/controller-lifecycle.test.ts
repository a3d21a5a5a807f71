// The controller's everyday work against a real API server and the simulator: it creates the
// service's deployment, adopts one that already exists, and tells a change that needs no new
// revision from one that does, writing the revision ids back onto the resource.
import { describe, expect, it } from "vitest";
import type { DeploymentSpec } from "../../src/crd/schema.ts";
import { waitFor } from "../support/cluster.ts";
import { TEST_API_KEY } from "../support/operator.ts";
import { conditionOf, hasCondition } from "../support/resources.ts";
import { type Scenario, useScenarios } from "../support/scenario.ts";

const spec = (image = "registry.example.com/agent:1"): DeploymentSpec => ({
  source: "internal_docker",
  sourceConfig: { resourceSpec: { minScale: 1, maxScale: 2 } },
  sourceRevisionConfig: { imageUri: image },
});

const writes = (s: Scenario) => {
  const c = s.sim.counters();
  return { post: c["POST /v2/deployments"] ?? {}, patch: c["PATCH /v2/deployments/{deployment_id}"] ?? {} };
};

describe("controller: create, adopt, update", () => {
  const scenarios = useScenarios({
    afterStop: (s) => expect(s.op.logs.text()).not.toContain(TEST_API_KEY),
  });

  it("creates the service's deployment and reports it Ready with its revision ids", async () => {
    const s = await scenarios.start("ctl-create");
    await s.user.create(s.namespace, "create-me", spec());

    const obj = await s.user.waitReady(s.namespace, "create-me");
    const remote = s.sim.store.getByName("create-me");
    expect(remote?.status).toBe("READY");
    expect(obj.status).toMatchObject({
      deploymentId: remote?.id,
      tenantId: remote?.tenant_id,
      remoteStatus: "READY",
      latestRevisionId: remote?.latest_revision_id,
      activeRevisionId: remote?.latest_revision_id,
      observedGeneration: 1,
    });
    expect(conditionOf(obj, "Ready")?.reason).toBe("Available");
    expect(conditionOf(obj, "Reconciling")).toBeUndefined();
    expect(obj.status?.createRequestedAt).toBeUndefined();
    expect(writes(s).post).toEqual({ "201": 1 });
    const events = await s.user.events(s.namespace, "create-me");
    expect(events.map((e) => e.reason)).toEqual(["Created"]);
    expect(events[0]?.note).toContain(remote?.id);
  });

  it("serves /readyz on its own health alone, even while the service fails every call, and /metrics", async () => {
    const s = await scenarios.start("ctl-probes", { op: { listen: true } });
    // An unreachable service must not make the operator NotReady (every replica, rollouts, Argo
    // CD): it is reported on the resources instead.
    s.sim.faults.set({ errors: [{ status: 503, rate: 1 }] });
    const { metrics, probes } = await s.op.operator.addresses();
    const readyz = await waitFor(
      async () => {
        const res = await fetch(`${probes}/readyz?verbose`);
        return res.status === 200 ? res.text() : undefined;
      },
      { description: "/readyz 200" },
    );
    expect(readyz).toContain("[+]informers ok");
    expect(readyz).not.toContain("service");
    await s.user.create(s.namespace, "measured", spec());
    await s.user.waitFor(
      s.namespace,
      "measured",
      (o) => (o?.status?.conditions ?? []).some((c) => c.reason === "ServiceUnavailable"),
      "the outage reported on the resource",
    );
    expect((await fetch(`${probes}/readyz`)).status).toBe(200);
    s.sim.faults.set({});
    await s.user.waitReady(s.namespace, "measured");

    const text = await (await fetch(`${metrics}/metrics`)).text();
    expect(text).toMatch(/controller_runtime_reconcile_total\{[^}]*result="success"[^}]*\} [1-9]/);
    expect(text).toMatch(/dms_service_requests_total\{[^}]*method="POST"[^}]*status="201"[^}]*\} 1/);
    expect(text).toContain("workqueue_depth");
  });

  it("adopts a deployment that already has the resource's name, without creating one", async () => {
    const id = "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d";
    const s = await scenarios.start("ctl-adopt", {
      sim: {
        seed: {
          deployments: [
            {
              id,
              name: "already-there",
              source: "internal_docker",
              source_config: { resource_spec: { min_scale: 1, max_scale: 2 } },
              source_revision_config: { image_uri: "registry.example.com/agent:1" },
            },
          ],
        },
      },
    });
    await s.user.create(s.namespace, "already-there", spec());

    const obj = await s.user.waitReady(s.namespace, "already-there");
    expect(obj.status?.deploymentId).toBe(id);
    const adopted = await s.user.waitForEvent(s.namespace, "already-there", "Adopted");
    expect(adopted.note).toContain(id);
    expect(writes(s)).toEqual({ post: {}, patch: {} });
    expect(s.sim.store.list()).toHaveLength(1);
  });

  it("patches a resourceSpec change without a revision, and an image change with one", async () => {
    const s = await scenarios.start("ctl-update");
    await s.user.create(s.namespace, "updated", spec());
    const first = await s.user.waitReady(s.namespace, "updated");
    const id = first.status?.deploymentId ?? "";
    const firstRevision = first.status?.latestRevisionId;
    expect(s.sim.store.revisions(id)).toHaveLength(1);

    // resourceSpec lives in source_config: the service applies it in place.
    await s.user.patch(s.namespace, "updated", {
      spec: { sourceConfig: { resourceSpec: { maxScale: 5 } } },
    });
    const scaled = await s.user.waitFor(
      s.namespace,
      "updated",
      (o) => o?.status?.observedGeneration === 2 && hasCondition(o, "Synced", "True"),
      "generation 2 synced",
    );
    expect(s.sim.store.get(id)?.source_config.resource_spec).toMatchObject({ min_scale: 1, max_scale: 5 });
    expect(s.sim.store.revisions(id)).toHaveLength(1);
    expect(scaled.status?.latestRevisionId).toBe(firstRevision);
    expect(writes(s).patch).toEqual({ "200": 1 });
    const updated = await s.user.waitForEvent(s.namespace, "updated", "Updated");
    expect(updated.note).toContain("sourceConfig.resourceSpec.maxScale: 2 → 5");
    expect(updated.note).not.toContain("new revision");

    // The image is a revision field: a new revision, whose id is written back once active.
    await s.user.patch(s.namespace, "updated", {
      spec: { sourceRevisionConfig: { imageUri: "registry.example.com/agent:2" } },
    });
    const rolled = await s.user.waitFor(
      s.namespace,
      "updated",
      (o) =>
        o?.status?.observedGeneration === 3 &&
        hasCondition(o, "Ready", "True") &&
        o.status.latestRevisionId !== firstRevision,
      "the new revision active",
    );
    const revisions = s.sim.store.revisions(id) ?? [];
    expect(revisions).toHaveLength(2);
    expect(rolled.status?.latestRevisionId).toBe(revisions[1]?.id);
    expect(rolled.status?.activeRevisionId).toBe(revisions[1]?.id);
    expect(revisions[1]?.source_revision_config.image_uri).toBe("registry.example.com/agent:2");
    expect(writes(s).patch).toEqual({ "200": 2 });
    const notes = (await s.user.events(s.namespace, "updated")).map((e) => e.note);
    expect(notes).toContainEqual(expect.stringContaining("(new revision): sourceRevisionConfig.imageUri"));
  });
});
