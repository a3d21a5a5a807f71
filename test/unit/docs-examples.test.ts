// Every complete Deployment resource the docs show (a ```yaml block with `kind: Deployment` in
// group dms.dev) passes the checks `plan --offline` makes: the CRD's schema and its CEL rules.
// A field renamed, a value no longer allowed or a rule added fails here, not for a reader. Every
// ServiceConnection and ClusterServiceConnection they show passes the schema its CRD is generated
// from, with no field it does not know (the CRDs' CEL rules are the API server's:
// test/integration/crd-validation.test.ts).
import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";
import { KindGuard, type TSchema } from "@sinclair/typebox";
import { Value } from "@sinclair/typebox/value";
import { describe, expect, it } from "vitest";
import { parseAllDocuments } from "yaml";
import { ClusterServiceConnectionSchema, ServiceConnectionSchema } from "../../src/crd/connection-schema.ts";
import { parseManifests } from "../../src/gitops/manifests.ts";
import { isRecord } from "../../src/runtime/json.ts";

const ROOT = join(import.meta.dirname, "..", "..");

function markdown(dir: string): string[] {
  return readdirSync(join(ROOT, dir), { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return markdown(path);
    return entry.name.endsWith(".md") ? [relative(ROOT, join(ROOT, path))] : [];
  });
}

interface Example {
  file: string;
  line: number;
  text: string;
}

const BLOCKS: Example[] = ["README.md", ...markdown("docs"), ...markdown("charts")].flatMap((file) => {
  const text = readFileSync(join(ROOT, file), "utf8");
  return [...text.matchAll(/```ya?ml\n([\s\S]*?)```/g)].map((m) => ({
    file,
    line: text.slice(0, m.index).split("\n").length + 1,
    text: m[1] ?? "",
  }));
});

const EXAMPLES = BLOCKS.filter(
  (e) => /^kind:\s*Deployment\b/m.test(e.text) && /^apiVersion:\s*dms\.dev\//m.test(e.text),
);

/** The connection kinds' schemas: the CRDs are generated from them. */
const CONNECTION_SCHEMAS: Record<string, TSchema> = {
  ServiceConnection: ServiceConnectionSchema,
  ClusterServiceConnection: ClusterServiceConnectionSchema,
};

/** Every ServiceConnection and ClusterServiceConnection document of the docs' YAML blocks. */
const CONNECTIONS = BLOCKS.flatMap((block) =>
  parseAllDocuments(block.text)
    .map((doc) => doc.toJS() as unknown)
    .filter(
      (doc): doc is Record<string, unknown> =>
        isRecord(doc) &&
        typeof doc.apiVersion === "string" &&
        doc.apiVersion.startsWith("dms.dev/") &&
        typeof doc.kind === "string" &&
        doc.kind in CONNECTION_SCHEMAS,
    )
    .map((doc) => ({ ...block, doc, kind: doc.kind as string })),
);

/** Fields the schema does not know, which kubectl's strict field validation refuses. */
function unknownFields(schema: TSchema, value: unknown, path: string): string[] {
  if (KindGuard.IsObject(schema) && isRecord(value))
    return Object.entries(value).flatMap(([key, child]) => {
      const known = schema.properties[key];
      if (known) return unknownFields(known, child, `${path}.${key}`);
      return schema.additionalProperties === undefined || schema.additionalProperties === false
        ? [`${path}.${key}: unknown field`]
        : [];
    });
  if (KindGuard.IsArray(schema) && Array.isArray(value))
    return value.flatMap((item, i) => unknownFields(schema.items, item, `${path}[${i}]`));
  return [];
}

describe("the docs' Deployment examples", () => {
  it("are found (the pattern still matches how the docs write them)", () => {
    expect(EXAMPLES.length).toBeGreaterThanOrEqual(5);
  });

  it.each(EXAMPLES.map((e) => [`${e.file}:${e.line}`, e] as const))(
    "%s passes the CRD's schema and rules",
    (_, example) => {
      const parsed = parseManifests(example.text, example.file);
      expect(parsed.problems.map((p) => `line ${p.line}: ${p.message}`)).toEqual([]);
      expect(parsed.resources.length).toBeGreaterThan(0);
    },
  );
});

describe("the docs' connection examples", () => {
  it("are found (the pattern still matches how the docs write them)", () => {
    expect(CONNECTIONS.map((c) => c.kind)).toEqual(
      expect.arrayContaining(["ServiceConnection", "ClusterServiceConnection"]),
    );
  });

  it.each(CONNECTIONS.map((c) => [`${c.file}:${c.line} ${c.kind}`, c] as const))(
    "%s passes the CRD's schema, with no unknown field",
    (_, example) => {
      const schema = CONNECTION_SCHEMAS[example.kind] as TSchema;
      const errors = [...Value.Errors(schema, example.doc)].map((e) => `${e.path}: ${e.message}`);
      expect([...errors, ...unknownFields(schema, example.doc, "")]).toEqual([]);
    },
  );
});
