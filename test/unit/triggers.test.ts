import { describe, expect, it } from "vitest";
import { FINALIZER } from "../../src/crd/schema.ts";
import type { KubeObject } from "../../src/kube/object.ts";
import { specOrMetaChanged } from "../../src/wiring/triggers.ts";

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
  ];
  for (const { reason, before, after, reconcile } of cases) {
    it(`${reconcile ? "reconciles" : "does not reconcile"}: ${reason}`, () => {
      expect(specOrMetaChanged(before ?? base, after)).toBe(reconcile);
    });
  }
});
