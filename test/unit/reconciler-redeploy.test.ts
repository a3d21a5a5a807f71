// Redeploy instead of rebuild in the reconciler at unit speed: DeploymentReconciler over in-memory
// ports and a manual clock. A spec that goes back to an image digest an earlier revision deployed
// redeploys it (no PATCH carrying source_revision_config), with both behaviours of the route; a
// tag under Pinned, a rotated secret, revisionReuse Never and a service without the route PATCH;
// a steady resource reads no revisions. Changes made outside Git: a revision the operator did not
// create named, counted and put back by a redeploy of its own (or, under driftPolicy Report, left
// as it is); spec.displayName sent by a PATCH after the create; an empty secrets list the service
// keeps sent once, never in a loop.
import { pino } from "pino";
import { describe, expect, it } from "vitest";
import { REPLACEMENT } from "../../src/api/printable.ts";
import { ANNOTATION_REBUILD_REQUESTED_AT, type DeploymentSpec } from "../../src/crd/schema.ts";
import type { StoredResource } from "../../src/reconcile/ports.ts";
import { DeploymentReconciler } from "../../src/reconcile/reconciler.ts";
import type { SessionLookup } from "../../src/reconcile/service/session.ts";
import { ManualClock } from "../support/manual-clock.ts";
import {
  claimingSession,
  MemoryResources,
  MemorySecrets,
  RecordedEvents,
  SimulatedService,
} from "../support/memory-ports.ts";

const REF = { namespace: "default", name: "agent" };
const GOOD = `registry.example/agent@sha256:${"a".repeat(64)}`;
const BAD = `registry.example/agent@sha256:${"b".repeat(64)}`;
const BUILD_MS = 60_000;
const SPEC: DeploymentSpec = { source: "external_docker", sourceRevisionConfig: { imageUri: GOOD } };

function world(route: SimulatedService["redeployRoute"] = "new-revision", good = GOOD) {
  const clock = new ManualClock({ start: Date.parse("2030-01-01T00:00:00Z") });
  const now = () => clock.now();
  const resources = new MemoryResources(now);
  const service = new SimulatedService({
    now,
    timing: { readyAfterMs: 0, revisionActiveAfterMs: BUILD_MS, deleteAfterMs: 0 },
  });
  service.redeployRoute = route;
  const events = new RecordedEvents();
  const counted: string[] = [];
  const logger = pino({ level: "silent" });
  const session = claimingSession(service, resources, { clock, logger });
  const connection: SessionLookup = { kind: "ready", session };
  const reconciler = new DeploymentReconciler({
    resources,
    sessions: { lookup: () => connection },
    secrets: new MemorySecrets(),
    events,
    clock,
    logger,
    pollMs: 5_000,
    externalChange: (connection, kind) => counted.push(`${connection}/${kind}`),
    // The rollout windows' search on a counter that stands still: not timed by the machine.
    searchCounter: () => 0,
  });
  const w = {
    clock,
    resources,
    service,
    events,
    /** `dms_external_changes_total` as counted: `<connection>/<kind>`. */
    counted,
    reconcile: () => reconciler.reconcile("default/agent", new AbortController().signal),
    async resync() {
      await session.snapshot.refresh(new AbortController().signal);
    },
    stored: () => resources.stored(REF),
    deployment: () => service.store.getByName("agent"),
    edit: (change: (o: StoredResource) => void) => resources.edit(REF, change),
    /** Reconciles until the resource is Ready at its generation (time passing between), at most `n` times. */
    async settle(n = 8) {
      for (let i = 0; i < n; i++) {
        await w.resync();
        await w.reconcile();
        const s = w.stored();
        const ready = s?.status?.conditions?.find((c) => c.type === "Ready");
        if (ready?.status === "True" && ready.observedGeneration === s?.metadata.generation) return;
        clock.advance(BUILD_MS / 4);
      }
      throw new Error(`not Ready: ${JSON.stringify(w.stored()?.status?.conditions)}`);
    },
    /** GOOD created by the operator and live, then BAD live: the revert case. */
    async goodThenBad(spec: Partial<DeploymentSpec> = {}) {
      const first = { ...SPEC, sourceRevisionConfig: { imageUri: good } };
      resources.create({ metadata: { name: "agent" }, spec: { ...first, ...spec } });
      await w.settle();
      w.edit((o) => {
        o.spec.sourceRevisionConfig = { imageUri: BAD };
      });
      await w.settle();
      service.resetCalls();
      events.all.length = 0;
    },
    /** {@link goodThenBad}, then back to GOOD, reconciled once (the redeploy sent). */
    async reverted() {
      await w.goodThenBad();
      w.back();
      await w.resync();
      await w.reconcile();
    },
    /**
     * {@link reverted} on a switch-active service, settled with the revision switched back to
     * live; the calls and events so far forgotten. Returns the deployment's id and revision count.
     */
    async switchedBackLive() {
      await w.reverted();
      clock.advance(BUILD_MS / 3);
      await w.settle(3);
      const id = w.deployment()?.id ?? "";
      service.resetCalls();
      events.all.length = 0;
      return { id, before: (service.store.revisions(id) ?? []).length };
    },
    back() {
      w.edit((o) => {
        o.spec.sourceRevisionConfig = { imageUri: good };
      });
    },
    /** A rebuild asked, reconciled once: its answer lost (a 504), the revision not made yet. */
    async rebuildLost() {
      w.edit((o) => {
        o.metadata.annotations = { [ANNOTATION_REBUILD_REQUESTED_AT]: "2030-01-02T00:00:00Z" };
      });
      service.failNext("createRevision", { status: 504, maybeApplied: true });
      await w.resync();
      await w.reconcile();
    },
    patchedRevisionConfig: () => service.lastPatchBody?.source_revision_config !== undefined,
  };
  return w;
}

