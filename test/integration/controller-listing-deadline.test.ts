// One tenant cannot hold the others: two tenants through two ServiceConnections, and one of them
// turns into a black hole (every request hangs, far longer than the request timeout). The other
// tenant's drift is still corrected within about one resync period; the black hole's resources
// report ListingDeadlineExceeded naming the connection and the deadline, an edit of one of them is
// reported at once instead of holding a worker for the request timeout, and once the service
// answers again its resources heal and the held edit is applied. Twenty connections to the black
// hole do not hold back the check of a new, healthy one.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { DeploymentSpec } from "../../src/crd/schema.ts";
import type { RunningSimulator } from "../../src/simulator/server.ts";
import { CONNECTION_CHECKS_PER_NAMESPACE } from "../../src/wiring/operator-config.ts";
import { freshNamespace, kubectl, kubectlOk, waitFor } from "../support/cluster.ts";
import { startOperator, startTestSimulator, TEST_API_KEY, type TestOperator } from "../support/operator.ts";
import { ClusterUser, conditionOf, hasCondition } from "../support/resources.ts";

/** Short, as the tests wait for passes: the first for the drift's, the last for the healing one. */
const RESYNC_MS = 6_000;
/** Well below the period, and far below the request timeout a pass must not wait for. */
const DEADLINE_MS = 2_000;
/** Resources on the tenant that turns into a black hole: more than the operator's workers. */
const STUCK = ["b0", "b1", "b2", "b3", "b4", "b5"];

const spec = (connection: string, maxScale = 2): DeploymentSpec => ({
  source: "internal_docker",
  sourceConfig: { resourceSpec: { minScale: 1, maxScale } },
  sourceRevisionConfig: { imageUri: "registry.example.com/shop:1" },
  connectionRef: { kind: "ServiceConnection", name: connection },
});

const maxScaleOf = (sim: RunningSimulator, name: string) =>
  sim.store.list().find((d) => d.name === name)?.source_config?.resource_spec?.max_scale;

