// The alerts' expressions (charts/dms-operator/files/alerts/prometheus-rules.yaml) read only
// series and labels the operator's registry defines, and their annotations show only labels their
// result keeps: an alert on a renamed metric never fires, a grouping by a label its series lack
// pages once for all of them, and `{{ $labels.x }}` of a label dropped renders empty
// (test/integration/metrics-queries.test.ts checks the same against a scrape of a running
// operator; test/tools/alerts.test.ts runs promtool on the rules).
import { describe, expect, it } from "vitest";
import {
  alertQueries,
  labelNamesOf,
  operatorLabels,
  unknownLabels,
  unknownSeries,
} from "../support/promql.ts";

describe("the alerts' expressions", () => {
  const queries = alertQueries();

  it("read only metrics the operator exports", async () => {
    expect(queries.length).toBeGreaterThan(5);
    expect(unknownSeries(queries, new Set(operatorLabels().keys()))).toEqual([]);
  });

  it("group, match and show only labels the series they read have", async () => {
    const read = queries.flatMap((q) => [...labelNamesOf(q.expr), ...(q.shown ?? [])]);
    for (const label of ["job", "namespace", "name", "controller", "connection", "status", "reason"])
      expect(read).toContain(label);
    // The annotations name the Lease, the controller and the connection.
    expect(queries.flatMap((q) => q.shown ?? [])).toEqual(
      expect.arrayContaining(["name", "controller", "connection", "namespace"]),
    );
    expect(unknownLabels(queries, operatorLabels())).toEqual([]);
  });

  it("show in their annotations only labels their expression's grouping keeps", () => {
    let checked = 0;
    for (const q of queries) {
      // The outermost aggregation's `by (…)` is the result's labels (each alert has one).
      const kept = /^\s*\(?\s*(?:sum|max|min|count) by \(([^)]*)\)/
        .exec(q.expr)?.[1]
        ?.split(",")
        .map((l) => l.trim());
      expect(kept, q.where).toBeDefined();
      for (const label of q.shown ?? []) expect(kept, `${q.where}: $labels.${label}`).toContain(label);
      checked += (q.shown ?? []).length;
    }
    expect(checked).toBeGreaterThan(5);
  });
});
