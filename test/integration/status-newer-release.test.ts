// A status a newer release wrote, kept by the operator rolled back to this version with its CRDs
// managed apart (`crds.enabled=false`, manifests/crd applied by a cluster admin): the newer
// release's CRD stays installed, and its status fields stay valid.
// The newer release wrote its status with server-side apply under the same field manager
// (`dms-operator`), so this version's apply would remove every field the manager owns alone and
// the apply leaves out: it carries each field it does not know as read, and removes none of them
// as residue, whoever wrote them. What it knows and no longer sets still goes (a failed
// revision's record a restore tool wrote), and so does a condition of a type it does not set.
//
// The same for a ServiceConnection, whose probe writes its status every few minutes.
//
// The newer CRDs are this version's with more status fields, installed over the ones the run's
// control plane installed (crds/) under the same field manager, and put back after the file.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseAllDocuments } from "yaml";
import { SERVICE_CONNECTION_KIND } from "../../src/crd/connection-schema.ts";
import {
  type CrdDefinition,
  crdFile,
  crdObject,
  DEPLOYMENT_CRD,
  SERVICE_CONNECTION_CRD,
} from "../../src/crd/render.ts";
import { PatchType } from "../../src/kube/client.ts";
import type { ConnectionObject } from "../../src/kube/connections.ts";
import { FIELD_MANAGER } from "../../src/kube/custom-resources.ts";
import type { DeploymentObject } from "../../src/kube/object.ts";
import { kubectlOk, waitFor } from "../support/cluster.ts";
import { TEST_API_KEY } from "../support/operator.ts";
import { conditionOf } from "../support/resources.ts";
import { type Scenario, useScenarios, waitForRequests } from "../support/scenario.ts";

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

/** The newer release's record of its own probe of a connection. */
const CHECKED = { endpoint: "/v3/health", at: "2026-12-01T00:00:00Z" };

/** This version's CRD of `definition` with the newer release's status fields `fields`. */
function newerCrd(definition: CrdDefinition, fields: object): object {
  const crd = crdObject(definition) as {
    spec: { versions: { schema: { openAPIV3Schema: { properties: { status: { properties: object } } } } }[] };
  };
  for (const version of crd.spec.versions) {
    const status = version.schema.openAPIV3Schema.properties.status;
    status.properties = { ...status.properties, ...fields };
  }
  return crd;
}

/** The CRD of `definition` as crds/ has it (as the control plane installed it). */
function installedCrd(definition: CrdDefinition): object {
  const file = readFileSync(join(import.meta.dirname, "..", "..", crdFile(definition)), "utf8");
  return parseAllDocuments(file)[0]?.toJS() as object;
}

const NEWER_CRDS = [
  newerCrd(DEPLOYMENT_CRD, {
    handledPromotion: {
      type: "object",
      properties: { annotation: { type: "string" }, value: { type: "string" } },
    },
    promotionNote: { type: "string", maxLength: 256 },
  }),
  newerCrd(SERVICE_CONNECTION_CRD, {
    healthCheck: { type: "object", properties: { endpoint: { type: "string" }, at: { type: "string" } } },
  }),
];

/** A condition of a type the newer release sets, this version does not. */
const DEGRADED = {
  type: "Degraded",
  status: "False",
  reason: "AsExpected",
  message: "the newer release's condition",
  lastTransitionTime: "2026-12-01T00:00:00Z",
};

/**
 * The newer release's status write of the object at `path` (its status subresource): `status` with
 * its record `field` and a condition of its own, applied as the operator applies, once the API
 * server serves the newer schema (it prunes `field` until then).
 */
