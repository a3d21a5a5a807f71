// "Why did my build fail", answered where users look, on the real control plane: a failed build
// gives one Warning event with its log tail (a secret value the resource sends, printed by the
// build, redacted) and an excerpt in the Stalled message, read once: neither a requested
// reconcile nor a restarted operator reads or reports it again. A rollout past
// spec.rolloutTimeout is Stalled RolloutTimeout with nothing sent again; a service without the
// logs route keeps reporting the status, without a tail, after one probe.
import { describe, expect, it } from "vitest";
import { registerLogsCommand } from "../../src/commands/logs-command.ts";
import type { DeploymentSpec } from "../../src/crd/schema.ts";
import { runCli } from "../support/cli.ts";
import { testKubeconfigPath } from "../support/cluster.ts";
import { startOperator, TEST_API_KEY } from "../support/operator.ts";
import { conditionOf, hasCondition } from "../support/resources.ts";
import { type Scenario, useScenarios, witness } from "../support/scenario.ts";

const LOGS = "GET /v2/deployments/{deployment_id}/revisions/{revision_id}/logs";
const SECRET_VALUE = "pg-pass-7c1d9e0b3a";

const spec: DeploymentSpec = {
  source: "internal_docker",
  sourceRevisionConfig: { imageUri: "registry.example.com/agent:1" },
  secrets: [{ name: "DB_PASSWORD", valueFrom: { secretKeyRef: { name: "agent-db", key: "password" } } }],
};
const image = (tag: string) => ({
  spec: { sourceRevisionConfig: { imageUri: `registry.example.com/agent:${tag}` } },
});
const served = (s: Scenario, route: string) =>
  Object.values(s.sim.counters()[route] ?? {}).reduce((a, b) => a + b, 0);

