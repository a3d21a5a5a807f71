// spec.export at unit speed: the reconciler over in-memory ports, with ConfigMaps kept as the API
// server keeps them. What the ConfigMap holds, who owns it (a controller ownerReference to the
// resource), that it is written only when what it holds changes, that a ConfigMap the resource
// does not own is refused and never written, and what removing or renaming the export does.
import { pino } from "pino";
import { describe, expect, it } from "vitest";
import { MAX_MESSAGE_LENGTH } from "../../src/crd/conventions.ts";
import type { DeploymentResourceStatus, DeploymentSpec } from "../../src/crd/schema.ts";
import { CONFIG_MAPS_FORBIDDEN, decodeConfigMap } from "../../src/kube/config-maps.ts";
import {
  conflictMessage,
  EXPORT_LABEL,
  EXPORT_UNAVAILABLE_RETRY_MS,
  exportData,
  exportDigest,
  leftMessage,
  unlabelledMessage,
} from "../../src/reconcile/export.ts";
import { EXPORT_CONDITION } from "../../src/reconcile/reasons.ts";
import { DeploymentReconciler } from "../../src/reconcile/reconciler.ts";
import { BODY, REF, SPEC } from "../support/agent-fixture.ts";
import { ManualClock } from "../support/manual-clock.ts";
import {
  claimingSession,
  InvalidConfigMapWrite,
  MemoryConfigMaps,
  MemoryResources,
  MemorySecrets,
  oneSession,
  RecordedEvents,
  SimulatedService,
} from "../support/memory-ports.ts";

const START = Date.parse("2030-01-01T00:00:00Z");
/** Long enough for the simulator's deployments to be READY with their revision active. */
const SETTLE_MS = 5_000;
const CM = { namespace: "default", name: "agent-endpoint" };
const EXPORTED: Partial<DeploymentSpec> = { export: { configMapName: CM.name } };

/** The reconciler over fresh in-memory ports, ConfigMaps among them. */
function world() {
  const clock = new ManualClock({ start: START });
  const now = () => clock.now();
  const resources = new MemoryResources(now);
  const service = new SimulatedService({ now });
  const events = new RecordedEvents();
  const configMaps = new MemoryConfigMaps();
  const logger = pino({ level: "silent" });
  const session = claimingSession(service, resources, { clock, logger, listingDeadlineMs: 30_000 });
  const reconciler = new DeploymentReconciler({
    resources,
    sessions: oneSession(session),
    secrets: new MemorySecrets(),
    events,
    clock,
    logger,
    pollMs: 5_000,
    createGraceMs: 60_000,
    configMaps,
  });
  const w = {
    clock,
    resources,
    service,
    events,
    configMaps,
    reconcile: () => reconciler.reconcile("default/agent", new AbortController().signal),
    async resync() {
      await session.snapshot.refresh(new AbortController().signal);
    },
    /** The resource, its deployment adopted and READY, reconciled until nothing is left to do. */
    async adopted(spec: Partial<DeploymentSpec> = EXPORTED) {
      service.seed(BODY);
      clock.advance(SETTLE_MS);
      resources.create({ metadata: { name: "agent" }, spec: { ...SPEC, ...spec } });
      await w.resync();
      await w.reconcile();
      await w.resync();
      await w.reconcile();
    },
    status: (): DeploymentResourceStatus => resources.stored(REF)?.status ?? {},
    condition: () => w.status().conditions?.find((c) => c.type === EXPORT_CONDITION),
    edit(change: (spec: DeploymentSpec) => void) {
      resources.edit(REF, (o) => change(o.spec));
    },
  };
  return w;
}

