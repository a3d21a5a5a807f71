// A status written by someone else (a merge patch of the status subresource, as `kubectl patch
// --subresource=status --type=merge`, `kubectl edit --subresource=status` or a restore tool write
// it) before the operator's: that writer co-owns the fields, and the operator's server-side apply
// removes only what the operator owns alone. The operator still brings the status to exactly what
// it computes: a condition it no longer sets is removed whole (not left partial, which the API
// server refuses with a 422 forever after), and a field or condition it never set does not stay.
//
// The service's deployment is rolling out (its second revision BUILDING, on a clock that stands
// still until the test moves it) when the resource and its status are restored.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { DeploymentResourceStatus } from "../../src/crd/schema.ts";
import type { RunningSimulator } from "../../src/simulator/server.ts";
import { freshNamespace, kubectlOk } from "../support/cluster.ts";
import { startOperator, startTestSimulator, TEST_API_KEY, type TestOperator } from "../support/operator.ts";
import { ClusterUser, conditionOf } from "../support/resources.ts";

/** The phases of a revision spread over this (see src/simulator/record.ts): BUILDING at 3.5/6. */
const REVISION_MS = 6_000;
const NAME = "restored";
const DEPLOYMENT_ID = "0f2a6c1e-5b7d-4e2a-9c31-8d4b2e6f7a10";
/** The manager of the other writer's merge patch. */
const RESTORER = "restore-tool";
/** The Reconciling condition's message as restored: the operator words it otherwise. */
const RESTORED_MESSAGE = "restored from a backup";

let held = Date.now();
let sim: RunningSimulator;
let op: TestOperator | undefined;
let namespace: string;
const user = new ClusterUser();

const condition = (type: string, status: "True" | "False", reason: string, message: string) => ({
  type,
  status,
  reason,
  message,
  observedGeneration: 1,
  lastTransitionTime: new Date(held).toISOString().replace(/\.\d+Z$/, "Z"),
});

/** The fields of the status subresource each manager owns, by manager. */
async function statusOwners(): Promise<Map<string, Record<string, unknown>>> {
  const raw = JSON.parse(
    await kubectlOk([
      "get",
      "-n",
      namespace,
      "deployments.dms.dev",
      NAME,
      "-o",
      "json",
      "--show-managed-fields",
    ]),
  );
  const owners = new Map<string, Record<string, unknown>>();
  for (const entry of raw.metadata.managedFields ?? [])
    if (entry.subresource === "status") owners.set(entry.manager, entry.fieldsV1?.["f:status"] ?? {});
  return owners;
}

const RECONCILING = 'k:{"type":"Reconciling"}';
const reconcilingFields = (owned: Record<string, unknown> | undefined) =>
  Object.keys(
    ((owned?.["f:conditions"] ?? {}) as Record<string, Record<string, unknown>>)[RECONCILING] ?? {},
  );

beforeAll(async () => {
  namespace = await freshNamespace("status-elsewhere");
  sim = await startTestSimulator({
    now: () => held,
    timing: { readyAfterMs: 0, revisionActiveAfterMs: REVISION_MS, deleteAfterMs: 0 },
    seed: {
      deployments: [
        {
          id: DEPLOYMENT_ID,
          name: NAME,
          source: "internal_docker",
          source_revision_config: { image_uri: "restored:1" },
        },
      ],
    },
  });
  // The second revision, building.
  sim.store.patch(DEPLOYMENT_ID, { source_revision_config: { image_uri: "restored:2" } });
  held += REVISION_MS * (3.5 / 6);
  const [active, latest] = sim.store.revisions(DEPLOYMENT_ID)?.map((r) => r.id) ?? [];
  await user.putSecret(namespace, "tenant", { "api-key": TEST_API_KEY });
  await user.create(namespace, NAME, {
    source: "internal_docker",
    sourceRevisionConfig: { imageUri: "restored:2" },
  });
  // What the operator had written, restored by another writer with a merge patch, beside a
  // failed revision's record and a Stalled condition of an earlier rollout.
  const status: DeploymentResourceStatus = {
    deploymentId: DEPLOYMENT_ID,
    connection: "default",
    activeRevisionId: active,
    latestRevisionId: latest,
    latestRevisionStatus: "BUILDING",
    rolloutStartedAt: new Date(held).toISOString().replace(/\.\d+Z$/, "Z"),
    observedGeneration: 1,
    failedRevisionLog: {
      revisionId: "5d1c9a0e-7f3b-4c2d-8e6a-1b9f0c3d2e4a",
      reason: "RevisionFailed",
      type: "build",
    },
    conditions: [
      condition("Ready", "False", "RolloutInProgress", `revision ${latest} is rolling out (BUILDING)`),
      condition("Synced", "True", "ReconcileSuccess", "the service's deployment matches the spec"),
      condition("Reconciling", "True", "RolloutInProgress", RESTORED_MESSAGE),
      condition("Stalled", "True", "RevisionFailed", "an earlier revision failed"),
    ],
  };
  await kubectlOk([
    "patch",
    "-n",
    namespace,
    "deployments.dms.dev",
    NAME,
    "--subresource=status",
    "--type=merge",
    `--field-manager=${RESTORER}`,
    "-p",
    JSON.stringify({ status }),
  ]);
  op = startOperator({ simulator: sim, namespaces: [namespace], pollMs: 200, resyncMs: 1_000 });
  await op.started();
}, 120_000);

afterAll(async () => {
  await op?.stop();
  await sim?.close();
});

describe("a status written by someone else", () => {
  it("loses what the operator does not write: a failed revision's record, a Stalled condition", async () => {
    const written = await user.waitFor(
      namespace,
      NAME,
      (o) => (conditionOf(o, "Reconciling")?.message ?? RESTORED_MESSAGE) !== RESTORED_MESSAGE,
      "the operator's Reconciling message",
    );
    const settled = await user.waitFor(
      namespace,
      NAME,
      (o) => o?.status?.failedRevisionLog === undefined && conditionOf(o, "Stalled") === undefined,
      "no failedRevisionLog, no Stalled condition",
    );
    expect(written.status?.latestRevisionStatus).toBe("BUILDING");
    expect(settled.status?.conditions?.map((c) => c.type).sort()).toEqual(["Ready", "Reconciling", "Synced"]);
    // The Reconciling condition is co-owned: the restorer's fields, the operator's message alone.
    const owners = await statusOwners();
    expect(reconcilingFields(owners.get(RESTORER))).toEqual(expect.arrayContaining(["f:reason", "f:type"]));
    expect(reconcilingFields(owners.get("dms-operator"))).toEqual(expect.arrayContaining(["f:message"]));
  });

  it("removes a co-owned condition whole once the operator no longer sets it: the rollout ends Ready", async () => {
    held += REVISION_MS;
    const done = await user.waitReady(namespace, NAME);
    expect(conditionOf(done, "Reconciling")).toBeUndefined();
    expect(done.status).toMatchObject({ latestRevisionStatus: "DEPLOYED", deploymentId: DEPLOYMENT_ID });
    expect(done.status?.activeRevisionId).toBe(done.status?.latestRevisionId);
  });
});
