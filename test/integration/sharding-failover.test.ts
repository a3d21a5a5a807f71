// Failover of the sharder itself: `--sharded` processes against the real API server and a
// simulator; the replica that is the elected leader (and so runs the sharder) is killed -9, and
// an edit is made to one of its resources just after. Every resource must be owned again by the
// replica the ring names among the survivors, and the edit must reach the service, within the
// Lease duration plus a margin: the survivors watched the dead replica's Lease before one of them
// led, so the new sharder moves its share as soon as that Lease, unrenewed, expires.
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import type { DeploymentSpec } from "../../src/crd/schema.ts";
import { claimOf } from "../../src/reconcile/claims.ts";
import { OWNER_LABEL } from "../../src/sharding/labels.ts";
import type { RunningSimulator } from "../../src/simulator/server.ts";
import { freshNamespace, waitFor } from "../support/cluster.ts";
import { startTestSimulator, TEST_API_KEY } from "../support/operator.ts";
import { ClusterUser, hasCondition } from "../support/resources.ts";
import { ShardedRing } from "../support/sharded-replicas.ts";

/** Resources in the ring (`FAILOVER_RESOURCES` for a larger share to move). */
const RESOURCES = Number(process.env.FAILOVER_RESOURCES ?? 60);
/** Leader kills in one run (`FAILOVER_KILLS=5` for more figures). */
const KILLS = Number(process.env.FAILOVER_KILLS ?? 2);
const LEASE_MS = 6_000;
/**
 * Beyond the Lease duration: the leader election's observation of the last renewal (at most one
 * retry late), the new sharder's watch listing, a Lease take, the label writes and the
 * new owner's reconcile, behind a loaded two-core machine. A bound that proves the mechanism
 * (without it, the new sharder alone waits a second Lease duration), not a timing.
 */
const MARGIN_MS = 10_000;

const image = (tag: number) => `registry.example.com/failover:${tag}`;
const spec = (tag: number): DeploymentSpec => ({
  source: "internal_docker",
  sourceRevisionConfig: { imageUri: image(tag) },
});

describe("sharding: the sharder's replica killed", () => {
  const user = new ClusterUser();
  let ring: ShardedRing | undefined;
  let sim: RunningSimulator | undefined;
  let work = "";
  afterAll(async () => {
    await ring?.stopAll();
    await sim?.close();
    if (work) await rm(work, { recursive: true, force: true });
  });

  it(`re-owns and reconciles the dead leader's share within the Lease duration plus ${MARGIN_MS / 1000} s, ${KILLS} times`, async () => {
    process.setMaxListeners(50);
    const namespace = await freshNamespace("failover");
    work = await mkdtemp(join(tmpdir(), "failover-"));
    const simulator = await startTestSimulator({ requestRecordLimit: 100_000 });
    sim = simulator;
    const apiKeyFile = join(work, "api-key");
    await writeFile(apiKeyFile, `${TEST_API_KEY}\n`, { mode: 0o600 });
    const r = new ShardedRing({
      namespace,
      ring: "dms-failover",
      leaseMs: LEASE_MS,
      renewDeadline: "4s",
      retryPeriod: "1s",
      baseUrl: simulator.url,
      apiKeyFile,
      work,
      prefix: "fo",
    });
    ring = r;
    for (let i = 0; i < 3; i++) r.start();
    const tags = new Map<string, number>();
    const names = Array.from({ length: RESOURCES }, (_, i) => `f${i}`);
    for (let i = 0; i < names.length; i += 20)
      await Promise.all(
        names.slice(i, i + 20).map(async (name) => {
          tags.set(name, 1);
          await user.create(namespace, name, spec(1));
        }),
      );
    const ownedAsRingSays = async () => {
      const place = await r.placement(user);
      const items = await r.list(user);
      for (const replica of r.replicas.values()) replica.process.assertRunning();
      return items.length === RESOURCES &&
        items.every((o) => o.metadata.labels?.[OWNER_LABEL] === place(claimOf(o)))
        ? items
        : undefined;
    };
    const settled = async () => {
      const items = await ownedAsRingSays();
      return items?.every(
        (o) =>
          o.status?.observedGeneration === o.metadata.generation &&
          hasCondition(o, "Ready", "True") &&
          o.spec.sourceRevisionConfig?.imageUri === image(tags.get(o.metadata.name) ?? 0),
      );
    };
    const reachedService = (name: string, tag: number) =>
      (simulator.store.revisions(simulator.store.getByName(name)?.id ?? "") ?? []).some((rev) =>
        JSON.stringify(rev).includes(`"${image(tag)}"`),
      );

    await waitFor(settled, {
      timeoutMs: 180_000,
      intervalMs: 1_000,
      description: "every resource ready and owned",
    });
    const reowned: number[] = [];
    const reconciled: number[] = [];
    let tag = 1;
    for (let kill = 0; kill < KILLS; kill++) {
      const leader = await waitFor(() => r.leader(user), {
        timeoutMs: 60_000,
        intervalMs: 250,
        description: "a running replica holding the leader election Lease",
      });
      const items = await r.list(user);
      const edited = items.find((o) => o.metadata.labels?.[OWNER_LABEL] === leader.name)?.metadata.name;
      if (!edited) throw new Error(`the leader ${leader.name} owns no resource`);
      const killedAt = Date.now();
      r.kill9(leader);
      tag += 1;
      tags.set(edited, tag);
      await user.patch(namespace, edited, { spec: { sourceRevisionConfig: { imageUri: image(tag) } } });
      const deadline = killedAt + LEASE_MS + MARGIN_MS;
      await waitFor(ownedAsRingSays, {
        timeoutMs: deadline - Date.now(),
        intervalMs: 100,
        description: `kill ${kill} (${leader.name}, the leader): every resource owned by the survivor the ring names`,
      });
      reowned.push(Date.now() - killedAt);
      const editTag = tag;
      await waitFor(() => reachedService(edited, editTag), {
        timeoutMs: Math.max(0, deadline - Date.now()),
        intervalMs: 100,
        description: `kill ${kill}: the edit of ${edited}, made after the kill, reaching the service`,
      });
      reconciled.push(Date.now() - killedAt);
      // A survivor leads now.
      expect((await waitFor(() => r.leader(user), { timeoutMs: 10_000, intervalMs: 250 })).name).not.toBe(
        leader.name,
      );
      // Back to three before the next kill.
      r.start();
      await waitFor(settled, {
        timeoutMs: 120_000,
        intervalMs: 500,
        description: `kill ${kill}: settled at three again`,
      });
    }
    console.log(
      `sharding failover: ${KILLS} leader kills, ${LEASE_MS / 1000} s Leases; owned again after (ms): ${reowned.join(", ")}; the edit at the service after: ${reconciled.join(", ")}`,
    );
    // No deployment created twice; every edit reached the service once.
    expect(
      simulator.requests({ route: "POST /v2/deployments" }).filter((q) => q.status === "201").length,
    ).toBe(RESOURCES);
    for (const [name, t] of tags) {
      const revisions = (simulator.store.revisions(simulator.store.getByName(name)?.id ?? "") ?? []).map(
        (rev) => JSON.stringify(rev),
      );
      expect(revisions.filter((rev) => rev.includes(`"${image(t)}"`)).length, `${name} ${image(t)}`).toBe(1);
    }
  }, 600_000);
});