describe("controller: one tenant's listing cannot hold the others", () => {
  const user = new ClusterUser();
  let nsGood: string;
  let nsBad: string;
  let good: RunningSimulator;
  let bad: RunningSimulator;
  let op: TestOperator;

  const connection = (namespace: string, name: string, sim: RunningSimulator, secret = name) => ({
    apiVersion: "dms.dev/v1alpha1",
    kind: "ServiceConnection",
    metadata: { name, namespace },
    spec: { baseUrl: sim.url, apiKeySecretRef: { name: secret, key: "api-key" } },
  });
  const connect = async (namespace: string, name: string, sim: RunningSimulator) => {
    await user.putSecret(namespace, name, { "api-key": TEST_API_KEY });
    await kubectlOk(["apply", "-f", "-"], { input: JSON.stringify(connection(namespace, name, sim)) });
  };
  const readyReason = async (namespace: string, name: string) => {
    const got = await kubectl(["get", "serviceconnection", name, "-n", namespace, "-o", "json"]);
    if (got.code !== 0) return undefined;
    const obj = JSON.parse(got.stdout) as { status?: { conditions?: { type: string; reason: string }[] } };
    return obj.status?.conditions?.find((c) => c.type === "Ready")?.reason;
  };
  /** The Ready reason of every ServiceConnection in `namespace`, by name, from one listing. */
  const readyReasons = async (namespace: string) => {
    const listed = JSON.parse(
      await kubectlOk(["get", "serviceconnections", "-n", namespace, "-o", "json"]),
    ) as {
      items: { metadata: { name: string }; status?: { conditions?: { type: string; reason: string }[] } }[];
    };
    return Object.fromEntries(
      listed.items.map((c) => [
        c.metadata.name,
        c.status?.conditions?.find((k) => k.type === "Ready")?.reason,
      ]),
    );
  };

  beforeAll(async () => {
    [nsGood, nsBad, good, bad] = await Promise.all([
      freshNamespace("deadline-good"),
      freshNamespace("deadline-bad"),
      startTestSimulator(),
      startTestSimulator(),
    ]);
    await Promise.all([connect(nsGood, "good", good), connect(nsBad, "bad", bad)]);
    op = startOperator({
      simulator: good,
      namespaces: [nsGood, nsBad],
      resyncMs: RESYNC_MS,
      listingDeadlineMs: DEADLINE_MS,
      // A request timeout far past the resync period: a pass that waited for the black hole's
      // listing, or a worker that waited for one of its lookups, would wait this long.
      service: { timeoutMs: 90_000 },
      concurrency: 4,
      // "bad" and the twenty black holes share a namespace: past the default bound of 20.
      maxConnectionsPerNamespace: 32,
      // At teardown the black hole still holds probes for their deadline: nothing to wait for.
      shutdownTimeoutMs: 500,
    });
    await op.started();
    await Promise.all([
      user.create(nsGood, "shop", spec("good")),
      ...STUCK.map((n) => user.create(nsBad, n, spec("bad"))),
    ]);
    await Promise.all([user.waitReady(nsGood, "shop"), ...STUCK.map((n) => user.waitReady(nsBad, n))]);
  });

  afterAll(async () => {
    bad?.faults.set({});
    await Promise.all([
      kubectl(["delete", "deployments.dms.dev", "--all", "-n", nsGood, "--wait=false"]),
      kubectl(["delete", "deployments.dms.dev", "--all", "-n", nsBad, "--wait=false"]),
      kubectl(["delete", "serviceconnections", "--all", "-n", nsBad, "--wait=false"]),
    ]);
    await op?.stop();
    await good?.close();
    await bad?.close();
  });

  it("corrects the other tenant's drift within about one period while the black hole's resources report it", async () => {
    bad.faults.set({ latency: [{ ms: 3_600_000 }] });
    const shop = good.store.list().find((d) => d.name === "shop");
    good.store.drift(shop?.id ?? "", { source_config: { resource_spec: { min_scale: 1, max_scale: 9 } } });

    // The next pass of the good tenant's connection, whatever the black hole does meanwhile.
    const corrected = await user.waitForEvent(nsGood, "shop", "DriftCorrected", 2 * RESYNC_MS + 5_000);
    expect(corrected.note).toContain("sourceConfig.resourceSpec.maxScale differed from the spec");
    expect(corrected.note).not.toContain("9");
    expect(maxScaleOf(good, "shop")).toBe(2);

    for (const name of STUCK) {
      const stuck = await user.waitFor(
        nsBad,
        name,
        (o) => hasCondition(o, "Synced", "False", "ListingDeadlineExceeded"),
        "ListingDeadlineExceeded",
        2 * RESYNC_MS + 5_000,
      );
      const message = conditionOf(stuck, "Synced")?.message ?? "";
      expect(message).toContain(`ServiceConnection ${nsBad}/bad`);
      expect(message).toContain("GET /v2/deployments");
      expect(message).toContain("listing deadline of 2s");
      // Ready still shows what the service last said: nothing is known to have changed there.
      expect(hasCondition(stuck, "Ready", "True")).toBe(true);
    }
  });

  it("reports an edit on the black hole's tenant at once, with no call that would hold a worker", async () => {
    const edited = await user.patch(nsBad, "b0", {
      spec: { sourceConfig: { resourceSpec: { maxScale: 3 } } },
    });
    const reported = await user.waitFor(
      nsBad,
      "b0",
      (o) =>
        hasCondition(o, "Synced", "False", "ListingDeadlineExceeded") &&
        o?.status?.observedGeneration === edited.metadata.generation,
      "the edit reported as ListingDeadlineExceeded",
      10_000,
    );
    expect(hasCondition(reported, "Reconciling", "True", "ListingDeadlineExceeded")).toBe(true);
    // The other tenant is served meanwhile: a change there goes through.
    await user.patch(nsGood, "shop", { spec: { sourceConfig: { resourceSpec: { maxScale: 4 } } } });
    await user.waitFor(
      nsGood,
      "shop",
      () => maxScaleOf(good, "shop") === 4,
      "the good tenant's edit applied",
    );
  });

  it("checks a new, healthy connection at once while twenty connections to the black hole are probed", async () => {
    const holes = Array.from({ length: 20 }, (_, i) => connection(nsBad, `hole-${i}`, bad, "bad"));
    const appliedAt = Date.now();
    await kubectlOk(["apply", "-f", "-"], {
      input: JSON.stringify({ apiVersion: "v1", kind: "List", items: holes }),
    });
    await kubectlOk(["apply", "-f", "-"], {
      input: JSON.stringify(connection(nsGood, "late", good, "good")),
    });
    // Each probe of the black hole waits for its deadline; none holds back the healthy one's.
    await waitFor(async () => (await readyReason(nsGood, "late")) === "Connected", {
      description: "the healthy connection Connected",
      timeoutMs: 30_000,
    });
    // At once, not after a round of the black hole's: its probe came before the black hole's
    // first probe past its namespace's share, which starts only once one of the share's probes
    // ended at its deadline (an order, whatever the machine's load).
    const probes = (sim: RunningSimulator) =>
      sim.requests({ since: appliedAt }).filter((r) => r.url.startsWith("/v2/auth/providers"));
    await waitFor(() => probes(bad).length > CONNECTION_CHECKS_PER_NAMESPACE, {
      description: "a probe of the black hole past its namespace's share",
      timeoutMs: 30_000,
    });
    const [healthy] = probes(good);
    expect(healthy?.at).toBeLessThan(probes(bad)[CONNECTION_CHECKS_PER_NAMESPACE]?.at ?? 0);
    // The black-hole namespace's checks run CONNECTION_CHECKS_PER_NAMESPACE at a time: twenty
    // take that many rounds of the 10 s probe deadline.
    const rounds = Math.ceil(holes.length / CONNECTION_CHECKS_PER_NAMESPACE);
    await waitFor(async () => (await readyReason(nsBad, "hole-19")) === "Unreachable", {
      description: "a black-hole connection Unreachable at its probe deadline, its namespace's in turn",
      timeoutMs: rounds * 10_000 + 15_000,
    });
    // What a user sees once the probes ended: the healthy one Connected, every black hole Unreachable.
    expect(await readyReason(nsGood, "late")).toBe("Connected");
    const reasons = await readyReasons(nsBad);
    for (const hole of holes) expect(reasons[hole.metadata.name], hole.metadata.name).toBe("Unreachable");
  }, 90_000);

  it("heals once the service answers again, and applies the edit held meanwhile", async () => {
    bad.faults.set({});
    for (const name of STUCK)
      await user.waitFor(
        nsBad,
        name,
        (o) => hasCondition(o, "Synced", "True"),
        "Synced again",
        2 * RESYNC_MS,
      );
    expect(maxScaleOf(bad, "b0")).toBe(3);
    expect(maxScaleOf(bad, "b1")).toBe(2);
  });
});
