// Rollout windows written to stall the operator, on the real control plane: one namespace holds
// changes under the worst windows (schedules that never fire beside an allow/deny pair that
// ping-pongs the search, and eight such pairs in four zones) and re-applies them every 2 s, while
// another namespace edits its own resource. What must hold, by what happened rather than by how
// long anything took: every edit of the other namespace reaches the service as a PATCH while the
// tenant is still re-applying its windows (each waited for, bounded only against a hang); the
// event loop is never held by the tenant's windows, as a kubelet would see it: /healthz, probed
// from another process every 250 ms with the probe's 2 s timeout, answers every time; and the
// operator keeps its Lease (a reconcile that held the event loop past the 4 s renew deadline would
// lose it). The search bounded by steps alone held the event loop ~7 s at each reconcile of the
// first resource; with the fire check and the search's time budget both removed again, probes
// failed at their 2 s timeout here while the team's PATCHes still went out within ~100 ms. How
// long the team's PATCH takes beside such a tenant is a benchmark's figure, not a bound here.
import { type ChildProcess, spawn } from "node:child_process";
import { setTimeout as sleep } from "node:timers/promises";
import { describe, expect, it } from "vitest";
import type { RolloutWindowSpec } from "../../src/crd/rollout-windows-schema.ts";
import type { DeploymentSpec } from "../../src/crd/schema.ts";
import type { RunningSimulator } from "../../src/simulator/server.ts";
import { freshNamespace, waitFor } from "../support/cluster.ts";
import { startOperator, startTestSimulator, type TestOperator } from "../support/operator.ts";
import { ClusterUser, conditionOf, hasCondition } from "../support/resources.ts";
import { useScenarios } from "../support/scenario.ts";

