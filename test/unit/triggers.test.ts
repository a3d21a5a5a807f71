import { describe, expect, it } from "vitest";
import { FINALIZER } from "../../src/crd/schema.ts";
import { subscribeTriggers } from "../../src/kube/custom-resources.ts";
import { type DeploymentObject, type KubeObject, specOrMetaChanged } from "../../src/kube/object.ts";
import type { ReflectorHandlers } from "../../src/kube/reflector.ts";
import { claimOf } from "../../src/reconcile/inputs.ts";
import { WorkQueue } from "../../src/runtime/queue.ts";

// Which updates of a Deployment resource bring a reconcile: anything but the operator's own
// status writes and its own finalizer being added.

const base: KubeObject = {
  metadata: {
    name: "a",
    namespace: "team",
    generation: 1,
    resourceVersion: "1",
    annotations: { note: "x" },
    labels: { app: "a" },
    finalizers: ["example.com/other"],
  },
};
const changed = (metadata: Partial<KubeObject["metadata"]>): KubeObject => ({
  metadata: { ...base.metadata, resourceVersion: "2", ...metadata },
});

describe("specOrMetaChanged", () => {
  const cases: Array<{ reason: string; after: KubeObject; before?: KubeObject; reconcile: boolean }> = [
    { reason: "a status write changes only the resourceVersion", after: changed({}), reconcile: false },
    {
      reason: "the operator's finalizer added: the reconcile that added it goes on",
      after: changed({ finalizers: ["example.com/other", FINALIZER] }),
      reconcile: false,
    },
    {
      reason: "the operator's finalizer added first in the list",
      after: changed({ finalizers: [FINALIZER, "example.com/other"] }),
      reconcile: false,
    },
    {
      reason: "the operator's finalizer removed by someone: it is put back",
      before: changed({ finalizers: ["example.com/other", FINALIZER] }),
      after: changed({ finalizers: ["example.com/other"] }),
      reconcile: true,
    },
    {
      reason: "another finalizer added",
      after: changed({ finalizers: ["example.com/other", "example.com/third"] }),
      reconcile: true,
    },
    {
      reason: "ours added while another is removed",
      after: changed({ finalizers: [FINALIZER] }),
      reconcile: true,
    },
    { reason: "the spec changed (generation)", after: changed({ generation: 2 }), reconcile: true },
    {
      reason: "deletion requested",
      after: changed({ deletionTimestamp: "2030-01-01T00:00:00Z" }),
      reconcile: true,
    },
    {
      reason: "an annotation changed (e.g. dms.dev/reconcile-requested-at)",
      after: changed({ annotations: { note: "y" } }),
      reconcile: true,
    },
    { reason: "a label changed", after: changed({ labels: { app: "b" } }), reconcile: true },
    {
      reason: "only the shard owner label changed (a moved resource, reconciled as it came)",
      before: changed({ labels: { app: "a", "shard.dms.dev/owner": "replica-a" } }),
      after: changed({ labels: { app: "a", "shard.dms.dev/owner": "replica-b" } }),
      reconcile: false,
    },
    {
      reason: "the shard owner label and another label changed",
      before: changed({ labels: { app: "a", "shard.dms.dev/owner": "replica-a" } }),
      after: changed({ labels: { app: "b", "shard.dms.dev/owner": "replica-b" } }),
      reconcile: true,
    },
    {
      reason: "the shard drain label lifted (the resource is reconciled again)",
      before: changed({ labels: { "shard.dms.dev/owner": "replica-a", "shard.dms.dev/drain": "true" } }),
      after: changed({ labels: { "shard.dms.dev/owner": "replica-a" } }),
      reconcile: true,
    },
  ];
  for (const { reason, before, after, reconcile } of cases) {
    it(`${reconcile ? "reconciles" : "does not reconcile"}: ${reason}`, () => {
      expect(specOrMetaChanged(before ?? base, after)).toBe(reconcile);
    });
  }
});

