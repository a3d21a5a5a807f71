import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import { prng } from "../../src/simulator/faults.ts";
import { dropRules, mergePatchOf } from "../bench/label-writes.bench.ts";

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

/** RFC 7386's application of `patch` to `target`, as the API server does it. */
function applyMergePatch(target: unknown, patch: unknown): unknown {
  if (typeof patch !== "object" || patch === null || Array.isArray(patch)) return patch;
  const result: Record<string, unknown> =
    typeof target === "object" && target !== null && !Array.isArray(target)
      ? { ...(target as Record<string, unknown>) }
      : {};
  for (const [key, value] of Object.entries(patch)) {
    if (value === null) delete result[key];
    else result[key] = applyMergePatch(result[key], value);
  }
  return result;
}

/** A JSON object without nulls (a merge patch cannot say one), keys from a few, values nested. */
function randomObject(next: () => number, depth = 0): Record<string, unknown> {
  const object: Record<string, unknown> = {};
  for (const key of ["a", "b", "c", "d", "e"]) {
    const roll = next();
    if (roll < 0.3) continue;
    if (roll < 0.45 && depth < 3) object[key] = randomObject(next, depth + 1);
    else if (roll < 0.6) object[key] = [Math.floor(next() * 3), { x: Math.floor(next() * 2) }];
    else if (roll < 0.8) object[key] = `v${Math.floor(next() * 3)}`;
    else object[key] = Math.floor(next() * 3);
  }
  return object;
}

describe("the label-writes benchmark's status merge patch", () => {
  it("sends what changed, a removed key as null, an object key by key and an array whole", () => {
    const from = { a: 1, b: { c: "x", d: [1, 2] }, gone: "y", same: { k: 1 } };
    const to = { a: 2, b: { c: "x", d: [1, 3] }, added: { k: 1 }, same: { k: 1 } };
    expect(mergePatchOf(from, to)).toEqual({ a: 2, b: { d: [1, 3] }, gone: null, added: { k: 1 } });
    expect(mergePatchOf(to, to)).toBeUndefined();
    expect(mergePatchOf({}, to)).toEqual(to);
    expect(mergePatchOf({ o: { p: 1 } }, { o: "s" })).toEqual({ o: "s" });
  });

  it("turns one object into the other once applied, for 2,000 random pairs", () => {
    for (let seed = 1; seed <= 2000; seed++) {
      const next = prng(seed);
      const from = randomObject(next);
      const to = randomObject(next);
      const patch = mergePatchOf(from, to);
      expect(applyMergePatch(from, patch ?? {}), `seed ${seed}`).toStrictEqual(to);
      if (JSON.stringify(from) === JSON.stringify(to)) expect(patch, `seed ${seed}`).toBeUndefined();
    }
  });
});
