// What a status write removes of a status someone else wrote: the top-level fields and condition
// types the status applied lacks (src/kube/custom-resources.ts `statusResidue`).
import { describe, expect, it } from "vitest";
import { CRDS, crdObject } from "../../src/crd/render.ts";
import { STATUS_FIELDS } from "../../src/crd/status-schema.ts";
import { CLUSTER_SERVICE_CONNECTIONS, SERVICE_CONNECTIONS } from "../../src/kube/connections.ts";
import {
  type CustomResourceKind,
  CustomResources,
  DEPLOYMENTS,
  statusResidue,
} from "../../src/kube/custom-resources.ts";
import { ConflictError } from "../../src/kube/errors.ts";
import type { DeploymentObject } from "../../src/kube/object.ts";
import { kubeStub } from "../support/kube-stub.ts";

const condition = (type: string, reason = "Done") => ({
  type,
  status: "True",
  reason,
  message: "",
  lastTransitionTime: "2026-12-07T00:00:00Z",
});

describe("statusResidue", () => {
  it("is empty when the status holds nothing the applied one lacks (whatever the values)", () => {
    const desired = { deploymentId: "a", conditions: [condition("Ready"), condition("Synced")] };
    const live = { deploymentId: "b", conditions: [condition("Synced", "Other"), condition("Ready")] };
    expect(statusResidue(live, desired)).toEqual([]);
    expect(statusResidue(undefined, desired)).toEqual([]);
    expect(statusResidue({}, {})).toEqual([]);
  });

  it("removes each top-level field the applied status lacks or leaves undefined", () => {
    const live = {
      deploymentId: "a",
      failedRevisionLog: { revisionId: "r" },
      "odd/key~": 1,
      latestRevisionId: "x",
    };
    expect(statusResidue(live, { deploymentId: "a", latestRevisionId: undefined })).toEqual([
      { op: "remove", path: "/status/failedRevisionLog" },
      { op: "remove", path: "/status/odd~1key~0" },
      { op: "remove", path: "/status/latestRevisionId" },
    ]);
  });

  it("removes each condition of a type the applied status lacks, by index, last first", () => {
    const live = {
      conditions: [condition("Ready"), condition("Reconciling"), condition("Synced"), { type: "Stalled" }],
    };
    expect(statusResidue(live, { conditions: [condition("Ready"), condition("Synced")] })).toEqual([
      { op: "remove", path: "/status/conditions/3" },
      { op: "remove", path: "/status/conditions/1" },
    ]);
  });

  it("keeps a field outside the known ones (a newer release's), still removes a known one and any condition type", () => {
    const live = {
      deploymentId: "a",
      handledPromotion: { value: "v" },
      failedRevisionLog: { revisionId: "r" },
      conditions: [condition("Ready"), condition("Degraded")],
    };
    const desired = { deploymentId: "a", conditions: [condition("Ready")] };
    expect(statusResidue(live, desired, STATUS_FIELDS)).toEqual([
      { op: "remove", path: "/status/failedRevisionLog" },
      { op: "remove", path: "/status/conditions/1" },
    ]);
  });

  it("removes the conditions whole when the applied status has none", () => {
    expect(statusResidue({ conditions: [condition("Ready")] }, {})).toEqual([
      { op: "remove", path: "/status/conditions" },
    ]);
    expect(statusResidue({ conditions: [condition("Ready")] }, { conditions: [] })).toEqual([
      { op: "remove", path: "/status/conditions/0" },
    ]);
  });

  it("relies on no CRD defaulting a field under status (a removed default would come back each write)", () => {
    const defaults: string[] = [];
    // Every schema node under status (status itself defaults to {}: never removed).
    const walk = (node: unknown, path: string): void => {
      if (typeof node !== "object" || node === null) return;
      for (const [key, child] of Object.entries(node)) {
        if (key === "default" && !path.endsWith(".properties")) defaults.push(path);
        walk(child, `${path}.${key}`);
      }
    };
    type Versions = { versions: { schema: { openAPIV3Schema: { properties: { status: object } } } }[] };
    for (const crd of CRDS)
      for (const { schema } of (crdObject(crd).spec as Versions).versions)
        walk(
          (schema.openAPIV3Schema.properties.status as { properties: object }).properties,
          `${crd.kind}.status.properties`,
        );
    expect(defaults).toEqual([]);
  });
});

/** A resource as the stub stores it; each write bumps its resourceVersion. */
interface Stored {
  apiVersion: string;
  kind: string;
  metadata: { namespace: string; name: string; resourceVersion: string };
  spec: object;
  status: Record<string, unknown>;
}