describe("DeploymentReconciler: redeploy instead of rebuild", () => {
  it("changed back with a rebuild asked (dms.dev/rebuild-requested-at): built by the PATCH, not redeployed, and no second build", async () => {
    const w = world();
    await w.goodThenBad();
    const before = (w.service.store.revisions(w.deployment()?.id ?? "") ?? []).length;
    w.back();
    w.edit((o) => {
      o.metadata.annotations = { [ANNOTATION_REBUILD_REQUESTED_AT]: "2030-01-02T00:00:00Z" };
    });
    await w.resync();
    await w.reconcile();
    expect(w.service.calls).toMatchObject({ redeploy: 0, patch: 1, createRevision: 0 });
    expect(w.patchedRevisionConfig()).toBe(true);
    expect(w.service.store.revisions(w.deployment()?.id ?? "")).toHaveLength(before + 1);
    expect(w.stored()?.status?.lastHandledRebuildAt).toBe("2030-01-02T00:00:00Z");
    expect(w.events.reasons()).toEqual(["Normal/Updated"]);
  });

  it("an image digest changed and changed back: one redeploy, no PATCH, the old config live again, faster than a build", async () => {
    const w = world();
    await w.goodThenBad();
    const good = w.service.store.revisions(w.deployment()?.id ?? "")?.[0]?.id;
    w.back();
    await w.resync();
    await w.reconcile();
    expect(w.service.calls).toMatchObject({ redeploy: 1, patch: 0, recentRevisions: 1 });
    expect(w.service.store.redeploys()).toMatchObject([{ revision_id: good, behaviour: "new-revision" }]);
    expect(w.events.reasons()).toEqual(["Normal/Redeployed"]);
    expect(w.events.all[0]?.note).toContain(
      `redeployed revision ${good} instead of building a new one (no build)`,
    );
    // Live after the deploy phases alone: a third of a build.
    w.clock.advance(BUILD_MS / 3);
    await w.settle(3);
    const status = w.stored()?.status;
    expect(status?.activeRevision).toMatchObject({ imageUri: GOOD });
    expect(status?.activeRevisionId).toBe(w.deployment()?.active_revision_id);
    expect(w.service.calls.patch).toBe(0);
    // Steady: no more redeploys, no read of the revisions.
    w.service.resetCalls();
    await w.resync();
    await w.reconcile();
    expect(w.service.calls).toMatchObject({ redeploy: 0, recentRevisions: 0, patch: 0 });
  });

  it("switch-active: the active revision switched back is Ready, and nothing is sent again", async () => {
    const w = world("switch-active");
    await w.goodThenBad();
    const [good, bad] = (w.service.store.revisions(w.deployment()?.id ?? "") ?? []).map((r) => r.id);
    w.back();
    await w.resync();
    await w.reconcile();
    expect(w.service.calls).toMatchObject({ redeploy: 1, patch: 0 });
    w.clock.advance(BUILD_MS / 3);
    await w.settle(3);
    expect(w.deployment()).toMatchObject({ active_revision_id: good, latest_revision_id: bad });
    expect(w.stored()?.status?.activeRevision).toMatchObject({ id: good, imageUri: GOOD });
    w.service.resetCalls();
    w.clock.advance(10 * BUILD_MS);
    await w.resync();
    await w.reconcile();
    expect(w.service.calls).toMatchObject({ redeploy: 0, patch: 0, recentRevisions: 0 });
    const conditions = w.stored()?.status?.conditions?.map((c) => `${c.type}=${c.status}`);
    expect(conditions).toEqual(["Ready=True", "Synced=True"]);
    // Git moves on to BAD again: the latest revision is switched back to, not built.
    w.edit((o) => {
      o.spec.sourceRevisionConfig = { imageUri: BAD };
    });
    await w.resync();
    await w.reconcile();
    expect(w.service.calls).toMatchObject({ redeploy: 1, patch: 0 });
    expect(w.service.store.redeploys().at(-1)).toMatchObject({ revision_id: bad });
  });

  it("switch-active under driftPolicy Report: the revision switched back to is the spec's, never a drift; a change outside it still is", async () => {
    const w = world("switch-active");
    await w.goodThenBad({ driftPolicy: "Report", sourceConfig: { customUrl: "https://agent.example" } });
    w.back();
    w.clock.advance(BUILD_MS / 3);
    await w.settle(3);
    // The service's config still names BAD, its latest revision: what the switch made live is GOOD.
    for (let i = 0; i < 2; i++) {
      w.clock.advance(BUILD_MS);
      await w.resync();
      await w.reconcile();
    }
    const synced = () => w.stored()?.status?.conditions?.find((c) => c.type === "Synced");
    expect(synced()).toMatchObject({ status: "True", reason: "ReconcileSuccess" });
    expect(w.events.reasons()).toEqual(["Normal/Redeployed"]);
    expect(w.counted).toEqual([]);
    // Someone changes a field outside the revision: that alone is the drift reported.
    w.service.store.drift(w.deployment()?.id ?? "", { source_config: { custom_url: "https://x.example" } });
    await w.resync();
    await w.reconcile();
    expect(synced()).toMatchObject({ status: "False", reason: "Drifted" });
    expect(synced()?.message).toContain("in sourceConfig.customUrl (changed outside this resource)");
    expect(w.counted).toEqual(["default/fields"]);
    expect(w.service.calls).toMatchObject({ redeploy: 1, patch: 0 });
  });

  it("switch-active, Git back to the latest revision's config with a rebuild asked: the latest config is built and goes live", async () => {
    const w = world("switch-active");
    const { id, before } = await w.switchedBackLive();
    // The service's config still names BAD (its latest revision); GOOD is active by the switch.
    w.edit((o) => {
      o.spec.sourceRevisionConfig = { imageUri: BAD };
      o.metadata.annotations = { [ANNOTATION_REBUILD_REQUESTED_AT]: "2030-01-02T00:00:00Z" };
    });
    await w.resync();
    await w.reconcile();
    expect(w.stored()?.status?.lastHandledRebuildAt).toBe("2030-01-02T00:00:00Z");
    // Acknowledged only with a revision built: one more revision, of BAD, and it goes live.
    expect(w.service.store.revisions(id)).toHaveLength(before + 1);
    expect(w.service.calls.createRevision).toBe(1);
    w.clock.advance(BUILD_MS / 3);
    await w.settle(8);
    const deployment = w.deployment();
    expect(deployment?.active_revision_id).toBe(deployment?.latest_revision_id);
    expect(w.stored()?.status?.activeRevision).toMatchObject({ imageUri: BAD });
  });

  it("switch-active, the revision switched back to live, a rebuild asked: the spec's config is built, not the service's latest", async () => {
    const w = world("switch-active");
    const { id, before } = await w.switchedBackLive();
    // GOOD is active by the switch; the service's config still names BAD, its latest revision.
    w.edit((o) => {
      o.metadata.annotations = { [ANNOTATION_REBUILD_REQUESTED_AT]: "2030-01-02T00:00:00Z" };
    });
    await w.resync();
    await w.reconcile();
    expect(w.stored()?.status?.lastHandledRebuildAt).toBe("2030-01-02T00:00:00Z");
    const revisions = w.service.store.revisions(id) ?? [];
    expect(revisions).toHaveLength(before + 1);
    // The revision built is of what the spec asks (GOOD), never of the service's latest (BAD).
    expect(w.deployment()?.source_revision_config).toMatchObject({ image_uri: GOOD });
    w.clock.advance(BUILD_MS / 3);
    await w.settle(8);
    expect(w.service.calls.redeploy).toBe(0);
    expect(w.stored()?.status?.activeRevision).toMatchObject({ imageUri: GOOD });
  });

  it("switch-active, a rebuild's answer lost, then Git back to an earlier image: the switch back keeps the rebuild's record, and its revision, once seen, is the operator's", async () => {
    const w = world("switch-active");
    await w.goodThenBad();
    const id = w.deployment()?.id ?? "";
    await w.rebuildLost();
    const sent = w.stored()?.status?.unconfirmedRebuild;
    expect(sent).toBeDefined();
    // Git reverts before the service shows the rebuild's revision: switched back, no revision made.
    w.back();
    await w.resync();
    await w.reconcile();
    expect(w.service.store.redeploys()).toMatchObject([{ behaviour: "switch-active" }]);
    expect(w.stored()?.status?.unconfirmedRebuild).toEqual(sent);
    // The rebuild's revision shows now: the operator's own, never an ExternalRevision.
    w.service.store.createRevision(id);
    const rebuilt = w.deployment()?.latest_revision_id;
    w.events.all.length = 0;
    await w.resync();
    await w.reconcile();
    expect(w.events.reasons()).toContain("Normal/Rebuilt");
    expect(w.events.reasons()).not.toContain("Warning/ExternalRevision");
    expect(w.stored()?.status?.externalRevision).toBeUndefined();
    expect(w.stored()?.status?.revisionHistory?.map((e) => e.id)).toContain(rebuilt);
    expect(w.counted).not.toContain("default/revision");
  });

  it.each([
    ["Correct", {}],
    ["Report", { driftPolicy: "Report" as const }],
  ])(
    "switch-active, a rebuild's answer lost, then Git back, then the rebuild's revision goes live (driftPolicy %s): the spec's revision is switched back to as the operator's own change, never a drift",
    async (_policy, spec) => {
      const w = world("switch-active");
      await w.goodThenBad(spec);
      const id = w.deployment()?.id ?? "";
      const good = w.service.store.revisions(id)?.[0]?.id;
      await w.rebuildLost();
      w.back();
      w.clock.advance(BUILD_MS / 3);
      await w.settle(3);
      expect(w.deployment()?.active_revision_id).toBe(good);
      // The rebuild (of BAD, the spec's config when it was sent) shows now, and goes live.
      w.service.store.createRevision(id);
      w.events.all.length = 0;
      w.clock.advance(BUILD_MS);
      await w.settle(8);
      expect(w.events.reasons()).toEqual(["Normal/Redeployed", "Normal/Rebuilt"]);
      expect(w.counted).toEqual([]);
      // The spec (GOOD) is what is live again, by a switch back to its revision.
      expect(w.service.store.redeploys().map((r) => r.revision_id)).toEqual([good, good]);
      expect(w.deployment()?.active_revision_id).toBe(good);
      expect(w.stored()?.status?.activeRevision).toMatchObject({ id: good, imageUri: GOOD });
      const conditions = w.stored()?.status?.conditions?.map((c) => `${c.type}=${c.status}`);
      expect(conditions).toEqual(["Ready=True", "Synced=True"]);
    },
  );

  it("revisionReuse Never, a rebuild's answer lost, then Git back: the rebuild's revision, made before the revert's PATCH, is Rebuilt; the PATCH's revision is live, nothing counted", async () => {
    const w = world();
    await w.goodThenBad({ revisionReuse: "Never" });
    const id = w.deployment()?.id ?? "";
    await w.rebuildLost();
    // The service made the rebuild's revision (of BAD) when asked; the listing shows it with the revert.
    const rebuilt = w.service.store.createRevision(id).id;
    w.back();
    await w.resync();
    await w.reconcile();
    expect(w.events.reasons()).toEqual(["Warning/RebuildUnconfirmed", "Normal/Updated", "Normal/Rebuilt"]);
    expect(w.stored()?.status?.revisionHistory?.map((e) => e.id)).toContain(rebuilt);
    expect(w.stored()?.status?.unconfirmedRebuild).toBeUndefined();
    w.clock.advance(BUILD_MS);
    await w.settle(8);
    expect(w.deployment()?.latest_revision_id).not.toBe(rebuilt);
    expect(w.stored()?.status?.activeRevision).toMatchObject({ imageUri: GOOD });
    expect(w.events.reasons()).not.toContain("Normal/DriftCorrected");
    expect(w.counted).toEqual([]);
  });

  it("switch-active, Git forward to the latest revision's config with a sourceConfig change: the latest revision goes live again", async () => {
    const w = world("switch-active");
    const { id } = await w.switchedBackLive();
    const [, bad] = (w.service.store.revisions(id) ?? []).map((r) => r.id);
    // The service's config still names BAD (its latest revision); GOOD is active by the switch.
    w.edit((o) => {
      o.spec.sourceRevisionConfig = { imageUri: BAD };
      o.spec.sourceConfig = { customUrl: "https://agent.example" };
    });
    await w.resync();
    await w.reconcile();
    expect(w.service.store.redeploys().at(-1)).toMatchObject({ revision_id: bad });
    w.clock.advance(BUILD_MS / 3);
    await w.settle(8);
    expect(w.deployment()).toMatchObject({ active_revision_id: bad, latest_revision_id: bad });
    expect(w.deployment()?.source_config).toMatchObject({ custom_url: "https://agent.example" });
    expect(w.stored()?.status?.activeRevision).toMatchObject({ id: bad, imageUri: BAD });
  });

  it.each([
    ["a redeploy", "redeploy" as const],
    ["a PATCH", "patch" as const],
  ])(
    "%s whose answer was lost although the service made the revision: never named an ExternalRevision",
    async (_name, method) => {
      const w = world();
      await w.goodThenBad();
      const id = w.deployment()?.id ?? "";
      const good = w.service.store.revisions(id)?.[0]?.id ?? "";
      const other = `registry.example/agent@sha256:${"c".repeat(64)}`;
      if (method === "redeploy") w.back();
      else
        w.edit((o) => {
          o.spec.sourceRevisionConfig = { imageUri: other };
        });
      w.service.failNext(method, { status: 504, maybeApplied: true });
      await w.resync();
      await expect(w.reconcile()).rejects.toThrow(/504/);
      // The service made the revision: only the answer was lost.
      if (method === "redeploy") w.service.store.redeploy(id, good, "new-revision");
      else w.service.store.patch(id, { source_revision_config: { image_uri: other } });
      w.events.all.length = 0;
      w.clock.advance(BUILD_MS);
      await w.settle(3);
      expect(w.events.reasons()).not.toContain("Warning/ExternalRevision");
      expect(w.stored()?.status?.externalRevision).toBeUndefined();
      expect(w.counted).toEqual([]);
      expect(w.service.calls[method]).toBe(1);
    },
  );

  it("switch-active, a redeploy whose answer was lost although the service switched: nothing shows it, so it is sent again, and the revision is live when the first switch is", async () => {
    const w = world("switch-active");
    await w.goodThenBad();
    const id = w.deployment()?.id ?? "";
    const [good, bad] = (w.service.store.revisions(id) ?? []).map((r) => r.id);
    w.back();
    w.service.failNext("redeploy", { status: 504, maybeApplied: true });
    await w.resync();
    await expect(w.reconcile()).rejects.toThrow(/504/);
    // The service took it: only the answer was lost. Until it is live, the deployment, its config
    // and the revision's status are as before: no look can tell it from a request that never came.
    w.service.store.redeploy(id, good ?? "", "switch-active");
    expect(w.deployment()).toMatchObject({ latest_revision_id: bad, active_revision_id: bad });
    expect(w.service.store.revision(id, good ?? "")?.status).toBe("DEPLOYED");
    w.clock.advance(1_000);
    await w.resync();
    await w.reconcile();
    expect(w.service.store.redeploys().map((r) => r.revision_id)).toEqual([good, good]);
    // The same switch again: live when the first one is, recorded once answered, never sent a third time.
    w.clock.advance(BUILD_MS / 3 - 1_000);
    await w.settle(1);
    expect(w.deployment()).toMatchObject({ latest_revision_id: bad, active_revision_id: good });
    expect(w.stored()?.status?.revisionHistory?.[0]).toMatchObject({
      id: good,
      redeployedAt: expect.any(String),
    });
    expect(w.service.calls.redeploy).toBe(2);
  });

  it("switch-active, Git forward to the latest revision's config under a closed rollout window: held, the sourceConfig sent, the revision brought back once it opens", async () => {
    const w = world("switch-active");
    const { id } = await w.switchedBackLive();
    const [, bad] = (w.service.store.revisions(id) ?? []).map((r) => r.id);
    w.edit((o) => {
      o.spec.rolloutWindows = [{ kind: "deny", schedule: "0 0 1 1 *", duration: "24h" }];
    });
    await w.resync();
    await w.reconcile();
    w.edit((o) => {
      o.spec.sourceRevisionConfig = { imageUri: BAD };
      o.spec.sourceConfig = { customUrl: "https://agent.example" };
    });
    await w.resync();
    await w.reconcile();
    expect(w.service.calls).toMatchObject({ redeploy: 0, patch: 1 });
    expect(w.service.lastPatchBody).toEqual({ source_config: { custom_url: "https://agent.example" } });
    const synced = w.stored()?.status?.conditions?.find((c) => c.type === "Synced");
    expect(synced).toMatchObject({ status: "False", reason: "OutsideRolloutWindow" });
    // Once the window opens, the latest revision is brought back.
    w.clock.advance(24 * 3_600_000);
    await w.resync();
    await w.reconcile();
    expect(w.service.calls.redeploy).toBe(1);
    expect(w.service.store.redeploys().at(-1)).toMatchObject({ revision_id: bad });
  });

  it("switch-active, the switch back failing on the service: RevisionFailed with its deploy log, said once, nothing sent again", async () => {
    const w = world("switch-active");
    await w.goodThenBad();
    const id = w.deployment()?.id ?? "";
    const [good, bad] = (w.service.store.revisions(id) ?? []).map((r) => r.id);
    w.service.store.drift(id, { fail_revisions: "deploy" });
    w.back();
    await w.resync();
    await w.reconcile();
    expect(w.service.store.redeploys()).toMatchObject([{ revision_id: good, behaviour: "switch-active" }]);
    // Past the deploy phases, far within spec.rolloutTimeout: the switch failed, BAD stays active.
    w.clock.advance(BUILD_MS / 3);
    await w.resync();
    await w.reconcile();
    expect(w.deployment()).toMatchObject({ latest_revision_id: bad, active_revision_id: bad });
    const conditions = () =>
      w.stored()?.status?.conditions?.map((c) => `${c.type}=${c.status}/${c.reason}`) ?? [];
    expect(conditions()).toContain("Ready=False/RevisionFailed");
    expect(conditions()).toContain("Stalled=True/RevisionFailed");
    expect(w.events.reasons()).toEqual(["Normal/Redeployed", "Warning/RevisionFailed"]);
    expect(w.events.all[1]?.note).toContain(
      `revision ${good} of the service's deployment ${id} DEPLOY_FAILED`,
    );
    expect(w.events.all[1]?.note).toContain("last deploy log lines:");
    expect(w.stored()?.status?.failedRevisionLog).toMatchObject({ revisionId: good, type: "deploy" });
    // Looked at again (a resync, a restart's first look): nothing said again, nothing sent again.
    w.clock.advance(10 * BUILD_MS);
    for (let i = 0; i < 2; i++) {
      await w.resync();
      await w.reconcile();
    }
    expect(conditions()).toContain("Ready=False/RevisionFailed");
    expect(w.events.reasons()).toEqual(["Normal/Redeployed", "Warning/RevisionFailed"]);
    expect(w.service.calls).toMatchObject({ redeploy: 1, patch: 0, getRevisionLogs: 1 });
  });

  it("switch-active: the rollout of the revision switched back to keeps its start until it is live", async () => {
    const w = world("switch-active");
    await w.reverted();
    w.clock.advance(1_000);
    await w.resync();
    await w.reconcile();
    const started = w.stored()?.status?.rolloutStartedAt;
    expect(started).toBeDefined();
    w.clock.advance(1_000);
    await w.resync();
    await w.reconcile();
    expect(w.stored()?.status?.rolloutStartedAt).toBe(started);
  });

  it("switch-active: a PATCH of the rest failing after the redeploy keeps the history, and no second redeploy", async () => {
    const w = world("switch-active");
    await w.goodThenBad();
    const good = w.service.store.revisions(w.deployment()?.id ?? "")?.[0]?.id;
    w.edit((o) => {
      o.spec.sourceRevisionConfig = { imageUri: GOOD };
      o.spec.sourceConfig = { customUrl: "https://agent.example" };
    });
    w.service.failNext("patch", { status: 503 });
    await w.resync();
    // Reported, and retried by the controller (rethrown).
    await expect(w.reconcile()).rejects.toThrow(/503/);
    expect(w.service.calls).toMatchObject({ redeploy: 1, patch: 1 });
    expect(w.stored()?.status?.revisionHistory?.[0]).toMatchObject({ id: good });
    expect(w.stored()?.status?.revisionHistory?.[0]?.redeployedAt).toBeDefined();
    // The retry sends the rest alone: the revision switched back to is not redeployed again.
    w.service.resetCalls();
    await w.resync();
    await w.reconcile();
    expect(w.service.calls).toMatchObject({ redeploy: 0, recentRevisions: 0, patch: 1 });
    expect(w.service.lastPatchBody).toEqual({ source_config: { custom_url: "https://agent.example" } });
  });

  it("switch-active under a closed rollout window: the live redeployed revision is not held", async () => {
    const w = world("switch-active");
    await w.reverted();
    w.clock.advance(BUILD_MS / 3);
    await w.settle(3);
    w.service.resetCalls();
    w.events.all.length = 0;
    // The spec's revision is live (switched back to); the service's config still names the newest.
    w.edit((o) => {
      o.spec.rolloutWindows = [{ kind: "deny", schedule: "0 0 * * *", duration: "24h" }];
    });
    await w.resync();
    await w.reconcile();
    const conditions = w.stored()?.status?.conditions?.map((c) => `${c.type}=${c.status}`);
    expect(conditions).toEqual(["Ready=True", "Synced=True"]);
    expect(w.events.reasons()).toEqual([]);
    expect(w.service.calls).toMatchObject({ redeploy: 0, patch: 0, recentRevisions: 0 });
  });

  it.each([
    ["a service without the route: one fallback, remembered", "missing" as const, {}],
    ["revisionReuse Never", "new-revision" as const, { revisionReuse: "Never" as const }],
  ])("%s: PATCH", async (_name, route, spec) => {
    const w = world(route);
    await w.goodThenBad(spec);
    w.back();
    await w.resync();
    await w.reconcile();
    expect(w.service.calls.redeploy).toBe(route === "missing" ? 1 : 0);
    expect(w.service.calls.patch).toBe(1);
    expect(w.patchedRevisionConfig()).toBe(true);
    if (route === "missing") {
      // Asked once per connection: the next change goes straight to the PATCH.
      await w.settle();
      w.edit((o) => {
        o.spec.sourceRevisionConfig = { imageUri: BAD };
      });
      w.service.resetCalls();
      await w.resync();
      await w.reconcile();
      expect(w.service.calls).toMatchObject({ redeploy: 0, patch: 1 });
    }
  });

  it("a tag under the default Pinned: PATCH (rebuild)", async () => {
    const w = world();
    w.resources.create({
      metadata: { name: "agent" },
      spec: { ...SPEC, sourceRevisionConfig: { imageUri: "registry.example/agent:1" } },
    });
    await w.settle();
    w.edit((o) => {
      o.spec.sourceRevisionConfig = { imageUri: "registry.example/agent:2" };
    });
    await w.settle();
    w.service.resetCalls();
    w.edit((o) => {
      o.spec.sourceRevisionConfig = { imageUri: "registry.example/agent:1" };
    });
    await w.resync();
    await w.reconcile();
    expect(w.service.calls).toMatchObject({ redeploy: 0, patch: 1 });
  });
});

