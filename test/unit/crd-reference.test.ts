// docs/reference/ is what `npm run generate` writes from the CRD schemas, and it documents every
// field of each CRD with its type, default, bounds and immutability: a field added to a schema
// without a regenerated page, or a page edited by hand, fails here as a stale crds/ does.
import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { referenceFile, renderReference } from "../../src/crd/reference.ts";
import { CRDS, type CrdDefinition, crdObject, DEPLOYMENT_CRD } from "../../src/crd/render.ts";

type Node = Record<string, unknown>;
const root = join(import.meta.dirname, "..", "..");
const named = CRDS.map((crd) => [crd.kind, crd] as const);

const schemaOf = (crd: CrdDefinition) => {
  const [v] = (crdObject(crd).spec as Node).versions as Node[];
  return ((v as Node).schema as Node).openAPIV3Schema as Node;
};

/** Every field path of a structural schema, as the reference writes it (`a[]`, `a.*`). */
function paths(node: Node, path = ""): string[] {
  const out: string[] = [];
  for (const [key, child] of Object.entries((node.properties as Record<string, Node>) ?? {})) {
    const p = path === "" ? key : `${path}.${key}`;
    out.push(p, ...paths(child, p));
  }
  const items = node.items as Node | undefined;
  if (items?.properties) out.push(`${path}[]`, ...paths(items, `${path}[]`));
  const values = node.additionalProperties as Node | undefined;
  if (typeof values === "object" && values.properties) out.push(`${path}.*`, ...paths(values, `${path}.*`));
  return out;
}

/** The reference's field table, by path: its cells after the path. */
function fieldRows(page: string): Map<string, string[]> {
  const table = page.slice(page.indexOf("## Fields"), page.indexOf("## Validation rules"));
  const rows = new Map<string, string[]>();
  for (const line of table.split("\n")) {
    const m = /^\| `([^`]+)` \| (.*) \|$/.exec(line);
    if (m)
      rows.set(
        m[1] ?? "",
        (m[2] ?? "").split(/(?<!\\)\| /).map((c) => c.trim()),
      );
  }
  return rows;
}

describe("docs/reference", () => {
  it.each(named)("the checked-in %s page is what `npm run generate` writes", async (_, crd) => {
    const onDisk = await readFile(join(root, referenceFile(crd)), "utf8");
    expect(onDisk, "docs/reference/ is out of date: run `npm run generate`").toBe(renderReference(crd));
  });

  it("holds exactly the generated pages", async () => {
    const files = (await readdir(join(root, "docs", "reference"))).sort();
    expect(files).toEqual(CRDS.map((crd) => referenceFile(crd).replace(/^docs\/reference\//, "")).sort());
  });

  it.each(named)("%s: has a row for every field of the schema, with its type", (_, crd) => {
    const rows = fieldRows(renderReference(crd));
    const expected = paths(schemaOf(crd));
    expect([...rows.keys()]).toEqual(expected);
    for (const [path, cells] of rows) expect(cells[0], path).toMatch(/^(\[\])*(map\[string\])?[a-z]/);
  });

  it("gives defaults, bounds, enums and immutability as the schema says", () => {
    const rows = fieldRows(renderReference(DEPLOYMENT_CRD));
    expect(rows.get("spec.managementPolicy")?.[1]).toBe("`Manage`");
    expect(rows.get("spec.source")?.[0]).toBe("string, required");
    expect(rows.get("spec.source")?.[2]).toContain("one of `github`, `external_docker`");
    expect(rows.get("spec.source")?.[3]).toMatch(/^\*\*Cannot change\*\*: spec\.source is immutable/);
    expect(rows.get("spec.name")?.[3]).toMatch(/^\*\*Cannot change\*\*: spec\.name is immutable/);
    expect(rows.get("spec.connectionRef")?.[3]).toMatch(/^\*\*Cannot change\*\*/);
    expect(rows.get("spec.sourceConfig.resourceSpec.cpu")?.[2]).toMatch(/^0 to \d+/);
    expect(rows.get("spec.secrets")?.[2]).toContain("items unique by `name`");
    expect(rows.get("spec.github.integrationId")?.[2]).toContain("format uuid");
    expect(rows.get("spec.sourceRevisionConfig.imageUri")?.[2]).toMatch(/length at most \d+/);
    // Only fields guarded by a rule on oldSelf say they cannot change.
    const fixed = [...rows].filter(([, cells]) => cells[3]?.startsWith("**Cannot change**")).map(([p]) => p);
    expect(fixed.sort()).toEqual([
      "spec.connectionRef",
      "spec.name",
      "spec.source",
      "spec.sourceConfig.deploymentType",
    ]);
  });

  it("says on the Deployment page, as kubectl explain does, that it is not the apps/v1 kind", () => {
    const description = String(schemaOf(DEPLOYMENT_CRD).description);
    expect(description).toContain("apps/v1");
    expect(description).toContain("dmsd");
    expect(renderReference(DEPLOYMENT_CRD)).toContain("Not the built-in apps/v1 Deployment");
  });
});
