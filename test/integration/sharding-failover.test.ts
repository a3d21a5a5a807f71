// Failover of the sharder itself: `--sharded` processes against the real API server and a
// simulator; the replica that is the elected leader (and so runs the sharder) is killed -9, and
// an edit is made to one of its resources just after. What must happen, read from the Leases'
// versions (a watch) and the simulator's record, not from how long it took: a survivor wins the
// election; its sharder takes the dead replica's Lease, only once that Lease expired (no renewal
// for its duration), and before a sharder that began watching the ring at its election could have
// called it expired (the survivors watched the dead replica's Lease before one of them led, so
// the new sharder moves the share as soon as the Lease, unrenewed, expires, not a Lease duration
// after it leads); the edit reaches the service once, sent by a survivor after that take; every
// resource ends owned by the survivor the ring names and reconciled; and the Lease is deleted
// once none of them names the dead replica. How long a failover takes is the benchmark's to show
// (`npm run bench -- scale --replicas`).
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import type { DeploymentSpec } from "../../src/crd/schema.ts";
import { claimOf } from "../../src/reconcile/inputs.ts";
import { decodeInheritance, INHERITANCE_ANNOTATION } from "../../src/sharding/inheritance.ts";
import { OWNER_LABEL } from "../../src/sharding/labels.ts";
import type { RunningSimulator } from "../../src/simulator/server.ts";
import { freshNamespace, waitFor } from "../support/cluster.ts";
import { describeVersions, LeaseHistory, podOf, takeoverOf } from "../support/lease-history.ts";
import { startTestSimulator, TEST_API_KEY } from "../support/operator.ts";
import { ClusterUser, hasCondition } from "../support/resources.ts";
import { ShardedRing } from "../support/sharded-replicas.ts";

/** Resources in the ring (`FAILOVER_RESOURCES` for a larger share to move). */
const RESOURCES = Number(process.env.FAILOVER_RESOURCES ?? 60);
/** Leader kills in one run (`FAILOVER_KILLS=5` for more). */
const KILLS = Number(process.env.FAILOVER_KILLS ?? 2);
const LEASE_MS = 6_000;
const RING = "dms-failover";
const PATCH = "PATCH /v2/deployments/{deployment_id}";
/** How long a wait may last before it counts as a hang: it bounds a hang, it times nothing. */
const HANG_MS = 180_000;

const image = (tag: number) => `registry.example.com/failover:${tag}`;
const spec = (tag: number): DeploymentSpec => ({
  source: "internal_docker",
  sourceRevisionConfig: { imageUri: image(tag) },
});

