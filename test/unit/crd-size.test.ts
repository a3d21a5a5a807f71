// The largest object each CRD admits, computed from its generated schema: every string at its
// maxLength, every list at its maxItems of its largest item, every map at its maxProperties of its
// longest key and largest value, every optional field present. A tenant can write no larger
// resource (the operator caches each one), and a field added without a bound fails here by path.
import { describe, expect, it } from "vitest";
import { CRDS, type CrdDefinition, crdObject } from "../../src/crd/render.ts";
import { VOLUME_KINDS } from "../support/spec-answers.ts";

type Node = Record<string, unknown>;

/** Most characters the JSON of one resource may take: what the bounds are chosen to keep under. */
const MAX_OBJECT_CHARS = 512 * 1024;

/** Longest JSON text of a number: `-1.7976931348623157e+308`. */
const NUMBER_CHARS = 24;

/** What the walk of a schema found. */
interface Measure {
  /** JSON characters of the largest value the schema admits (a preserved object counted as `{}`). */
  chars: number;
  /** Paths of strings, lists and maps without a bound. */
  unbounded: string[];
  /** Paths of objects kept as given: their own fields are bounded, what those hold is not. */
  preserved: string[];
}

/** The bound `mapKeyRule` (src/crd/openapi-types.ts) puts on a map's keys, if it has one. */
function keyBound(node: Node): number | undefined {
  const rules = (node["x-kubernetes-validations"] ?? []) as { rule: string }[];
  for (const { rule } of rules) {
    const found = /^self\.all\(k, k\.size\(\) <= (\d+)\)$/.exec(rule);
    if (found) return Number(found[1]);
  }
  return undefined;
}

/** Characters of `n` values of `each` characters, separated by commas, between brackets. */
const sequence = (n: number, each: number) => 2 + n * each + Math.max(n - 1, 0);

/** Walks one schema node; see {@link Measure}. */
function measure(node: Node, path: string, found: Measure): number {
  if (Array.isArray(node.enum)) return Math.max(...node.enum.map((v) => JSON.stringify(v).length));
  if (node["x-kubernetes-preserve-unknown-fields"] === true) {
    found.preserved.push(path);
    if (typeof node.maxProperties !== "number") found.unbounded.push(`${path} (fields)`);
    return 2;
  }
  switch (node.type) {
    case "string":
      if (typeof node.maxLength !== "number") {
        found.unbounded.push(path);
        return 2;
      }
      return node.maxLength + 2;
    case "number":
    case "integer":
      return NUMBER_CHARS;
    case "boolean":
      return "false".length;
    case "array": {
      const item = measure(node.items as Node, `${path}[]`, found);
      if (typeof node.maxItems !== "number") {
        found.unbounded.push(path);
        return sequence(1, item);
      }
      return sequence(node.maxItems, item);
    }
    case "object": {
      if (typeof node.additionalProperties === "object") {
        const value = measure(node.additionalProperties as Node, `${path}{}`, found);
        const key = keyBound(node);
        if (typeof node.maxProperties !== "number") found.unbounded.push(`${path} (entries)`);
        if (key === undefined) found.unbounded.push(`${path} (keys)`);
        const entry = (key ?? 0) + 2 + 1 + value;
        return sequence(typeof node.maxProperties === "number" ? node.maxProperties : 1, entry);
      }
      const properties = Object.entries((node.properties ?? {}) as Record<string, Node>);
      const fields = properties.map(
        ([key, child]) => JSON.stringify(key).length + 1 + measure(child, `${path}.${key}`, found),
      );
      return 2 + fields.reduce((a, b) => a + b, 0) + Math.max(fields.length - 1, 0);
    }
    default:
      throw new Error(`${path}: no type to measure`);
  }
}

/** Measures a schema from `path`. */
const walk = (node: Node, path: string): Measure => {
  const found: Measure = { chars: 0, unbounded: [], preserved: [] };
  found.chars = measure(node, path, found);
  return found;
};

/** The one version's `openAPIV3Schema` of a CRD. */
const schemaOf = (crd: CrdDefinition): Node => {
  const [version] = (crdObject(crd).spec as { versions: Node[] }).versions;
  return ((version as Node).schema as Node).openAPIV3Schema as Node;
};

/**
 * The largest object of a CRD: its `apiVersion` and `kind`, and its `spec` at its largest.
 * `metadata` is the API server's (it bounds names itself); `status` is the operator's own.
 */
function largestObject(crd: CrdDefinition): Measure {
  const spec = walk((schemaOf(crd).properties as Record<string, Node>).spec as Node, "spec");
  const envelope = JSON.stringify({ apiVersion: "dms.dev/v1alpha1", kind: crd.kind, spec: {} });
  return { ...spec, chars: envelope.length - 2 + spec.chars };
}

const named = CRDS.map((crd) => [crd.kind, crd] as const);

