// The writes whose answer was lost: the first new revision of the config sent is theirs, never one
// of another config, nor one after it, nor any once a later write was answered.
import { describe, expect, it } from "vitest";
import { revisionConfigHash } from "../../src/reconcile/revision-history.ts";
import { UnansweredWrites } from "../../src/reconcile/service/unanswered-writes.ts";
import type { Deployment } from "../../src/reconcile/service-types.ts";

const IMAGE = `registry.example/agent@sha256:${"a".repeat(64)}`;
const HASH = revisionConfigHash({ image_uri: IMAGE }, "external_docker");

const deployment = (latest: string, image = IMAGE) =>
  ({
    id: "d",
    source: "external_docker",
    latest_revision_id: latest,
    source_revision_config: { image_uri: image },
  }) as unknown as Deployment;

describe("UnansweredWrites", () => {
  it("names the first new revision of the config sent, and only that one", () => {
    const writes = new UnansweredWrites();
    writes.lost("d", "r1", HASH);
    expect(writes.madeBy(deployment("r1"))).toBeUndefined();
    expect(writes.madeBy(deployment("r2"))).toBe("r2");
    expect(writes.madeBy(deployment("r2"))).toBe("r2");
    expect(writes.madeBy(deployment("r3"))).toBeUndefined();
  });

  it("never names a revision of another config, nor any after it", () => {
    const writes = new UnansweredWrites();
    writes.lost("d", "r1", HASH);
    expect(writes.madeBy(deployment("r2", "registry.example/agent:other"))).toBeUndefined();
    expect(writes.madeBy(deployment("r3"))).toBeUndefined();
  });

  it("forgets a write once a later one was answered", () => {
    const writes = new UnansweredWrites();
    writes.lost("d", "r1", HASH);
    writes.delete("d");
    expect(writes.madeBy(deployment("r2"))).toBeUndefined();
  });
});
