import { createHash } from "node:crypto";
import { describe, expect, it } from "vitest";
import { decodeCustomResource, decodeDeployment, READ_ANNOTATIONS } from "../../src/kube/object.ts";
import { decodeSecretMeta } from "../../src/kube/secrets.ts";
import { MAX_ANNOTATION_VALUE } from "../../src/reconcile/inputs.ts";

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
      creationTimestamp: "2026-01-05T10:00:00Z",
      labels: { team: "billing" } as Record<string, string>,
      annotations: {
        "kubectl.kubernetes.io/last-applied-configuration":
          '{"apiVersion":"dms.dev/v1alpha1","kind":"Deployment","spec":{}}\n',
        "dms.dev/paused": "true",
        "dms.dev/not-read": "x",
        "example.com/notes": "y",
      } as Record<string, string>,
      finalizers: ["dms.dev/finalizer"],
      managedFields: [
        {
          manager: "kubectl-client-side-apply",
          operation: "Update",
          fieldsType: "FieldsV1",
          fieldsV1: { "f:spec": { "f:source": {} } },
        },
      ],
      ownerReferences: [{ apiVersion: "v1", kind: "ConfigMap", name: "owner", uid: "a1" }],
      someFutureField: "dropped",
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
  it("keeps only the metadata the operator reads and, of the annotations, only those it reads", () => {
    const raw = applied();
    const { labels: _l, managedFields: _m, ownerReferences: _o, someFutureField: _f, ...read } = raw.metadata;
    expect(decodeDeployment(raw)).toEqual({
      ...raw,
      metadata: { ...read, annotations: { "dms.dev/paused": "true" } },
    });
  });

  it("keeps the metadata's fields in the API server's order, whichever of them an object has", () => {
    const { name, namespace, uid, resourceVersion, generation, creationTimestamp } = applied().metadata;
    const whole = { name, namespace, uid, resourceVersion, generation, creationTimestamp };
    const order = ["name", "resourceVersion", "namespace", "uid", "generation", "creationTimestamp"];
    for (const left of [undefined, "namespace", "uid", "generation", "creationTimestamp"] as const) {
      const metadata: Record<string, unknown> = { ...whole };
      if (left !== undefined) delete metadata[left];
      const kept = decodeCustomResource({ ...applied(), metadata })?.metadata ?? {};
      expect(Object.keys(kept)).toEqual(order.filter((k) => k !== left));
      expect(kept).toEqual(metadata);
    }
  });

  it("keeps the live revision and the history as they were, however their strings are shared", () => {
    const raw = applied();
    const id = "0c3d9a1e-6f2b-4c8d-9e7a-1b2c3d4e5f60";
    const older = "7d1e2f3a-4b5c-4d6e-8f90-a1b2c3d4e5f6";
    const image = `registry.test/billing@sha256:${"a".repeat(64)}`;
    const digest = "b".repeat(64);
    Object.assign(raw.spec, { sourceRevisionConfig: { imageUri: image } });
    Object.assign(raw.status, {
      latestRevisionId: id,
      activeRevisionId: JSON.parse(JSON.stringify(id)),
      appliedSecretsHash: digest,
      activeRevision: { id: `${id}`, imageUri: `${image}`, deployedAt: "2026-01-05T10:01:00Z" },
      revisionHistory: [
        { id: `${id}`, secretsHash: `${digest}`, configHash: "c".repeat(64), deployed: true },
        {
          id: older,
          secretsHash: "d".repeat(64),
          deployed: true,
          imageUri: `${image}`,
          redeployedAt: "2026-01-05T10:00:30Z",
          redeployedFrom: older,
        },
        "not an entry",
      ],
    });
    const copy = structuredClone(raw);
    const decoded = decodeDeployment(raw);
    expect(decoded?.status).toStrictEqual(copy.status);
    // `raw` is not modified.
    expect(raw).toStrictEqual(copy);
  });

  it("holds the source configuration, the conditions and the finalizers that resources share once, frozen", () => {
    const one = applied();
    const other = applied();
    other.metadata.name = "other-agent";
    const copy = structuredClone(one);
    const [a, b] = [decodeDeployment(one), decodeDeployment(other)];
    expect(a?.spec.sourceConfig).toBe(b?.spec.sourceConfig);
    expect(a?.status?.conditions).toBe(b?.status?.conditions);
    expect(a?.metadata.finalizers).toBe(b?.metadata.finalizers);
    expect(Object.isFrozen(a?.spec.sourceConfig)).toBe(true);
    expect(Object.isFrozen(a?.status?.conditions)).toBe(true);
    expect(Object.isFrozen(a?.status?.conditions?.[1])).toBe(true);
    // A resource whose Ready condition differs shares the condition they have alike, not the list.
    const third = applied();
    third.metadata.name = "third-agent";
    third.status.conditions[0] = { type: "Ready", status: "False" };
    const c = decodeDeployment(third);
    expect(c?.status?.conditions).not.toBe(a?.status?.conditions);
    expect(c?.status?.conditions?.[1]).toBe(a?.status?.conditions?.[1]);
    expect(c?.status?.conditions?.[0]).toStrictEqual({ type: "Ready", status: "False" });
    // As they were, and `raw` neither modified nor frozen.
    expect(a?.status).toStrictEqual(copy.status);
    expect(a?.spec).toStrictEqual(copy.spec);
    expect(one).toStrictEqual(copy);
    expect(Object.isFrozen(one.spec.sourceConfig)).toBe(false);
  });

  it("keeps nothing of 256 KiB of annotations and labels but the annotations it reads", () => {
    const big = "x".repeat(200 * 1024);
    const raw = applied();
    raw.metadata.annotations["example.com/blob"] = big;
    Object.assign(raw.metadata.labels, Object.fromEntries([...Array(2000)].map((_, i) => [`l${i}`, "v"])));
    const decoded = decodeDeployment(raw);
    expect(decoded?.metadata.labels).toBeUndefined();
    expect(JSON.stringify(decoded?.metadata).length).toBeLessThan(1024);
  });

  it("keeps the shard labels, and no other label", () => {
    const raw = applied();
    Object.assign(raw.metadata.labels, {
      "shard.dms.dev/owner": "dms-operator-5d9f8-x2x7q",
      "shard.dms.dev/drain": "true",
      "shard.dms.dev/other": "x",
    });
    expect(decodeDeployment(raw)?.metadata.labels).toEqual({
      "shard.dms.dev/owner": "dms-operator-5d9f8-x2x7q",
      "shard.dms.dev/drain": "true",
    });
    // A value no API server would accept (over 63 characters) is not kept.
    raw.metadata.labels["shard.dms.dev/owner"] = "o".repeat(64);
    expect(decodeDeployment(raw)?.metadata.labels).toEqual({ "shard.dms.dev/drain": "true" });
  });

  it("keeps each annotation it reads, and one over the length bound as a digest that still changes", () => {
    const long = "t".repeat(MAX_ANNOTATION_VALUE + 1);
    const raw = applied();
    for (const key of READ_ANNOTATIONS) raw.metadata.annotations[key] = "2026-01-05T10:00:00Z";
    raw.metadata.annotations["dms.dev/rollout-now"] = long;
    raw.metadata.annotations["dms.dev/reconcile-requested-at"] = "r".repeat(MAX_ANNOTATION_VALUE);
    const kept = decodeDeployment(raw)?.metadata.annotations ?? {};
    expect(Object.keys(kept).sort()).toEqual([...READ_ANNOTATIONS].sort());
    expect(kept["dms.dev/reconcile-requested-at"]).toBe("r".repeat(MAX_ANNOTATION_VALUE));
    expect(kept["dms.dev/rollout-now"]).toBe(`sha256:${createHash("sha256").update(long).digest("hex")}`);
    raw.metadata.annotations["dms.dev/rollout-now"] = `${long}u`;
    expect(decodeDeployment(raw)?.metadata.annotations?.["dms.dev/rollout-now"]).not.toBe(
      kept["dms.dev/rollout-now"],
    );
  });

  it("keeps the finalizers' count and its own names, every other name as one shared empty string", () => {
    // Thousands of names of 317 characters: 1.5 MiB on one object, as much in the cache without this.
    const foreign = Array.from({ length: 4_700 }, (_, i) => `example.com/${String(i).padStart(305, "f")}`);
    const raw = applied();
    raw.metadata.finalizers = [...foreign.slice(0, 2_000), "dms.dev/finalizer", ...foreign.slice(2_000)];
    const finalizers = decodeDeployment(raw)?.metadata.finalizers;
    expect(finalizers).toHaveLength(4_701);
    // Its own name stays at its index: the JSON Patch that removes it names that index.
    expect(finalizers?.indexOf("dms.dev/finalizer")).toBe(2_000);
    expect(finalizers?.filter((f) => f !== "")).toEqual(["dms.dev/finalizer"]);
    expect(JSON.stringify(finalizers).length).toBeLessThan(4_701 * 4 + 64);
    // A connection keeps its own finalizer too.
    const connection = decodeCustomResource({
      ...raw,
      kind: "ServiceConnection",
      metadata: { ...raw.metadata, finalizers: ["x.io/a", "dms.dev/connection-in-use", "x.io/b"] },
    });
    expect(connection?.metadata.finalizers).toEqual(["", "dms.dev/connection-in-use", ""]);
  });

  it("keeps no annotations object when none of those it reads is set", () => {
    const raw = applied();
    delete (raw.metadata.annotations as Record<string, string>)["dms.dev/paused"];
    expect(decodeDeployment(raw)?.metadata).not.toHaveProperty("annotations");
  });

  it("leaves the object it was given untouched", () => {
    const raw = applied();
    decodeDeployment(raw);
    expect(raw).toEqual(applied());
  });

  it("keeps an object with only the metadata it reads as it is", () => {
    const {
      managedFields: _m,
      annotations: _a,
      labels: _l,
      ownerReferences: _o,
      someFutureField: _f,
      ...metadata
    } = applied().metadata;
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

describe("decodeCustomResource (the connections' decode)", () => {
  it("keeps neither the labels nor the annotations of a ServiceConnection", () => {
    const raw = {
      apiVersion: "dms.dev/v1alpha1",
      kind: "ServiceConnection",
      metadata: {
        name: "team",
        namespace: "billing",
        resourceVersion: "9",
        labels: { team: "billing" } as Record<string, string>,
        annotations: { "example.com/blob": "x".repeat(200 * 1024) },
      },
      spec: { baseUrl: "https://dms.example.com" },
    };
    expect(decodeCustomResource(raw)).toEqual({
      ...raw,
      metadata: { name: "team", namespace: "billing", resourceVersion: "9" },
    });
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
