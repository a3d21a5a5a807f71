// The table of docs/guide/promotion.md against the operator's own status code: one row per
// situation the fixtures build, each row's Conditions and activeRevision cells what statusFrom()
// writes for it, for an image and for a commit. What Kargo's step concludes from those objects is
// checked by its expression engine in test/e2e/promotion.test.ts.
import { describe, expect, it } from "vitest";
import {
  ARTIFACTS,
  activeRevisionText,
  conditionsText,
  docFluxResource,
  docKargoStep,
  docKustomize,
  docTable,
  STEP_COLUMNS,
  situations,
} from "../support/promotion-doc.ts";

describe("the table of docs/guide/promotion.md", () => {
  const table = docTable();

  it("covers exactly the situations the tests build", () => {
    for (const { artifact } of STEP_COLUMNS)
      expect([...table.keys()].sort()).toEqual(Object.keys(situations(artifact)).sort());
  });

  it.each(
    STEP_COLUMNS.flatMap(({ artifact }) =>
      Object.entries(situations(artifact)).map(([name, s]) => ({ artifact, name, s })),
    ),
  )(
    "$name ($artifact): the doc shows the conditions and the active revision the operator writes",
    ({ artifact, name, s }) => {
      const row = table.get(name);
      expect(row?.conditions).toBe(conditionsText(s.generation, s.status));
      expect(row?.activeRevision).toBe(activeRevisionText(artifact, s.status));
    },
  );

  it("fills every step cell with an outcome of the step", () => {
    for (const row of table.values())
      for (const { artifact } of STEP_COLUMNS)
        expect(row.steps[artifact], `${row.situation}: ${artifact}`).toMatch(/^(Succeeded|Failed|Running)$/);
  });

  it("gives the steps, the Flux marker and the Kustomize field spec the tests judge", () => {
    for (const { step } of Object.values(ARTIFACTS)) {
      const config = docKargoStep(step);
      expect(config.successExpression).toContain("status?.activeRevision");
      expect(config.failureExpression).toContain('"Stalled"');
      expect(config.url).toMatch(
        /^https:\/\/kubernetes\.default\.svc\/apis\/dms\.dev\/v1alpha1\/namespaces\//,
      );
    }
    expect(docFluxResource().text).toMatch(/imageUri: \S+ # \{"\$imagepolicy": "[a-z0-9-]+:[a-z0-9-]+"\}/);
    expect(docKustomize().fieldSpec).toContain("path: spec/sourceRevisionConfig/imageUri");
  });
});