async function applyAsNewerRelease(
  s: Scenario,
  path: string,
  object: { kind: string; name: string },
  status: { conditions?: object[] } | undefined,
  field: Record<string, unknown>,
): Promise<void> {
  const [name] = Object.keys(field);
  await waitFor(
    async () => {
      const written = (await s.user.client.request({
        method: "PATCH",
        path,
        query: { fieldManager: FIELD_MANAGER, force: true },
        contentType: PatchType.Apply,
        body: {
          apiVersion: "dms.dev/v1alpha1",
          kind: object.kind,
          metadata: { name: object.name, namespace: s.namespace },
          status: { ...status, ...field, conditions: [...(status?.conditions ?? []), DEGRADED] },
        },
      })) as { status?: Record<string, unknown> };
      return name !== undefined && written.status?.[name] !== undefined;
    },
    { description: "the newer release's field stored" },
  );
}

/** The `dms-operator` field manager's fields of `obj`'s status (its status apply's). */
async function ownedStatus(resource: string, namespace: string, name: string): Promise<object | undefined> {
  const raw = JSON.parse(
    await kubectlOk(["get", "-n", namespace, resource, name, "-o", "json", "--show-managed-fields"]),
  );
  return raw.metadata.managedFields.find(
    (e: { manager: string; subresource?: string }) =>
      e.manager === FIELD_MANAGER && e.subresource === "status",
  )?.fieldsV1?.["f:status"];
}

const extra = (o: DeploymentObject | undefined) => o?.status as Record<string, unknown> | undefined;

beforeAll(async () => {
  for (const crd of NEWER_CRDS) await applyCrd(crd);
  await kubectlOk([
    "wait",
    "--for=condition=Established",
    "--timeout=60s",
    "crd/deployments.dms.dev",
    "crd/serviceconnections.dms.dev",
  ]);
});

afterAll(async () => {
  for (const definition of [DEPLOYMENT_CRD, SERVICE_CONNECTION_CRD]) await applyCrd(installedCrd(definition));
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
    // The newer release's status write: all it sets, its record and a condition of its own among them.
    await applyAsNewerRelease(s, path, { kind: "Deployment", name: NAME }, ready.status, {
      handledPromotion: HANDLED,
    });
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
    expect(await ownedStatus("deployments.dms.dev", s.namespace, NAME)).toHaveProperty("f:handledPromotion");
  });

  it("a ServiceConnection's probe keeps the field this version does not know, and drops the condition", async () => {
    const s = await scenarios.start("status-newer-conn");
    const kind = SERVICE_CONNECTION_KIND;
    await s.user.createTenantConnection(s.namespace, s.sim.url, TEST_API_KEY);
    const connected = (o: ConnectionObject | undefined) =>
      o?.status?.conditions?.some((c) => c.type === "Ready" && c.reason === "Connected") === true;
    const ready = await s.user.waitForConnection(kind, "tenant", s.namespace, connected, "Connected");
    // The newer release's status write, its record and a condition of its own among them.
    const path = `/apis/dms.dev/v1alpha1/namespaces/${s.namespace}/serviceconnections/tenant/status`;
    await applyAsNewerRelease(s, path, { kind, name: "tenant" }, ready.status, { healthCheck: CHECKED });
    // A change of its spec: a new client, probed at once, and the probe's status written.
    const probes = s.sim.requests({ route: "GET /v2/auth/providers" }).length;
    await s.user.client.request({
      method: "PATCH",
      path: path.replace(/\/status$/, ""),
      contentType: PatchType.Merge,
      body: { spec: { qps: 7 } },
    });
    await waitForRequests(s.sim, probes + 1, { route: "GET /v2/auth/providers" });
    const written = await s.user.waitForConnection(
      kind,
      "tenant",
      s.namespace,
      (o) => connected(o) && o?.status?.observedGeneration === 2 && !conditionOf(o, "Degraded"),
      "the probe's status of generation 2, without the newer release's condition",
    );
    expect(written.status).toMatchObject({ healthCheck: CHECKED, providers: ready.status?.providers });
    expect(written.status?.conditions?.map((c) => c.type)).toEqual(["Ready"]);
    expect(await ownedStatus("serviceconnections.dms.dev", s.namespace, "tenant")).toHaveProperty(
      "f:healthCheck",
    );
  });
});
