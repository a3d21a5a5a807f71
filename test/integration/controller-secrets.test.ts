// Secrets by reference: a rotated Kubernetes Secret reaches the service in one PATCH, with no
// value anywhere the user can read (status, events, logs); a missing Secret or key stops the
// resource before any call to the service, and creating it later heals the resource through the
// Secret watch. One resource whose secret values are over the limit is stopped alone, reading
// its Secret once per reconcile, while another namespace's resource converges.
import { describe, expect, it } from "vitest";
import type { DeploymentSpec } from "../../src/crd/schema.ts";
import { freshNamespace, waitFor } from "../support/cluster.ts";
import { startOperator, startTestSimulator, TEST_API_KEY, type TestOperator } from "../support/operator.ts";
import { ClusterUser, conditionOf, hasCondition } from "../support/resources.ts";
import { useScenarios } from "../support/scenario.ts";

const FIRST = "sk-first-0f3a9c5d7e1b";
const SECOND = "sk-second-8b2e4d6f0a1c";

const agent = (secrets: DeploymentSpec["secrets"]): DeploymentSpec => ({
  source: "internal_docker",
  sourceRevisionConfig: { imageUri: "registry.example.com/agent:1" },
  secrets,
});
const spec = (secret: string, key: string): DeploymentSpec =>
  agent([{ name: "OPENAI_API_KEY", valueFrom: { secretKeyRef: { name: secret, key } } }]);