// The status sink at the reconciler: what the service or the tenant gave is written with the
// printable rule. A compared value holding a bidirectional control is left unset and Synced says
// which; text for people (why a revision was redeployed, the drift lines) is escaped.
describe("DeploymentReconciler: the status sink", () => {
  const RLO = "\u202e";
  const noRule = (text: string | undefined) => expect(text ?? "").not.toMatch(/[\u202e\u200b\x9b]/u);

  it("a hostile service's image: activeRevision.imageUri left unset with Synced saying why; the drift line escaped", async () => {
    const w = world();
    w.resources.create({ metadata: { name: "agent" }, spec: { ...SPEC, managementPolicy: "ObserveOnly" } });
    // ObserveOnly creates nothing: the deployment is the service's, as it reports it.
    w.service.store.create({
      name: "agent",
      source: "external_docker",
      source_config: {},
      source_revision_config: { image_uri: GOOD },
    });
    w.clock.advance(BUILD_MS);
    await w.resync();
    await w.reconcile();
    const id = w.deployment()?.id ?? "";
    expect(w.stored()?.status?.activeRevision).toMatchObject({ imageUri: GOOD });
    const hostile = `registry.example/agent${RLO}@sha256:${"c".repeat(64)}`;
    w.service.store.drift(id, { source_revision_config: { image_uri: hostile } });
    w.clock.advance(BUILD_MS);
    await w.resync();
    await w.reconcile();
    const status = w.stored()?.status;
    expect(w.deployment()?.source_revision_config.image_uri).toBe(hostile);
    expect(status?.activeRevision?.id).toBe(w.deployment()?.active_revision_id);
    expect(status?.activeRevision?.imageUri).toBeUndefined();
    const synced = status?.conditions?.find((c) => c.type === "Synced");
    expect(synced).toMatchObject({ status: "False", reason: "Drifted" });
    expect(synced?.message).toContain(
      "left unset: status.activeRevision.imageUri as the service gave it holds U+202E",
    );
    expect(synced?.message).toContain(`registry.example/agent${REPLACEMENT}@sha256:`);
    noRule(JSON.stringify(status));
    // Written once: the next look at the same answer changes nothing.
    const before = w.resources.writes.patchStatus;
    await w.resync();
    await w.reconcile();
    expect(w.resources.writes.patchStatus).toBe(before);
  });

  it("a redeploy of an image holding a bidi control: redeployReason escaped, the image itself left unset", async () => {
    const good = `registry.example/age${RLO}nt@sha256:${"a".repeat(64)}`;
    const w = world("new-revision", good);
    await w.reverted();
    w.clock.advance(BUILD_MS / 3);
    await w.settle(3);
    const status = w.stored()?.status;
    expect(w.service.calls.redeploy).toBe(1);
    const [entry] = status?.revisionHistory ?? [];
    expect(entry?.redeployedFrom).toBeDefined();
    expect(entry?.redeployReason).toContain(`deployed image registry.example/age${REPLACEMENT}nt@sha256:`);
    expect(status?.activeRevision?.imageUri).toBeUndefined();
    expect(status?.activeRevision?.id).toBe(w.deployment()?.active_revision_id);
    const synced = status?.conditions?.find((c) => c.type === "Synced");
    expect(synced).toMatchObject({ status: "True", reason: "ReconcileSuccess" });
    expect(synced?.message).toContain("status.activeRevision.imageUri as the service gave it holds U+202E");
    noRule(JSON.stringify(status));
  });
});

