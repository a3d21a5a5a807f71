// The sharder's store (the leader's only): a lean record of every Deployment resource, read from
// full objects (the ring places a resource by its claim, which is in its spec), so its memory
// must stay a few hundred bytes per resource however large the resources' specs and statuses.

import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { describe, expect, it } from "vitest";
import { decodeDeployment } from "../../src/kube/object.ts";
import {
  decodeShardObject,
  SHARD_CONNECTION_INDEX,
  SHARD_INDEXERS,
  type ShardObject,
} from "../../src/kube/shards.ts";
import { claimOf, connectionKeyOf } from "../../src/reconcile/inputs.ts";
import { CacheIndexes } from "../../src/runtime/compact.ts";
import { DRAIN_LABEL, OWNER_LABEL } from "../../src/sharding/labels.ts";
import { asksPass, shardInputsChanged } from "../../src/sharding/sharder-loop.ts";

/** A Deployment resource as the API server sends it: managed fields, annotations, a full status. */
function wireObject(i: number): Record<string, unknown> {
  const namespace = `team-${i % 20}`;
  const name = `app-${i.toString(36).padStart(5, "0")}`;
  return {
    apiVersion: "dms.dev/v1alpha1",
    kind: "Deployment",
    metadata: {
      name,
      namespace,
      uid: `6b1f0c2e-8d3a-4c1b-9f2e-${i.toString(16).padStart(12, "0")}`,
      resourceVersion: String(1_000_000 + i),
      generation: 3,
      creationTimestamp: "2026-11-20T10:00:00Z",
      labels: { app: name, team: namespace, [OWNER_LABEL]: `dms-operator-5d9f-${"abc"[i % 3]}` },
      annotations: { "kubectl.kubernetes.io/last-applied-configuration": "x".repeat(600) },
      finalizers: ["dms.dev/cleanup"],
      managedFields: [{ manager: "kubectl", operation: "Apply", fieldsV1: { "f:spec": { "f:name": {} } } }],
    },
    spec: {
      ...(i % 2 === 0 ? { name: `svc-${name}` } : {}),
      ...(i % 4 === 1 ? { connectionRef: { kind: "ServiceConnection", name: `conn-${i % 5}` } } : {}),
      source: "internal_docker",
      sourceRevisionConfig: { imageUri: `registry.example.com/${name}:v${i}` },
      secrets: [{ name: "TOKEN", valueFrom: { secretKeyRef: { name: "tokens", key: "token" } } }],
    },
    status: {
      observedGeneration: 3,
      deploymentId: `0d8f${i.toString(16).padStart(28, "0")}`,
      conditions: [
        {
          type: "Ready",
          status: "True",
          reason: "Deployed",
          message: "the deployment is live",
          lastTransitionTime: "2026-11-20T10:00:05Z",
        },
      ],
    },
  };
}

