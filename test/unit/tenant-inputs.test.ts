// Every input a tenant controls has a row in docs/tenant-inputs.md with its size bound, its time
// bound, where they are enforced and the test that holds them. Here: every field of the three
// CRDs, walked in the schemas `npm run generate` renders (src/crd/render.ts), is covered by a
// row, and every row's test names files that exist. A new CRD field fails here until its row is in.
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { CRDS, openApiSchema } from "../../src/crd/render.ts";

const ROOT = join(import.meta.dirname, "..", "..");
const DOC = "docs/tenant-inputs.md";
const COLUMNS = ["input", "size bound", "time bound", "where enforced", "test"] as const;

type Node = Record<string, unknown>;
const isNode = (value: unknown): value is Node =>
  typeof value === "object" && value !== null && !Array.isArray(value);

/**
 * The leaf fields of a schema as `kind path`: `spec.secrets[].name`, a map's values as `.*`. An
 * object without declared fields (a map, `metadata`, a Kubernetes-shaped object kept as given)
 * is a leaf itself.
 */
function fieldsOf(kind: string, node: Node, path = ""): string[] {
  const children: Array<[string, unknown]> = [];
  if (isNode(node.properties))
    for (const [key, child] of Object.entries(node.properties))
      children.push([path ? `${path}.${key}` : key, child]);
  if (isNode(node.items)) children.push([`${path}[]`, node.items]);
  if (isNode(node.additionalProperties)) children.push([`${path}.*`, node.additionalProperties]);
  if (children.length === 0) return path ? [`${kind} ${path}`] : [];
  return children.flatMap(([p, child]) => (isNode(child) ? fieldsOf(kind, child, p) : []));
}

/** Every field of every CRD the generator renders. */
const FIELDS = CRDS.flatMap((crd) => fieldsOf(crd.kind, openApiSchema(crd.schema)));

/** One row of the table: its cells by column. */
type Row = Record<(typeof COLUMNS)[number], string>;

/** The rows of the doc's table (the one whose header is {@link COLUMNS}). */
function tableRows(text: string): Row[] {
  const lines = text.split("\n");
  const cells = (line: string) =>
    line
      .trim()
      .replace(/^\||\|$/g, "")
      .split("|")
      .map((c) => c.trim());
  const header = lines.findIndex((l) => l.startsWith("|") && cells(l).join("/") === COLUMNS.join("/"));
  if (header < 0) throw new Error(`${DOC}: no table with the columns ${COLUMNS.join(" | ")}`);
  const rows: Row[] = [];
  for (const line of lines.slice(header + 2)) {
    if (!line.startsWith("|")) break;
    const c = cells(line);
    if (c.length !== COLUMNS.length)
      throw new Error(`${DOC}: a row without ${COLUMNS.length} cells: ${line}`);
    rows.push(Object.fromEntries(COLUMNS.map((name, i) => [name, c[i] ?? ""])) as Row);
  }
  return rows;
}

/** A field pattern of an input cell: `` `Deployment spec.secrets.*` ``, `*ServiceConnection`, `*`. */
interface Pattern {
  kind: string;
  path: string;
}
const PATTERN = /`(\*|\*?[A-Z][A-Za-z]*) ((?:apiVersion|kind|metadata|spec|status)[^`]*)`/g;

function patternsOf(rows: readonly Row[]): Pattern[] {
  return rows.flatMap((row) =>
    [...row.input.matchAll(PATTERN)].map((m) => ({ kind: m[1] ?? "", path: m[2] ?? "" })),
  );
}

/** Whether `pattern` covers `field` (`Kind path`): the kind matches, and the path is it or under it. */
function covers(pattern: Pattern, field: string): boolean {
  const space = field.indexOf(" ");
  const kind = field.slice(0, space);
  const path = field.slice(space + 1);
  const kindMatches = pattern.kind.startsWith("*")
    ? kind.endsWith(pattern.kind.slice(1))
    : kind === pattern.kind;
  if (!kindMatches) return false;
  if (!pattern.path.endsWith(".*")) return path === pattern.path;
  const prefix = pattern.path.slice(0, -2);
  return path === prefix || path.startsWith(`${prefix}.`) || path.startsWith(`${prefix}[`);
}

/** The fields no pattern covers, each with what to do. */
function uncovered(fields: readonly string[], patterns: readonly Pattern[]): string[] {
  return fields
    .filter((field) => !patterns.some((p) => covers(p, field)))
    .map((field) => `${field}: add a row (or a pattern to a row) for it in ${DOC}, with its bounds and test`);
}

const rows = tableRows(readFileSync(join(ROOT, DOC), "utf8"));
const patterns = patternsOf(rows);

describe(DOC, () => {
  it("walks every field of the three CRDs", () => {
    expect(CRDS.map((c) => c.kind)).toEqual(["Deployment", "ServiceConnection", "ClusterServiceConnection"]);
    expect(FIELDS).toContain("Deployment spec.secrets[].valueFrom.secretKeyRef.key");
    expect(FIELDS).toContain("Deployment spec.sourceConfig.resourceSpec.labels.*");
    expect(FIELDS).toContain("ClusterServiceConnection spec.namespaceSelector.matchExpressions[].values[]");
    expect(FIELDS.length).toBeGreaterThan(200);
  });

  it("has a row for every CRD field", () => {
    expect(uncovered(FIELDS, patterns)).toEqual([]);
  });

  it("fails for a field without a row, naming it and the file to edit", () => {
    const fake = ["Deployment spec.newField", "ClusterServiceConnection spec.namespaceSelector2"];
    expect(uncovered([...FIELDS, ...fake], patterns)).toEqual(
      fake.map((f) => `${f}: add a row (or a pattern to a row) for it in ${DOC}, with its bounds and test`),
    );
    // A pattern covers its path and what is under it, never a sibling that shares a prefix.
    expect(covers({ kind: "Deployment", path: "spec.secrets.*" }, "Deployment spec.secretsExtra")).toBe(
      false,
    );
    expect(covers({ kind: "*ServiceConnection", path: "spec.tenantId" }, "Deployment spec.tenantId")).toBe(
      false,
    );
  });

  it("has no pattern that covers no field (a renamed field leaves none behind)", () => {
    expect(
      patterns.filter((p) => !FIELDS.some((f) => covers(p, f))).map((p) => `${p.kind} ${p.path}`),
    ).toEqual([]);
  });

  it("names, in each row's test cell, test files that exist, or says the bound is open", () => {
    const problems = rows.flatMap((row) => {
      const files = [...row.test.matchAll(/`(test\/[^`]+?\.ts)`/g)].map((m) => m[1] ?? "");
      if (files.length === 0)
        return row.test === "none — open" ? [] : [`${row.input}: name a test file, or write "none — open"`];
      return files.filter((f) => !existsSync(join(ROOT, f))).map((f) => `${row.input}: ${f} does not exist`);
    });
    expect(problems).toEqual([]);
  });

  it("fills every cell", () => {
    expect(rows.length).toBeGreaterThan(20);
    expect(rows.filter((row) => COLUMNS.some((c) => row[c] === "")).map((row) => row.input)).toEqual([]);
  });
});
