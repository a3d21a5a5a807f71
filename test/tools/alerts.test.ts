// The operator's alerts, checked by Prometheus's own promtool (built from Go modules into the
// tool cache, see test/controlplane/binaries.ts): the PrometheusRule the chart renders
// (metrics.prometheusRule.enabled) and the one of manifests/components/alerts hold the same
// rules, which `promtool check rules` accepts and `promtool test rules` fires on the series of
// test/tools/alerts.promtool-test.yaml (and not on the ones that must not). Each alert carries
// its runbook, a section of docs/operating/alerts.md.
import { execFile } from "node:child_process";
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parse, stringify } from "yaml";
import { ensureGoTool, PROMTOOL } from "../controlplane/binaries.ts";
import { helmBinary, type K8sObject, renderChart } from "../support/helm-chart.ts";
import { type AlertRule, alertGroups, dashboard } from "../support/promql.ts";

const ROOT = join(import.meta.dirname, "..", "..");
const COMPONENT = join(ROOT, "manifests", "components", "alerts", "prometheus-rule.yaml");
const PROMTOOL_TESTS = join(import.meta.dirname, "alerts.promtool-test.yaml");
const RUNBOOKS = join(ROOT, "docs", "operating", "alerts.md");
const RUNBOOK_BASE = "https://github.com/dms-dev/dms-operator/blob/main/docs/operating/alerts.md";

type Groups = { name: string; rules: AlertRule[] }[];
const specOf = (rule: K8sObject | undefined) => (rule as unknown as { spec: { groups: Groups } }).spec;

/** `promtool <args>`: exit code and output (a non-zero exit is a result). */
async function promtool(binary: string, args: string[], cwd: string) {
  try {
    const { stdout, stderr } = await promisify(execFile)(binary, args, { cwd, timeout: 120_000 });
    return { code: 0, out: `${stdout}${stderr}` };
  } catch (error) {
    const e = error as { code?: number; stdout?: string; stderr?: string };
    return { code: typeof e.code === "number" ? e.code : 1, out: `${e.stdout ?? ""}${e.stderr ?? ""}` };
  }
}