describe("controller: failure evidence", () => {
  const scenarios = useScenarios();

  /** A resource sending the Secret's value, Ready, whose next revision fails at `phase`. */
  async function failing(s: Scenario, name: string, phase: "build" | "deploy") {
    await s.user.putSecret(s.namespace, "agent-db", { password: SECRET_VALUE });
    await s.user.create(s.namespace, name, spec);
    const ready = await s.user.waitReady(s.namespace, name);
    s.sim.store.drift(ready.status?.deploymentId ?? "", { fail_revisions: phase });
    await s.user.patch(s.namespace, name, image("2"));
    return s.user.waitFor(
      s.namespace,
      name,
      (o) => hasCondition(o, "Stalled", "True", "RevisionFailed"),
      "Stalled RevisionFailed",
    );
  }

  it("a failed build: one Warning with the redacted tail, the excerpt in Stalled, never again", async () => {
    const s = await scenarios.start("evidence-build");
    const failed = await failing(s, "builder", "build");
    const latest = failed.status?.latestRevisionId ?? "";
    const warning = await s.user.waitForEvent(s.namespace, "builder", "RevisionFailed");
    expect(warning.type).toBe("Warning");
    expect(warning.note).toContain(`revision ${latest} of the service's deployment`);
    expect(warning.note).toContain("BUILD_FAILED: it will not go live; last build log lines:");
    expect(warning.note).toContain("ERROR error: build failed");
    // The build printed the value the resource sends: the event shows it redacted.
    expect(warning.note).toContain("env: DB_PASSWORD=***");
    expect(warning.note).not.toContain(SECRET_VALUE);
    expect(Buffer.byteLength(warning.note)).toBeLessThanOrEqual(1024);
    const stalled = conditionOf(failed, "Stalled")?.message ?? "";
    expect(stalled).toContain(`revision ${latest} BUILD_FAILED`);
    expect(stalled).toMatch(/Last build log lines: .*error: build failed/);
    expect(JSON.stringify(failed.status)).not.toContain(SECRET_VALUE);
    expect(failed.status?.failedRevisionLog).toMatchObject({
      revisionId: latest,
      reason: "RevisionFailed",
      type: "build",
    });
    expect(served(s, LOGS)).toBe(1);

    // dms-operator logs <resource> reads the resource from the cluster, and its latest revision's
    // build log (the one that failed) through the resource's connection.
    const printed = await runCli(
      ["logs", "builder", "-n", s.namespace, "--kubeconfig", testKubeconfigPath()],
      {
        commands: [registerLogsCommand],
        env: { DMS_BASE_URL: s.sim.url, DMS_API_KEY: TEST_API_KEY },
      },
    );
    expect(printed.stderr).toBe("");
    expect(printed.stdout.trimEnd().split("\n").at(-1)).toMatch(/ ERROR error: build failed/);
    expect(served(s, LOGS)).toBe(2);

    // A requested reconcile reads the revision again, not its log.
    await s.user.annotate(s.namespace, "builder", {
      "dms.dev/reconcile-requested-at": "2025-06-01T10:00:00Z",
    });
    await s.user.waitFor(
      s.namespace,
      "builder",
      (o) => o?.status?.lastHandledReconcileAt === "2025-06-01T10:00:00Z",
      "the requested reconcile handled",
    );
    // A restarted operator reconciles everything at its start: the status says the log was read.
    await s.op.stop();
    const restarted = startOperator({ simulator: s.sim, namespaces: [s.namespace] });
    scenarios.defer(() => restarted.stop());
    await s.user.annotate(s.namespace, "builder", {
      "dms.dev/reconcile-requested-at": "2025-06-01T11:00:00Z",
    });
    await s.user.waitFor(
      s.namespace,
      "builder",
      (o) => o?.status?.lastHandledReconcileAt === "2025-06-01T11:00:00Z",
      "the restarted operator's reconcile",
    );
    // Stalled: nothing polls it, while another resource came up and was polled meanwhile.
    await witness(s, "witness", { ...spec, secrets: [] });
    expect(served(s, LOGS)).toBe(2);
    const events = await s.user.events(s.namespace, "builder");
    expect(events.filter((e) => e.reason === "RevisionFailed").map((e) => e.count)).toEqual([1]);
  });

  it("a rollout past spec.rolloutTimeout: Stalled RolloutTimeout with the revision's status, nothing sent again", async () => {
    // Revisions take ten minutes here: the first one is still being built after two seconds.
    const s = await scenarios.start("evidence-timeout", {
      sim: { timing: { revisionActiveAfterMs: 600_000 } },
    });
    await s.user.create(s.namespace, "slow", { ...spec, secrets: [], rolloutTimeout: "2s" });
    const timedOut = await s.user.waitFor(
      s.namespace,
      "slow",
      (o) => hasCondition(o, "Stalled", "True", "RolloutTimeout"),
      "Stalled RolloutTimeout",
    );
    expect(hasCondition(timedOut, "Ready", "False", "RolloutTimeout")).toBe(true);
    expect(hasCondition(timedOut, "Synced", "True")).toBe(true);
    expect(timedOut.status?.conditions?.some((c) => c.type === "Reconciling")).toBe(false);
    expect(conditionOf(timedOut, "Stalled")?.message).toMatch(
      /^revision \S+ \((CREATING|QUEUED)\) has not gone live within spec\.rolloutTimeout 2s; no revision is active\. Nothing is sent again/,
    );
    const warning = await s.user.waitForEvent(s.namespace, "slow", "RolloutTimeout");
    expect(warning.note).toContain("has not gone live within spec.rolloutTimeout 2s");
    expect(warning.note).toContain("last build log lines:");
    expect(s.sim.counters()["POST /v2/deployments"]).toEqual({ "201": 1 });
    expect(s.sim.counters()["PATCH /v2/deployments/{deployment_id}"]).toBeUndefined();
    expect(served(s, LOGS)).toBe(1);
  });

  it("a service without the logs route: the status without a tail, after one probe", async () => {
    const s = await scenarios.start("evidence-no-route", { sim: { logsRoute: "missing" } });
    const failed = await failing(s, "plain", "build");
    const warning = await s.user.waitForEvent(s.namespace, "plain", "RevisionFailed");
    expect(warning.note).toMatch(/BUILD_FAILED: it will not go live; the service has no logs route$/);
    expect(conditionOf(failed, "Stalled")?.message).not.toContain("log lines");
    // The next failed revision of the same connection is reported without probing again.
    await s.user.patch(s.namespace, "plain", image("3"));
    await s.user.waitFor(
      s.namespace,
      "plain",
      (o) =>
        hasCondition(o, "Stalled", "True", "RevisionFailed") &&
        o?.status?.latestRevisionId !== failed.status?.latestRevisionId,
      "the next revision failed",
    );
    expect(s.sim.counters()["GET (unmatched)"]).toEqual({ "404": 1 });
    expect(s.op.logs.find("no revision logs route")).toHaveLength(1);
  });
});