const PATCH = "PATCH /v2/deployments/{deployment_id}";
const LEASE = "dms-operator-leader";
const ZONES = ["Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "America/Santiago"];

/** An allow/deny pair of the same schedule: never open, and the search jumps a minute at a time. */
const pair = (schedule: string, timeZone: string): RolloutWindowSpec[] => [
  { kind: "allow", schedule, duration: "1m", timeZone },
  { kind: "deny", schedule, duration: "1m", timeZone },
];
/** The pair beside 14 deny windows on dates that do not exist: refused, naming the third. */
const IMPOSSIBLE: RolloutWindowSpec[] = [
  ...pair("*/2 * * * *", "UTC"),
  ...Array.from({ length: 14 }, (_, i) => ({
    kind: "deny" as const,
    schedule: i % 2 ? "0 0 31 2 *" : "0 0 31 4,6,9,11 *",
    duration: "1h",
    timeZone: ZONES[i % 4] ?? "UTC",
  })),
];
/** Eight pairs in four zones: read, and searched until a budget stops the search. */
const PING_PONG: RolloutWindowSpec[] = Array.from({ length: 8 }, (_, i) =>
  pair(i % 2 ? "1-59/2 * * * *" : "*/2 * * * *", ZONES[i % 4] ?? "UTC"),
).flat();

const spec = (image: string): DeploymentSpec => ({
  source: "internal_docker",
  sourceConfig: { resourceSpec: { minScale: 1, maxScale: 8 } },
  sourceRevisionConfig: { imageUri: image },
});
const withImage = (tag: string, windows?: RolloutWindowSpec[]) => ({
  spec: {
    sourceRevisionConfig: { imageUri: `registry.example.com/agent:${tag}` },
    ...(windows ? { rolloutWindows: windows } : {}),
  },
});

/**
 * Probes `url` every 250 ms from a child process (its event loop is not the operator's), each
 * with a 2 s timeout, as a kubelet's probe would; the child writes one line per probe to its
 * stdout, which `lines` reads: `ok <ms> <status>` or `fail <ms> <status or error>`.
 */
function probeFromOutside(url: string): { process: ChildProcess; lines: () => string[] } {
  const script = `
    const url = ${JSON.stringify(url)};
    setInterval(async () => {
      const start = performance.now();
      try {
        const res = await fetch(url, { signal: AbortSignal.timeout(2000) });
        await res.text();
        process.stdout.write((res.status === 200 ? "ok " : "fail ") + Math.round(performance.now() - start) + " " + res.status + "\\n");
      } catch (error) {
        process.stdout.write("fail " + Math.round(performance.now() - start) + " " + error.name + "\\n");
      }
    }, 250);`;
  const child = spawn(process.execPath, ["-e", script], { stdio: ["ignore", "pipe", "inherit"] });
  let out = "";
  child.stdout?.on("data", (chunk: Buffer) => {
    out += chunk.toString();
  });
  return { process: child, lines: () => out.split("\n").filter(Boolean) };
}

describe("controller: hostile rollout windows in one namespace", () => {
  const user = new ClusterUser();
  const scenarios = useScenarios();

  it("another namespace's edits go out, /healthz answers and the Lease is kept while one re-applies the worst windows every 2 s", async () => {
    const hostile = await freshNamespace("windows-hostile");
    const team = await freshNamespace("windows-team");
    const sim: RunningSimulator = await startTestSimulator();
    scenarios.defer(() => sim.close());
    // The windows' search on the operator's own counter (its CPU time), whose budget is part of
    // what bounds the event loop here: no counter that stands still.
    const op: TestOperator = startOperator({
      simulator: sim,
      namespaces: [hostile, team],
      listen: true,
      // A renew deadline of 4 s: a reconcile that holds the event loop longer loses the Lease.
      leaderElection: {
        namespace: team,
        leaseDurationMs: 6_000,
        renewDeadlineMs: 4_000,
        retryPeriodMs: 1_000,
      },
    });
    scenarios.defer(() => op.stop());
    await op.started();

    await user.create(hostile, "dates", spec("registry.example.com/agent:1"));
    await user.create(hostile, "pairs", spec("registry.example.com/agent:1"));
    await user.create(team, "app", spec("registry.example.com/app:1"));
    for (const [ns, name] of [
      [hostile, "dates"],
      [hostile, "pairs"],
      [team, "app"],
    ] as const)
      await user.waitReady(ns, name, 30_000);
    const app = await user.get(team, "app");
    const appId = app?.status?.deploymentId ?? "";
    expect(appId).not.toBe("");

    const { probes } = await op.operator.addresses();
    const prober = probeFromOutside(`${probes}/healthz`);
    scenarios.defer(async () => {
      prober.process.kill();
    });

    // The tenant: a new image under the worst windows, every 2 s, until the team's edits are out.
    let applying = true;
    let rounds = 0;
    const tenant = (async () => {
      for (let round = 2; applying; round++) {
        await user.patch(hostile, "dates", withImage(String(round), IMPOSSIBLE));
        await user.patch(hostile, "pairs", withImage(String(round), PING_PONG));
        rounds += 1;
        await sleep(2_000);
      }
    })();

    // The other team: an edit every 2.5 s, from once the operator has reconciled the tenant's
    // first round, each waited for at the service: the revision its PATCH made (the 2 s and 2.5 s
    // pauses pace the load; they synchronise nothing).
    await user.waitFor(
      hostile,
      "dates",
      (o) => (o?.status?.observedGeneration ?? 0) >= 2,
      "the tenant's first round reconciled",
      60_000,
    );
    /** The images of the team's deployment's revisions at the service, oldest first. */
    const appImages = () =>
      (sim.store.revisions(appId) ?? []).map(
        (rev) => /registry\.example\.com\/[a-z]+:\d+/.exec(JSON.stringify(rev))?.[0],
      );
    const roundsBefore = rounds;
    // The simulator's clock: the team's PATCHes are counted from the first edit on.
    const editsFrom = Date.now();
    const edits: string[] = [];
    for (let edit = 2; edit <= 8; edit++) {
      const image = `registry.example.com/agent:${edit}`;
      await user.patch(team, "app", withImage(`${edit}`));
      edits.push(image);
      await waitFor(() => appImages().includes(image), {
        timeoutMs: 60_000,
        description: () => `the team's edit ${edit} at the service; its revisions: ${appImages().join(", ")}`,
      });
      await sleep(2_500);
    }
    // The tenant kept re-applying its windows meanwhile: the edits went out beside them.
    expect(rounds).toBeGreaterThan(roundsBefore);
    applying = false;
    await tenant;
    // Each edit reached the service once, in order, after the create's revision.
    expect(appImages()).toEqual(["registry.example.com/app:1", ...edits]);
    const patches = sim.requests({ route: PATCH, since: editsFrom }).filter((r) => r.url.includes(appId));
    expect(patches.map((r) => r.status)).toEqual(edits.map(() => "200"));

    // The operator answered every probe from outside while it reconciled both namespaces.
    const probesSeen = prober.lines();
    expect(probesSeen.length).toBeGreaterThan(40);
    expect(probesSeen.filter((l) => !l.startsWith("ok "))).toEqual([]);

    // The Lease stayed with the operator all along.
    expect(op.logs.find("leadership lost")).toEqual([]);
    const lease = (await user.client.request({
      method: "GET",
      path: `/apis/coordination.k8s.io/v1/namespaces/${team}/leases/${LEASE}`,
    })) as { spec?: { holderIdentity?: string; leaseTransitions?: number } };
    expect(lease.spec?.holderIdentity).toBe(op.identity);
    expect(lease.spec?.leaseTransitions ?? 0).toBe(0);

    // The tenant's resources fail alone, each with its reason.
    const dates = await waitFor(
      async () => {
        const o = await user.get(hostile, "dates");
        return hasCondition(o, "Synced", "False", "InvalidSpec") ? o : undefined;
      },
      { description: "the impossible dates refused" },
    );
    expect(conditionOf(dates, "Synced")?.message).toMatch(
      /^spec\.rolloutWindows\[2\]\.schedule: "0 0 31 4,6,9,11 \*" never starts a window within 8 years in Europe\/Berlin/,
    );
    const pairs = await user.get(hostile, "pairs");
    // Out of steps, or out of time on a slow machine: held either way, never refused for it.
    expect(conditionOf(pairs, "Synced")?.reason).toBe("OutsideRolloutWindow");
    // Nothing of theirs was sent: every image change is held or refused.
    const service = sim.store.get(pairs?.status?.deploymentId ?? "");
    expect(service?.source_revision_config.image_uri).toBe("registry.example.com/agent:1");
  }, 120_000);
});
