// Prometheus's own reader of the text format (`promtool check metrics`, built into the tool
// cache, see test/controlplane/binaries.ts) accepts the operator's /metrics, a tenant's text in a
// label value included, whole and of chosen families (`/metrics?name=`); and rejects the line a
// label value left unescaped would make, so its acceptance says something.
import { execFile } from "node:child_process";
import { describe, expect, it } from "vitest";
import { ensureGoTool, PROMTOOL } from "../controlplane/binaries.ts";
import { populatedMetrics, scrape } from "../support/exposition.ts";

/** `promtool check metrics` of `body` on its stdin: exit code and output. */
async function checkMetrics(body: Buffer): Promise<{ code: number; out: string }> {
  const bin = await ensureGoTool(PROMTOOL);
  return new Promise((resolve) => {
    const child = execFile(bin, ["check", "metrics"], { timeout: 60_000 }, (error, stdout, stderr) => {
      const code = error ? (typeof error.code === "number" ? error.code : 1) : 0;
      resolve({ code, out: `${stdout}${stderr}` });
    });
    child.stdin?.end(body);
  });
}

/** prom-client's default gauges whose names end in `_total` (its names, not the operator's). */
const PROM_CLIENT_TOTALS = /^nodejs_active_(handles|requests|resources)_total non-counter /;

/** The lint problems promtool names, but those of prom-client's own defaults. */
function lintProblems(out: string): string[] {
  return out.split("\n").filter((line) => line.trim() !== "" && !PROM_CLIENT_TOTALS.test(line));
}

describe("promtool check metrics", { timeout: 1_800_000 }, () => {
  it("reads the operator's /metrics whole, a tenant's quote, newline and backslash in a label value", async () => {
    const body = await scrape(populatedMetrics());
    expect(body.toString()).toContain('value="x\\"\\n\\\\y');
    const check = await checkMetrics(body);
    // Read whole (a line it cannot read exits 1, "error while linting"); its lint finds only
    // prom-client's gauges named `_total`, which the operator does not name (exit 3).
    expect(check.out).not.toContain("error while linting");
    expect([0, 3], check.out).toContain(check.code);
    expect(lintProblems(check.out)).toEqual([]);
  });

  it("names the lint problems of any other family: only prom-client's are let through", async () => {
    const check = await checkMetrics(Buffer.from("# HELP a_total x\n# TYPE a_total gauge\na_total 1\n"));
    expect(check.code).toBe(3);
    expect(lintProblems(check.out)).toEqual(['a_total non-counter metrics should not have "_total" suffix']);
  });

  it("reads a scrape of chosen families (/metrics?name=)", async () => {
    const names = [
      "dms_service_unknown_values_total",
      "dms_service_request_duration_seconds",
      "dms_resources",
    ];
    const check = await checkMetrics(await scrape(populatedMetrics(), names));
    expect(check.out).not.toContain("error while linting");
    expect(check.code, check.out).toBe(0);
  });

  it("rejects a label value whose newline is left unescaped", async () => {
    const check = await checkMetrics(
      Buffer.from('# HELP a_total x\n# TYPE a_total counter\na_total{v="x\ny"} 1\n'),
    );
    expect(check.code).toBe(1);
    expect(check.out).toContain("unescaped new-line");
  });
});