describe("exportData: what the ConfigMap holds", () => {
  const status: DeploymentResourceStatus = {
    deploymentId: "dep-1",
    activeRevisionId: "rev-2",
    activeRevision: { id: "rev-2", imageUri: "repo/agent:2", deployedAt: "2030-01-01T00:00:00Z" },
  };

  it("the URL, the ids, and what the active revision deployed", () => {
    expect(exportData(status, "https://agent.example")).toEqual({
      data: {
        url: "https://agent.example",
        deploymentId: "dep-1",
        activeRevisionId: "rev-2",
        imageUri: "repo/agent:2",
      },
      left: [],
    });
    const built: DeploymentResourceStatus = {
      ...status,
      activeRevision: { id: "rev-2", repoCommitSha: "a".repeat(40), deployedAt: "2030-01-01T00:00:00Z" },
    };
    expect(exportData(built, null).data).toEqual({
      deploymentId: "dep-1",
      activeRevisionId: "rev-2",
      repoCommitSha: "a".repeat(40),
    });
  });

  it("no artifact while the service has not reported it for the active revision; no url without one", () => {
    const older = { ...status, activeRevision: { id: "rev-1", imageUri: "repo/agent:1", deployedAt: "x" } };
    expect(exportData(older, undefined)).toEqual({
      data: { deploymentId: "dep-1", activeRevisionId: "rev-2" },
      left: [],
    });
  });

  it("a custom URL outside the printable rule, or too long, is left out and named, never rewritten", () => {
    const hostile = exportData(status, "https://agent\u202e.example");
    expect(hostile.data.url).toBeUndefined();
    expect(hostile.left).toEqual(["url (the service's custom URL holds U+202E)"]);
    const long = exportData(status, `https://${"a".repeat(2100)}.example`);
    expect(long.data.url).toBeUndefined();
    expect(long.left[0]).toContain("longer than 2048 characters");
  });

  it("an id outside the printable rule, or longer than 64 characters, is left out and named", () => {
    const long = exportData({ ...status, deploymentId: "d".repeat(65) }, null);
    expect(long.data.deploymentId).toBeUndefined();
    expect(long.left).toEqual(["deploymentId (the service's id is longer than 64 characters)"]);
    const hostile = exportData({ ...status, activeRevisionId: "rev\u001b[2J" }, null);
    expect(hostile.data).toEqual({ deploymentId: "dep-1" });
    expect(hostile.left).toEqual(["activeRevisionId (the service's id holds U+001B)"]);
    expect(exportData({ ...status, deploymentId: "d".repeat(64) }, null).data.deploymentId).toHaveLength(64);
  });

  it("the digest tells data apart by every key and value, in any order", () => {
    expect(exportDigest({ a: "1", b: "2" })).toBe(exportDigest({ b: "2", a: "1" }));
    expect(exportDigest({ a: "1" })).not.toBe(exportDigest({ a: "1", b: "" }));
    expect(exportDigest({ a: "12" })).not.toBe(exportDigest({ a: "1", "2": "" }));
    expect(exportDigest(undefined)).toBe(exportDigest({}));
  });
});

