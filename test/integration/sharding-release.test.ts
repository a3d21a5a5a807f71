// A join's share released whole (src/sharding/release.ts): `--sharded` processes against the real
// API server and a simulator. A fourth replica joins three settled ones while every resource is
// being edited: each owner must write on its Lease that it released to the newcomer's process the
// share the ring gives it, the newcomer must take it up (its log says so) and name each owner on
// its own Lease once it has listed that share, no label for it may come before, and the annotation
// must go once the labels followed; throughout, every edit reaches the service exactly once and no
// deployment has two writers at once (each write's span at the service, as the chaos test reads
// them). A second newcomer's labels are then refused by a ValidatingAdmissionPolicy, so its share
// stays released, not labelled: it must reconcile that share (its writes reach the service) while
// the resources are still labelled for their owners; killed -9, the owners must take the share
// back once its Lease is taken, and apply the edits made since.
import { readFile } from "node:fs/promises";
import { afterAll, describe, expect, it } from "vitest";
import type { DeploymentSpec } from "../../src/crd/schema.ts";
import { claimOf } from "../../src/reconcile/inputs.ts";
import { OWNER_LABEL } from "../../src/sharding/labels.ts";
import {
  decodeHolding,
  decodeRelease,
  HOLDING_ANNOTATION,
  RELEASED_ANNOTATION,
} from "../../src/sharding/release.ts";
import { refuseDeploymentUpdates } from "../support/admission-policy.ts";
import { waitFor } from "../support/cluster.ts";
import { ClusterUser, hasCondition } from "../support/resources.ts";
import { type Replica, type ShardedWorld, shardedWorld } from "../support/sharded-replicas.ts";
import { alternations, handovers } from "../support/write-spans.ts";

const RESOURCES = Number(process.env.RELEASE_RESOURCES ?? 240);
const LEASE_MS = 6_000;
/** Each edit takes this long at the service: a write still in flight at a hand-over shows as an overlap. */
const EDIT_LATENCY_MS = 250;
const image = (tag: number) => `registry.example.com/release:${tag}`;
const spec = (tag: number): DeploymentSpec => ({
  source: "internal_docker",
  sourceRevisionConfig: { imageUri: image(tag) },
});

