// Rebuild on demand on the real control plane, the operator talking HTTP to the simulator:
// dms.dev/rebuild-requested-at creates one revision through POST /v2/deployments/{id}/revisions,
// recorded in status.lastHandledRebuildAt (its revision in status.revisionHistory, the operator's
// own), and only once per value; a service without the route
// gets the request refused with a condition and an event (RebuildRouteMissing), and no write;
// asked with new secret values in the same change, the PATCH's revision is the one (no second build),
// the route missing or not; a rebuild whose answer was lost (RebuildUnconfirmed) that the service
// made after all is the operator's own once its revision is seen, never an ExternalRevision.
import { describe, expect, it } from "vitest";
import { ROUTES } from "../../src/api/wire.ts";
import {
  ANNOTATION_REBUILD_REQUESTED_AT,
  ANNOTATION_RECONCILE_REQUESTED_AT,
  type DeploymentSpec,
} from "../../src/crd/schema.ts";
import type { RebuildRouteMode } from "../../src/simulator/server.ts";
import { conditionOf, hasCondition } from "../support/resources.ts";
import { type Scenario, useScenarios } from "../support/scenario.ts";

const spec: DeploymentSpec = {
  source: "internal_docker",
  sourceRevisionConfig: { imageUri: "registry.example.com/agent:1" },
};
const ASKED = "2030-01-01T00:00:00Z";
/** The rebuild route, as the simulator's faults name it. */
const REBUILD_ROUTE = "POST /v2/deployments/{deployment_id}/revisions";

/** The writes the simulator received: POST of the rebuild route (by URL, any answer), PATCH. */
const writes = (s: Scenario, id: string) => ({
  rebuilds: s.sim.requests({ method: "POST" }).filter((r) => r.url === `/v2/deployments/${id}/revisions`),
  patches: s.sim.requests({ route: `PATCH ${ROUTES.DEPLOYMENT}` }),
});

/** Asks for one more reconcile of `agent` and waits until it is done. */
async function reconcileAgain(s: Scenario): Promise<void> {
  await s.user.annotate(s.namespace, "agent", { [ANNOTATION_RECONCILE_REQUESTED_AT]: "again" });
  await s.user.waitFor(
    s.namespace,
    "agent",
    (o) => o?.status?.lastHandledReconcileAt === "again",
    "a later reconcile",
  );
}