// Which keys a watched change enqueues: a resource and, on its add or delete, its rivals for one
// service name (the name conflict is judged again on both sides).
describe("subscribeTriggers", () => {
  const resource = (name: string, serviceName: string): DeploymentObject =>
    ({
      metadata: { name, namespace: "team", generation: 1, resourceVersion: "1" },
      spec: { name: serviceName, source: "internal_docker" },
    }) as DeploymentObject;
  function world(stored: DeploymentObject[], queue?: WorkQueue) {
    let handlers: ReflectorHandlers<DeploymentObject> = {};
    const enqueued: string[] = [];
    const resyncs: string[] = [];
    subscribeTriggers(
      {
        subscribe: (h) => {
          handlers = h;
          return () => {};
        },
        byIndex: (index, value) => (index === "claim" ? stored.filter((o) => claimOf(o) === value) : []),
      },
      { onChange: () => () => {} },
      {
        enqueue: (key) => {
          enqueued.push(key);
          queue?.add(key);
        },
        enqueueAll: (keys, spreadMs) => {
          resyncs.push(...keys);
          queue?.addSpread(keys, spreadMs);
        },
        forget: () => {},
      },
      "claim",
      "secret",
    );
    return { handlers, enqueued, resyncs };
  }
  const created = (o: DeploymentObject, creationTimestamp: string): DeploymentObject =>
    ({ ...o, metadata: { ...o.metadata, creationTimestamp } }) as DeploymentObject;
  const settledAt = (o: DeploymentObject, observedGeneration: number): DeploymentObject =>
    ({ ...o, status: { observedGeneration } }) as DeploymentObject;

  it("enqueues the rivals of an added resource: one that took the name alone may lose it now", () => {
    const old = resource("p0-old", "shared");
    const added = resource("p0-new", "shared");
    const { handlers, enqueued } = world([old, added, resource("other", "elsewhere")]);
    handlers.onAdd?.(added);
    expect(enqueued.sort()).toEqual(["team/p0-new", "team/p0-old"]);
  });

  it("enqueues the rivals of a deleted resource, not the deleted one", () => {
    const gone = created(resource("p0-old", "shared"), "2026-01-01T00:00:00Z");
    const rival = created(resource("p0-new", "shared"), "2026-01-01T00:00:05Z");
    const { handlers, enqueued } = world([rival]);
    handlers.onDelete?.(gone);
    expect(enqueued).toEqual(["team/p0-new"]);
  });

  it("never enqueues an older rival: another namespace's churn of the name does not reconcile its holder", () => {
    const holder = created(resource("holder", "shared"), "2026-01-01T00:00:00Z");
    const stored = [holder];
    const { handlers, enqueued } = world(stored);
    for (let i = 0; i < 50; i++) {
      const churn = created(
        resource(`churn-${i}`, "shared"),
        `2026-01-01T00:01:${String(i).padStart(2, "0")}Z`,
      );
      stored.push(churn);
      handlers.onAdd?.(churn);
      stored.pop();
      handlers.onDelete?.(churn);
    }
    expect(enqueued.filter((k) => k === "team/holder")).toEqual([]);
  });

  it("enqueues an added resource alone when it has no rival", () => {
    const added = resource("solo", "solo");
    const { handlers, enqueued } = world([added]);
    handlers.onAdd?.(added);
    expect(enqueued).toEqual(["team/solo"]);
  });

  it("enqueues a settled resource's add as a resync, an edited, new or deleted one's as fresh work", () => {
    const settled = settledAt(resource("settled", "a"), 1);
    const edited = settledAt(
      { ...resource("edited", "b"), metadata: { ...settled.metadata, name: "edited", generation: 2 } },
      1,
    );
    const fresh = resource("new", "c");
    const deleting = settledAt(
      {
        ...resource("deleting", "d"),
        metadata: { ...settled.metadata, name: "deleting", deletionTimestamp: "2030-01-01T00:00:00Z" },
      },
      1,
    );
    const { handlers, enqueued, resyncs } = world([]);
    for (const o of [settled, edited, fresh, deleting]) handlers.onAdd?.(o);
    expect(resyncs).toEqual(["team/settled"]);
    expect(enqueued).toEqual(["team/edited", "team/new", "team/deleting"]);
  });

  it("reconciles an inherited share's edits before its settled resources, whatever the order they came in", async () => {
    // A failover hands over thousands at once, listed in name order: the edit is among the last.
    const queue = new WorkQueue();
    const { handlers } = world([], queue);
    for (let i = 0; i < 100; i++)
      handlers.onAdd?.(settledAt(resource(`r${String(i).padStart(3, "0")}`, `s${i}`), 1));
    const edited = resource("r100", "s100");
    handlers.onAdd?.(settledAt({ ...edited, metadata: { ...edited.metadata, generation: 2 } }, 1));
    expect(await queue.get()).toBe("team/r100");
    expect(await queue.get()).toBe("team/r000");
    queue.shutDown();
  });
});
