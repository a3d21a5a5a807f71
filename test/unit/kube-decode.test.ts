import { describe, expect, it } from "vitest";
import { decodeDeployment, LAST_APPLIED_ANNOTATION } from "../../src/kube/deployments.ts";
import { decodeSecretMeta } from "../../src/kube/secrets.ts";

/** A Deployment resource as `kubectl apply` leaves it and the API server returns it. */
function applied() {
  return {
    apiVersion: "dms.dev/v1alpha1",
    kind: "Deployment",
    metadata: {
      name: "billing-agent",
      namespace: "default",
      uid: "6730c30d-dff7-43ba-9085-56e50e52f123",
      resourceVersion: "267",
      generation: 2,
      labels: { team: "billing" },
      annotations: {
        [LAST_APPLIED_ANNOTATION]: '{"apiVersion":"dms.dev/v1alpha1","kind":"Deployment","spec":{}}\n',
        "dms.dev/paused": "true",
      },
      finalizers: ["dms.dev/finalizer"],
      managedFields: [
        {
          manager: "kubectl-client-side-apply",
          operation: "Update",
          fieldsType: "FieldsV1",
          fieldsV1: { "f:spec": { "f:source": {} } },
        },
      ],
      someFutureField: "kept",
    },
    spec: { source: "external_docker", sourceConfig: { listenerId: "5d6e7f80" } },
    status: {
      observedGeneration: 1,
      tenantId: "5e1a7c3d-0000-4000-8000-00000000d0e5",
      conditions: [
        { type: "Ready", status: "True" },
        { type: "Synced", status: "True", reason: "ReconcileSuccess", message: "matches the spec" },
      ],
    },
  };
}

describe("decodeDeployment", () => {
  it("drops managedFields and kubectl's last-applied copy, keeping everything the operator reads", () => {
    const raw = applied();
    const { managedFields: _m, ...metadata } = raw.metadata;
    expect(decodeDeployment(raw)).toEqual({
      ...raw,
      metadata: { ...metadata, annotations: { "dms.dev/paused": "true" } },
    });
  });

  it("leaves the object it was given untouched", () => {
    const raw = applied();
    decodeDeployment(raw);
    expect(raw).toEqual(applied());
  });

  it("keeps an object without annotations or managedFields as it is", () => {
    const { managedFields: _m, annotations: _a, ...metadata } = applied().metadata;
    const raw = { ...applied(), metadata };
    expect(decodeDeployment(raw)).toEqual(raw);
  });

  it.each([
    ["no spec", { metadata: { name: "x", resourceVersion: "1" } }],
    ["no resourceVersion", { metadata: { name: "x" }, spec: {} }],
    ["not an object", "x"],
  ])("refuses %s", (_what, raw) => {
    expect(decodeDeployment(raw)).toBeUndefined();
  });
});

describe("decodeSecretMeta", () => {
  it("keeps only namespace, name and resourceVersion of a Secret's metadata", () => {
    const { spec: _s, status: _st, ...secret } = applied();
    expect(decodeSecretMeta(secret)).toEqual({
      metadata: { namespace: "default", name: "billing-agent", resourceVersion: "267" },
    });
  });
});