describe("the sharder's store", () => {
  it("keeps identity, version, the shard labels, the claim and the connection, as the reconciler reads them", () => {
    for (let i = 0; i < 8; i++) {
      const raw = wireObject(i);
      const lean = decodeShardObject(raw);
      const full = decodeDeployment(raw);
      if (!lean || !full) throw new Error("undecodable");
      expect(lean.claim).toBe(claimOf(full));
      expect(lean.connection).toBe(connectionKeyOf(full));
      // One flat shape, every field set: the store's records share one hidden class, and the
      // record is its own metadata.
      expect(Object.keys(lean)).toEqual([
        "name",
        "namespace",
        "resourceVersion",
        "uid",
        "owner",
        "drain",
        "drainTo",
        "claim",
        "connection",
        "created",
        "ringChoice",
      ]);
      expect(lean.owner).toBe((raw.metadata as { labels: Record<string, string> }).labels[OWNER_LABEL]);
      expect(lean.drain).toBe(false);
      expect(lean.uid).toBe(full.metadata.uid);
      expect(lean.metadata).toBe(lean);
      expect(lean.metadata).toMatchObject({
        name: full.metadata.name,
        namespace: full.metadata.namespace,
        resourceVersion: full.metadata.resourceVersion,
      });
    }
  });

  it("reads a resource without a usable spec as claiming its own name on the default connection", () => {
    const raw = wireObject(3);
    expect(decodeShardObject({ ...raw, spec: "none" })?.claim).toBe("app-00003");
    expect(decodeShardObject({ ...raw, spec: { connectionRef: { kind: 7 } } })?.connection).toBe("default");
    expect(decodeShardObject({ metadata: { name: 1 } })).toBeUndefined();
  });

  it("reads the shard labels tolerantly: an empty owner is none, any drain value is a drain", () => {
    const raw = wireObject(3);
    const withLabels = (labels: Record<string, string>) =>
      decodeShardObject({ ...raw, metadata: { ...(raw.metadata as object), labels } });
    expect(withLabels({ [OWNER_LABEL]: "" })?.owner).toBeUndefined();
    expect(withLabels({ [OWNER_LABEL]: "r-1", [DRAIN_LABEL]: "r-2" })).toMatchObject({
      owner: "r-1",
      drain: true,
      drainTo: "r-2",
    });
    expect(withLabels({ [DRAIN_LABEL]: "" })).toMatchObject({ drain: true, drainTo: undefined });
    expect(withLabels({ [DRAIN_LABEL]: "true" })).toMatchObject({ drain: true, drainTo: undefined });
    expect(withLabels({ [OWNER_LABEL]: "x".repeat(64) })?.owner).toBeUndefined();
  });

  it("holds 10,000 resources in a few hundred bytes each (measured after a collection)", () => {
    setFlagsFromString("--expose-gc");
    const gc = runInNewContext("gc") as () => void;
    const count = 10_000;
    gc();
    const before = process.memoryUsage().heapUsed;
    // What the reflector keeps: its map by key and the index by connection.
    const cache = new Map<string, ShardObject>();
    const indexes = new CacheIndexes(SHARD_INDEXERS);
    for (let i = 0; i < count; i++) {
      const obj = decodeShardObject(JSON.parse(JSON.stringify(wireObject(i))));
      if (!obj) throw new Error("undecodable");
      const key = `${obj.metadata.namespace}/${obj.metadata.name}`;
      cache.set(key, obj);
      indexes.update(key, undefined, obj);
    }
    gc();
    const perResource = (process.memoryUsage().heapUsed - before) / count;
    console.log(`sharder store: ${Math.round(perResource)} bytes per resource at ${count}`);
    expect(cache.size).toBe(count);
    expect([...indexes.keys(SHARD_CONNECTION_INDEX, "ServiceConnection/team-1/conn-1")].length).toBe(500);
    expect(perResource).toBeLessThan(380);
    // 10,000 objects as the API server sends them, serialized, parsed and decoded, and two full
    // collections: 0.4 s of CPU, 8 s at a load of 20 (past the default 5 s).
  }, 30_000);
});

describe("what wakes the sharder", () => {
  const base = decodeShardObject(wireObject(1));
  if (!base) throw new Error("undecodable");
  const next = (change: Partial<ShardObject>): ShardObject => ({
    ...base,
    metadata: { ...base.metadata, resourceVersion: "2" },
    ...change,
  });

  it("is a change of the shard labels, the claim or the uid, not a status write", () => {
    expect(shardInputsChanged(base, next({}))).toBe(false);
    expect(shardInputsChanged(base, next({ owner: undefined }))).toBe(true);
    expect(shardInputsChanged(base, next({ drain: true }))).toBe(true);
    expect(shardInputsChanged(next({ drain: true }), next({ drain: true, drainTo: "r-2" }))).toBe(true);
    expect(shardInputsChanged(base, next({ owner: "dms-operator-5d9f-z" }))).toBe(true);
    expect(shardInputsChanged(base, next({ claim: "renamed" }))).toBe(true);
    expect(shardInputsChanged(base, next({ uid: "another" }))).toBe(true);
  });

  it("is not a move onto the ring's choice (a hand-over by the ring): the period's pass reads it", () => {
    const choice = "dms-operator-5d9f-z";
    // As the sharder says: labelled for the ring's choice, undrained.
    const placed = (r: ShardObject) => !r.drain && r.owner === choice;
    const handedOver = next({ owner: choice });
    expect(placed(base)).toBe(false);
    expect(asksPass(base, handedOver, placed)).toBe(false);
    expect(asksPass(base, next({ owner: "dms-operator-5d9f-y" }), placed)).toBe(true);
    expect(asksPass(base, next({ owner: undefined }), placed)).toBe(true);
    expect(asksPass(base, next({ owner: choice, drain: true, drainTo: "r-2" }), placed)).toBe(true);
    // Placed, but as another claim or another object: rivals may have to follow.
    expect(asksPass(base, next({ owner: choice, claim: "renamed" }), placed)).toBe(true);
    expect(asksPass(base, next({ owner: choice, uid: "another" }), placed)).toBe(true);
    // Placed away from the ring's choice: a pass moves it back.
    expect(asksPass(handedOver, next({ owner: undefined }), placed)).toBe(true);
    // A status write is never a pass, placed or not.
    expect(asksPass(base, next({}), () => false)).toBe(false);
  });
});