describe("sharding: a join's share released whole", () => {
  const user = new ClusterUser();
  let world: ShardedWorld | undefined;
  let policy: { remove(): Promise<void> } | undefined;
  afterAll(async () => {
    await policy?.remove();
    await world?.stop();
  });

  it("moves a join's share by releases on the owners' Leases, one writer at a time, and takes it back from a newcomer killed", async () => {
    process.setMaxListeners(50);
    // Three replicas `rel-0`…`rel-2` of the ring `dms-rel`, 6 s Leases renewed every second.
    world = await shardedWorld("rel", 3, { requestRecordLimit: 200_000 });
    const { namespace, simulator, ring: r } = world;
    simulator.faults.set({
      latency: [{ route: "PATCH /v2/deployments/{deployment_id}", ms: EDIT_LATENCY_MS }],
    });
    const tags = new Map<string, number>();
    const names = Array.from({ length: RESOURCES }, (_, i) => `d${i}`);
    for (let i = 0; i < names.length; i += 20)
      await Promise.all(
        names.slice(i, i + 20).map(async (name) => {
          tags.set(name, 1);
          await user.create(namespace, name, spec(1));
        }),
      );
    /** Every resource labelled as the ring says, Ready with its latest image; throws naming those that are not. */
    const settled = async () => {
      const place = await r.placement(user);
      const items = await r.list(user);
      for (const replica of r.replicas.values()) replica.process.assertRunning();
      const pending = items.filter(
        (o) =>
          !(
            o.metadata.labels?.[OWNER_LABEL] === place(claimOf(o)) &&
            o.status?.observedGeneration === o.metadata.generation &&
            hasCondition(o, "Ready", "True") &&
            o.spec.sourceRevisionConfig?.imageUri === image(tags.get(o.metadata.name) ?? 0)
          ),
      );
      if (items.length === RESOURCES && pending.length === 0) return true;
      throw new Error(
        `${items.length} resources, ${pending.length} pending: ${pending
          .slice(0, 5)
          .map(
            (o) =>
              `${o.metadata.name} (owner ${o.metadata.labels?.[OWNER_LABEL]}, ring ${place(claimOf(o))}, generation ${o.metadata.generation}, observed ${o.status?.observedGeneration})`,
          )
          .join(", ")}`,
      );
    };
    await waitFor(settled, {
      timeoutMs: 180_000,
      intervalMs: 1_000,
      description: "every resource ready and owned",
    });

    /** Every release seen on a ring Lease, polled while `watching`: `<Lease> <annotation value>`. */
    const seen = new Set<string>();
    let watching = true;
    const leases = async () =>
      (
        (await user.client.request({
          method: "GET",
          path: `/apis/coordination.k8s.io/v1/namespaces/${namespace}/leases?labelSelector=${encodeURIComponent("sharding.dms.dev/ring=dms-rel")}`,
        })) as { items: { metadata: { name: string; annotations?: Record<string, string> } }[] }
      ).items;
    /** The first newcomer (the next replica started). */
    const firstName = "rel-3";
    /** The owners its Lease named as listed (`sharding.dms.dev/holding`), over the join. */
    const holdingSeen = new Set<string>();
    /** Its Lease's holding annotation read just after a resource was first seen labelled for it. */
    let holdingAtFirstLabel: string | undefined | null = null;
    const polling = (async () => {
      while (watching) {
        // Read before the Leases: an owner labels for the newcomer only once the newcomer's Lease
        // names it as having listed the share, which it does until that owner's labels are all
        // written (seconds later), so the Leases read next show it still.
        const labelled =
          holdingAtFirstLabel === null
            ? await r.list(user, `${OWNER_LABEL}=${firstName}`).then((items) => items.length > 0)
            : false;
        const ls = await leases();
        for (const l of ls) {
          const value = l.metadata.annotations?.[RELEASED_ANNOTATION];
          if (value !== undefined) seen.add(`${l.metadata.name} ${value}`);
          if (l.metadata.name === firstName)
            for (const owner of decodeHolding(l.metadata.annotations?.[HOLDING_ANNOTATION]) ?? [])
              holdingSeen.add(owner);
        }
        if (labelled)
          holdingAtFirstLabel = ls.find((l) => l.metadata.name === firstName)?.metadata.annotations?.[
            HOLDING_ANNOTATION
          ];
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    })();
    let tag = 1;
    /**
     * Every image given to each resource after its first: each one that was settled before the
     * next edit (the first round's, and the last) reaches the service once, any other at most
     * once (an edit made again before it was applied is never applied).
     */
    const given = new Map<string, number[]>();
    const applied = new Set<number>();
    const editAll = () =>
      Promise.all(
        names.map(async (name) => {
          tag += 1;
          tags.set(name, tag);
          given.set(name, [...(given.get(name) ?? []), tag]);
          await user.patch(namespace, name, { spec: { sourceRevisionConfig: { imageUri: image(tag) } } });
        }),
      );
    const logOf = (replica: Replica) => readFile(replica.process.logPath, "utf8");

    // 1. A join, every resource edited as it begins.
    const newcomer = r.start();
    expect(newcomer.name).toBe(firstName);
    await editAll();
    await waitFor(settled, {
      timeoutMs: 120_000,
      intervalMs: 500,
      description: "the join settled with the edits applied",
    });
    for (const t of tags.values()) applied.add(t);
    // The releases go once the labels followed.
    await waitFor(
      async () => (await leases()).every((l) => l.metadata.annotations?.[RELEASED_ANNOTATION] === undefined),
      {
        timeoutMs: 30_000,
        intervalMs: 250,
        description: "no Lease still showing a release",
      },
    );
    const releases = [...seen].map((s) => ({
      lease: s.slice(0, s.indexOf(" ")),
      release: decodeRelease(s.slice(s.indexOf(" ") + 1)),
    }));
    console.log(`release: the join's releases seen on the owners' Leases: ${[...seen].join("; ")}`);
    expect(releases.length).toBeGreaterThan(0);
    for (const { lease, release } of releases) {
      expect(release?.heir).toBe(newcomer.name);
      expect(release?.identity.startsWith(`${newcomer.name}_`)).toBe(true);
      expect(lease).not.toBe(newcomer.name);
    }
    expect(await logOf(newcomer)).toContain("taking up the share a live replica released to this one");
    // Its labels followed only once it had listed each owner's share (said on its Lease).
    console.log(
      `release: the newcomer's Lease named as listed ${[...holdingSeen].join(", ")}; when its first label was seen: ${holdingAtFirstLabel}`,
    );
    expect(typeof holdingAtFirstLabel === "string" && holdingAtFirstLabel !== "").toBe(true);
    for (const { lease } of releases) expect(holdingSeen.has(lease)).toBe(true);

    // 2. Another join, its labels refused: the share stays released, and the newcomer reconciles
    // it while every resource is still labelled for its owner.
    const secondName = "rel-4";
    const held = `!has(object.metadata.labels) || !('${OWNER_LABEL}' in object.metadata.labels) || object.metadata.labels['${OWNER_LABEL}'] != '${secondName}'`;
    policy = await refuseDeploymentUpdates(user, {
      name: `release-hold-${namespace}`,
      namespace,
      allowed: held,
      message: "labels for the second newcomer held back by the test",
      probe: { name: names[0] ?? "", body: { metadata: { labels: { [OWNER_LABEL]: secondName } } } },
    });
    seen.clear();
    const second = r.start();
    expect(second.name).toBe(secondName);
    const secondWrites = () =>
      simulator
        .requests({ route: "PATCH /v2/deployments/{deployment_id}" })
        .filter((q) => q.userAgent?.endsWith(`(${secondName})`)).length;
    // Edited once its share is released to it: the owners no longer reconcile that share.
    await waitFor(async () => ([...seen].some((v) => v.includes(`${secondName}_`)) ? true : undefined), {
      timeoutMs: 60_000,
      intervalMs: 100,
      description: "an owner's Lease showing a release to the second newcomer",
    });
    await editAll();
    await waitFor(
      async () => {
        if (secondWrites() >= 3) return true;
        // Said on a timeout: what the owners' Leases showed, and the end of the newcomer's log.
        throw new Error(
          `${secondWrites()} writes by ${secondName}; releases seen: ${[...seen].join("; ")}; its log ends:\n${second.process.logTail(20)}`,
        );
      },
      {
        timeoutMs: 60_000,
        intervalMs: 250,
        description: "the second newcomer writing the share released to it",
      },
    );
    const stillOwners = (await r.list(user)).filter((o) => o.metadata.labels?.[OWNER_LABEL] === secondName);
    expect(stillOwners, "no resource labelled for the second newcomer (its labels are refused)").toEqual([]);
    console.log(
      `release: the second newcomer wrote ${secondWrites()} PATCHes of resources labelled for their owners`,
    );
    // Killed -9: the owners take the share back once its Lease is taken, and apply the edits made since.
    r.kill9(second);
    await editAll();
    await waitFor(settled, {
      timeoutMs: 120_000,
      intervalMs: 500,
      description: "the second newcomer's share back with its owners, the edits applied",
    });
    watching = false;
    await polling;
    const back = (await Promise.all([...r.replicas.values()].filter((x) => x !== second).map(logOf))).join(
      "\n",
    );
    expect(back).toContain("cannot take it up: reconciling it here again");

    // Every edit reached the service at most once (each settled one once), and no deployment had
    // two writers at once.
    for (const t of tags.values()) applied.add(t);
    for (const name of names) {
      const revisions = (simulator.store.revisions(simulator.store.getByName(name)?.id ?? "") ?? []).map(
        (rev) => JSON.stringify(rev),
      );
      for (const t of given.get(name) ?? []) {
        const times = revisions.filter((rev) => rev.includes(`"${image(t)}"`)).length;
        if (applied.has(t)) expect(times, `${name} ${image(t)}`).toBe(1);
        else expect(times, `${name} ${image(t)}`).toBeLessThanOrEqual(1);
      }
    }
    const spans = handovers(simulator.requests());
    console.log(
      `release: ${spans.count} hand-overs of a deployment's writes; the smallest gap ${spans.smallestGapMs} ms (${spans.smallestAt})`,
    );
    expect(spans.overlaps).toEqual([]);
    expect(spans.count).toBeGreaterThan(0);
    expect(alternations(simulator.requests(), LEASE_MS)).toEqual([]);
  }, 600_000);
});
