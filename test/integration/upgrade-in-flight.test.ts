// Upgrading from 0.1.0 while work is in flight: resources as 0.1.0's operator left them
// (test/fixtures/0.1.0/in-flight.json: their spec, metadata and status, the service's deployment
// and revisions under them, and the ServiceConnection one of them uses) handed to this version's
// operator, on a service in the state 0.1.0 left it. A rollout under way (its revision BUILDING),
// a resource Stalled on a revision whose build failed, an ObserveOnly resource, a resource on a
// ServiceConnection and a deletionPolicy Delete resource deleted while no operator ran. The new
// operator writes nothing to the service but that one DELETE, keeps the ids and finalizers, keeps
// each condition where 0.1.0 left it (no transition), follows the rollout to its end and keeps
// the Stalled reason until the spec changes.
//
// The simulator's revision ids are drawn anew: the fixture's are replaced by them in the status
// stored. The simulator's clock stands still unless the test moves it, so the rollout is BUILDING
// until it is let go.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { DeploymentResourceStatus, DeploymentSpec } from "../../src/crd/schema.ts";
import type { DeploymentObject } from "../../src/kube/object.ts";
import type { RunningSimulator } from "../../src/simulator/server.ts";
import { freshNamespace, kubectlOk, waitFor } from "../support/cluster.ts";
import { startOperator, startTestSimulator, TEST_API_KEY, type TestOperator } from "../support/operator.ts";
import { ClusterUser, conditionOf, hasCondition } from "../support/resources.ts";
import { waitForPasses, waitIdle } from "../support/scenario.ts";

interface StoredResource {
  metadata: { name: string; generation: number; annotations?: Record<string, string>; finalizers?: string[] };
  spec: DeploymentSpec;
  status: DeploymentResourceStatus;
  /** The service's deployment as 0.1.0's operator left it: its revisions oldest first. */
  service: { id: string; revisions: { id: string; status: string; imageUri: string }[] };
}
interface InFlight {
  deployments: StoredResource[];
  serviceConnection: { metadata: { name: string }; spec: Record<string, unknown>; status: object };
}
const FIXTURE: InFlight = JSON.parse(
  readFileSync(join(import.meta.dirname, "..", "fixtures", "0.1.0", "in-flight.json"), "utf8"),
);
const stored = (name: string): StoredResource => {
  const found = FIXTURE.deployments.find((d) => d.metadata.name === name);
  if (!found) throw new Error(`no resource ${name} in the fixture`);
  return found;
};

/** The times in the fixture's statuses (to the second, as 0.1.0 wrote them). */
const TIME = /\b\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\b/g;
/** The latest of them: the moment 0.1.0's operator stopped, which the test puts a second ago. */
const RECORDED = Math.max(...(JSON.stringify(FIXTURE).match(TIME) ?? []).map((t) => Date.parse(t)));
/**
 * `text` with each time moved by as long as passed since the fixture was recorded: a rollout 0.1.0
 * started is as recent now as it was then (not past `rolloutTimeout` because the fixture aged).
 */
const recent = (text: string, shift = Date.now() - 1_000 - RECORDED): string =>
  text.replace(TIME, (t) => new Date(Date.parse(t) + shift).toISOString().replace(/\.\d{3}Z$/, "Z"));

/** The phases of a revision spread over this (see src/simulator/record.ts): BUILDING at 3.5/6. */
const REVISION_MS = 6_000;

let held = Date.now();
let sim: RunningSimulator;
let op: TestOperator | undefined;
let namespace: string;
const user = new ClusterUser();
/** Each resource's status as stored, with the simulator's revision ids. */
const before = new Map<string, DeploymentResourceStatus>();
/** The simulator's revision ids of each resource, oldest first. */
const revisionIds = new Map<string, string[]>();

/** What the new operator carries on from 0.1.0's status while nothing changed. */
const CARRIED = [
  "deploymentId",
  "tenantId",
  "connection",
  "activeRevisionId",
  "latestRevisionId",
  "latestRevisionStatus",
  "liveRevision",
  "rolloutStartedAt",
  "failedRevisionLog",
  "lastHandledReconcileAt",
] as const;

/** The service's calls but its reads, by route. */
const serviceWrites = () =>
  Object.fromEntries(Object.entries(sim.counters()).filter(([route]) => !route.startsWith("GET ")));

const get = async (name: string): Promise<DeploymentObject> => {
  const object = await user.get(namespace, name);
  if (!object) throw new Error(`${name} is gone`);
  return object;
};

const failedIn = (service: StoredResource["service"]) =>
  service.revisions.some((r) => r.status.endsWith("_FAILED"));

