// plan's verdict on the specs the API server refuses (the table test/integration/crd-validation.test.ts
// applies to a real kube-apiserver): each is refused by plan too, naming the same field, before
// any request to the service. And the CRD's own CEL rules run, not a copy: a rule's message is the CRD's.
import { describe, expect, it, vi } from "vitest";
import { openApiSchema } from "../../src/crd/render.ts";
import { crdRuleViolations, isTransitionRule } from "../../src/gitops/crd-rules.ts";
import { parseManifests } from "../../src/gitops/manifests.ts";
import { RULES_NOT_CHECKED, validateResource } from "../../src/gitops/validate.ts";
import { REFUSED_DEPLOYMENT_SPECS } from "../support/refused-deployments.ts";

/** The `self` of every CEL rule evaluated, in order: which nodes' rules ran. */
const evaluated = vi.hoisted(() => ({ selves: [] as unknown[] }));
// The CEL library as it is, each compiled rule recording the node it is evaluated on.
vi.mock("@marcbachmann/cel-js", async (importOriginal) => {
  const cel = await importOriginal<typeof import("@marcbachmann/cel-js")>();
  class Environment extends cel.Environment {
    override parse(expression: string) {
      const run = super.parse(expression);
      const recorded = (context?: Record<string, unknown>) => {
        evaluated.selves.push(context?.self);
        return run(context);
      };
      return Object.assign(recorded, run) as typeof run;
    }
  }
  return { ...cel, Environment };
});

const resource = (spec: Record<string, unknown>) => ({
  apiVersion: "dms.dev/v1alpha1",
  kind: "Deployment",
  metadata: { name: "d" },
  spec,
});

/** The field the API server's message names first, e.g. `spec.secrets[0]`. */
const fieldOf = (message: RegExp) =>
  /^\/?(spec(?:\\\.|\\\[|\\\]|[A-Za-z0-9[\]])*)/.exec(message.source)?.[1]?.replace(/\\/g, "");