describe("the operator's alerts", { timeout: 120_000 }, () => {
  let promtoolBin: string;
  let helmBin: string;
  let chartGroups: Groups;
  let componentGroups: Groups;
  const dirs: string[] = [];

  beforeAll(async () => {
    [promtoolBin, helmBin] = await Promise.all([ensureGoTool(PROMTOOL), helmBinary()]);
    const objects = await renderChart(helmBin, {
      namespace: "dms-system",
      set: ["metrics.prometheusRule.enabled=true"],
    });
    chartGroups = specOf(objects.find((o) => o.kind === "PrometheusRule")).groups;
    componentGroups = (parse(readFileSync(COMPONENT, "utf8")) as { spec: { groups: Groups } }).spec.groups;
  }, 1_800_000);

  afterAll(() => {
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });

  /** A directory holding `groups` as prometheus-rules.yaml and the promtool tests beside it. */
  const ruleDir = (groups: Groups) => {
    const dir = mkdtempSync(join(tmpdir(), "dms-alerts-"));
    dirs.push(dir);
    writeFileSync(join(dir, "prometheus-rules.yaml"), stringify({ groups }));
    copyFileSync(PROMTOOL_TESTS, join(dir, "tests.yaml"));
    return dir;
  };

  it("are the same in the chart's PrometheusRule, manifests/components/alerts and the rule file", () => {
    expect(chartGroups).toEqual(alertGroups());
    expect(componentGroups).toEqual(alertGroups());
    expect(chartGroups[0]?.rules.map((r) => r.alert)).toEqual([
      "DmsOperatorDown",
      "DmsOperatorNoLeader",
      "DmsOperatorReconcileErrors",
      "DmsConnectionNotReady",
      "DmsResourcesStalled",
      "DmsServiceRateLimited",
      "DmsRolloutHeldTooLong",
    ]);
  });

  it.for([
    ["the chart's", () => chartGroups],
    ["the component's", () => componentGroups],
  ] as const)("pass `promtool check rules` and `promtool test rules`: %s", async ([, groups], { expect }) => {
    const dir = ruleDir(groups());
    const check = await promtool(promtoolBin, ["check", "rules", "prometheus-rules.yaml"], dir);
    expect(check.out).toContain("SUCCESS: 7 rules found");
    expect(check.code, check.out).toBe(0);
    const test = await promtool(promtoolBin, ["test", "rules", "tests.yaml"], dir);
    expect(test.code, test.out).toBe(0);
    expect(test.out).toContain("SUCCESS");
  });

  it.for([
    // The healthy 5% would now fire.
    ["DmsOperatorReconcileErrors", "> 0.1", "> 0.01"],
    // The healthy day's wait would now fire.
    ["DmsRolloutHeldTooLong", "> 15 * 86400", "> 3600"],
    // Only the failed revisions: the stalled rollout before them no longer counts.
    ["DmsResourcesStalled", "dms_resources_stalled{", 'dms_resources_stalled{reason="RevisionFailed", '],
  ] as const)(
    "fail `promtool test rules` when %s's expression changes (%s to %s): the tests can fail",
    async ([alert, from, to]) => {
      const loosened = structuredClone(alertGroups());
      const rule = loosened[0]?.rules.find((r) => r.alert === alert);
      if (!rule?.expr.includes(from)) throw new Error(`no ${alert} reading ${from}`);
      rule.expr = rule.expr.replaceAll(from, to);
      const dir = ruleDir(loosened);
      const test = await promtool(promtoolBin, ["test", "rules", "tests.yaml"], dir);
      expect(test.code).not.toBe(0);
      expect(test.out).toContain(alert);
    },
  );

  it("are checked by a promtool that says which Prometheus release it is", async () => {
    const version = await promtool(promtoolBin, ["--version"], tmpdir());
    expect(version.code, version.out).toBe(0);
    expect(version.out).toMatch(/^promtool, version 3\.\d+\.\d+ /);
  });

  it("carry a summary, a description, a severity and a runbook_url pointing to a section of docs/operating/alerts.md", () => {
    const headings = new Set(
      [...readFileSync(RUNBOOKS, "utf8").matchAll(/^## (\S+)$/gm)].map((m) => (m[1] ?? "").toLowerCase()),
    );
    for (const rule of alertGroups().flatMap((g) => g.rules)) {
      expect(rule.annotations?.summary, rule.alert).toBeTruthy();
      expect(rule.annotations?.description, rule.alert).toBeTruthy();
      expect(["critical", "warning"], rule.alert).toContain(rule.labels?.severity);
      expect(rule.annotations?.runbook_url, rule.alert).toBe(`${RUNBOOK_BASE}#${rule.alert.toLowerCase()}`);
      expect(headings.has(rule.alert.toLowerCase()), `a "## ${rule.alert}" section`).toBe(true);
      expect(rule.expr, rule.alert).toContain('job="dms-operator-metrics"');
    }
  });

  it("follow the release's job, runbook base, alert labels and leader election in the chart", async () => {
    const objects = await renderChart(helmBin, {
      release: "shard-b",
      namespace: "team-a",
      set: [
        "metrics.prometheusRule.enabled=true",
        "metrics.prometheusRule.labels.release=kube-prometheus-stack",
        "metrics.prometheusRule.additionalAlertLabels.team=platform",
        "metrics.prometheusRule.runbookBaseUrl=https://runbooks.corp.example/dms/",
        "leaderElection.enabled=false",
        "replicas=1",
      ],
    });
    const rule = objects.find((o) => o.kind === "PrometheusRule");
    expect(rule?.metadata).toMatchObject({
      name: "shard-b-dms-operator",
      namespace: "team-a",
      labels: { release: "kube-prometheus-stack" },
    });
    const rules = specOf(rule).groups.flatMap((g) => g.rules);
    // Without leader election no replica reports a Lease.
    expect(rules.map((r) => r.alert)).not.toContain("DmsOperatorNoLeader");
    expect(rules).toHaveLength(6);
    for (const r of rules) {
      expect(r.expr).toContain('job="shard-b-dms-operator-metrics"');
      expect(r.expr).not.toContain('job="dms-operator-metrics"');
      expect(r.labels).toEqual({ severity: expect.any(String), team: "platform" });
      expect(r.annotations?.runbook_url).toBe(`https://runbooks.corp.example/dms#${r.alert.toLowerCase()}`);
    }
    // The job is the ServiceMonitor's: the name of the Service it selects.
    const service = (
      await renderChart(helmBin, {
        release: "shard-b",
        namespace: "team-a",
        set: ["metrics.serviceMonitor.enabled=true"],
      })
    ).find((o) => o.kind === "Service");
    expect(service?.metadata.name).toBe("shard-b-dms-operator-metrics");
  });
});

// The dashboard's counts of resources, evaluated by promtool on the series two installs export:
// an unsharded one, whose leader and standby each count every resource (one count), and a
// sharded one, whose replicas each count their own share and export dms_shard_lease_held (the
// sum of the shares).
describe("the dashboard's counts of resources", { timeout: 120_000 }, () => {
  const UNSHARDED = "dms-operator-metrics";
  const SHARDED = "shards-dms-operator-metrics";
  /** Per pod of each job: its instance, whether it is sharded, and the gauges it exports. */
  const pods = [
    { job: UNSHARDED, pod: "a", sharded: false, trueTrue: 10, falseTrue: 2, inProgress: 2, failed: 1 },
    { job: UNSHARDED, pod: "b", sharded: false, trueTrue: 10, falseTrue: 2, inProgress: 2, failed: 1 },
    { job: SHARDED, pod: "x", sharded: true, trueTrue: 4, falseTrue: 1, inProgress: 1, failed: 1 },
    { job: SHARDED, pod: "y", sharded: true, trueTrue: 3, falseTrue: 0, inProgress: 1, failed: 0 },
    { job: SHARDED, pod: "z", sharded: true, trueTrue: 5, falseTrue: 1, inProgress: 0, failed: 2 },
  ];
  const series = pods.flatMap((p, i) => {
    const labels = `job="${p.job}", namespace="dms-system", pod="${p.pod}", instance="10.0.0.${i + 1}:8443"`;
    return [
      [`dms_resources{${labels}, ready="True", synced="True"}`, p.trueTrue],
      [`dms_resources{${labels}, ready="False", synced="True"}`, p.falseTrue],
      [`dms_rollouts{${labels}, state="in_progress"}`, p.inProgress],
      [`dms_resources_stalled{${labels}, reason="RevisionFailed"}`, p.failed],
      [`dms_resources_stalled{${labels}, reason="Other"}`, 0],
      ...(p.sharded ? [[`dms_shard_lease_held{${labels}, replica="${p.pod}"}`, 1]] : []),
    ].map(([s, v]) => ({ series: String(s), values: `${v}x10` }));
  });
  const panel = (title: string) => {
    const expr = dashboard().panels.find((p) => p.title === title)?.targets?.[0]?.expr;
    if (!expr) throw new Error(`no panel "${title}"`);
    return expr;
  };
  /** The expected samples of each panel for $job selecting the unsharded, the sharded, or both jobs. */
  const expected = {
    "Resources by Ready/Synced": [
      { labels: '{ready="True", synced="True"}', value: [10, 12, 22] },
      { labels: '{ready="False", synced="True"}', value: [2, 2, 4] },
    ],
    "Rollouts in progress, failed and held": [{ labels: '{state="in_progress"}', value: [2, 2, 4] }],
    "Resources Stalled by reason": [{ labels: '{reason="RevisionFailed"}', value: [1, 3, 4] }],
  };

  it("count an unsharded install's resources once and add up a sharded install's shares", async ({
    expect,
  }) => {
    const bin = await ensureGoTool(PROMTOOL);
    const jobs = [UNSHARDED, SHARDED, `${UNSHARDED}|${SHARDED}`];
    const tests = Object.entries(expected).flatMap(([title, samples]) =>
      jobs.map((job, j) => ({
        expr: panel(title).replaceAll("$job", job),
        eval_time: "5m",
        exp_samples: samples.map((s) => ({ labels: s.labels, value: s.value[j] })),
      })),
    );
    const dir = mkdtempSync(join(tmpdir(), "dms-dashboard-"));
    try {
      writeFileSync(join(dir, "rules.yaml"), stringify({ groups: [] }));
      writeFileSync(
        join(dir, "tests.yaml"),
        stringify({
          rule_files: ["rules.yaml"],
          evaluation_interval: "1m",
          tests: [{ interval: "1m", input_series: series, promql_expr_test: tests }],
        }),
      );
      const test = await promtool(bin, ["test", "rules", "tests.yaml"], dir);
      expect(test.code, test.out).toBe(0);
      expect(test.out).toContain("SUCCESS");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