/** Puts the service where 0.1.0 left it: the new revisions made, failed or building. */
function replayService(): void {
  // The failed builds first: the clock moves past their end, then to the middle of the rollout's.
  const failedFirst = [...FIXTURE.deployments].sort(
    (a, b) => Number(!failedIn(a.service)) - Number(!failedIn(b.service)),
  );
  for (const { metadata, service } of failedFirst) {
    const [first, ...later] = service.revisions;
    if (!first) throw new Error(`${metadata.name}: no revision in the fixture`);
    const failed = failedIn(service);
    if (failed) sim.store.drift(service.id, { fail_revisions: "build" });
    for (const revision of later) {
      sim.store.patch(service.id, { source_revision_config: { image_uri: revision.imageUri } });
      held += failed ? 2 * REVISION_MS : REVISION_MS * (3.5 / 6);
    }
  }
}

/** `text` with each of the fixture's revision ids (whole and as 8 characters) replaced by the simulator's. */
function withSimulatorIds({ metadata, service }: StoredResource, text: string): string {
  const ids = sim.store.revisions(service.id)?.map((r) => r.id) ?? [];
  revisionIds.set(metadata.name, ids);
  return service.revisions.reduce((out, revision, i) => {
    const id = ids[i] ?? "";
    return out.replaceAll(revision.id, id).replaceAll(revision.id.slice(0, 8), id.slice(0, 8));
  }, text);
}

/**
 * Writes a status as 0.1.0's operator did: server-side apply of the status subresource as field
 * manager `dms-operator`, forced (src/kube/custom-resources.ts then and now). Which fields the
 * operator owns decides what a later apply without them removes.
 */
const applyStatus = (object: object) =>
  kubectlOk(
    [
      "apply",
      "-n",
      namespace,
      "--server-side",
      "--field-manager=dms-operator",
      "--force-conflicts",
      "--subresource=status",
      "-f",
      "-",
    ],
    { input: JSON.stringify(object) },
  );

async function storeResource(resource: StoredResource): Promise<void> {
  const { metadata, spec, service } = resource;
  const { generation, ...meta } = metadata;
  // Generation 2: created with the first revision's image, then changed to the spec's.
  const first = { ...spec, sourceRevisionConfig: { imageUri: service.revisions[0]?.imageUri ?? "" } };
  await user.create(namespace, metadata.name, generation > 1 ? first : spec, meta);
  if (generation > 1) await user.patch(namespace, metadata.name, { spec });
  expect((await get(metadata.name)).metadata.generation).toBe(generation);
  const status = JSON.parse(recent(withSimulatorIds(resource, JSON.stringify(resource.status))));
  await applyStatus({
    apiVersion: "dms.dev/v1alpha1",
    kind: "Deployment",
    metadata: { name: metadata.name },
    status,
  });
  before.set(metadata.name, status);
}

beforeAll(async () => {
  namespace = await freshNamespace("upgrade-in-flight");
  sim = await startTestSimulator({
    now: () => held,
    timing: { readyAfterMs: 0, revisionActiveAfterMs: REVISION_MS, deleteAfterMs: 0 },
    seed: {
      deployments: FIXTURE.deployments.map(({ metadata, service }) => ({
        id: service.id,
        name: metadata.name,
        source: "internal_docker",
        source_revision_config: { image_uri: service.revisions[0]?.imageUri ?? "" },
      })),
    },
  });
  replayService();
  const connection = FIXTURE.serviceConnection;
  await user.putSecret(namespace, "tenant", { "api-key": TEST_API_KEY });
  await kubectlOk(["create", "-n", namespace, "-f", "-"], {
    input: JSON.stringify({
      apiVersion: "dms.dev/v1alpha1",
      kind: "ServiceConnection",
      metadata: connection.metadata,
      spec: { ...connection.spec, baseUrl: sim.url },
    }),
  });
  await applyStatus({
    apiVersion: "dms.dev/v1alpha1",
    kind: "ServiceConnection",
    metadata: connection.metadata,
    status: JSON.parse(
      recent(JSON.stringify(connection.status).replaceAll(String(connection.spec.baseUrl), sim.url)),
    ),
  });
  for (const resource of FIXTURE.deployments) await storeResource(resource);
  // Deleted while no operator runs: its finalizer holds it.
  await user.delete(namespace, "deleting");
  expect((await get("deleting")).metadata.deletionTimestamp).toBeDefined();
  op = startOperator({ simulator: sim, namespaces: [namespace], pollMs: 200, resyncMs: 1_000 });
  await op.started();
}, 120_000);