describe("controller: dms.dev/rebuild-requested-at", () => {
  const scenarios = useScenarios();

  async function ready(prefix: string, rebuildRoute: RebuildRouteMode) {
    const s = await scenarios.start(prefix, { sim: { rebuildRoute } });
    await s.user.create(s.namespace, "agent", spec);
    const obj = await s.user.waitReady(s.namespace, "agent");
    return { s, id: obj.status?.deploymentId ?? "" };
  }

  it("creates one revision through the rebuild route and records the request as handled", async () => {
    const { s, id } = await ready("ctl-rebuild", "present");
    expect(s.sim.store.revisions(id)).toHaveLength(1);
    // The POST answers a second late: what is waited for below is its answer, not the intent.
    s.sim.faults.set({ latency: [{ ms: 1_000, route: REBUILD_ROUTE }] });
    await s.user.annotate(s.namespace, "agent", { [ANNOTATION_REBUILD_REQUESTED_AT]: ASKED });
    const handled = await s.user.waitFor(
      s.namespace,
      "agent",
      // Its answer recorded: the intent written before the POST names the request already.
      (o) => o?.status?.lastHandledRebuildAt === ASKED && o.status.unconfirmedRebuild === undefined,
      "status.lastHandledRebuildAt recorded, the rebuild's answer with it",
    );
    const revisions = s.sim.store.revisions(id);
    expect(revisions).toHaveLength(2);
    const rebuilt = s.sim.store.get(id)?.latest_revision_id;
    expect(handled.status?.latestRevisionId).toBe(rebuilt);
    // The operator's own, as its creates are: in the history, never named someone else's.
    expect(handled.status?.revisionHistory?.[0]?.id).toBe(rebuilt);
    expect(handled.status?.externalRevision).toBeUndefined();
    const event = await s.user.waitForEvent(s.namespace, "agent", "Rebuilt");
    expect(event.note).toContain(s.sim.store.get(id)?.latest_revision_id);
    // The new revision rolls out, and the same value asks for nothing more.
    await s.user.waitFor(
      s.namespace,
      "agent",
      (o) => hasCondition(o, "Ready", "True") && o?.status?.activeRevisionId === o?.status?.latestRevisionId,
      "the rebuilt revision live",
    );
    await reconcileAgain(s);
    expect(writes(s, id)).toMatchObject({ rebuilds: [{ status: "201" }], patches: [] });
    expect(s.sim.store.revisions(id)).toHaveLength(2);
    expect((await s.user.events(s.namespace, "agent")).map((e) => e.reason)).not.toContain(
      "ExternalRevision",
    );
  });

  it("asked with new secret values in the same change: the PATCH's revision is the one asked for, no second build", async () => {
    const s = await scenarios.start("ctl-rebuild-secret", { sim: { rebuildRoute: "present" } });
    await s.user.create(s.namespace, "agent", { ...spec, secrets: [{ name: "API_KEY", value: "sk-old" }] });
    const id = (await s.user.waitReady(s.namespace, "agent")).status?.deploymentId ?? "";
    const before = s.sim.store.revisions(id)?.length ?? 0;
    // One write, so that one reconcile sees both.
    await s.user.patch(s.namespace, "agent", {
      metadata: { annotations: { [ANNOTATION_REBUILD_REQUESTED_AT]: ASKED } },
      spec: { secrets: [{ name: "API_KEY", value: "sk-new" }] },
    });
    const handled = await s.user.waitFor(
      s.namespace,
      "agent",
      // Its answer recorded: the intent written before the POST names the request already.
      (o) => o?.status?.lastHandledRebuildAt === ASKED && o.status.unconfirmedRebuild === undefined,
      "status.lastHandledRebuildAt recorded, the rebuild's answer with it",
    );
    expect(s.sim.store.revisions(id)).toHaveLength(before + 1);
    expect(writes(s, id).rebuilds).toEqual([]);
    expect(handled.status?.revisionHistory?.[0]?.id).toBe(s.sim.store.get(id)?.latest_revision_id);
  });

  it("refuses the request on a service without the route, with a condition and an event, and no write", async () => {
    const { s, id } = await ready("ctl-rebuild-missing", "method-not-allowed");
    await s.user.annotate(s.namespace, "agent", { [ANNOTATION_REBUILD_REQUESTED_AT]: ASKED });
    const refused = await s.user.waitFor(
      s.namespace,
      "agent",
      (o) => conditionOf(o, "Synced")?.reason === "RebuildRouteMissing",
      "Synced=False RebuildRouteMissing",
    );
    expect(conditionOf(refused, "Synced")).toMatchObject({
      status: "False",
      message: expect.stringContaining("the service has no rebuild route"),
    });
    expect(refused.status?.lastHandledRebuildAt).toBeUndefined();
    const event = await s.user.waitForEvent(s.namespace, "agent", "RebuildRouteMissing");
    expect(event.type).toBe("Warning");
    expect(s.sim.store.revisions(id)).toHaveLength(1);
    // Remembered for the connection: a later reconcile refuses it again without asking.
    await reconcileAgain(s);
    const after = writes(s, id);
    expect(after.rebuilds.map((r) => r.status)).toEqual(["405"]);
    expect(after.patches).toEqual([]);
  });

  it("a rebuild whose answer was lost: its revision, seen at the next look, is the operator's, never an ExternalRevision", async () => {
    const { s, id } = await ready("ctl-rebuild-lost", "present");
    // The service builds, and the connection drops where its answer would come.
    s.sim.faults.set({ script: [{ route: REBUILD_ROUTE, count: 1, status: "lost" }] });
    await s.user.annotate(s.namespace, "agent", { [ANNOTATION_REBUILD_REQUESTED_AT]: ASKED });
    const unconfirmed = await s.user.waitForEvent(s.namespace, "agent", "RebuildUnconfirmed");
    expect(unconfirmed.type).toBe("Warning");
    expect(s.sim.store.revisions(id)).toHaveLength(2);
    s.sim.faults.clear();
    await reconcileAgain(s);
    // That look saw the revision: the operator's own, recorded as a rebuild answered would be.
    const rebuilt = s.sim.store.get(id)?.latest_revision_id;
    const seen = await s.user.get(s.namespace, "agent");
    expect(seen?.status?.externalRevision).toBeUndefined();
    expect(seen?.status?.revisionHistory?.[0]?.id).toBe(rebuilt);
    expect(seen?.status?.lastHandledRebuildAt).toBe(ASKED);
    expect(seen?.status?.unconfirmedRebuild).toBeUndefined();
    const event = await s.user.waitForEvent(s.namespace, "agent", "Rebuilt");
    expect(event).toMatchObject({
      type: "Normal",
      note: expect.stringContaining(`whose answer was lost, made revision ${rebuilt}`),
    });
    const reasons = (await s.user.events(s.namespace, "agent")).map((e) => e.reason);
    expect(reasons).not.toContain("ExternalRevision");
    // Asked once, never again.
    expect(writes(s, id).rebuilds).toHaveLength(1);
    expect(s.sim.store.revisions(id)).toHaveLength(2);
  });

  it("on a service without the route, a rotated Secret's revision is the one asked for: acknowledged, not refused", async () => {
    const s = await scenarios.start("ctl-rebuild-missing-secret", {
      sim: { rebuildRoute: "method-not-allowed" },
    });
    await s.user.create(s.namespace, "agent", { ...spec, secrets: [{ name: "API_KEY", value: "sk-old" }] });
    const id = (await s.user.waitReady(s.namespace, "agent")).status?.deploymentId ?? "";
    await s.user.annotate(s.namespace, "agent", { [ANNOTATION_REBUILD_REQUESTED_AT]: ASKED });
    await s.user.waitFor(
      s.namespace,
      "agent",
      (o) => conditionOf(o, "Synced")?.reason === "RebuildRouteMissing",
      "the request refused: the route found missing",
    );
    const before = s.sim.store.revisions(id)?.length ?? 0;
    await s.user.patch(s.namespace, "agent", { spec: { secrets: [{ name: "API_KEY", value: "sk-new" }] } });
    const done = await s.user.waitFor(
      s.namespace,
      "agent",
      (o) => (o?.metadata.generation ?? 0) > 1 && o?.status?.observedGeneration === o?.metadata.generation,
      "the rotated Secret reconciled",
    );
    expect(done.status?.lastHandledRebuildAt).toBe(ASKED);
    expect(conditionOf(done, "Synced")).toMatchObject({ status: "True" });
    expect(s.sim.store.revisions(id)).toHaveLength(before + 1);
    expect(done.status?.revisionHistory?.[0]?.id).toBe(s.sim.store.get(id)?.latest_revision_id);
    // The route known missing: not asked again.
    expect(writes(s, id).rebuilds.map((r) => r.status)).toEqual(["405"]);
  });
});
