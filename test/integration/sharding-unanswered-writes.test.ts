// A drain after writes that got no answer: the service holds each edit 5 s while the replicas
// give a write 3 s (`--timeout-ms=3000`), so every edit times out at the replica and is still in
// progress at the service for 2 s more. A second replica joins meanwhile and takes about half
// of the resources: the first replica acknowledges each drain only once its writes to that
// resource can no longer be running at the service, so the new owner's first write to a
// deployment arrives only after the old owner's last one was answered (no overlap), whichever
// write comes first. (Without the wait, the same run showed 6 overlaps of up to 1.7 s.)
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import type { DeploymentSpec } from "../../src/crd/schema.ts";
import { claimOf } from "../../src/reconcile/inputs.ts";
import { OWNER_LABEL } from "../../src/sharding/labels.ts";
import { freshNamespace, waitFor } from "../support/cluster.ts";
import { ClusterUser, hasCondition } from "../support/resources.ts";
import { type SmallRing, startSmallRing } from "../support/sharded-replicas.ts";
import { handovers } from "../support/write-spans.ts";

const RESOURCES = 12;
/** Longer than the replicas' 3 s request timeout. */
const EDIT_LATENCY_MS = 5_000;
const PATCH = "PATCH /v2/deployments/{deployment_id}";

const spec = (tag: number): DeploymentSpec => ({
  source: "internal_docker",
  sourceRevisionConfig: { imageUri: `registry.example.com/unanswered:${tag}` },
});

describe("sharding: a drain after writes that got no answer", () => {
  const user = new ClusterUser();
  let small: SmallRing | undefined;
  let work = "";
  afterAll(async () => {
    await small?.close();
    if (work) await rm(work, { recursive: true, force: true });
  });

  it("hands a resource over only after the service is done with the old owner's timed-out writes", async () => {
    const namespace = await freshNamespace("unanswered");
    work = await mkdtemp(join(tmpdir(), "unanswered-"));
    small = await startSmallRing({ namespace, ring: "dms-unanswered", prefix: "ua", work });
    const { ring: r, sim } = small;
    // Every resource's edit in flight at once: the one connection may hold every worker.
    const FLAGS = ["--concurrency=16", "--max-reconciles-per-connection=16"];
    const first = r.start(FLAGS);
    const names = Array.from({ length: RESOURCES }, (_, i) => `u${i}`);
    for (const name of names) await user.create(namespace, name, spec(1));
    /** Every resource Ready with image `tag`, owned by the running replica the ring names. */
    const settled = (tag: number) => async () => {
      const place = await r.placement(user);
      const items = await r.list(user);
      for (const replica of r.replicas.values()) replica.process.assertRunning();
      return items.length === RESOURCES &&
        items.every(
          (o) =>
            o.metadata.labels?.[OWNER_LABEL] === place(claimOf(o)) &&
            o.status?.observedGeneration === o.metadata.generation &&
            hasCondition(o, "Ready", "True") &&
            o.spec.sourceRevisionConfig?.imageUri === `registry.example.com/unanswered:${tag}`,
        )
        ? true
        : undefined;
    };
    await waitFor(settled(1), { timeoutMs: 90_000, intervalMs: 500, description: "every resource ready" });

    // Every edit now times out at the replica, the service still on it for 2 s more.
    sim.faults.set({ latency: [{ route: PATCH, ms: EDIT_LATENCY_MS }] });
    for (const name of names)
      await user.patch(namespace, name, {
        spec: { sourceRevisionConfig: { imageUri: "registry.example.com/unanswered:2" } },
      });
    await waitFor(() => ((sim.requests({ route: PATCH }).length ?? 0) >= RESOURCES ? true : undefined), {
      timeoutMs: 30_000,
      intervalMs: 100,
      description: "the first replica's edits sent",
    });
    const second = r.start(FLAGS);
    // The second replica joins and takes its share, by drains the first acknowledges.
    await waitFor(
      async () => {
        const items = await r.list(user);
        const place = await r.placement(user);
        return items.every((o) => o.metadata.labels?.[OWNER_LABEL] === place(claimOf(o))) ? true : undefined;
      },
      { timeoutMs: 120_000, intervalMs: 250, description: "the second replica owning its share" },
    );
    const moved = (await r.list(user)).filter((o) => o.metadata.labels?.[OWNER_LABEL] === second.name);
    expect(moved.length, `${first.name} kept everything`).toBeGreaterThan(0);
    // Answers again in time; a last edit, so that every new owner writes.
    sim.faults.set({});
    for (const name of names)
      await user.patch(namespace, name, {
        spec: { sourceRevisionConfig: { imageUri: "registry.example.com/unanswered:3" } },
      });
    await waitFor(settled(3), { timeoutMs: 120_000, intervalMs: 500, description: "every resource at :3" });

    const found = handovers(sim.requests());
    console.log(
      `unanswered writes: ${moved.length} resources moved, ${found.count} handovers; smallest gap between the old owner's last answer and the new owner's first arrival: ${found.smallestGapMs} ms`,
    );
    // Each moved resource: written by the first replica (its edit), then by the second.
    expect(found.count).toBeGreaterThanOrEqual(moved.length);
    expect(found.overlaps).toEqual([]);
  }, 400_000);
});
