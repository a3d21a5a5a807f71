// The runbooks of docs/operating/alerts.md name only things that exist: the chart's values they
// tell to change, the annotations they tell to set, the operator's commands, the metrics and
// labels they tell to query, and the reasons they explain. A value renamed, a command dropped or
// a reason no longer set would leave an on-call engineer following a runbook to nothing.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import { COMMANDS } from "../../src/commands/registry.ts";
import { CONNECTION_REASON } from "../../src/connection/status.ts";
import * as schema from "../../src/crd/schema.ts";
import { OTHER_REASON } from "../../src/gauges/resource-metrics.ts";
import { REASON } from "../../src/reconcile/reasons.ts";
import { STALLED_REASONS } from "../../src/wiring/operator-metrics.ts";
import { metricNames, operatorLabels, unknownLabels, unknownSeries } from "../support/promql.ts";

const ROOT = join(import.meta.dirname, "..", "..");
const RUNBOOKS = readFileSync(join(ROOT, "docs", "operating", "alerts.md"), "utf8");
const VALUES = parse(readFileSync(join(ROOT, "charts", "dms-operator", "values.yaml"), "utf8")) as Record<
  string,
  unknown
>;
/** The runbooks' code spans. */
const SPANS = [...RUNBOOKS.matchAll(/`([^`\n]+)`/g)].map((m) => m[1] ?? "");

/** Whether `path` (`a.b.c`) is a key of the chart's values. */
function hasValue(path: string): boolean {
  let at: unknown = VALUES;
  for (const key of path.split(".")) {
    if (typeof at !== "object" || at === null || !(key in at)) return false;
    at = (at as Record<string, unknown>)[key];
  }
  return true;
}

describe("docs/operating/alerts.md", () => {
  it("names only values the chart has", () => {
    const paths = SPANS.filter((s) =>
      /^(config|runtime|networkPolicy|metrics|leaderElection)\.[a-zA-Z.]+$/.test(s),
    );
    expect(paths).toEqual(
      expect.arrayContaining(["config.qps", "runtime.heapSizeMiB", "metrics.prometheusRule.labels"]),
    );
    expect(paths.filter((p) => !hasValue(p))).toEqual([]);
    expect(hasValue("config.qpss")).toBe(false);
  });

  it("names only annotations the operator reads, and commands it has", () => {
    const annotations = new Set(
      (Object.values(schema) as unknown[]).filter(
        (v): v is string => typeof v === "string" && v.startsWith("dms.dev/"),
      ),
    );
    const named = [...RUNBOOKS.matchAll(/\bdms\.dev\/[a-z-]+/g)].map((m) => m[0]);
    expect(named).toContain("dms.dev/rollout-now");
    expect(named.filter((a) => !annotations.has(a))).toEqual([]);
    const commands = new Set(COMMANDS.map((c) => c.name));
    const run = [...RUNBOOKS.matchAll(/`dms-operator ([a-z-]+)/g)].map((m) => m[1] ?? "");
    expect(run).toContain("logs");
    expect(run.filter((c) => !commands.has(c))).toEqual([]);
  });

  it("queries only metrics and labels the operator exports", () => {
    const queries = SPANS.filter((s) => /^dms_[a-z_]+(\{|$| )/.test(s)).map((expr) => ({
      where: "runbook",
      expr,
    }));
    expect(queries.flatMap((q) => metricNames(q.expr))).toEqual(
      expect.arrayContaining(["dms_resources_stalled", "dms_rollouts"]),
    );
    // `dms_resources_stalled{reason}` names its label the way a matcher does.
    const asMatchers = queries.map((q) => ({ ...q, expr: q.expr.replace(/\{([a-z_]+)\}/, '{$1=""}') }));
    expect(unknownSeries(asMatchers, new Set(operatorLabels().keys()))).toEqual([]);
    expect(unknownLabels(asMatchers, operatorLabels())).toEqual([]);
  });

  it("explains the reasons the operator sets: every reason dms_resources_stalled counts apart, and only those", () => {
    const section = RUNBOOKS.slice(
      RUNBOOKS.indexOf("## DmsResourcesStalled"),
      RUNBOOKS.indexOf("## DmsServiceRateLimited"),
    );
    const rows = [...section.matchAll(/^\| (`[A-Za-z]+`(?:, `[A-Za-z]+`)*) \|/gm)].flatMap((m) =>
      [...(m[1] ?? "").matchAll(/`([A-Za-z]+)`/g)].map((r) => r[1] ?? ""),
    );
    expect(new Set(rows)).toEqual(new Set([...STALLED_REASONS, OTHER_REASON]));
    const connection = RUNBOOKS.slice(
      RUNBOOKS.indexOf("## DmsConnectionNotReady"),
      RUNBOOKS.indexOf("## DmsResourcesStalled"),
    );
    const reasons = new Set<string>([...Object.values(CONNECTION_REASON), ...Object.values(REASON)]);
    const named = [...connection.matchAll(/`([A-Z][A-Za-z]+)`/g)].map((m) => m[1] ?? "");
    expect(named).toContain("CertificateNotTrusted");
    expect(named.filter((r) => !reasons.has(r))).toEqual([]);
    expect(reasons.has(REASON.RateLimited)).toBe(RUNBOOKS.includes("`RateLimited`"));
  });
});
