// What the namespace watch keeps: a namespace's name, version and labels, nothing else (its
// annotations may hold a whole applied manifest, its managedFields are large and never read).
import { describe, expect, it } from "vitest";
import { decodeNamespaceMeta } from "../../src/kube/namespaces.ts";

describe("decodeNamespaceMeta", () => {
  it("keeps name, resourceVersion and labels, and drops the rest", () => {
    const raw = {
      apiVersion: "meta.k8s.io/v1",
      kind: "PartialObjectMetadata",
      metadata: {
        name: "team-a",
        resourceVersion: "42",
        uid: "0b7e4f0e",
        labels: { team: "a", "kubernetes.io/metadata.name": "team-a" },
        annotations: { "kubectl.kubernetes.io/last-applied-configuration": "{…}" },
        managedFields: [{ manager: "kubectl", operation: "Apply" }],
      },
    };
    expect(decodeNamespaceMeta(raw)).toEqual({
      metadata: {
        name: "team-a",
        resourceVersion: "42",
        labels: { team: "a", "kubernetes.io/metadata.name": "team-a" },
      },
    });
  });

  it("a namespace without labels has none (not unknown: an empty set a selector can be matched against)", () => {
    expect(
      decodeNamespaceMeta({ metadata: { name: "bare", resourceVersion: "1" } })?.metadata.labels,
    ).toEqual({});
  });

  it("refuses what is not an object with metadata", () => {
    expect(decodeNamespaceMeta({ metadata: { name: 3 } })).toBeUndefined();
    expect(decodeNamespaceMeta("team-a")).toBeUndefined();
  });
});
