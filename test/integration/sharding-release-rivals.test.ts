// Rivals across a release whose owner dies: `--sharded` processes against the real API server and
// a simulator. Pairs of resources claim one service name each (the older `o-<i>`, and `x-<i>`
// naming it); a third replica joins and each owner releases to it the share the ring gives it
// (src/sharding/release.ts), labelling those resources for it. An admission policy refuses the
// older ones' labels for the newcomer (and every drain label, so rivals move by the release
// alone), so a pair is split: the rival labelled for the newcomer,
// the older one still labelled for its owner and reconciled by the newcomer through its watch of
// that owner's share. The owner is then killed -9: once its Lease is taken, that watch starts
// again by the record written on it. Between the two watches the older resources must stay
// claimants at the newcomer, or a rival finds the name free and writes its own image to the
// older one's deployment (what the ring chaos test once saw).
import { readFile } from "node:fs/promises";
import { afterAll, describe, expect, it } from "vitest";
import type { DeploymentSpec } from "../../src/crd/schema.ts";
import { DRAIN_LABEL, OWNER_LABEL } from "../../src/sharding/labels.ts";
import { refuseDeploymentUpdates } from "../support/admission-policy.ts";
import { waitFor } from "../support/cluster.ts";
import { ClusterUser, hasCondition } from "../support/resources.ts";
import { shardedWorld } from "../support/sharded-replicas.ts";
import { writesByDeployment } from "../support/write-spans.ts";

/** Pairs: about a third of them the newcomer's, a third of those split off the owner killed. */
const PAIRS = 30;
const image = (tag: number) => `registry.example.com/pair:${tag}`;
const older = (tag: number): DeploymentSpec => ({
  source: "internal_docker",
  sourceRevisionConfig: { imageUri: image(tag) },
});
const rival = (of: string): DeploymentSpec => ({
  name: of,
  source: "internal_docker",
  sourceRevisionConfig: { imageUri: `registry.example.com/rival:${of}` },
});

describe("sharding: rivals split by a release whose owner dies", () => {
  const user = new ClusterUser();
  /** What the test started, undone last first: the policy, then the replicas and the simulator. */
  const undo: (() => Promise<void>)[] = [];
  afterAll(async () => {
    for (const step of undo.reverse()) await step();
  });

  it("keeps the older resource a claimant at the newcomer while its watch starts again by the record: no rival writes", async () => {
    const world = await shardedWorld("rr", 2, { requestRecordLimit: 50_000 });
    undo.push(() => world.stop());
    const { namespace, simulator, ring: r } = world;
    await r.untilMembers(user);
    const names = Array.from({ length: PAIRS }, (_, i) => `o-${i}`);
    await Promise.all(names.map((name) => user.create(namespace, name, older(1))));
    await Promise.all(names.map((name) => user.create(namespace, `x-${name.slice(2)}`, rival(name))));
    await waitFor(
      async () => {
        const items = await r.list(user);
        const settled = items.filter((o) =>
          o.metadata.name.startsWith("o-")
            ? hasCondition(o, "Ready", "True")
            : hasCondition(o, "Stalled", "True") &&
              o.status?.conditions?.some((c) => c.reason === "NameConflict"),
        );
        return settled.length === 2 * PAIRS ? true : undefined;
      },
      { timeoutMs: 90_000, intervalMs: 500, description: "every older resource Ready, every rival stalled" },
    );

    const newcomerName = "rr-2";
    // No drain label at all (rivals then move only by the release, each resource by its own
    // write, in no order), and no label for the newcomer on an older resource.
    const labels = "object.metadata.labels";
    const noDrain = `!has(${labels}) || !('${DRAIN_LABEL}' in ${labels})`;
    const olderStays = `!object.metadata.name.startsWith('o-') || !has(${labels}) || !('${OWNER_LABEL}' in ${labels}) || ${labels}['${OWNER_LABEL}'] != '${newcomerName}'`;
    const policy = await refuseDeploymentUpdates(user, {
      name: `release-rivals-${namespace}`,
      namespace,
      allowed: `(${noDrain}) && (${olderStays})`,
      message: "the older resources' labels for the newcomer held back by the test",
      probe: { name: "o-0", body: { metadata: { labels: { [OWNER_LABEL]: newcomerName } } } },
    });
    undo.push(() => policy.remove());
    const leader = (await r.leader(user))?.name;
    const victim = r.live().find((name) => name !== leader);
    expect(victim, `a replica other than the leader (${leader})`).toBeDefined();
    const newcomer = r.start();
    expect(newcomer.name).toBe(newcomerName);

    // Split: the rival labelled for the newcomer, the older one still for the replica to be killed.
    let seen = "";
    const split = await waitFor(
      async () => {
        const owners = new Map(
          (await r.list(user)).map((o) => [o.metadata.name, o.metadata.labels?.[OWNER_LABEL]]),
        );
        const pairs = names.filter(
          (n) => owners.get(`x-${n.slice(2)}`) === newcomerName && owners.get(n) === victim,
        );
        seen = [...owners].map(([n, o]) => `${n}@${o}`).join(" ");
        return pairs.length > 0 ? pairs : undefined;
      },
      {
        timeoutMs: 60_000,
        intervalMs: 250,
        description: () =>
          `a rival labelled for ${newcomerName} while its older one stays with ${victim}: ${seen}`,
      },
    );
    const logOf = () => readFile(newcomer.process.logPath, "utf8");
    expect(await logOf()).toContain("taking up the share a live replica released to this one");

    // The owner dies; its Lease taken, the newcomer watches its share again by the record.
    r.kill9(r.replicas.get(victim ?? "") ?? newcomer);
    await waitFor(
      async () =>
        (await logOf())
          .split("\n")
          .some(
            (line) =>
              line.includes("inheriting a dead replica's share") && line.includes(`"from":"${victim}"`),
          )
          ? true
          : undefined,
      { timeoutMs: 60_000, intervalMs: 250, description: `${newcomerName} inheriting ${victim}'s share` },
    );
    expect(await logOf()).toContain("inheriting a share again: the replica releasing it died");
    // The older resources of the split pairs, edited: the newcomer applies each (through the watch
    // of the dead replica's share, their labels refused) once it reconciles them again.
    await Promise.all(
      split.map((name) =>
        user.patch(namespace, name, { spec: { sourceRevisionConfig: { imageUri: image(2) } } }),
      ),
    );
    const revisionsOf = (name: string) =>
      (simulator.store.revisions(simulator.store.getByName(name)?.id ?? "") ?? []).map((rev) =>
        JSON.stringify(rev),
      );
    await waitFor(
      async () =>
        split.every((name) => revisionsOf(name).some((rev) => rev.includes(image(2)))) ? true : undefined,
      {
        timeoutMs: 60_000,
        intervalMs: 250,
        description: `the split pairs' edits applied (${split.join(", ")})`,
      },
    );
    const writes = writesByDeployment(simulator.requests());
    for (const name of split) {
      const writers = (writes.get(simulator.store.getByName(name)?.id ?? "") ?? []).map((w) =>
        w.userAgent?.replace(/.*\(/, "("),
      );
      expect(writers.at(-1), `${name}'s last writer`).toBe(`(${newcomerName})`);
    }
    // No rival ever wrote: every older resource's deployment has only its own images.
    for (const name of names)
      expect(
        revisionsOf(name).filter((rev) => rev.includes("registry.example.com/rival:")),
        `${name} (split: ${split.includes(name)})`,
      ).toEqual([]);
  }, 300_000);
});