describe("plan refuses what the API server refuses", () => {
  it.each(REFUSED_DEPLOYMENT_SPECS.map((c) => [c.reason, c] as const))(
    "refuses %s",
    (_reason, { spec, message }) => {
      const violations = validateResource(resource(spec));
      expect(violations).not.toEqual([]);
      const field = fieldOf(message);
      expect(field).toBeDefined();
      // The first field the API server names is named by plan too (its prefix, for a map key).
      expect(violations.map((v) => v.message).join("\n")).toContain(field);
    },
  );

  it("refuses 1.5 replicas and half a database connection as not whole numbers", () => {
    const messages = validateResource(
      resource({
        source: "internal_template",
        sourceConfig: { resourceSpec: { maxScale: 1.5, dbMaxConnections: 2.5 } },
      }),
    ).map((v) => v.message);
    expect(messages).toEqual([
      "spec.sourceConfig.resourceSpec.maxScale: Expected number to be a multiple of 1",
      "spec.sourceConfig.resourceSpec.dbMaxConnections: Expected number to be a multiple of 1",
    ]);
  });

  it("accepts fractional CPU and memory, which the service does not document as whole", () => {
    expect(
      validateResource(
        resource({
          source: "internal_template",
          sourceConfig: { resourceSpec: { cpu: 0.5, cpuLimit: 1.5, memoryMb: 512.5 } },
        }),
      ),
    ).toEqual([]);
  });

  it("reports a CEL rule with the CRD's message at the rule's fieldPath", () => {
    const violations = validateResource(
      resource({ source: "internal_template", sourceConfig: { resourceSpec: { minScale: 3, maxScale: 1 } } }),
    );
    expect(violations).toEqual([
      {
        path: ["spec", "sourceConfig", "resourceSpec", "minScale"],
        message:
          "spec.sourceConfig.resourceSpec.minScale must not exceed spec.sourceConfig.resourceSpec.maxScale: lower minScale or raise maxScale",
      },
    ]);
  });

  it("evaluates rules over maps whose keys are names of object members (constructor, __proto__, toString)", () => {
    // The API server accepts these label keys; the evaluator must read them as map keys.
    const labels = JSON.parse('{"constructor":" ","__proto__":"x","toString":"y","hasOwnProperty":"z"}');
    expect(
      validateResource(resource({ source: "internal_template", sourceConfig: { resourceSpec: { labels } } })),
    ).toEqual([]);
    // And still refuses what the rules refuse under such a key.
    const long = JSON.parse(`{"constructor":" ","${"k".repeat(320)}":"v"}`);
    const refused = validateResource(
      resource({ source: "internal_template", sourceConfig: { resourceSpec: { labels: long } } }),
    );
    expect(refused.map((v) => v.message).join("\n")).toMatch(/resourceSpec\.labels/);
    expect(refused.map((v) => v.message).join("\n")).not.toMatch(/could not be evaluated/);
  });

  it("gives a list item's rule its index", () => {
    expect(
      validateResource(
        resource({ source: "internal_template", secrets: [{ name: "A", value: "1" }, { name: "B" }] }),
      ),
    ).toEqual([
      {
        path: ["spec", "secrets", 1],
        message: "spec.secrets[1]: set exactly one of value or valueFrom.secretKeyRef",
      },
    ]);
  });

  it("skips transition rules (oldSelf): a file has no previous object", () => {
    const rules: string[] = [];
    const collect = (node: unknown): void => {
      if (Array.isArray(node)) node.forEach(collect);
      else if (node && typeof node === "object")
        for (const [key, value] of Object.entries(node)) {
          if (key === "x-kubernetes-validations")
            for (const r of value as { rule: string }[]) rules.push(r.rule);
          else collect(value);
        }
    };
    collect(openApiSchema());
    const transition = rules.filter(isTransitionRule);
    expect(transition.length).toBeGreaterThan(0);
    expect(rules.length - transition.length).toBeGreaterThan(15);
    // A valid resource with every field a transition rule reads: none of them is evaluated.
    expect(crdRuleViolations(resource({ source: "internal_template", name: "x" }), true)).toEqual([]);
  });

  it("runs no CEL rule on a document a blocking check refused (its size is unbounded), and says so", () => {
    const labels = Object.fromEntries(Array.from({ length: 20_000 }, (_, i) => [`l${i}`, "v"]));
    evaluated.selves.length = 0;
    const violations = validateResource(
      resource({ source: "internal_template", sourceConfig: { resourceSpec: { labels } } }),
    );
    expect(violations.map((v) => v.message)).toEqual([
      expect.stringMatching(/labels: Expected object to have no more than 32 properties/),
      RULES_NOT_CHECKED,
    ]);
    // The labels' own rule reads every key: not one rule ran, as the API server runs none.
    expect(evaluated.selves).toEqual([]);
  });

  it("runs the CEL rules after a check that does not block them (a pattern), as the API server does", () => {
    evaluated.selves.length = 0;
    const messages = validateResource(
      resource({
        source: "internal_template",
        rolloutTimeout: "soon",
        secrets: [{ name: "A", value: "x", valueFrom: { secretKeyRef: { name: "s", key: "k" } } }],
      }),
    ).map((v) => v.message);
    expect(messages).toEqual([
      expect.stringMatching(/^spec\.rolloutTimeout: Expected string to match /),
      "spec.secrets[0]: set exactly one of value or valueFrom.secretKeyRef",
    ]);
    expect(evaluated.selves.length).toBeGreaterThan(0);
  });
});

describe("errors per document", () => {
  it("counts a YAML syntax error once, naming the document", () => {
    const text = [
      "apiVersion: dms.dev/v1alpha1",
      "kind: Deployment",
      "metadata: {name: a}",
      "spec: {source: internal_template}",
      "---",
      "apiVersion: dms.dev/v1alpha1",
      "kind: Deployment",
      "metadata:",
      "  name: b",
      " spec: [",
      "  bad: : :",
      "---",
      "apiVersion: dms.dev/v1alpha1",
      "kind: Deployment",
      "metadata: {name: c}",
      "spec: {source: internal_template}",
    ].join("\n");
    const parsed = parseManifests(text, "f.yaml");
    expect(parsed.resources.map((r) => r.resource.metadata.name)).toEqual(["a", "c"]);
    expect(parsed.problems).toHaveLength(1);
    expect(parsed.problems[0]).toMatchObject({ file: "f.yaml", line: 10, document: 2 });
    expect(parsed.problems[0]?.message).toMatch(
      /^document 2 \(from line 5\): .* \(and \d+ more syntax error\(s\) after it\)$/,
    );
  });
});
