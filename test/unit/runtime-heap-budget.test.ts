import { readFileSync } from "node:fs";
import { getHeapStatistics } from "node:v8";
import { describe, expect, it } from "vitest";
import { parseAllDocuments } from "yaml";
import {
  type HeapBudget,
  HeapBudgetCheck,
  type HeapBudgetWarning,
  heapLimitMiBFor,
  MEASURED_HEAP_BUDGET,
  supportedResources,
} from "../../src/runtime/heap-budget.ts";

const MiB = 2 ** 20;

/**
 * The runtime variables of the operator container in manifests/manager/manager.yaml: those with
 * a literal value, except the operator's own `DMS_*` settings.
 */
function shippedRuntimeEnv(): Record<string, string> {
  const text = readFileSync(new URL("../../manifests/manager/manager.yaml", import.meta.url), "utf8");
  for (const doc of parseAllDocuments(text)) {
    const containers = doc.toJS()?.spec?.template?.spec?.containers ?? [];
    for (const c of containers as { env?: { name: string; value?: string }[] }[]) {
      const literal = (c.env ?? []).filter((e) => e.value !== undefined && !e.name.startsWith("DMS_"));
      if (literal.length > 0) return Object.fromEntries(literal.map((e) => [e.name, String(e.value)]));
    }
  }
  throw new Error("manifests/manager/manager.yaml sets no runtime variables");
}

/** NODE_OPTIONS of the operator container in manifests/manager/manager.yaml. */
function shippedNodeOptions(): string {
  const value = shippedRuntimeEnv().NODE_OPTIONS;
  if (!value) throw new Error("manifests/manager/manager.yaml sets no NODE_OPTIONS");
  return value;
}
/** Round numbers: 10 MiB base, 10 KiB per resource, half the limit for the live set. */
const budget: HeapBudget = { baseBytes: 10 * MiB, bytesPerResource: 10 * 1024, liveFraction: 0.5 };

describe("supportedResources", () => {
  it("gives the resources that fit in the live share of the limit after the base", () => {
    // 100 MiB limit -> 50 MiB live -> 40 MiB for resources -> 4,096 of 10 KiB.
    expect(supportedResources(100 * MiB, budget)).toBe(4096);
    expect(supportedResources(200 * MiB, budget)).toBe(9216);
  });

  it("is 0, never negative, when the base alone does not fit", () => {
    expect(supportedResources(15 * MiB, budget)).toBe(0);
  });

  it("agrees with heapLimitMiBFor: the limit it names supports that many", () => {
    for (const n of [1, 1000, 10_000, 25_000]) {
      const limit = heapLimitMiBFor(n, budget);
      expect(supportedResources(limit * MiB, budget)).toBeGreaterThanOrEqual(n);
      expect(supportedResources((limit - 1) * MiB, budget)).toBeLessThan(n);
    }
  });

  it("with the measured budget, the heap setting shipped in the manifests supports 10,000 resources", () => {
    const nodeOptions = shippedNodeOptions();
    const flag = (name: string) => Number(new RegExp(`--${name}=(\\d+)`).exec(nodeOptions)?.[1]);
    // V8's heap_size_limit: the old space plus a young generation of three semi-spaces.
    const heapLimit = (flag("max-old-space-size") + 3 * flag("max-semi-space-size")) * MiB;
    expect(supportedResources(heapLimit, MEASURED_HEAP_BUDGET)).toBeGreaterThanOrEqual(10_000);
  });

  it("the image sets the same runtime variables as the manifests", () => {
    const dockerfile = readFileSync(new URL("../../Dockerfile", import.meta.url), "utf8");
    // The ENV lines, continuations joined: NAME=value or NAME="value" pairs.
    const env = new Map<string, string>();
    for (const line of dockerfile.replace(/\\\n\s*/g, " ").split("\n")) {
      if (!line.startsWith("ENV ")) continue;
      for (const [, name, quoted, bare] of line.slice(4).matchAll(/(\w+)=(?:"([^"]*)"|(\S+))/g))
        env.set(name as string, quoted ?? bare ?? "");
    }
    const shipped = shippedRuntimeEnv();
    expect(Object.keys(shipped)).toEqual(expect.arrayContaining(["NODE_OPTIONS", "MALLOC_ARENA_MAX"]));
    for (const [name, value] of Object.entries(shipped)) expect(env.get(name), name).toBe(value);
  });
});

describe("HeapBudgetCheck", () => {
  function check() {
    const warnings: { fields: HeapBudgetWarning; message: string }[] = [];
    const c = new HeapBudgetCheck((fields, message) => warnings.push({ fields, message }), {
      heapLimitBytes: 100 * MiB,
      budget,
    });
    return { c, warnings };
  }

  it("stays quiet up to the supported number", () => {
    const { c, warnings } = check();
    for (let i = 0; i < 4096; i++) c.add(1);
    expect(warnings).toEqual([]);
  });

  it("warns once on crossing, naming the counts, the limit and the heap needed", () => {
    const { c, warnings } = check();
    c.add(4096);
    c.add(1);
    c.add(1);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]?.fields).toEqual({
      watched: 4097,
      supported: 4096,
      heapLimitMiB: 100,
      neededHeapLimitMiB: heapLimitMiBFor(4097, budget),
    });
    expect(warnings[0]?.message).toMatch(/\(4097\) than the heap limit of 100 MiB supports \(4096\)/);
    expect(warnings[0]?.message).toMatch(/--max-old-space-size/);
  });

  it("warns again only after going back under and crossing once more", () => {
    const { c, warnings } = check();
    c.add(4097);
    c.add(-1);
    c.add(-1);
    c.add(1);
    expect(warnings).toHaveLength(1);
    c.add(1);
    c.add(1);
    expect(warnings).toHaveLength(2);
  });

  it("defaults to this process's own heap limit", () => {
    const c = new HeapBudgetCheck(() => {});
    expect(c.supported).toBe(supportedResources(getHeapStatistics().heap_size_limit));
  });

  it("never counts below zero (a delete seen before its add)", () => {
    const { c, warnings } = check();
    c.add(-5);
    c.add(4096);
    expect(warnings).toEqual([]);
    c.add(1);
    expect(warnings).toHaveLength(1);
  });
});
