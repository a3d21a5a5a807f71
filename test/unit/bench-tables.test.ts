import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { type LogSection, markdownTable, render, renderLog, runsTable } from "../../scripts/bench-tables.ts";
import { scaleMarkdown } from "../bench/scale-report.ts";
import { tenancyMarkdown } from "../bench/tenancy-report.ts";

// docs/benchmarks.md shows the current figures; the history is data in docs/bench/, rendered by
// scripts/bench-tables.ts. The page's tables must be the data's, and the log must render whole.

const ROOT = join(import.meta.dirname, "..", "..");
const page = readFileSync(join(ROOT, "docs", "benchmarks.md"), "utf8");
const log = (
  JSON.parse(readFileSync(join(ROOT, "docs", "bench", "log.json"), "utf8")) as { sections: LogSection[] }
).sections;

/** The text between a benchmark's markers on the page. */
function between(name: string): string {
  const match = page.match(new RegExp(`<!-- ${name}:begin[^\\n]*-->\\n([\\s\\S]*?)\\n<!-- ${name}:end -->`));
  if (!match) throw new Error(`no ${name} markers in docs/benchmarks.md`);
  return match[1] ?? "";
}

describe("the benchmark page", () => {
  it("is a page, not a log: at most 250 lines", () => {
    expect(page.split("\n").length).toBeLessThanOrEqual(251);
  });

  it("keeps each line to the current figure: none over 600 characters (the history is log.json's)", () => {
    const long = page
      .split("\n")
      .flatMap((line, i) => (line.length > 600 ? [`line ${i + 1}: ${line.length}`] : []));
    expect(long).toEqual([]);
  });

  it("shows the latest run of scale and of scale --tenants as their JSON holds them", () => {
    expect(between("scale")).toBe(scaleMarkdown("current"));
    expect(between("tenancy")).toBe(tenancyMarkdown("current"));
  });
});

describe("the runs of a benchmark the runner reports", () => {
  it("lists every run's results with when it was measured, nested figures left out", () => {
    const table = runsTable({
      benchmark: "b",
      runs: [
        { date: "2026-11-22T04:53:55Z", rows: [{ variant: "a", requestsPerSecond: 10 }] },
        {
          date: "2026-12-01T00:00:00Z",
          commit: "abc",
          figures: [{ variant: "a", medianMs: 5, byRoute: { x: 1 } }],
        },
      ],
    });
    expect(table).toBe(
      [
        "| date | commit | variant | requestsPerSecond | medianMs |",
        "|---|---|---|---|---|",
        "| 2026-11-22 |  | a | 10 |  |",
        "| 2026-12-01 | `abc` | a |  | 5 |",
      ].join("\n"),
    );
  });
});

describe("the log of past runs", () => {
  it("has tables whose rows are as wide as their heads", () => {
    for (const section of log)
      for (const block of section.blocks)
        if (!Array.isArray(block) && "head" in block)
          for (const row of block.rows)
            expect(row.length, `${section.section}: ${row[0]}`).toBe(block.head.length);
  });

  it("renders every section, its tables as Markdown and the JSON's tables where it says so", () => {
    const rendered = renderLog(log, undefined, (name) => `<${name} table>`);
    expect(rendered).toContain("## Memory\n");
    expect(rendered).toContain("<scale table>");
    expect(rendered).toContain("<tenancy table>");
    expect(rendered).toContain("| `node -e 0` | 28 | 1 |");
    expect(renderLog(log, "cli-start", () => "")).toMatch(/^## CLI start/);
  });

  it("renders text, tables and indented tables in the order written", () => {
    const sections: LogSection[] = [
      { section: "a", title: null, blocks: [["intro", ""]] },
      {
        section: "b",
        title: "B",
        blocks: [
          ["text"],
          { head: ["x", "y"], rows: [["1", ""]] },
          { head: ["z"], rows: [["2"]], indent: "  " },
          { rendered: "scale" },
        ],
      },
    ];
    expect(renderLog(sections, undefined, (name) => name)).toBe(
      "intro\n\n## B\ntext\n| x | y |\n|---|---|\n| 1 |  |\n  | z |\n  |---|\n  | 2 |\nscale",
    );
    expect(() => renderLog(sections, "c", () => "")).toThrow("log: no section 'c'; the sections are a, b");
  });

  it("names what it can render when asked for something else", () => {
    expect(() => render(["nope"])).toThrow(
      /'nope' is not one of: scale, tenancy, replicas, reconcile-path, log/,
    );
    expect(() => render(["scale", "extra"])).toThrow(/only 'log' takes a section/);
    expect(markdownTable(["a"], [[1]])).toBe("| a |\n|---|\n| 1 |");
  });

  it("renders the accumulated runs of each benchmark", () => {
    for (const what of [
      "scale",
      "tenancy",
      "replicas",
      "reconcile-path",
      "simulator",
      "operator",
      "cli-start",
    ])
      expect(render([what]).split("\n")[1]).toMatch(/^\|(---\|)+$/);
  });
});