/**
 * A stub of the status subresource: an apply merges the status over the stored one (as a field
 * or condition another manager co-owns stays), refused with 422 when `invalid` holds of the
 * result; a JSON Patch removes. Any write under another resourceVersion gets a 409, after the
 * JSON Patch's ops are applied as the API server does: a removal of a path gone is a 422 first.
 */
async function statusServer(
  status: Record<string, unknown>,
  invalid = (_s: Stored) => false,
  kind: CustomResourceKind = DEPLOYMENTS,
) {
  let version = 1;
  const stored: Stored = {
    apiVersion: "dms.dev/v1alpha1",
    kind: "Deployment",
    metadata: { namespace: "ns", name: "d", resourceVersion: "1" },
    spec: { source: "internal_docker" },
    status,
  };
  const requests: string[] = [];
  let conflictOnPatch = false;
  let beforeJsonPatch = () => {};
  const { client } = await kubeStub(async (req, res) => {
    let text = "";
    for await (const chunk of req) text += chunk;
    const body = text ? JSON.parse(text) : undefined;
    const type = String(req.headers["content-type"] ?? "").split(";")[0];
    const precondition =
      type === "application/json-patch+json" ? body[0].value : body?.metadata?.resourceVersion;
    requests.push(`${req.method} ${type || "-"}${precondition ? ` @${precondition}` : ""}`);
    const answer = (code: number, object: unknown) => {
      res.writeHead(code, { "content-type": "application/json" });
      res.end(JSON.stringify(object));
    };
    if (type === "application/json-patch+json") {
      beforeJsonPatch();
      const gone = (body.slice(1) as { path: string }[]).some(({ path }) => {
        const [, , key, index] = path.split("/");
        const value = stored.status[key as string];
        return value === undefined || (index !== undefined && !(value as unknown[])[Number(index)]);
      });
      if (gone) return answer(422, { kind: "Status", code: 422, reason: "Invalid" });
    }
    if (precondition && (precondition !== stored.metadata.resourceVersion || conflictOnPatch))
      return answer(409, { kind: "Status", code: 409, reason: "Conflict" });
    if (req.method === "PATCH" && type === "application/apply-patch+yaml") {
      // Conditions merge by type, as a list map does.
      const byType = new Map<unknown, unknown>();
      for (const c of [
        ...((stored.status.conditions as { type: string }[]) ?? []),
        ...(body.status.conditions ?? []),
      ])
        byType.set(c.type, c);
      const conditions = byType.size > 0 ? { conditions: [...byType.values()] } : {};
      const next = { ...stored, status: { ...stored.status, ...body.status, ...conditions } };
      if (invalid(next)) return answer(422, { kind: "Status", code: 422, reason: "Invalid" });
      stored.status = next.status;
    } else if (req.method === "PATCH") {
      for (const op of body.slice(1) as { path: string }[]) {
        const [, , key, index] = op.path.split("/");
        if (index === undefined) delete stored.status[key as string];
        else (stored.status.conditions as unknown[]).splice(Number(index), 1);
      }
    }
    if (req.method === "PATCH") stored.metadata.resourceVersion = String(++version);
    answer(200, stored);
  });
  const resources = new CustomResources<DeploymentObject, unknown>(kind, { client });
  return {
    resources,
    requests,
    stored,
    conflictOnPatch: () => {
      conflictOnPatch = true;
    },
    /** Runs `write` (another writer's) just before each JSON Patch arrives. */
    beforeJsonPatch: (write: () => void) => {
      beforeJsonPatch = write;
    },
  };
}

const ref = { namespace: "ns", name: "d" };
const signal = new AbortController().signal;
const desired = { deploymentId: "a", conditions: [condition("Ready")] };

