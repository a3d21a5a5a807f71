import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import { dropRules } from "../bench/label-writes.bench.ts";

// `npm run bench -- label-writes --crd-rules off` measures what the CRDs' CEL rules cost a write
// by installing the CRDs without them; these are the rules it drops them by.

describe("the label-writes benchmark's CRDs without rules", () => {
  it("drops every rule at any depth, in objects and lists, and counts them", () => {
    const schema = {
      "x-kubernetes-validations": [{ rule: "a" }],
      properties: {
        spec: {
          "x-kubernetes-validations": [{ rule: "b" }, { rule: "c" }],
          properties: { items: { items: { "x-kubernetes-validations": [{ rule: "d" }], type: "object" } } },
        },
      },
    };
    expect(dropRules([schema])).toBe(4);
    expect(JSON.stringify(schema)).not.toContain("x-kubernetes-validations");
    expect(schema.properties.spec.properties.items.items).toEqual({ type: "object" });
  });

  it("leaves the Deployment CRD's schema otherwise whole, with none of its rules", () => {
    const text = readFileSync(
      join(import.meta.dirname, "..", "..", "crds", "dms.dev_deployments.yaml"),
      "utf8",
    );
    const crd = parse(text);
    const rules = (text.match(/^\s+- rule: /gm) ?? []).length;
    expect(rules).toBeGreaterThan(0);
    expect(dropRules(crd)).toBe(rules);
    expect(JSON.stringify(crd)).not.toContain("x-kubernetes-validations");
    expect(crd.spec.versions[0].schema.openAPIV3Schema.properties.spec.properties.source.enum).toContain(
      "github",
    );
  });
});