describe("the reconciler keeps the ConfigMap of spec.export", () => {
  it("creates it, owned by the resource (a controller ownerReference), labelled for the watch", async () => {
    const w = world();
    await w.adopted();
    const cm = w.configMaps.get(CM);
    const deployment = w.service.store.getByName("agent");
    expect(cm?.ownerReferences).toEqual([
      {
        apiVersion: "dms.dev/v1alpha1",
        kind: "Deployment",
        name: "agent",
        uid: "uid-agent",
        controller: true,
        blockOwnerDeletion: true,
      },
    ]);
    expect(cm?.labels).toEqual({ [EXPORT_LABEL]: "true" });
    expect(cm?.data).toEqual({
      url: "https://agent.example",
      deploymentId: deployment?.id,
      activeRevisionId: deployment?.active_revision_id,
      imageUri: "repo/agent:1",
    });
    expect(w.status().exportedConfigMap).toBe(CM.name);
    expect(w.condition()).toMatchObject({ status: "True", reason: "Exported" });
    expect(w.condition()?.message).toBe(
      `ConfigMap ${CM.name} holds url, deploymentId, activeRevisionId, imageUri`,
    );
    expect(w.events.reasons().filter((r) => r.includes("Export"))).toEqual(["Normal/Exported"]);
  });

  it("writes nothing, and reads nothing, while what it holds is unchanged", async () => {
    const w = world();
    await w.adopted();
    w.configMaps.calls.length = 0;
    await w.reconcile();
    await w.resync();
    await w.reconcile();
    expect(w.configMaps.calls).toEqual([]);
    // Behind the watch: one read finds the content already there, and writes nothing.
    w.configMaps.lagging = true;
    await w.reconcile();
    expect(w.configMaps.calls).toEqual([`read ${CM.namespace}/${CM.name}`]);
  });

  it("replaces it, at the version read, when a new revision goes live", async () => {
    const w = world();
    await w.adopted();
    const before = w.configMaps.get(CM);
    w.edit((spec) => {
      spec.sourceRevisionConfig = { imageUri: "repo/agent:2" };
    });
    await w.reconcile();
    w.clock.advance(SETTLE_MS);
    await w.resync();
    await w.reconcile();
    const after = w.configMaps.get(CM);
    const deployment = w.service.store.getByName("agent");
    expect(after?.data.imageUri).toBe("repo/agent:2");
    expect(after?.data.activeRevisionId).toBe(deployment?.active_revision_id);
    expect(after?.data.activeRevisionId).not.toBe(before?.data.activeRevisionId);
    expect(after?.uid).toBe(before?.uid);
    expect(w.configMaps.calls.filter((c) => c.startsWith("replace"))).not.toHaveLength(0);
    expect(w.configMaps.calls.filter((c) => c.startsWith("create"))).toHaveLength(1);
  });

  it("writes it back when another hand deletes or edits it", async () => {
    const w = world();
    await w.adopted();
    const data = w.configMaps.get(CM)?.data;
    w.configMaps.remove(CM);
    await w.reconcile();
    expect(w.configMaps.get(CM)?.data).toEqual(data);
    const own = w.configMaps.get(CM);
    w.configMaps.put(CM, { ...own, data: { ...data, url: "https://elsewhere.example" } });
    // The put keeps the ownerReference: the resource still controls it.
    await w.reconcile();
    expect(w.configMaps.get(CM)?.data).toEqual(data);
  });

  it("its own ConfigMap with the export label removed by hand: written back labelled, or, under the export policy, ExportConflict saying how to put it back", async () => {
    const w = world();
    await w.adopted();
    const unlabel = () => {
      const own = w.configMaps.get(CM);
      w.configMaps.put(CM, { ...own, labels: {}, data: { url: "https://elsewhere.example" } });
    };
    unlabel();
    await w.reconcile();
    expect(w.configMaps.get(CM)?.labels).toEqual({ [EXPORT_LABEL]: "true" });
    expect(w.condition()).toMatchObject({ status: "True", reason: "Exported" });

    w.configMaps.policy = true;
    unlabel();
    await w.reconcile();
    expect(w.condition()).toMatchObject({ status: "False", reason: "ExportConflict" });
    expect(w.condition()?.message).toBe(unlabelledMessage(CM.name));
    expect(w.events.reasons().filter((r) => r.includes("Export"))).toContain("Warning/ExportConflict");

    // Once the label is back, the export is written again.
    const own = w.configMaps.get(CM);
    w.configMaps.put(CM, { ...own, labels: { [EXPORT_LABEL]: "true" } });
    await w.reconcile();
    expect(w.condition()).toMatchObject({ status: "True", reason: "Exported" });
    expect(w.configMaps.get(CM)?.data.url).not.toBe("https://elsewhere.example");
  });

  it("refuses a ConfigMap it does not own: never written, ExportConflict and one Warning", async () => {
    const w = world();
    w.configMaps.put(CM, { data: { url: "https://someone-else.example" } });
    await w.adopted();
    expect(w.configMaps.get(CM)?.data).toEqual({ url: "https://someone-else.example" });
    expect(w.configMaps.calls.filter((c) => !c.startsWith("read"))).toEqual([]);
    expect(w.condition()).toMatchObject({ status: "False", reason: "ExportConflict" });
    expect(w.condition()?.message).toBe(conflictMessage(CM.name, {}));
    expect(w.condition()?.message).toContain("has no controller");
    expect(w.status().exportedConfigMap).toBeUndefined();
    // The deployment itself is in line: the refusal is the export's alone.
    expect(w.status().conditions?.find((c) => c.type === "Synced")?.status).toBe("True");
    expect(w.events.reasons().filter((r) => r.includes("Export"))).toEqual(["Warning/ExportConflict"]);
    await w.reconcile();
    expect(w.events.reasons().filter((r) => r.includes("Export"))).toEqual(["Warning/ExportConflict"]);

    // Once the other ConfigMap goes, the export is written.
    w.configMaps.remove(CM);
    await w.reconcile();
    expect(w.configMaps.get(CM)?.ownerReferences[0]?.uid).toBe("uid-agent");
    expect(w.condition()).toMatchObject({ status: "True", reason: "Exported" });
  });

  it("refuses one another resource controls, naming it, even when it carries the export label", async () => {
    const w = world();
    const other = { apiVersion: "dms.dev/v1alpha1", kind: "Deployment", name: "billing", uid: "uid-billing" };
    w.configMaps.put(CM, {
      labels: { [EXPORT_LABEL]: "true" },
      ownerReferences: [{ ...other, controller: true }],
      data: { deploymentId: "theirs" },
    });
    await w.adopted();
    expect(w.configMaps.get(CM)?.data).toEqual({ deploymentId: "theirs" });
    expect(w.condition()?.message).toContain(
      `ConfigMap ${CM.name} exists and is controlled by Deployment/billing`,
    );
  });

  it("renaming the export deletes the ConfigMap it wrote; removing it deletes it and its condition", async () => {
    const w = world();
    await w.adopted();
    w.edit((spec) => {
      spec.export = { configMapName: "agent-endpoint-2" };
    });
    await w.reconcile();
    expect(w.configMaps.get(CM)).toBeUndefined();
    expect(w.configMaps.get({ ...CM, name: "agent-endpoint-2" })?.data.deploymentId).toBeDefined();
    expect(w.status().exportedConfigMap).toBe("agent-endpoint-2");
    w.edit((spec) => {
      delete spec.export;
    });
    await w.reconcile();
    expect(w.configMaps.get({ ...CM, name: "agent-endpoint-2" })).toBeUndefined();
    expect(w.status().exportedConfigMap).toBeUndefined();
    expect(w.condition()).toBeUndefined();
    expect(w.events.reasons().filter((r) => r.includes("ExportRemoved"))).toEqual([
      "Normal/ExportRemoved",
      "Normal/ExportRemoved",
    ]);
    // And a resource without an export makes no ConfigMap call at all.
    w.configMaps.calls.length = 0;
    await w.reconcile();
    expect(w.configMaps.calls).toEqual([]);
  });

  it.each([
    ["renamed", "agent-endpoint-2", "spec.export.configMapName now names agent-endpoint-2"],
    ["removed", undefined, "spec.export was removed"],
  ])(
    "%s in the step its ConfigMap lost the export label, under the export policy: that ConfigMap left as it is, said once, never tried again; a new name written",
    async (_name, renamed, why) => {
      const w = world();
      await w.adopted();
      w.configMaps.policy = true;
      const unlabelled = { ...w.configMaps.get(CM), labels: {} };
      w.configMaps.put(CM, unlabelled);
      w.edit((spec) => {
        if (renamed) spec.export = { configMapName: renamed };
        else delete spec.export;
      });
      w.events.all.length = 0;
      w.configMaps.calls.length = 0;
      for (let i = 0; i < 3; i++) {
        await w.reconcile();
        w.clock.advance(SETTLE_MS);
      }
      // The policy lets the operator delete only labelled ConfigMaps: the old one is left, untouched.
      expect(w.configMaps.get(CM)).toMatchObject({ labels: {}, data: unlabelled.data });
      expect(w.configMaps.calls.filter((c) => c.startsWith("delete"))).toEqual([`delete default/${CM.name}`]);
      expect(w.events.reasons().filter((r) => r.includes("Export"))).toEqual([
        "Warning/ExportConflict",
        ...(renamed ? ["Normal/Exported"] : []),
      ]);
      expect(w.events.all[0]?.note).toBe(leftMessage(CM.name, why));
      expect(w.status().exportedConfigMap).toBe(renamed);
      if (renamed) {
        expect(w.configMaps.get({ ...CM, name: renamed })?.labels).toEqual({ [EXPORT_LABEL]: "true" });
        expect(w.condition()).toMatchObject({ status: "True", reason: "Exported" });
      } else expect(w.condition()).toBeUndefined();
    },
  );

  it("removing a refused export clears its condition, and touches no ConfigMap", async () => {
    const w = world();
    w.configMaps.put(CM, { data: { url: "https://someone-else.example" } });
    await w.adopted();
    expect(w.condition()?.reason).toBe("ExportConflict");
    w.configMaps.calls.length = 0;
    w.edit((spec) => {
      delete spec.export;
    });
    await w.reconcile();
    expect(w.condition()).toBeUndefined();
    expect(w.configMaps.calls).toEqual([]);
    expect(w.configMaps.get(CM)?.data).toEqual({ url: "https://someone-else.example" });
  });

  it("removing the export never deletes a ConfigMap another hand took over", async () => {
    const w = world();
    await w.adopted();
    w.configMaps.put(CM, { data: { mine: "now" } });
    w.edit((spec) => {
      delete spec.export;
    });
    await w.reconcile();
    expect(w.configMaps.get(CM)?.data).toEqual({ mine: "now" });
    expect(w.status().exportedConfigMap).toBeUndefined();
  });

  it("a write the API server refuses is ExportFailed and retried, the deployment's status kept", async () => {
    const w = world();
    w.configMaps.failing.set("create", new Error("POST configmaps: HTTP 403 Forbidden"));
    w.service.seed(BODY);
    w.clock.advance(SETTLE_MS);
    w.resources.create({ metadata: { name: "agent" }, spec: { ...SPEC, ...EXPORTED } });
    await w.resync();
    const next = await w.reconcile();
    expect(w.condition()).toMatchObject({ status: "False", reason: "ExportFailed" });
    expect(w.condition()?.message).toContain("HTTP 403 Forbidden");
    expect(next).toEqual({ kind: "requeueAfter", ms: 5_000 });
    expect(w.status().deploymentId).toBeDefined();
    w.configMaps.failing.clear();
    await w.reconcile();
    expect(w.condition()).toMatchObject({ status: "True", reason: "Exported" });
  });

  it("without the ConfigMap permissions: ExportFailed naming them, nothing tried, the deployment reconciled", async () => {
    const w = world();
    w.configMaps.refusal = CONFIG_MAPS_FORBIDDEN;
    await w.adopted();
    expect(await w.reconcile()).toEqual({ kind: "requeueAfter", ms: EXPORT_UNAVAILABLE_RETRY_MS });
    expect(w.condition()).toMatchObject({ status: "False", reason: "ExportFailed" });
    expect(w.condition()?.message).toContain("get, list, watch, create, update and delete on configmaps");
    expect(w.configMaps.calls).toEqual([]);
    expect(w.status().deploymentId).toBeDefined();
    expect(w.status().conditions?.find((c) => c.type === "Synced")?.status).toBe("True");
    w.configMaps.refusal = undefined;
    await w.reconcile();
    expect(w.condition()).toMatchObject({ status: "True", reason: "Exported" });
  });

  it("a ConfigMap the API server refuses every write of (immutable, a binaryData key) is ExportConflict", async () => {
    const w = world();
    await w.adopted();
    w.configMaps.failing.set(
      "replace",
      new InvalidConfigMapWrite("PUT configmaps/agent-endpoint: HTTP 422 Invalid: field is immutable"),
    );
    const own = w.configMaps.get(CM);
    w.configMaps.put(CM, { ...own, data: { url: "https://edited.example" } });
    // Not polled: no later write would pass; a change of that ConfigMap enqueues the resource.
    expect(await w.reconcile()).toEqual({ kind: "done" });
    expect(w.condition()).toMatchObject({ status: "False", reason: "ExportConflict" });
    expect(w.condition()?.message).toContain("immutable, or holds one of the exported keys");
    expect(w.events.reasons()).toContain("Warning/ExportConflict");
  });

  it("a condition message is cut to the condition's length, however long the API server's answer", async () => {
    const w = world();
    w.configMaps.failing.set("create", new Error(`POST configmaps: HTTP 500: ${"x".repeat(10_000)}`));
    await w.adopted();
    expect(w.condition()).toMatchObject({ status: "False", reason: "ExportFailed" });
    expect(w.condition()?.message.length).toBeLessThanOrEqual(MAX_MESSAGE_LENGTH);
    expect(w.condition()?.message.endsWith("…")).toBe(true);
  });

  it("a deployment just created is exported with its id, then with its revision once live", async () => {
    const w = world();
    w.resources.create({ metadata: { name: "agent" }, spec: { ...SPEC, ...EXPORTED } });
    await w.resync();
    await w.reconcile();
    const deployment = w.service.store.getByName("agent");
    expect(w.configMaps.get(CM)?.data).toEqual({
      url: "https://agent.example",
      deploymentId: deployment?.id,
    });
    w.clock.advance(SETTLE_MS);
    await w.resync();
    await w.reconcile();
    expect(w.configMaps.get(CM)?.data).toMatchObject({
      activeRevisionId: w.service.store.getByName("agent")?.active_revision_id,
      imageUri: "repo/agent:1",
    });
  });

  it("writes nothing while the resource is being deleted (the garbage collector removes the ConfigMap)", async () => {
    const w = world();
    await w.adopted({ ...EXPORTED, deletionPolicy: "Delete" });
    w.configMaps.calls.length = 0;
    w.resources.delete(REF);
    await w.reconcile();
    expect(w.resources.stored(REF)?.metadata.deletionTimestamp).toBeDefined();
    expect(w.configMaps.calls).toEqual([]);
    expect(w.status().exportedConfigMap).toBe(CM.name);
  });
});

