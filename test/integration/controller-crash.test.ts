// Crash safety of a create: the intent is recorded before the POST, a listing that lags behind a
// create is waited out, and an operator that dies with a create in flight leaves the next
// instance enough to find that deployment instead of creating a second one.
import { describe, expect, it } from "vitest";
import type { DeploymentSpec } from "../../src/crd/schema.ts";
import { startOperator } from "../support/operator.ts";
import { useScenarios } from "../support/scenario.ts";

const spec: DeploymentSpec = {
  source: "internal_docker",
  sourceRevisionConfig: { imageUri: "registry.example.com/agent:1" },
};

describe("controller: no duplicate creates", () => {
  const scenarios = useScenarios();

  it("waits for a lagging listing instead of creating again", async () => {
    const s = await scenarios.start("ctl-lag");
    // Created deployments stay out of every listing (by name and by id) for 2 s, while the
    // operator polls every 200 ms.
    s.sim.faults.set({ listingLagMs: 2_000 });
    await s.user.create(s.namespace, "lagging", spec);

    const obj = await s.user.waitReady(s.namespace, "lagging");
    expect(s.sim.counters()["POST /v2/deployments"]).toEqual({ "201": 1 });
    expect(obj.status?.deploymentId).toBe(s.sim.store.getByName("lagging")?.id);
    expect(obj.status?.createRequestedAt).toBeUndefined();
    const reasons = (await s.user.events(s.namespace, "lagging")).map((e) => e.reason);
    expect(reasons).toEqual(["Created"]);
  });

  it("a second instance finds the deployment a killed one created, and never POSTs", async () => {
    // The POST is applied at once but its answer trickles out for seconds: the first instance
    // gives up after 0.5 s not knowing the outcome, and the new deployment is not listed for 4 s.
    const s = await scenarios.start("ctl-crash", {
      op: { service: { timeoutMs: 500 }, shutdownTimeoutMs: 1 },
    });
    s.sim.faults.set({
      slowBody: [{ chunkBytes: 16, delayMs: 100, route: "POST /v2/deployments" }],
      listingLagMs: 4_000,
    });
    await s.user.create(s.namespace, "crashing", spec);

    // The failure is reported; the next reconcile (after a backoff that may be short) sees the
    // recorded intent and waits for the listing, so the event is what stays to be seen.
    const timedOut = await s.user.waitForEvent(s.namespace, "crashing", "ServiceUnavailable");
    expect(timedOut.note).toContain("may have been applied");
    await s.user.waitFor(
      s.namespace,
      "crashing",
      (o) => o?.status?.createRequestedAt !== undefined,
      "the create intent recorded",
    );
    await s.op.stop();
    s.sim.faults.set({ listingLagMs: 4_000 });

    const second = startOperator({ simulator: s.sim, namespaces: [s.namespace] });
    scenarios.defer(() => second.stop());
    const obj = await s.user.waitReady(s.namespace, "crashing");

    expect(s.sim.store.list().filter((d) => d.name === "crashing")).toHaveLength(1);
    expect(obj.status?.deploymentId).toBe(s.sim.store.getByName("crashing")?.id);
    // One POST ever reached the service: the first instance's, answered after it had gone.
    expect(s.sim.counters()["POST /v2/deployments"]).toEqual({ "201": 1 });
    expect(second.logs.find("waiting for the service to list it").length).toBeGreaterThan(0);
    // The user learns of the create once, from the instance that saw it listed.
    const created = (await s.user.events(s.namespace, "crashing")).filter((e) => e.reason === "Created");
    expect(created.map((e) => e.reportingInstance)).toEqual([second.identity]);
  });
});
