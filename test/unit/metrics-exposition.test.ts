// The text /metrics serves, read as strictly as Prometheus's scraper reads it (one bad line and
// the whole scrape is rejected): tenant text in a label value escaped, each family's HELP and TYPE
// once and before its samples, histograms' buckets cumulative up to +Inf and equal to _count,
// with _sum beside them; the same for a scrape of chosen families (`/metrics?name=`).
// test/tools/metrics-exposition.test.ts has promtool read the same text.
import { describe, expect, it } from "vitest";
import {
  type Family,
  populatedMetrics,
  readExposition,
  scrape,
  TENANT_VALUE,
} from "../support/exposition.ts";

const UNKNOWN = "dms_service_unknown_values_total";

/** The problems of each histogram of `families`: buckets not cumulative, no +Inf, no _sum or _count. */
function histogramProblems(families: Map<string, Family>): string[] {
  const problems: string[] = [];
  for (const [name, f] of families) {
    if (f.type !== "histogram") continue;
    const series = new Map<string, Family["samples"]>();
    for (const s of f.samples) {
      const { le: _, ...rest } = s.labels;
      const key = JSON.stringify(rest);
      series.set(key, [...(series.get(key) ?? []), s]);
    }
    for (const [key, samples] of series) {
      const buckets = samples.filter((s) => s.name === `${name}_bucket`);
      const les = buckets.map((b) => Number((b.labels.le ?? "").replace("+Inf", "Infinity")));
      const count = samples.find((s) => s.name === `${name}_count`)?.value;
      if (buckets.at(-1)?.labels.le !== "+Inf") problems.push(`${name}${key}: no +Inf bucket last`);
      if (les.some((le, i) => i > 0 && !(le > (les[i - 1] ?? 0))))
        problems.push(`${name}${key}: le not increasing`);
      if (buckets.some((b, i) => i > 0 && b.value < (buckets[i - 1]?.value ?? 0)))
        problems.push(`${name}${key}: buckets not cumulative`);
      if (count === undefined || buckets.at(-1)?.value !== count)
        problems.push(`${name}${key}: +Inf is not _count`);
      if (!samples.some((s) => s.name === `${name}_sum`)) problems.push(`${name}${key}: no _sum`);
    }
  }
  return problems;
}

describe("the text of /metrics", () => {
  it("escapes a tenant's text in a label value and keeps each family whole, HELP and TYPE once", async () => {
    const families = readExposition(await scrape(populatedMetrics()));
    expect(families.size).toBeGreaterThan(30);
    for (const [name, f] of families) {
      expect(f.help, name).not.toBe("");
      expect(["counter", "gauge", "histogram", "summary"], name).toContain(f.type);
    }
    // Cut at 64 UTF-16 units: the lone half of the emoji's pair is sent as U+FFFD.
    const cut = `${TENANT_VALUE.slice(0, 63)}\ufffd`;
    expect(families.get(UNKNOWN)?.samples).toEqual([
      {
        name: UNKNOWN,
        labels: { connection: "ServiceConnection/team-a/prod", field: "deployment.status", value: cut },
        value: 1,
      },
    ]);
    // Every family the dashboard and the alerts read has series here.
    for (const name of [
      "dms_connection_ready",
      "dms_resources_stalled",
      "dms_external_changes_total",
      "workqueue_depth",
    ])
      expect(families.get(name)?.samples.length, name).toBeGreaterThan(0);
  });

  it("has histograms whose buckets are cumulative up to +Inf, which is _count, beside _sum", async () => {
    const families = readExposition(await scrape(populatedMetrics()));
    const histograms = [...families].filter(([, f]) => f.type === "histogram").map(([n]) => n);
    expect(histograms).toEqual(
      expect.arrayContaining([
        "controller_runtime_reconcile_time_seconds",
        "workqueue_queue_duration_seconds",
        "dms_service_request_duration_seconds",
      ]),
    );
    expect(histogramProblems(families)).toEqual([]);
    const reconciles = families.get("controller_runtime_reconcile_time_seconds")?.samples ?? [];
    expect(reconciles.find((s) => s.labels.le === "+Inf")?.value).toBe(5);
    expect(reconciles.find((s) => s.labels.le === "0.005")?.value).toBe(1);
  });

  it("keeps each family whole in a scrape of chosen ones (/metrics?name=), a tenant's text escaped", async () => {
    const names = [UNKNOWN, "dms_service_request_duration_seconds", "dms_connection_ready", UNKNOWN];
    const families = readExposition(await scrape(populatedMetrics(), names));
    expect([...families.keys()]).toEqual([
      UNKNOWN,
      "dms_service_request_duration_seconds",
      "dms_connection_ready",
    ]);
    expect(histogramProblems(families)).toEqual([]);
  });

  it("the reader rejects what the scraper rejects", () => {
    const read = (text: string) => () => readExposition(Buffer.from(text));
    expect(read('# TYPE a counter\na{v="x\ny"} 1\n')).toThrow(/not a sample/);
    expect(read('# TYPE a counter\na{v="x"y"} 1\n')).toThrow(/not a sample/);
    expect(read('# TYPE a counter\na{v="x\\y"} 1\n')).toThrow(/not a sample/);
    expect(read("# TYPE a counter\n# TYPE a counter\na 1\n")).toThrow(/a second TYPE/);
    expect(read("# HELP a x\na 1\n# HELP b y\nb 1\n# HELP a x\n")).toThrow(/apart/);
    expect(() =>
      readExposition(Buffer.from([0x61, 0x7b, 0x76, 0x3d, 0x22, 0xff, 0x22, 0x7d, 0x20, 0x31, 0x0a])),
    ).toThrow();
    expect(
      read('# HELP a x\n# TYPE a counter\na{v="q\\"\\n\\\\"} 1\n')().get("a")?.samples[0]?.labels.v,
    ).toBe('q"\n\\');
  });
});
