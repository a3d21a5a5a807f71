// The decision table of docs/gitops-health.md against the operator's own status code: one row per
// situation the fixtures build, and each row's Conditions cell is what statusFrom() writes for it.
// What each tool concludes from those conditions is checked by the tools' engines in
// test/e2e/gitops-health.test.ts.
import { describe, expect, it } from "vitest";
import {
  conditionsText,
  docArgoScript,
  docFluxExprs,
  docTable,
  SITUATIONS,
  TOOL_COLUMNS,
} from "../support/gitops-health-doc.ts";

describe("the decision table of docs/gitops-health.md", () => {
  const table = docTable();

  it("covers exactly the situations the tests build", () => {
    expect([...table.keys()].sort()).toEqual(Object.keys(SITUATIONS).sort());
  });

  it.each(Object.entries(SITUATIONS))("%s: the doc shows the conditions the operator writes", (name, s) => {
    expect(table.get(name)?.conditions).toBe(conditionsText(s.generation, s.status));
  });

  it("fills every tool's cell of every row, and gives the snippets the tools are judged with", () => {
    for (const row of table.values())
      for (const { header } of TOOL_COLUMNS)
        expect(row.tools[header], `${row.situation}: ${header}`).toMatch(/^[A-Z]/);
    expect(docArgoScript()).toContain("obj.status");
    expect(docFluxExprs()).toMatchObject({ current: expect.any(String), failed: expect.any(String) });
  });
});