describe("patchStatus of a status someone else wrote", () => {
  it("makes one request when the status holds nothing more than the operator's", async () => {
    const s = await statusServer({ deploymentId: "b", conditions: [condition("Ready", "Before")] });
    const written = await s.resources.patchStatus(ref, desired, signal, "1");
    expect(s.requests).toEqual(["PATCH application/apply-patch+yaml @1"]);
    expect(written.status).toEqual(desired);
  });

  it("removes what the apply left (a field, a condition type) with one JSON Patch of the version written", async () => {
    const s = await statusServer({
      failedRevisionLog: { revisionId: "r" },
      conditions: [condition("Stalled")],
    });
    const written = await s.resources.patchStatus(ref, desired, signal, "1");
    expect(s.requests).toEqual([
      "PATCH application/apply-patch+yaml @1",
      "PATCH application/json-patch+json @2",
    ]);
    expect(written.status).toEqual({ deploymentId: "a", conditions: [condition("Ready")] });
    expect(written.metadata.resourceVersion).toBe("3");
  });

  it("keeps a field a newer release's CRD holds that the operator does not know, whoever wrote it", async () => {
    const s = await statusServer({
      handledPromotion: { value: "v" },
      failedRevisionLog: { revisionId: "r" },
    });
    const written = await s.resources.patchStatus(ref, desired, signal, "1");
    expect(s.requests).toEqual([
      "PATCH application/apply-patch+yaml @1",
      "PATCH application/json-patch+json @2",
    ]);
    expect(written.status).toEqual({ ...desired, handledPromotion: { value: "v" } });
  });

  it.each([SERVICE_CONNECTIONS, CLUSTER_SERVICE_CONNECTIONS])(
    "$kind: keeps a field a newer release's CRD holds, removes a known one it no longer sets",
    async (kind) => {
      const s = await statusServer({ healthCheck: { at: "t" }, providers: 2 }, undefined, kind);
      const applied = { observedGeneration: 1, conditions: [condition("Ready")], deployments: 0, refused: 0 };
      const written = await s.resources.patchStatus(ref, applied, signal, "1");
      expect(s.requests).toEqual([
        "PATCH application/apply-patch+yaml @1",
        "PATCH application/json-patch+json @2",
      ]);
      expect(written.status).toEqual({ ...applied, healthCheck: { at: "t" } });
    },
  );

  it("returns the status applied when the removal races another writer", async () => {
    const s = await statusServer({ failedRevisionLog: { revisionId: "r" } });
    s.conflictOnPatch();
    await expect(s.resources.patchStatus(ref, desired, signal)).resolves.toMatchObject({
      status: { failedRevisionLog: { revisionId: "r" }, deploymentId: "a" },
    });
  });

  it("after a 422, removes the residue of the version it was to write, then applies once more", async () => {
    // Refused while a Reconciling condition is there (left partial by the apply on the API server).
    const partial = (o: Stored) =>
      (o.status.conditions as { type: string }[]).some((c) => c.type === "Reconciling");
    const s = await statusServer({ conditions: [condition("Ready"), condition("Reconciling")] }, partial);
    const written = await s.resources.patchStatus(ref, desired, signal, "1");
    expect(s.requests).toEqual([
      "PATCH application/apply-patch+yaml @1",
      "GET -",
      "PATCH application/json-patch+json @1",
      "PATCH application/apply-patch+yaml @2",
    ]);
    expect(written.status).toEqual(desired);
  });

  it("passes on a 422 with nothing to remove (the status itself is invalid), and a conflict of a version read since", async () => {
    const invalid = await statusServer({}, () => true);
    await expect(invalid.resources.patchStatus(ref, desired, signal)).rejects.toMatchObject({ status: 422 });
    expect(invalid.requests).toEqual(["PATCH application/apply-patch+yaml", "GET -"]);
    // Written by someone else between the 422 and the read: the removal is of a version the
    // status was not computed from.
    let written: Stored | undefined;
    const racing = (o: Stored) => {
      if (written) written.metadata.resourceVersion = "5";
      return (o.status.conditions as unknown[]).length > 1;
    };
    const raced = await statusServer({ conditions: [condition("Ready"), condition("Stalled")] }, racing);
    written = raced.stored;
    await expect(raced.resources.patchStatus(ref, desired, signal, "1")).rejects.toBeInstanceOf(
      ConflictError,
    );
    expect(raced.requests).toEqual([
      "PATCH application/apply-patch+yaml @1",
      "GET -",
      "PATCH application/json-patch+json @1",
    ]);
  });

  it("returns the status applied when another writer removed the residue first (the removal's 422)", async () => {
    // The API server applies a JSON Patch before it checks the resourceVersion: a path gone
    // meanwhile is a 422, not the 409 of the precondition.
    const s = await statusServer({ failedRevisionLog: { revisionId: "r" } });
    s.beforeJsonPatch(() => {
      delete s.stored.status.failedRevisionLog;
      s.stored.metadata.resourceVersion = "7";
    });
    await expect(s.resources.patchStatus(ref, desired, signal, "1")).resolves.toMatchObject({
      status: { deploymentId: "a" },
    });
  });

  it("after a 422, a removal of what another writer removed since the read is a conflict", async () => {
    const partial = (o: Stored) =>
      (o.status.conditions as { type: string }[]).some((c) => c.type === "Reconciling");
    const s = await statusServer({ conditions: [condition("Ready"), condition("Reconciling")] }, partial);
    s.beforeJsonPatch(() => {
      s.stored.status.conditions = [condition("Ready")];
      s.stored.metadata.resourceVersion = "7";
    });
    await expect(s.resources.patchStatus(ref, desired, signal, "1")).rejects.toBeInstanceOf(ConflictError);
  });
});
