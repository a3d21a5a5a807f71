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
import { type AlertRule, alertGroups } from "../support/promql.ts";

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
      rule.expr = rule.expr.replace(from, to);
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
