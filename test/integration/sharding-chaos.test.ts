// Ring chaos: the operator run as separate `--sharded` processes against the real API server and
// two simulators (the default connection and a ServiceConnection), while replicas are killed -9,
// added and stopped, and resources are edited. What must hold throughout: every edit reaches the
// service exactly once, no deployment is created twice, no two replicas take turns writing one
// deployment within a Lease's duration, no replica's first write to a deployment reaches the
// service before the previous writer's last write to it was answered (the service takes 250 ms
// over each edit, so a handover with a write still in flight shows), and every resource is owned
// again by a live replica, the one the ring gives it, after each disruption. Each replica that
// left had its Lease taken by the sharder before its share moved, only once the Lease expired (a
// replica killed) or was released (one stopped), and deleted once none of its resources named it;
// a leader killed had its Lease taken by the new leader sooner than a sharder that began watching
// the ring at its election could have called it expired (read from the Leases' versions; how long
// a failover takes is the benchmark's to show, `npm run bench -- scale --replicas`). Rivals (resources
// naming the service deployment of another) are created at the start and during each join, while
// the join drains resources to the new replica: rivals must reach their replica oldest first, or
// the younger one, alone there for a moment, would take the name and write its own image (a
// second writer): no rival's image may ever reach the service.
import { mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
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
import { type Replica, ShardedRing } from "../support/sharded-replicas.ts";
import { alternations, handovers, writesByDeployment } from "../support/write-spans.ts";

/** Sizes chosen to run in about three minutes on two cores: 200 resources, 20 rounds. */
const RESOURCES = Number(process.env.RING_CHAOS_RESOURCES ?? 200);
const ROUNDS = Number(process.env.RING_CHAOS_ROUNDS ?? 20);
const EDITS_PER_ROUND = 12;
const LEASE_MS = 6_000;
/** How long a wait may last before it counts as a hang: it bounds a hang, it times nothing. */
const HANG_MS = 180_000;
const KEY_B = "ring-chaos-key-b-5f1e";
/**
 * How long each simulator takes over an edit (a PATCH), between its arrival and its answer: a
 * write takes time at the service, so one still in flight at a handover shows as an overlap.
 */
const EDIT_LATENCY_MS = 250;
const RING = "dms-ring-chaos";
/** Rivals created before the rounds, and during each join (each names a resource's deployment). */
const RIVALS_AT_START = 8;
const RIVALS_PER_JOIN = 4;

/** A rival of the resource `of`: its deployment's name, on its connection, an image of its own. */
const rivalSpec = (of: string, n: number, connection: boolean): DeploymentSpec => ({
  name: of,
  source: "internal_docker",
  sourceRevisionConfig: { imageUri: `registry.example.com/rival:${n}` },
  ...(connection ? { connectionRef: { kind: "ServiceConnection", name: "b" } } : {}),
});

const spec = (tag: number, connection: boolean): DeploymentSpec => ({
  source: "internal_docker",
  sourceRevisionConfig: { imageUri: `registry.example.com/ring:${tag}` },
  ...(connection ? { connectionRef: { kind: "ServiceConnection", name: "b" } } : {}),
});

describe("sharding: ring chaos", () => {
  const user = new ClusterUser();
  let ringOf: ShardedRing | undefined;
  let leases: LeaseHistory | undefined;
  const sims: RunningSimulator[] = [];
  let work = "";
  afterAll(async () => {
    await leases?.stop();
    await ringOf?.stopAll();
    await Promise.all(sims.map((s) => s.close()));
    if (work && !process.env.KEEP_WORK) await rm(work, { recursive: true, force: true });
  });

  it(`keeps ${RESOURCES} resources owned once through ${ROUNDS} rounds of kills and scaling`, async () => {
    // An exit handler per operator process started.
    process.setMaxListeners(50);
    const namespace = await freshNamespace("ring");
    const history = await LeaseHistory.start(user, namespace);
    leases = history;
    work = await mkdtemp(join(tmpdir(), "ring-chaos-"));
    const simA = await startTestSimulator({ requestRecordLimit: 500_000 });
    const simB = await startTestSimulator({ apiKey: KEY_B, requestRecordLimit: 500_000 });
    sims.push(simA, simB);
    for (const sim of [simA, simB])
      sim.faults.set({ latency: [{ route: "PATCH /v2/deployments/{deployment_id}", ms: EDIT_LATENCY_MS }] });
    await user.putSecret(namespace, "b", { "api-key": KEY_B });
    await user.client.request({
      method: "POST",
      path: `/apis/dms.dev/v1alpha1/namespaces/${namespace}/serviceconnections`,
      body: {
        apiVersion: "dms.dev/v1alpha1",
        kind: "ServiceConnection",
        metadata: { name: "b", namespace },
        spec: { baseUrl: simB.url, apiKeySecretRef: { name: "b", key: "api-key" } },
      },
    });
    const keyFile = join(work, "api-key");
    await writeFile(keyFile, `${TEST_API_KEY}\n`, { mode: 0o600 });

    const ring = new ShardedRing({
      namespace,
      ring: RING,
      leaseMs: LEASE_MS,
      renewDeadline: "4s",
      retryPeriod: "1s",
      baseUrl: simA.url,
      apiKeyFile: keyFile,
      work,
      prefix: "ring",
    });
    ringOf = ring;
    const replicas = ring.replicas;
    const start = () => ring.start();
    const kill9 = (r: Replica) => ring.kill9(r);
    const stop = (r: Replica) => ring.stop(r);
    const live = () => ring.live();
    const list = () => ring.list(user);

    for (let i = 0; i < 3; i++) start();
    // What each resource's image should end as, and every edit made.
    const tags = new Map<string, number>();
    const edits: { name: string; tag: number; connection: boolean }[] = [];
    const names = Array.from({ length: RESOURCES }, (_, i) => `r${i}`);
    const onB = (name: string) => Number(name.slice(1)) % 2 === 1;
    for (let i = 0; i < names.length; i += 20)
      await Promise.all(
        names.slice(i, i + 20).map(async (name) => {
          tags.set(name, 1);
          await user.create(namespace, name, spec(1, onB(name)));
        }),
      );
    /** The rivals created: each one's name and the resource whose deployment it names. */
    const rivals = new Map<string, string>();
    const createRivals = async (count: number) => {
      const made = Array.from({ length: count }, () => {
        const of = names[Math.floor(Math.random() * names.length)] ?? "r0";
        const n = rivals.size;
        rivals.set(`x${n}`, of);
        return { name: `x${n}`, of, n };
      });
      await Promise.all(
        made.map(({ name, of, n }) => user.create(namespace, name, rivalSpec(of, n, onB(of)))),
      );
    };
    await createRivals(RIVALS_AT_START);
    const total = () => RESOURCES + rivals.size;

    /**
     * Every resource labelled for a replica that is running (no matter its status): none left
     * with a replica that was killed or stopped. A replica just started may not have its share
     * yet; `settled` waits for that.
     */
    const owned = async () => {
      const members = new Set(live());
      const items = await list();
      return items.every((o) => members.has(o.metadata.labels?.[OWNER_LABEL] ?? "")) ? true : undefined;
    };
    const owners = new Map<string, string | undefined>();
    let moves = 0;
    /** What the last look of {@link settled} found not settled yet, for a timeout's message. */
    let unsettled = "";
    /**
     * Every resource owned by the live replica the ring names; each Ready at its latest generation
     * but the rivals, which stall (the older resource keeps the name).
     */
    const settled = async () => {
      const place = await ring.placement(user);
      const items = await list();
      const pending = items.filter((o) => {
        const owner = o.metadata.labels?.[OWNER_LABEL];
        if (rivals.has(o.metadata.name))
          return !(owner !== undefined && owner === place(claimOf(o)) && hasCondition(o, "Stalled", "True"));
        return !(
          owner !== undefined &&
          owner === place(claimOf(o)) &&
          o.status?.observedGeneration === o.metadata.generation &&
          hasCondition(o, "Ready", "True") &&
          o.spec.sourceRevisionConfig?.imageUri === `registry.example.com/ring:${tags.get(o.metadata.name)}`
        );
      });
      for (const r of replicas.values()) r.process.assertRunning();
      unsettled = `${items.length} of ${total()} resources; not settled: ${pending
        .slice(0, 10)
        .map(
          (o) =>
            `${o.metadata.name} (owner ${o.metadata.labels?.[OWNER_LABEL]}, the ring's ${place(claimOf(o))}, generation ${o.metadata.generation} observed ${o.status?.observedGeneration}, ${o.status?.conditions?.map((c) => `${c.type}=${c.status} ${c.reason}`).join(", ")})`,
        )
        .join("; ")}`;
      if (items.length !== total() || pending.length > 0) return undefined;
      for (const o of items) {
        const owner = o.metadata.labels?.[OWNER_LABEL];
        if (owners.has(o.metadata.name) && owners.get(o.metadata.name) !== owner) moves += 1;
        owners.set(o.metadata.name, owner);
      }
      return true;
    };
    await waitFor(settled, {
      timeoutMs: 240_000,
      intervalMs: 1_000,
      description: "every resource ready and owned",
    });

    /** Every replica that left the ring: killed -9 or stopped, and whether it led then. */
    const departed: { name: string; round: number; killed: boolean; led: boolean; mark: number }[] = [];
    /**
     * How `d`'s Lease left it: taken by a sharder after its last renewal, only once it expired (or
     * was released, for a replica stopped); a leader killed, by the new leader, sooner than a
     * sharder that began watching the ring at its election could have called it expired.
     */
    const checkTakeover = async (d: (typeof departed)[number]) => {
      const versions = () => history.versions(d.name);
      const taken = await waitFor(() => takeoverOf(versions(), d.name), {
        timeoutMs: HANG_MS,
        intervalMs: 250,
        description: () => `round ${d.round}: ${d.name}'s Lease taken; seen: ${describeVersions(versions())}`,
      });
      const seen = `round ${d.round}, ${d.name} ${d.killed ? "killed" : "stopped"}: ${describeVersions(versions())}`;
      expect(taken.take.leaseTransitions, seen).toBe(taken.before.leaseTransitions + 1);
      // The ring its share moved by, written on the Lease: the survivors, without it.
      const ring = decodeInheritance(taken.take.annotations[INHERITANCE_ANNOTATION]);
      expect(ring, seen).toBeDefined();
      expect(ring?.members ?? [], seen).not.toContain(d.name);
      const takenAt = taken.take.acquireTime ?? Number.NEGATIVE_INFINITY;
      // A replica killed released nothing: the take follows its last renewal.
      if (d.killed) expect(taken.before, seen).toBe(taken.last);
      // Released (a graceful stop), or expired: a Lease duration after its last renewal was sent
      // (the times compared are one machine's clock, written by the processes themselves).
      if (taken.before.holderIdentity !== "")
        expect(takenAt, seen).toBeGreaterThanOrEqual((taken.last.renewTime ?? Infinity) + LEASE_MS);
      if (d.killed && d.led) {
        const elected = history
          .versions(RING, d.mark)
          .find((v) => v.holderIdentity !== "" && podOf(v.holderIdentity) !== d.name);
        if (!elected)
          throw new Error(
            `${seen}; no replica elected after: ${describeVersions(history.versions(RING, d.mark))}`,
          );
        expect(taken.take.holderIdentity, seen).toBe(`sharder/${elected.holderIdentity}`);
        expect(takenAt, `${seen}; elected: ${describeVersions([elected])}`).toBeLessThan(
          (elected.acquireTime ?? Number.NEGATIVE_INFINITY) + LEASE_MS,
        );
      }
    };
    /** The replica holding the leader election Lease, by the latest version seen. */
    const leading = () => {
      const holder = history.versions(RING).at(-1)?.holderIdentity ?? "";
      return holder === "" ? undefined : podOf(holder);
    };
    let tag = 1;
    for (let round = 0; round < ROUNDS; round++) {
      // Edits in flight while the ring changes.
      const edited = Array.from(
        { length: EDITS_PER_ROUND },
        () => names[Math.floor(Math.random() * names.length)] ?? "r0",
      );
      const editing = Promise.all(
        [...new Set(edited)].map(async (name) => {
          tag += 1;
          tags.set(name, tag);
          edits.push({ name, tag, connection: onB(name) });
          await user.patch(namespace, name, {
            spec: { sourceRevisionConfig: { imageUri: `registry.example.com/ring:${tag}` } },
          });
        }),
      );
      const members = live();
      const step = round % 5;
      const mark = history.mark();
      const left = (r: Replica, killed: boolean) =>
        departed.push({ name: r.name, round, killed, led: leading() === r.name, mark });
      if (step === 1 && members.length === 3) {
        start(); // 3 → 4
        // New rivals while the join drains resources to the new replica.
        await createRivals(RIVALS_PER_JOIN);
      } else if (step === 3 && members.length >= 4) {
        // 4 → 2: one graceful stop, one kill -9
        const [a, b] = members.slice(0, 2).map((n) => replicas.get(n) as Replica);
        left(b as Replica, true);
        kill9(b as Replica);
        left(a as Replica, false);
        await stop(a as Replica);
      } else {
        // Rounds 0, 5, ...: the leader, which runs the sharder; the others: a random replica.
        const leader = step === 0 ? await ring.leader(user) : undefined;
        const victim =
          leader ?? (replicas.get(members[Math.floor(Math.random() * members.length)] ?? "") as Replica);
        left(victim, true);
        kill9(victim);
        if (live().length < 3) start();
      }
      await waitFor(owned, {
        timeoutMs: HANG_MS,
        intervalMs: 250,
        description: `round ${round}: every resource owned again by the replica the ring names`,
      });
      await editing;
      await waitFor(settled, {
        timeoutMs: HANG_MS,
        intervalMs: 500,
        description: () => `round ${round}: every resource ready with its edits applied; ${unsettled}`,
      });
      for (const d of departed.filter((d) => d.round === round)) await checkTakeover(d);
    }
    // The leader was killed (rounds 0, 5, ...), and the Lease of every replica that left was taken
    // (checked each round) and then deleted, once none of its resources named it.
    expect(departed.filter((d) => d.killed && d.led).length).toBeGreaterThan(0);
    for (const d of departed)
      await waitFor(() => takeoverOf(history.versions(d.name), d.name)?.deleted, {
        timeoutMs: HANG_MS,
        intervalMs: 250,
        description: () => `${d.name}'s Lease deleted; seen: ${describeVersions(history.versions(d.name))}`,
      });

    // No deployment created twice on either service.
    const created = (sim: RunningSimulator) => sim.requests({ route: "POST /v2/deployments" });
    const createdOk = (sim: RunningSimulator) => created(sim).filter((r) => r.status === "201").length;
    expect(createdOk(simA) + createdOk(simB)).toBe(RESOURCES);
    expect(simA.store.list().length + simB.store.list().length).toBe(RESOURCES);
    // Every edit reached the service exactly once: one revision per image given, none twice.
    for (const { name, tag: t, connection } of edits) {
      const sim = connection ? simB : simA;
      const deployment = sim.store.getByName(name);
      const images = (sim.store.revisions(deployment?.id ?? "") ?? []).map((r) => JSON.stringify(r));
      const image = `registry.example.com/ring:${t}`;
      const writers = (writesByDeployment(sim.requests()).get(deployment?.id ?? "") ?? []).map(
        (w) => `${w.userAgent?.replace(/.*\(/, "(")} ${new Date(w.at).toISOString().slice(11, 23)}`,
      );
      const revisions = images.map((r) => /registry\.example\.com\/[a-z]+:\d+/.exec(r)?.[0]).join(", ");
      expect(
        images.filter((r) => r.includes(`"${image}"`)).length,
        `${name} ${image}: revisions ${revisions}; written by ${writers.join(", ")}`,
      ).toBe(1);
    }
    // No replica wrote a deployment between two writes of another within one Lease duration, and
    // no replica's write to a deployment arrived before every earlier write to it by another
    // replica was answered: each write's span at the service is [arrival, answer].
    const found = {
      count: 0,
      smallestGapMs: Number.POSITIVE_INFINITY,
      smallestAt: "",
      overlaps: [] as string[],
    };
    for (const sim of [simA, simB]) {
      const h = handovers(sim.requests());
      found.count += h.count;
      found.overlaps.push(...h.overlaps);
      if (h.smallestGapMs < found.smallestGapMs)
        Object.assign(found, { smallestGapMs: h.smallestGapMs, smallestAt: h.smallestAt });
      expect(alternations(sim.requests(), LEASE_MS)).toEqual([]);
      // Every request said which replica sent it.
      expect(sim.requests().every((r) => /^dms-operator\/\S+ \(ring-\d+\)$/.test(r.userAgent ?? ""))).toBe(
        true,
      );
    }
    // How many joins' shares were released whole (src/sharding/release.ts), and how many such
    // releases ended early (a newcomer killed before its labels followed): said, not required
    // (a join with a hand-over still in transit moves by hand-overs).
    // Every replica's log, those killed or stopped included (`<prefix>-<serial>.log` in `work`).
    const logs = (
      await Promise.all(
        (await readdir(work)).filter((f) => f.endsWith(".log")).map((f) => readFile(join(work, f), "utf8")),
      )
    ).join("");
    const count = (text: string) => logs.split(text).length - 1;
    console.log(
      `ring chaos: ${count("releasing the share the ring gives it whole")} releases of a joined replica's share begun, ${count("cannot take it up")} ended early`,
    );
    console.log(
      `ring chaos: ${found.count} handovers of a deployment's writes between replicas; smallest gap between the previous writer's last answer and the next writer's first arrival: ${found.smallestGapMs} ms (${found.smallestAt})`,
    );
    expect(found.overlaps).toEqual([]);
    // Resources did move: the rounds were handovers, not a ring that never changed.
    expect(moves).toBeGreaterThan(RESOURCES / 4);
    // No rival ever wrote: it always reached the replica of the resource whose name it claims
    // after that resource (checked last: the checks above say more of a failure).
    for (const sim of [simA, simB])
      for (const d of sim.store.list()) {
        const images = (sim.store.revisions(d.id) ?? []).map((r) => JSON.stringify(r));
        const writers = (writesByDeployment(sim.requests()).get(d.id) ?? []).map(
          (w) => `${w.userAgent?.replace(/.*\(/, "(")} ${new Date(w.at).toISOString().slice(11, 23)}`,
        );
        expect(
          images.filter((r) => r.includes("registry.example.com/rival:")),
          `${d.name}, written by ${writers.join(", ")}`,
        ).toEqual([]);
      }
  }, 900_000);
});