describe("controller: secrets", () => {
  const scenarios = useScenarios();

  it("sends a rotated Secret value in one PATCH and never shows a value", async () => {
    const s = await scenarios.start("ctl-rotate");
    await s.user.putSecret(s.namespace, "agent-secrets", { openai: FIRST });
    await s.user.create(s.namespace, "rotating", spec("agent-secrets", "openai"));
    const first = await s.user.waitReady(s.namespace, "rotating");
    const id = first.status?.deploymentId ?? "";
    // Keyed with the install key, which the operator created in its namespace: no offline guess.
    const digest = await s.user.secretDigest(s.namespace);
    expect(first.status?.appliedSecretsHash).toMatch(/^hmac-sha256:[0-9a-f]{64}$/);
    expect(first.status?.appliedSecretsHash).toBe(digest.digest([{ name: "OPENAI_API_KEY", value: FIRST }]));

    await s.user.putSecret(s.namespace, "agent-secrets", { openai: SECOND });

    const rotated = await s.user.waitFor(
      s.namespace,
      "rotating",
      (o) => o?.status?.appliedSecretsHash === digest.digest([{ name: "OPENAI_API_KEY", value: SECOND }]),
      "the new value applied",
    );
    expect(s.sim.counters()["PATCH /v2/deployments/{deployment_id}"]).toEqual({ "200": 1 });
    // The service makes a new revision for new secret values.
    expect(s.sim.store.revisions(id)).toHaveLength(2);
    const event = await s.user.waitForEvent(s.namespace, "rotating", "Updated");
    expect(event.note).toContain("secrets: rotated OPENAI_API_KEY");
    await s.user.waitReady(s.namespace, "rotating");

    const events = await s.user.events(s.namespace, "rotating");
    const visible = [JSON.stringify(rotated), JSON.stringify(events), s.op.logs.text()].join("\n");
    for (const secret of [FIRST, SECOND, TEST_API_KEY]) expect(visible).not.toContain(secret);
  });

  it("reads no Secret in a resync once the secrets are applied, and reads it again when it changes", async () => {
    const s = await scenarios.start("ctl-secret-reads", { op: { resyncMs: 1_000 } });
    await s.user.putSecret(s.namespace, "agent-secrets", { openai: FIRST });
    await s.user.create(s.namespace, "steady", spec("agent-secrets", "openai"));
    const ready = await s.user.waitReady(s.namespace, "steady");
    expect(ready.status?.appliedSecretVersions).toMatch(/^[0-9a-f]{64}$/);
    const digest = await s.user.secretDigest(s.namespace);

    // Three resync passes (one reconcile each), counted by the API server itself.
    const gets = await s.user.requestsServed("secrets", "GET");
    const reconciles = await s.op.reconciles();
    await waitFor(async () => (await s.op.reconciles()) >= reconciles + 3, {
      description: "three resync passes",
      timeoutMs: 20_000,
    });
    expect((await s.user.requestsServed("secrets", "GET")) - gets).toBe(0);

    // A new value: the watch sees a new resourceVersion, and the reconcile reads it.
    await s.user.putSecret(s.namespace, "agent-secrets", { openai: SECOND });
    await s.user.waitFor(
      s.namespace,
      "steady",
      (o) => o?.status?.appliedSecretsHash === digest.digest([{ name: "OPENAI_API_KEY", value: SECOND }]),
      "the new value applied",
    );
    expect(await s.user.requestsServed("secrets", "GET")).toBeGreaterThan(gets);
  });

  it("names a missing Secret and key, sends nothing, and heals when the Secret appears", async () => {
    const s = await scenarios.start("ctl-missing");
    // Past the start-up listing every operator makes, the service must hear nothing.
    await s.op.started();
    s.sim.resetCounters();
    await s.user.create(s.namespace, "waiting-for-secret", spec("late-secret", "token"));

    const missing = await s.user.waitFor(
      s.namespace,
      "waiting-for-secret",
      (o) => hasCondition(o, "Synced", "False", "SecretNotFound"),
      "SecretNotFound",
    );
    expect(conditionOf(missing, "Synced")?.message).toContain('key "token" of Secret "late-secret"');
    expect(hasCondition(missing, "Stalled", "True", "SecretNotFound")).toBe(true);
    const warning = await s.user.waitForEvent(s.namespace, "waiting-for-secret", "SecretNotFound");
    expect(warning.type).toBe("Warning");

    // The Secret appears without the key: the watch brings the resource back, still stopped.
    const before = await s.op.reconciles();
    await s.user.putSecret(s.namespace, "late-secret", { other: FIRST });
    await waitFor(async () => (await s.op.reconciles()) > before, { description: "a reconcile" });
    const stillMissing = await s.user.get(s.namespace, "waiting-for-secret");
    expect(hasCondition(stillMissing, "Synced", "False", "SecretNotFound")).toBe(true);
    expect(s.sim.counters()).toEqual({});

    await s.user.putSecret(s.namespace, "late-secret", { other: FIRST, token: SECOND });

    const healed = await s.user.waitReady(s.namespace, "waiting-for-secret");
    expect(conditionOf(healed, "Stalled")).toBeUndefined();
    expect(s.sim.counters()["POST /v2/deployments"]).toEqual({ "201": 1 });
    const digest = await s.user.secretDigest(s.namespace);
    expect(healed.status?.appliedSecretsHash).toBe(
      digest.digest([{ name: "OPENAI_API_KEY", value: SECOND }]),
    );
    expect(s.op.logs.text()).not.toContain(SECOND);
  });

  it("stops a resource whose 200 entries read one 700 KB Secret, one GET per reconcile, while another namespace converges", async () => {
    const [crowded, neighbour] = [await freshNamespace("ctl-budget-a"), await freshNamespace("ctl-budget-b")];
    const sim = await startTestSimulator();
    const op = startOperator({ simulator: sim, namespaces: [crowded, neighbour] });
    scenarios.defer(() => op.stop().then(() => sim.close()));
    const user = new ClusterUser();
    await user.putSecret(crowded, "big", { blob: "x".repeat(700_000) });
    await op.started();
    const gets = await user.requestsServed("secrets", "GET");
    const reconciles = await deploymentReconciles(op);

    const entries = Array.from({ length: 200 }, (_, i) => ({
      name: `S_${i}`,
      valueFrom: { secretKeyRef: { name: "big", key: "blob" } },
    }));
    await user.create(crowded, "crowded", agent(entries));
    await user.create(neighbour, "neighbour", agent([{ name: "OPENAI_API_KEY", value: FIRST }]));

    const stopped = await user.waitFor(
      crowded,
      "crowded",
      (o) => hasCondition(o, "Synced", "False", "SecretsTooLarge"),
      "SecretsTooLarge",
    );
    expect(conditionOf(stopped, "Synced")?.message).toMatch(
      /^the secret values of spec\.secrets come to 140,000,000 bytes, more than the limit of 1,048,576 \(--max-secret-bytes\): /,
    );
    expect(hasCondition(stopped, "Stalled", "True", "SecretsTooLarge")).toBe(true);
    expect((await user.waitForEvent(crowded, "crowded", "SecretsTooLarge")).type).toBe("Warning");
    await user.waitReady(neighbour, "neighbour");
    // The neighbour's inline value costs no Secret GET: those counted are the crowded resource's,
    // at most one per reconcile (one per entry would be 200 for each).
    const read = (await user.requestsServed("secrets", "GET")) - gets;
    expect(read).toBeGreaterThanOrEqual(1);
    expect(read).toBeLessThanOrEqual((await deploymentReconciles(op)) - reconciles);
    expect(sim.counters()["POST /v2/deployments"]).toEqual({ "201": 1 });

    // A new value: the Secret watch brings the resource back for exactly one reconcile, one GET.
    const before = await user.requestsServed("secrets", "GET");
    await user.putSecret(crowded, "big", { blob: "y".repeat(650_000) });
    await user.waitFor(
      crowded,
      "crowded",
      (o) => conditionOf(o, "Synced")?.message?.includes("come to 130,000,000 bytes") === true,
      "the new size reported",
    );
    expect((await user.requestsServed("secrets", "GET")) - before).toBe(1);
    expect(sim.counters()["POST /v2/deployments"]).toEqual({ "201": 1 });
  });
});

/** Reconciles of Deployment resources finished so far, from the operator's own metrics. */
async function deploymentReconciles(op: TestOperator): Promise<number> {
  const metric = await op.operator.metrics.registry
    .getSingleMetric("controller_runtime_reconcile_total")
    ?.get();
  return (metric?.values ?? [])
    .filter((v) => v.labels.controller === "deployment")
    .reduce((sum, v) => sum + v.value, 0);
}
