// Each connection's share of the workers, on a real API server: a tenant whose service never
// answers holds at most --max-reconciles-per-connection of them; its other resources wait in its
// connection's queue without a worker (counted by dms_connection_waiting_reconciles), and another
// tenant's edit is reconciled meanwhile. Nothing here depends on how long anything takes: the
// slow service never answers until the test ends, and every step waits for the event itself.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { DeploymentSpec } from "../../src/crd/schema.ts";
import type { RunningSimulator } from "../../src/simulator/server.ts";
import { freshNamespace, kubectl, waitFor } from "../support/cluster.ts";
import { startOperator, startTestSimulator, TEST_API_KEY, type TestOperator } from "../support/operator.ts";
import { ClusterUser } from "../support/resources.ts";

const SLOW_KEY = "slow-tenant-key-0b7e2c";
/** A service that never answers within the test: a day. */
const NEVER_MS = 86_400_000;
const SLOW_RESOURCES = ["s0", "s1", "s2", "s3"];

const spec = (connection: string, image: number): DeploymentSpec => ({
  source: "internal_docker",
  sourceConfig: { resourceSpec: { minScale: 1, maxScale: 2 } },
  sourceRevisionConfig: { imageUri: `registry.example.com/shop:${image}` },
  connectionRef: { kind: "ServiceConnection", name: connection },
});

/** The requests a simulator has received and not answered (its own record). */
const pending = (sim: RunningSimulator) => sim.requests().filter((r) => r.status === undefined);

describe("controller: each connection's share of the workers", () => {
  const user = new ClusterUser();
  let nsHealthy: string;
  let nsSlow: string;
  let healthy: RunningSimulator;
  let slow: RunningSimulator;
  let op: TestOperator;

  beforeAll(async () => {
    nsHealthy = await freshNamespace("fair-healthy");
    nsSlow = await freshNamespace("fair-slow");
    healthy = await startTestSimulator({});
    slow = await startTestSimulator({ apiKey: SLOW_KEY });
    await user.createTenantConnection(nsHealthy, healthy.url, TEST_API_KEY);
    await user.createTenantConnection(nsSlow, slow.url, SLOW_KEY);
    // Two workers, one per connection. The calls' timeout and the reconcile's deadline are far
    // beyond the test: a reconcile of the slow tenant holds its worker until the test ends.
    op = startOperator({
      simulator: healthy,
      namespaces: [nsHealthy, nsSlow],
      concurrency: 2,
      maxReconcilesPerConnection: 1,
      service: { timeoutMs: 3_600_000 },
      reconcileTimeoutMs: 7_200_000,
      shutdownTimeoutMs: 500,
      listen: true,
    });
    await op.started();
  });

  afterAll(async () => {
    await op?.stop();
    slow?.faults.clear();
    for (const ns of [nsHealthy, nsSlow])
      await kubectl(["delete", "deployments.dms.dev", "--all", "-n", ns, "--wait=false"]);
    await healthy?.close();
    await slow?.close();
  });

  it("reconciles the healthy tenant's edit while the slow connection holds its cap, and stays ready", async () => {
    await user.create(nsHealthy, "shop", spec("tenant", 1));
    for (const name of SLOW_RESOURCES) await user.create(nsSlow, name, spec("tenant", 1));
    await user.waitReady(nsHealthy, "shop");
    for (const name of SLOW_RESOURCES) await user.waitReady(nsSlow, name);

    // The slow tenant's service stops answering; each of its resources is edited, so each needs a call.
    slow.faults.set({ latency: [{ ms: NEVER_MS }] });
    slow.resetCounters();
    for (const name of SLOW_RESOURCES) await user.patch(nsSlow, name, { spec: spec("tenant", 2) });
    // One reconcile of the slow connection holds its one seat, stuck on a call that is not answered;
    // the three others wait in the connection's queue, without a worker.
    await waitFor(async () => (await op.metric("dms_connection_waiting_reconciles")) === 3 || undefined, {
      description: "three slow resources waiting for their connection's share",
    });
    expect(pending(slow).length).toBeGreaterThanOrEqual(1);
    const stuck = pending(slow).map((r) => r.url);

    // The healthy tenant's edit takes the other worker: its PATCH reaches its service.
    healthy.resetCounters();
    await user.patch(nsHealthy, "shop", { spec: spec("tenant", 2) });
    await waitFor(
      () => (healthy.counters()["PATCH /v2/deployments/{deployment_id}"]?.["200"] ?? 0) >= 1 || undefined,
      {
        description: "the healthy tenant's PATCH",
      },
    );
    await user.waitFor(
      nsHealthy,
      "shop",
      (o) => o?.status?.observedGeneration === o?.metadata.generation,
      "observed",
    );

    // Meanwhile the slow connection still held its cap: the same calls pending, none answered,
    // and still three of its resources waiting.
    expect(pending(slow).map((r) => r.url)).toEqual(expect.arrayContaining(stuck));
    expect(slow.requests().filter((r) => r.status !== undefined)).toEqual([]);
    expect(await op.metric("dms_connection_waiting_reconciles")).toBe(3);
    const { probes } = await op.operator.addresses();
    expect((await fetch(`${probes}/readyz`)).status).toBe(200);
  });
});