describe("the size of the largest object each CRD admits", () => {
  it("is measured exactly: the walk of a small schema gives the JSON length of its largest value", () => {
    const schema: Node = {
      type: "object",
      properties: {
        name: { type: "string", maxLength: 3 },
        on: { type: "boolean" },
        kind: { type: "string", enum: ["a", "bcd"] },
        args: { type: "array", maxItems: 2, items: { type: "string", maxLength: 2 } },
        labels: {
          type: "object",
          maxProperties: 2,
          additionalProperties: { type: "string", maxLength: 1 },
          "x-kubernetes-validations": [{ rule: "self.all(k, k.size() <= 2)" }],
        },
      },
    };
    const largest = { name: "xxx", on: false, kind: "bcd", args: ["xx", "xx"], labels: { aa: "x", bb: "x" } };
    expect(walk(schema, "spec")).toEqual({
      chars: JSON.stringify(largest).length,
      unbounded: [],
      preserved: [],
    });
  });

  it("names every string, list, map key and map without a bound", () => {
    const schema: Node = {
      type: "object",
      properties: {
        note: { type: "string" },
        args: { type: "array", items: { type: "string", maxLength: 1 } },
        labels: { type: "object", additionalProperties: { type: "string", maxLength: 1 } },
        extra: { type: "object", "x-kubernetes-preserve-unknown-fields": true },
      },
    };
    expect(walk(schema, "spec").unbounded).toEqual([
      "spec.note",
      "spec.args",
      "spec.labels (entries)",
      "spec.labels (keys)",
      "spec.extra (fields)",
    ]);
  });

  it.each(named)("%s: every string, list and map of spec has a bound", (_, crd) => {
    expect(largestObject(crd).unbounded).toEqual([]);
  });

  it.each(named)(`%s: the largest object stays under ${MAX_OBJECT_CHARS / 1024} KiB of JSON`, (_, crd) => {
    const { chars } = largestObject(crd);
    expect(chars).toBeLessThanOrEqual(MAX_OBJECT_CHARS);
  });

  it("keeps as given only the Kubernetes-shaped objects docs/crd-validation.md lists", () => {
    // Their own fields are counted (maxProperties); their contents cannot be bounded by a schema
    // that keeps them as given. A new one is a decision to document, not an accident.
    const container = (list: string) => [
      `${list}[].env[].valueFrom`,
      `${list}[].envFrom[]`,
      `${list}[].resources.limits`,
      `${list}[].resources.requests`,
      `${list}[].securityContext`,
    ];
    const rs = "spec.sourceConfig.resourceSpec";
    expect(largestObject(CRDS[0] as CrdDefinition).preserved.sort()).toEqual(
      [
        ...VOLUME_KINDS.map((v) => `${rs}.volumes[].${v}`),
        ...container(`${rs}.initContainers`),
        ...container(`${rs}.sidecars`),
      ].sort(),
    );
    for (const crd of CRDS.slice(1)) expect(largestObject(crd).preserved, crd.kind).toEqual([]);
  });
});

/**
 * The counts a map's or a list's description states, read against its bounds: "At most N" (its
 * maxProperties or maxItems), "keys of at most K" (its key rule), "values of at most V" (its
 * values' maxLength). A bound changed without its description fails here by path.
 */
function statedCounts(node: Node, path: string, out: string[]): void {
  const description = typeof node.description === "string" ? node.description : "";
  const count = node.maxProperties ?? node.maxItems;
  const check = (pattern: RegExp, bound: unknown, what: string) => {
    const said = pattern.exec(description);
    if (said && bound !== undefined && Number(said[1]) !== bound)
      out.push(`${path}: says ${what} ${said[1]}, the bound is ${String(bound)}`);
  };
  check(/\bAt most (\d+)[,.]/, count, "at most");
  check(/\bkeys of at most (\d+)\b/, keyBound(node), "keys of at most");
  const values = node.additionalProperties as Node | undefined;
  check(/\bvalues of at most (\d+)\b/, values?.maxLength, "values of at most");
  for (const [key, child] of Object.entries(node.properties ?? {}))
    statedCounts(child as Node, `${path}.${key}`, out);
  if (values && typeof values === "object") statedCounts(values, `${path}.*`, out);
  if (node.items && typeof node.items === "object") statedCounts(node.items as Node, `${path}[]`, out);
}

describe("the bounds a description states", () => {
  it.each(named)("are the bounds of the field (%s)", (_kind, crd) => {
    const out: string[] = [];
    statedCounts(schemaOf(crd), "", out);
    expect(out).toEqual([]);
  });

  it("finds a count that is not the bound", () => {
    const out: string[] = [];
    statedCounts(
      {
        properties: {
          labels: {
            description: "Labels. At most 64, keys of at most 317 characters, values of at most 63.",
            maxProperties: 32,
            additionalProperties: { type: "string", maxLength: 63 },
            "x-kubernetes-validations": [{ rule: "self.all(k, k.size() <= 317)" }],
          },
        },
      },
      "spec",
      out,
    );
    expect(out).toEqual(["spec.labels: says at most 64, the bound is 32"]);
  });
});