describe("the watch of exported ConfigMaps: what a cached one weighs", () => {
  it("keeps identity, version and controller, never the data, whatever the ConfigMap holds", () => {
    const huge = "x".repeat(1 << 20);
    const raw = {
      metadata: {
        namespace: "default",
        name: "agent-endpoint",
        uid: "cm-1",
        resourceVersion: "7",
        labels: { [EXPORT_LABEL]: "true", other: "label" },
        annotations: { big: huge },
        ownerReferences: [
          { apiVersion: "v1", kind: "Other", name: "x", uid: "u-0" },
          {
            apiVersion: "dms.dev/v1alpha1",
            kind: "Deployment",
            name: "agent",
            uid: "uid-agent",
            controller: true,
          },
        ],
      },
      data: { url: huge, deploymentId: "dep-1" },
    };
    const cached = decodeConfigMap(raw);
    expect(cached).toEqual({
      metadata: { namespace: "default", name: "agent-endpoint", resourceVersion: "7" },
      view: {
        uid: "cm-1",
        resourceVersion: "7",
        labelled: true,
        controller: { apiVersion: "dms.dev/v1alpha1", kind: "Deployment", name: "agent", uid: "uid-agent" },
      },
    });
    expect(JSON.stringify(cached).length).toBeLessThan(400);
    expect(decodeConfigMap({ ...raw, metadata: { ...raw.metadata, labels: {} } })?.view.labelled).toBe(false);
  });

  it("keeps only ConfigMaps a dms.dev Deployment controls: an apps/v1 Deployment's, or none, is not kept", () => {
    const controlledBy = (apiVersion: string, kind: string) => ({
      metadata: {
        namespace: "default",
        name: "agent-endpoint",
        resourceVersion: "7",
        labels: { [EXPORT_LABEL]: "true" },
        ownerReferences: [{ apiVersion, kind, name: "agent", uid: "u-1", controller: true }],
      },
    });
    expect(decodeConfigMap(controlledBy("dms.dev/v1alpha1", "Deployment"))).toBeTruthy();
    expect(decodeConfigMap(controlledBy("apps/v1", "Deployment"))).toBeNull();
    expect(decodeConfigMap(controlledBy("dms.dev.evil.example/v1", "Deployment"))).toBeNull();
    expect(decodeConfigMap(controlledBy("dms.dev/v1alpha1", "ServiceConnection"))).toBeNull();
    expect(decodeConfigMap({ metadata: { name: "x", resourceVersion: "1" } })).toBeNull();
  });
});