afterAll(async () => {
  await op?.stop();
  await sim?.close();
});

describe("upgrade from 0.1.0 with work in flight", () => {
  it("handles the deleted Delete resource once: one DELETE, the finalizer removed", async () => {
    await waitFor(async () => (await user.get(namespace, "deleting")) === undefined, {
      description: "deleting gone",
    });
    expect(sim.store.get(stored("deleting").service.id)).toBeUndefined();
  });

  it("writes nothing else to the service, keeps ids, finalizers and every condition's transition", async () => {
    // Two whole resync passes after the start: each resource was looked at, and again.
    await waitForPasses(sim, 2, held, { timeoutMs: 30_000 });
    await waitIdle(op as TestOperator);
    expect(serviceWrites()).toEqual({ "DELETE /v2/deployments/{deployment_id}": { 204: 1 } });
    for (const name of ["rolling", "stalled", "observed", "connected"]) {
      const object = await get(name);
      const was = before.get(name) ?? {};
      const status = object.status ?? {};
      expect({ name, finalizers: object.metadata.finalizers ?? [] }).toEqual({
        name,
        finalizers: stored(name).metadata.finalizers ?? [],
      });
      for (const field of CARRIED)
        expect({ name, field, value: status[field] }).toEqual({ name, field, value: was[field] });
      for (const condition of was.conditions ?? [])
        expect({ name, condition: pick(conditionOf(object, condition.type)) }).toEqual({
          name,
          condition: pick(condition),
        });
    }
  });

  it("follows the rollout 0.1.0 left BUILDING to its end, with no write", async () => {
    const [active, latest] = revisionIds.get("rolling") ?? [];
    const building = await get("rolling");
    expect(building.status?.latestRevisionStatus).toBe("BUILDING");
    expect(hasCondition(building, "Reconciling", "True", "RolloutInProgress")).toBe(true);
    expect(building.status?.activeRevisionId).toBe(active);
    held += REVISION_MS;
    const done = await user.waitReady(namespace, "rolling");
    expect(done.status).toMatchObject({
      activeRevisionId: latest,
      latestRevisionId: latest,
      latestRevisionStatus: "DEPLOYED",
      deploymentId: stored("rolling").service.id,
    });
    expect(conditionOf(done, "Reconciling")).toBeUndefined();
    expect(serviceWrites()).toEqual({ "DELETE /v2/deployments/{deployment_id}": { 204: 1 } });
  });

  it("keeps the ObserveOnly resource observing, and the connection's resource on its connection", async () => {
    const observed = await get("observed");
    expect(hasCondition(observed, "Synced", "True", "ObserveOnly")).toBe(true);
    expect(hasCondition(observed, "Ready", "True", "Available")).toBe(true);
    const connected = await get("connected");
    expect(connected.status?.connection).toBe("ServiceConnection/tenant");
    expect(hasCondition(connected, "Ready", "True", "Available")).toBe(true);
    const connection = await user.connection("ServiceConnection", "tenant", namespace);
    expect(hasCondition(connection, "Ready", "True", "Connected")).toBe(true);
  });

  it("keeps the Stalled RevisionFailed until the spec changes, then rolls out the new revision", async () => {
    const failed = (revisionIds.get("stalled") ?? [])[1];
    const stalled = await get("stalled");
    expect(hasCondition(stalled, "Stalled", "True", "RevisionFailed")).toBe(true);
    expect(conditionOf(stalled, "Stalled")?.message).toContain(`revision ${failed} BUILD_FAILED`);
    expect(stalled.status?.failedRevisionLog?.revisionId).toBe(failed);
    sim.store.drift(stored("stalled").service.id, { fail_revisions: null });
    await user.patch(namespace, "stalled", { spec: { sourceRevisionConfig: { imageUri: "stalled:3" } } });
    await waitFor(() => (sim.store.revisions(stored("stalled").service.id)?.length ?? 0) === 3, {
      description: "a third revision of stalled",
    });
    const moved = await user.waitFor(
      namespace,
      "stalled",
      (o) => conditionOf(o, "Stalled") === undefined,
      "no longer Stalled",
    );
    expect(moved.status?.latestRevisionId).not.toBe(failed);
    held += REVISION_MS;
    await user.waitReady(namespace, "stalled");
  });
});

/** What says a condition did not move: its type, status, reason and when it last moved. */
const pick = (
  c: { type: string; status: string; reason?: string; lastTransitionTime?: string } | undefined,
) => c && { type: c.type, status: c.status, reason: c.reason, lastTransitionTime: c.lastTransitionTime };
