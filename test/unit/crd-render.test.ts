import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { Value } from "@sinclair/typebox/value";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import { CRD_FILE, crdObject, openApiSchema, renderCrd } from "../../src/crd/render.ts";
import { DeploymentResourceSchema } from "../../src/crd/schema.ts";

type Node = Record<string, unknown>;
const root = join(import.meta.dirname, "..", "..");

/** Every schema node with its path, descending through properties, items and map values. */
function* nodes(node: Node, path = "<root>"): Generator<[string, Node]> {
  yield [path, node];
  const properties = node.properties as Record<string, Node> | undefined;
  for (const [key, child] of Object.entries(properties ?? {})) yield* nodes(child, `${path}.${key}`);
  if (node.items) yield* nodes(node.items as Node, `${path}[]`);
  if (typeof node.additionalProperties === "object")
    yield* nodes(node.additionalProperties as Node, `${path}{}`);
}

const version = () => (crdObject().spec as Node).versions as Node[];

describe("CRD generation", () => {
  it("the checked-in CRD is what `npm run generate` writes from the schema", async () => {
    const onDisk = await readFile(join(root, CRD_FILE), "utf8");
    expect(onDisk, "crds/ is out of date: run `npm run generate`").toBe(renderCrd());
  });

  it("renders the same text every time", () => {
    expect(renderCrd()).toBe(renderCrd());
  });

  it("carries the fixed names other repositories rely on", () => {
    const crd = parse(renderCrd());
    expect(crd.metadata.name).toBe("deployments.dms.dev");
    expect(crd.spec.group).toBe("dms.dev");
    expect(crd.spec.scope).toBe("Namespaced");
    expect(crd.spec.names).toMatchObject({
      kind: "Deployment",
      plural: "deployments",
      shortNames: ["dmsd"],
      categories: ["dms"],
    });
    const [v] = crd.spec.versions;
    expect(v).toMatchObject({ name: "v1alpha1", served: true, storage: true, subresources: { status: {} } });
    expect(v.additionalPrinterColumns.map((c: Node) => c.name)).toEqual([
      "Remote",
      "Ready",
      "Latest",
      "Active",
      "Age",
    ]);
  });

  it("describes every field, so `kubectl explain` teaches the resource", () => {
    const schema = openApiSchema();
    const spec = (schema.properties as Record<string, Node>).spec as Node;
    const status = (schema.properties as Record<string, Node>).status as Node;
    const undescribed: string[] = [];
    for (const top of [spec, status]) {
      for (const [path, node] of nodes(top, top === spec ? "spec" : "status")) {
        // Elements of string lists and map values are not fields of their own.
        if (path.endsWith("{}") || (node.type === "string" && path.endsWith("[]"))) continue;
        if (typeof node.description !== "string" || node.description.length < 5) undescribed.push(path);
      }
    }
    expect(undescribed).toEqual([]);
  });

  it("is structural: no keyword Kubernetes refuses, and every object states its fields or preserves them", () => {
    const [v] = version();
    const schema = ((v as Node).schema as Node).openAPIV3Schema as Node;
    for (const [path, node] of nodes(schema)) {
      for (const banned of ["anyOf", "oneOf", "allOf", "const", "patternProperties", "$id"]) {
        expect(node, `${path} has ${banned}`).not.toHaveProperty(banned);
      }
      expect(typeof node.type, `${path} has no type`).toBe("string");
      if (node.type === "object" && path !== "<root>.metadata") {
        const open = node["x-kubernetes-preserve-unknown-fields"] === true;
        expect(Boolean(node.properties) || Boolean(node.additionalProperties) || open, path).toBe(true);
        if (open) expect(node.properties, `${path} both preserves and lists fields`).toBeUndefined();
      }
    }
  });

  it("bounds every list and string that a CEL rule reads, so the API server's cost budget holds", () => {
    const spec = (openApiSchema().properties as Record<string, Node>).spec as Node;
    const props = spec.properties as Record<string, Node>;
    expect(props.secrets?.maxItems).toBeTypeOf("number");
    expect(props.secretReferences?.maxItems).toBeTypeOf("number");
    expect(props.name?.maxLength).toBeTypeOf("number");
  });

  it("keeps the messages of CEL rules naming the field", () => {
    const rules: Node[] = [];
    for (const [, node] of nodes(openApiSchema())) {
      rules.push(...((node["x-kubernetes-validations"] as Node[] | undefined) ?? []));
    }
    expect(rules.length).toBeGreaterThan(15);
    for (const rule of rules) expect(String(rule.message)).toMatch(/spec\.[a-zA-Z]+/);
  });

  it("accepts a full resource with the generated TypeBox schema (types and schema agree)", () => {
    const resource = {
      apiVersion: "dms.dev/v1alpha1",
      kind: "Deployment",
      metadata: { name: "a", namespace: "ns" },
      spec: {
        source: "github",
        github: { integrationId: "6f1c1d2e-0000-4000-8000-000000000001", repository: "acme/support-agent" },
        sourceConfig: { resourceSpec: { cpu: 0.5, cpuLimit: 1, labels: { Team: "A" } } },
        secrets: [{ name: "API_KEY", valueFrom: { secretKeyRef: { name: "s", key: "k" } } }],
      },
    };
    expect([...Value.Errors(DeploymentResourceSchema, resource)]).toEqual([]);
  });
});
