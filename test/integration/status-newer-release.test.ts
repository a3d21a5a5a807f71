// A status a newer release wrote, kept by the operator rolled back to this version with its CRDs
// managed apart (`crds.enabled=false`, manifests/crd applied by a cluster admin): the newer
// release's CRD stays installed, and its status fields stay valid.
// The newer release wrote its status with server-side apply under the same field manager
// (`dms-operator`), so this version's apply would remove every field the manager owns alone and
// the apply leaves out: it carries each field it does not know as read, and removes none of them
// as residue, whoever wrote them. What it knows and no longer sets still goes (a failed
// revision's record a restore tool wrote), and so does a condition of a type it does not set.
//
// The newer CRD is this version's with two more status fields, installed over the one the run's
// control plane installed (crds/) under the same field manager, and put back after the file.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseAllDocuments } from "yaml";
import { crdObject, DEPLOYMENT_CRD } from "../../src/crd/render.ts";
import { PatchType } from "../../src/kube/client.ts";
import { FIELD_MANAGER } from "../../src/kube/custom-resources.ts";
import type { DeploymentObject } from "../../src/kube/object.ts";
import { kubectlOk, waitFor } from "../support/cluster.ts";
import { conditionOf } from "../support/resources.ts";
import { useScenarios } from "../support/scenario.ts";

const NAME = "agent";
const CRD_MANAGER = "dms-test-harness";
/** The newer release's record of an annotation it handled (set by the newer release itself). */
const HANDLED = { annotation: "dms.dev/promote-requested-at", value: "2026-12-01T00:00:00Z" };
/** A field of the newer release's that another writer (a restore tool) wrote. */
const NOTE = "restored from a backup";
const RESTORER = "restore-tool";

const applyCrd = (crd: object) =>
  kubectlOk(["apply", "--server-side", "--force-conflicts", `--field-manager=${CRD_MANAGER}`, "-f", "-"], {
    input: JSON.stringify(crd),
  });

/** This version's CRD with the newer release's two status fields. */
function newerCrd(): object {
  const crd = crdObject(DEPLOYMENT_CRD) as {
    spec: { versions: { schema: { openAPIV3Schema: { properties: { status: { properties: object } } } } }[] };
  };
  for (const version of crd.spec.versions) {
    const status = version.schema.openAPIV3Schema.properties.status;
    status.properties = {
      ...status.properties,
      handledPromotion: {
        type: "object",
        properties: { annotation: { type: "string" }, value: { type: "string" } },
      },
      promotionNote: { type: "string", maxLength: 256 },
    };
  }
  return crd;
}

/** The Deployment CRD as crds/ has it (as the control plane installed it). */
function installedCrd(): object {
  const file = readFileSync(
    join(import.meta.dirname, "..", "..", "crds", "dms.dev_deployments.yaml"),
    "utf8",
  );
  return parseAllDocuments(file)[0]?.toJS() as object;
}

const extra = (o: DeploymentObject | undefined) => o?.status as Record<string, unknown> | undefined;

beforeAll(async () => {
  await applyCrd(newerCrd());
  await kubectlOk(["wait", "--for=condition=Established", "--timeout=60s", "crd/deployments.dms.dev"]);
});

afterAll(async () => {
  await applyCrd(installedCrd());
});

describe("a status a newer release wrote, after a rollback that kept its CRD", () => {
  const scenarios = useScenarios();

  it("keeps the fields this version does not know, and removes what it knows and no longer sets", async () => {
    const s = await scenarios.start("status-newer");
    await s.user.create(s.namespace, NAME, {
      source: "internal_docker",
      sourceRevisionConfig: { imageUri: "registry.example.com/agent:1" },
    });
    const ready = await s.user.waitReady(s.namespace, NAME);
    const path = `/apis/dms.dev/v1alpha1/namespaces/${s.namespace}/deployments/${NAME}/status`;
    // The newer release's status write: all it sets, its record and a condition of its own
    // among them, applied as the operator applies (once the API server serves the newer schema).
    const newerStatus = {
      ...ready.status,
      handledPromotion: HANDLED,
      conditions: [
        ...(ready.status?.conditions ?? []),
        {
          type: "Degraded",
          status: "False",
          reason: "AsExpected",
          message: "the newer release's condition",
          lastTransitionTime: "2026-12-01T00:00:00Z",
        },
      ],
    };
    await waitFor(
      async () => {
        const written = (await s.user.client.request({
          method: "PATCH",
          path,
          query: { fieldManager: FIELD_MANAGER, force: true },
          contentType: PatchType.Apply,
          body: {
            apiVersion: "dms.dev/v1alpha1",
            kind: "Deployment",
            metadata: { name: NAME, namespace: s.namespace },
            status: newerStatus,
          },
        })) as DeploymentObject;
        return extra(written)?.handledPromotion !== undefined;
      },
      { description: "the newer release's field stored" },
    );
    // Another writer's merge patch: a field of the newer release's, and a failed revision's
    // record the operator does not set.
    await s.user.client.request({
      method: "PATCH",
      path,
      query: { fieldManager: RESTORER },
      contentType: PatchType.Merge,
      body: {
        status: {
          promotionNote: NOTE,
          failedRevisionLog: { revisionId: "5d1c9a0e-7f3b-4c2d-8e6a-1b9f0c3d2e4a", reason: "RevisionFailed" },
        },
      },
    });
    // An edit: the operator writes the status again.
    await s.user.patch(s.namespace, NAME, {
      spec: { sourceRevisionConfig: { imageUri: "registry.example.com/agent:2" } },
    });
    const written = await s.user.waitFor(
      s.namespace,
      NAME,
      (o) => o?.status?.observedGeneration === 2 && o.status.failedRevisionLog === undefined,
      "the edit's status, without the failed revision's record",
    );
    expect(extra(written)).toMatchObject({ handledPromotion: HANDLED, promotionNote: NOTE });
    expect(conditionOf(written, "Degraded")).toBeUndefined();
    const done = await s.user.waitReady(s.namespace, NAME);
    expect(extra(done)).toMatchObject({ handledPromotion: HANDLED, promotionNote: NOTE });
    expect(done.status).toMatchObject({
      deploymentId: ready.status?.deploymentId,
      observedGeneration: 2,
      activeRevision: { imageUri: "registry.example.com/agent:2" },
    });
    expect(done.status?.activeRevisionId).not.toBe(ready.status?.activeRevisionId);
    expect(done.status?.conditions?.map((c) => c.type)).toEqual(["Ready", "Synced"]);
    // Still the operator's field manager's: the newer release, rolled forward, owns it as before.
    const raw = JSON.parse(
      await kubectlOk([
        "get",
        "-n",
        s.namespace,
        "deployments.dms.dev",
        NAME,
        "-o",
        "json",
        "--show-managed-fields",
      ]),
    );
    const owned = raw.metadata.managedFields.find(
      (e: { manager: string; subresource?: string }) =>
        e.manager === FIELD_MANAGER && e.subresource === "status",
    );
    expect(owned?.fieldsV1?.["f:status"]).toHaveProperty("f:handledPromotion");
  });
});