describe("sharding: the sharder's replica killed", () => {
  const user = new ClusterUser();
  let ring: ShardedRing | undefined;
  let sim: RunningSimulator | undefined;
  let leases: LeaseHistory | undefined;
  let work = "";
  afterAll(async () => {
    await leases?.stop();
    await ring?.stopAll();
    await sim?.close();
    if (work) await rm(work, { recursive: true, force: true });
  });

  it(`re-owns and reconciles the dead leader's share by taking its Lease once expired, not a Lease duration after a survivor leads, ${KILLS} times`, async () => {
    process.setMaxListeners(50);
    const namespace = await freshNamespace("failover");
    work = await mkdtemp(join(tmpdir(), "failover-"));
    const simulator = await startTestSimulator({ requestRecordLimit: 100_000 });
    sim = simulator;
    const history = await LeaseHistory.start(user, namespace);
    leases = history;
    const apiKeyFile = join(work, "api-key");
    await writeFile(apiKeyFile, `${TEST_API_KEY}\n`, { mode: 0o600 });
    const r = new ShardedRing({
      namespace,
      ring: RING,
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
    const deploymentOf = (name: string) => simulator.store.getByName(name)?.id ?? "";
    const reachedService = (name: string, tag: number) =>
      (simulator.store.revisions(deploymentOf(name)) ?? []).some((rev) =>
        JSON.stringify(rev).includes(`"${image(tag)}"`),
      );

    await waitFor(settled, {
      timeoutMs: HANG_MS,
      intervalMs: 1_000,
      description: "every resource ready and owned",
    });
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
      const mark = history.mark();
      // The simulator's clock: the edit's PATCH is looked for among the requests since.
      const killedAt = Date.now();
      r.kill9(leader);
      const survivors = r.live();
      tag += 1;
      tags.set(edited, tag);
      await user.patch(namespace, edited, { spec: { sourceRevisionConfig: { imageUri: image(tag) } } });
      const editTag = tag;
      await waitFor(ownedAsRingSays, {
        timeoutMs: HANG_MS,
        intervalMs: 250,
        description: `kill ${kill} (${leader.name}, the leader): every resource owned by the survivor the ring names`,
      });
      await waitFor(() => reachedService(edited, editTag), {
        timeoutMs: HANG_MS,
        intervalMs: 250,
        description: `kill ${kill}: the edit of ${edited}, made after the kill, reaching the service`,
      });
      // Once no resource names the dead replica, its Lease is deleted.
      await waitFor(() => takeoverOf(history.versions(leader.name), leader.name)?.deleted, {
        timeoutMs: HANG_MS,
        intervalMs: 250,
        description: () =>
          `kill ${kill}: ${leader.name}'s Lease taken and deleted; seen: ${describeVersions(history.versions(leader.name))}`,
      });

      // A survivor won the election after the kill.
      const elected = history
        .versions(RING, mark)
        .find((v) => v.holderIdentity !== "" && podOf(v.holderIdentity) !== leader.name);
      if (!elected)
        throw new Error(
          `kill ${kill}: no survivor elected; ${describeVersions(history.versions(RING, mark))}`,
        );
      expect(survivors).toContain(podOf(elected.holderIdentity));
      // Its sharder took the dead replica's Lease: the share moved under that hold, by the ring
      // written on it: the survivors, the new leader's replica taking the smaller share (none
      // named when the dead replica was still releasing a joined replica's share: see
      // docs/guide/sharding.md, "A join's share released whole").
      const leaseSeen = describeVersions(history.versions(leader.name));
      const taken = takeoverOf(history.versions(leader.name), leader.name);
      if (!taken) throw new Error(`kill ${kill}: ${leader.name}'s Lease never taken; ${leaseSeen}`);
      expect(taken.before, leaseSeen).toBe(taken.last);
      expect(taken.take.holderIdentity, leaseSeen).toBe(`sharder/${elected.holderIdentity}`);
      expect(taken.take.leaseTransitions, leaseSeen).toBe(taken.last.leaseTransitions + 1);
      const heirs = decodeInheritance(taken.take.annotations[INHERITANCE_ANNOTATION]);
      expect(heirs?.members, leaseSeen).toEqual(survivors);
      expect([podOf(elected.holderIdentity), undefined], leaseSeen).toContain(heirs?.leader);
      // Taken only once expired: a Lease duration after its last renewal was sent (every time
      // compared here is one machine's clock, written by the processes themselves).
      const lastRenewal = taken.last.renewTime ?? Number.POSITIVE_INFINITY;
      const takenAt = taken.take.acquireTime ?? Number.NEGATIVE_INFINITY;
      expect(takenAt, leaseSeen).toBeGreaterThanOrEqual(lastRenewal + LEASE_MS);
      // And by what the survivors watched before the election: a sharder that began watching the
      // ring when it was elected could call the Lease expired a whole duration after that at the
      // earliest (a newcomer never calls a holder gone before watching it that long).
      const electedAt = elected.acquireTime ?? Number.NEGATIVE_INFINITY;
      expect(takenAt, `${describeVersions([elected])}; ${leaseSeen}`).toBeLessThan(electedAt + LEASE_MS);
      // The edit went out from a survivor, after the take: nobody wrote the dead replica's
      // resource while its Lease was still its own (once only: checked at the end).
      const patch = simulator
        .requests({ route: PATCH, since: killedAt })
        .find((q) => q.url.includes(deploymentOf(edited)) && q.status === "200");
      if (!patch) throw new Error(`kill ${kill}: no PATCH of ${edited} recorded since the kill`);
      expect(survivors.map((s) => `(${s})`)).toContain(patch.userAgent?.replace(/.*\(/, "("));
      expect(patch.at).toBeGreaterThan(takenAt);
      // Back to three before the next kill, and every resource reconciled.
      r.start();
      await waitFor(settled, {
        timeoutMs: HANG_MS,
        intervalMs: 500,
        description: `kill ${kill}: settled at three again`,
      });
    }
    // No deployment created twice; every edit reached the service once.
    expect(
      simulator.requests({ route: "POST /v2/deployments" }).filter((q) => q.status === "201").length,
    ).toBe(RESOURCES);
    for (const [name, t] of tags) {
      const revisions = (simulator.store.revisions(deploymentOf(name)) ?? []).map((rev) =>
        JSON.stringify(rev),
      );
      expect(revisions.filter((rev) => rev.includes(`"${image(t)}"`)).length, `${name} ${image(t)}`).toBe(1);
    }
  }, 900_000);
});