describe("DeploymentReconciler: changes made outside Git", () => {
  /** GOOD created by the operator and live; then someone deploys BAD on the service. */
  async function hotfixed(spec: Partial<DeploymentSpec> = {}) {
    const w = world("switch-active");
    w.resources.create({ metadata: { name: "agent" }, spec: { ...SPEC, ...spec } });
    await w.settle();
    w.service.resetCalls();
    w.events.all.length = 0;
    w.service.store.drift(w.deployment()?.id ?? "", { source_revision_config: { image_uri: BAD } });
    const external = w.deployment()?.latest_revision_id;
    w.clock.advance(BUILD_MS);
    await w.resync();
    await w.reconcile();
    return { w, external };
  }

  it("a revision someone else made while the spec pins a digest its own revision deployed: named, counted, put back by a redeploy (no build)", async () => {
    const { w, external } = await hotfixed();
    expect(w.service.calls).toMatchObject({ redeploy: 1, patch: 0 });
    expect(w.events.reasons()).toEqual(["Warning/ExternalRevision", "Normal/DriftCorrected"]);
    expect(w.events.all[0]?.note).toContain(`revision ${external} `);
    expect(w.events.all[1]?.note).toMatch(
      /sourceRevisionConfig\.imageUri differed from the spec; redeployed revision .*(no build)/,
    );
    expect(w.events.all[1]?.note).not.toContain(BAD);
    const status = w.stored()?.status;
    expect(status?.externalRevision).toMatchObject({ id: external, imageUri: BAD });
    expect(w.counted).toEqual(["default/revision", "default/fields"]);
    // Said once: the next looks name it no more, and the redeployed revision goes live.
    w.events.all.length = 0;
    await w.settle();
    expect(w.events.reasons()).not.toContain("Warning/ExternalRevision");
    expect(w.counted).toHaveLength(2);
    expect(w.stored()?.status?.activeRevision?.imageUri).toBe(GOOD);
  });

  it("a change outside a resource of a ServiceConnection: counted under the connection's key, its namespace included", async () => {
    // Two namespaces may each have a connection named prod: the count says whose.
    const { w } = await hotfixed({ connectionRef: { kind: "ServiceConnection", name: "prod" } });
    expect(w.counted).toEqual([
      `ServiceConnection/${REF.namespace}/prod/revision`,
      `ServiceConnection/${REF.namespace}/prod/fields`,
    ]);
  });

  it("a second revision someone else made after the switch back: put back again, never taken for the one switched back to", async () => {
    const { w } = await hotfixed();
    await w.settle();
    const id = w.deployment()?.id ?? "";
    const other = `registry.example/agent@sha256:${"c".repeat(64)}`;
    w.service.store.drift(id, { source_revision_config: { image_uri: other } });
    const external = w.deployment()?.latest_revision_id;
    w.events.all.length = 0;
    w.clock.advance(BUILD_MS);
    await w.resync();
    await w.reconcile();
    expect(w.events.reasons()).toEqual(["Warning/ExternalRevision", "Normal/DriftCorrected"]);
    expect(w.stored()?.status?.externalRevision?.id).toBe(external);
    expect(w.service.calls.redeploy).toBe(2);
    w.clock.advance(BUILD_MS / 3);
    await w.settle();
    expect(w.stored()?.status?.activeRevision).toMatchObject({ imageUri: GOOD });
    expect(w.deployment()?.active_revision_id).toBe(w.stored()?.status?.revisionHistory?.[0]?.id);
  });

  it("driftPolicy Report: nothing written; Synced=False Drifted says what differs and that the policy is Report, once", async () => {
    const { w, external } = await hotfixed({ driftPolicy: "Report" });
    expect(w.service.calls).toMatchObject({ redeploy: 0, patch: 0 });
    expect(w.events.reasons()).toEqual(["Warning/ExternalRevision"]);
    const synced = w.stored()?.status?.conditions?.find((c) => c.type === "Synced");
    expect(synced).toMatchObject({ status: "False", reason: "Drifted" });
    expect(synced?.message).toMatch(
      /driftPolicy is Report.*sourceRevisionConfig\.imageUri.*nothing is written/,
    );
    expect(w.stored()?.status?.externalRevision?.id).toBe(external);
    expect(w.counted).toEqual(["default/revision", "default/fields"]);
    const writes = w.resources.writes.patchStatus;
    await w.resync();
    await w.reconcile();
    expect(w.service.calls).toMatchObject({ redeploy: 0, patch: 0 });
    expect(w.resources.writes.patchStatus).toBe(writes);
    expect(w.counted).toHaveLength(2);
    // Set to Correct: put back at once (a new generation applies the whole spec).
    w.edit((o) => {
      o.spec.driftPolicy = "Correct";
    });
    await w.reconcile();
    expect(w.service.calls.redeploy).toBe(1);
  });

  it("driftPolicy Report beside a rebuild on a service without the route: Synced names both, the drift counted once", async () => {
    const { w } = await hotfixed({ driftPolicy: "Report" });
    expect(w.counted).toEqual(["default/revision", "default/fields"]);
    const synced = () => w.stored()?.status?.conditions?.find((c) => c.type === "Synced");
    const drift = synced()?.message ?? "";
    w.service.rebuildRoute = false;
    w.events.all.length = 0;
    w.edit((o) => {
      o.metadata.annotations = { [ANNOTATION_REBUILD_REQUESTED_AT]: "2030-01-02T00:00:00Z" };
    });
    // The route found missing by the call, then known to the connection (no call): the same.
    for (const calls of [1, 1]) {
      await w.resync();
      await w.reconcile();
      expect(w.service.calls.createRevision).toBe(calls);
      expect(synced()).toMatchObject({ status: "False", reason: "RebuildRouteMissing" });
      expect(synced()?.message).toMatch(/rebuild-requested-at asks for a new revision/);
      expect(synced()?.message).toContain(drift);
      expect(w.counted).toHaveLength(2);
    }
    expect(w.events.reasons()).toEqual(["Warning/RebuildRouteMissing"]);
    // The request withdrawn: the drift alone, still not counted again.
    w.edit((o) => {
      o.metadata.annotations = {};
    });
    await w.reconcile();
    expect(synced()).toMatchObject({ status: "False", reason: "Drifted", message: drift });
    expect(w.counted).toHaveLength(2);
    expect(w.events.reasons()).toEqual(["Warning/RebuildRouteMissing"]);
  });

  it("spec.displayName: sent by a PATCH right after the create (which does not take it), then left alone; removed from the spec, the service keeps its value", async () => {
    const w = world();
    w.resources.create({ metadata: { name: "agent" }, spec: { ...SPEC, displayName: "Support agent" } });
    await w.reconcile();
    expect(w.service.calls).toMatchObject({ create: 1, patch: 1 });
    expect(w.service.lastPatchBody).toEqual({ display_name: "Support agent" });
    expect(w.deployment()?.display_name).toBe("Support agent");
    await w.settle();
    expect(w.service.calls.patch).toBe(1);
    w.edit((o) => {
      o.spec.displayName = "Billing agent";
    });
    await w.settle();
    expect(w.service.calls.patch).toBe(2);
    expect(w.events.reasons()).toContain("Normal/Updated");
    w.edit((o) => {
      delete o.spec.displayName;
    });
    await w.settle();
    expect(w.service.calls.patch).toBe(2);
    expect(w.deployment()?.display_name).toBe("Billing agent");
  });

  it.each([
    { mode: "clears", patches: 1, synced: "True/ReconcileSuccess" },
    { mode: "unchanged", patches: 1, synced: "False/CannotClearSecrets" },
  ] as const)(
    "an empty spec.secrets, the service's empty list $mode: one PATCH, never a loop ($synced)",
    async ({ mode, patches, synced }) => {
      const w = world();
      w.resources.create({
        metadata: { name: "agent" },
        spec: { ...SPEC, secrets: [{ name: "API_KEY", value: "sk-1" }] },
      });
      await w.settle();
      w.service.store.emptySecrets.mode = mode;
      w.service.resetCalls();
      w.events.all.length = 0;
      w.edit((o) => {
        o.spec.secrets = [];
      });
      for (let i = 0; i < 4; i++) {
        await w.resync();
        await w.reconcile();
        w.clock.advance(BUILD_MS);
      }
      expect(w.service.calls.patch).toBe(patches);
      const condition = w.stored()?.status?.conditions?.find((c) => c.type === "Synced");
      expect(`${condition?.status}/${condition?.reason}`).toBe(synced);
      const kept = w.deployment()?.secrets.map((s) => s.name);
      if (mode === "clears") expect(kept).toEqual([]);
      else {
        expect(kept).toEqual(["API_KEY"]);
        expect(w.events.reasons()).toEqual(["Normal/Updated", "Warning/CannotClearSecrets"]);
        expect(condition?.message).toMatch(/API_KEY.*"unchanged".*remove them on the service/);
      }
    },
  );
});
