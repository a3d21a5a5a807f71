// Revision outcomes on the real control plane: "is my revision live, and if not, why". A build
// that fails ends the rollout as RevisionFailed (Ready=False, Stalled=True, one Warning event,
// no polling while stalled) and the next spec change tries again; a rollout shows the revision's
// status and DEPLOYED finishes it, with revision reads only while it rolls out; a service
// without the revisions route, or --revision-tracking=off, keeps working as before.
import { describe, expect, it } from "vitest";
import type { DeploymentSpec } from "../../src/crd/schema.ts";
import { conditionOf, hasCondition } from "../support/resources.ts";
import { type Scenario, useScenarios, witness } from "../support/scenario.ts";

const REVISION = "GET /v2/deployments/{deployment_id}/revisions/{revision_id}";

const spec: DeploymentSpec = {
  source: "internal_docker",
  sourceRevisionConfig: { imageUri: "registry.example.com/agent:1" },
};
const image = (tag: string) => ({
  spec: { sourceRevisionConfig: { imageUri: `registry.example.com/agent:${tag}` } },
});
const revisionReads = (s: Scenario) =>
  Object.values(s.sim.counters()[REVISION] ?? {}).reduce((a, b) => a + b, 0);
/** Reads of the revisions of `name`'s deployment only. */
const readsOf = (s: Scenario, name: string) => {
  const id = s.sim.store.getByName(name)?.id ?? "";
  return s.sim.requests({ route: REVISION }).filter((r) => r.url.startsWith(`/v2/deployments/${id}/`)).length;
};

describe("controller: revision outcomes", () => {
  const scenarios = useScenarios();

  it("a failed build: RevisionFailed naming the revision, one Warning, no polling; a new spec change tries again", async () => {
    const s = await scenarios.start("rev-failed");
    await s.user.create(s.namespace, "builder", spec);
    const ready = await s.user.waitReady(s.namespace, "builder");
    const firstRevision = ready.status?.activeRevisionId;
    expect(ready.status?.latestRevisionStatus).toBe("DEPLOYED");
    const id = ready.status?.deploymentId ?? "";
    s.sim.store.drift(id, { fail_revisions: "build" });

    await s.user.patch(s.namespace, "builder", image("2"));
    const failed = await s.user.waitFor(
      s.namespace,
      "builder",
      (o) => hasCondition(o, "Ready", "False", "RevisionFailed"),
      "RevisionFailed",
    );
    const latest = failed.status?.latestRevisionId ?? "";
    expect(latest).not.toBe(firstRevision);
    expect(failed.status?.activeRevisionId).toBe(firstRevision);
    expect(failed.status?.latestRevisionStatus).toBe("BUILD_FAILED");
    expect(hasCondition(failed, "Stalled", "True", "RevisionFailed")).toBe(true);
    expect(hasCondition(failed, "Synced", "True")).toBe(true);
    expect(failed.status?.conditions?.some((c) => c.type === "Reconciling")).toBe(false);
    expect(conditionOf(failed, "Ready")?.message).toContain(`revision ${latest} BUILD_FAILED`);
    const warning = await s.user.waitForEvent(s.namespace, "builder", "RevisionFailed");
    expect(warning.type).toBe("Warning");
    expect(warning.note).toContain(latest);

    // Stalled: no poll, so no more revision reads and no second event, while another resource
    // came up and was polled meanwhile.
    const readsWhenStalled = readsOf(s, "builder");
    await witness(s, "witness", spec);
    expect(readsOf(s, "builder")).toBe(readsWhenStalled);
    const events = await s.user.events(s.namespace, "builder");
    expect(events.filter((e) => e.reason === "RevisionFailed").map((e) => e.count)).toEqual([1]);

    // Asking for a reconcile looks at the revision again (it is still failed: no new event).
    await s.user.annotate(s.namespace, "builder", {
      "dms.dev/reconcile-requested-at": "2025-06-01T10:00:00Z",
    });
    await s.user.waitFor(
      s.namespace,
      "builder",
      (o) => o?.status?.lastHandledReconcileAt === "2025-06-01T10:00:00Z",
      "the requested reconcile handled",
    );
    expect(readsOf(s, "builder")).toBe(readsWhenStalled + 1);

    // The next spec change is a new revision: this one builds, and its rollout finishes.
    s.sim.store.drift(id, { fail_revisions: null });
    await s.user.patch(s.namespace, "builder", image("3"));
    const healed = await s.user.waitReady(s.namespace, "builder");
    expect(healed.status?.latestRevisionStatus).toBe("DEPLOYED");
    expect(healed.status?.activeRevisionId).toBe(healed.status?.latestRevisionId);
    expect(healed.status?.latestRevisionId).not.toBe(latest);
    expect(healed.status?.conditions?.some((c) => c.type === "Stalled")).toBe(false);
  });

  it("a rollout shows the revision's status and DEPLOYED ends it; reads happen only while it rolls out", async () => {
    const s = await scenarios.start("rev-rollout", { sim: { timing: { revisionActiveAfterMs: 3_000 } } });
    await s.user.create(s.namespace, "rolling", spec);
    await s.user.waitReady(s.namespace, "rolling", 30_000);
    const seen = new Set<string>();
    await s.user.patch(s.namespace, "rolling", image("2"));
    await s.user.waitFor(
      s.namespace,
      "rolling",
      (o) => {
        if (o?.status?.latestRevisionStatus) seen.add(o.status.latestRevisionStatus);
        return hasCondition(o, "Ready", "True") && o?.metadata.generation === o?.status?.observedGeneration;
      },
      "the rollout done",
      30_000,
    );
    // Some of the build and deploy phases were seen on the way (200 ms polls over 3 s).
    expect([...seen].filter((st) => st !== "DEPLOYED").length).toBeGreaterThan(1);
    expect(seen.has("DEPLOYED")).toBe(true);
    // Steady state: no read of its revisions at all, while another resource came up and was polled.
    const settled = readsOf(s, "rolling");
    await witness(s, "witness", spec);
    expect(readsOf(s, "rolling")).toBe(settled);
  });

  it("a service without the route keeps working: one log line, no further probing", async () => {
    const s = await scenarios.start("rev-missing", { sim: { revisionsRoute: "missing" } });
    await s.user.create(s.namespace, "plain", spec);
    await s.user.waitReady(s.namespace, "plain");
    await s.user.patch(s.namespace, "plain", image("2"));
    const done = await s.user.waitReady(s.namespace, "plain");
    expect(done.status?.activeRevisionId).toBe(done.status?.latestRevisionId);
    expect(s.sim.counters()["GET (unmatched)"]).toEqual({ "404": 1 });
    expect(s.op.logs.find("no revisions route")).toHaveLength(1);
  });

  it("--revision-tracking=off makes no revision read", async () => {
    const s = await scenarios.start("rev-off", { op: { revisionTracking: false } });
    await s.user.create(s.namespace, "untracked", spec);
    await s.user.waitReady(s.namespace, "untracked");
    await s.user.patch(s.namespace, "untracked", image("2"));
    await s.user.waitReady(s.namespace, "untracked");
    expect(revisionReads(s)).toBe(0);
  });
});
