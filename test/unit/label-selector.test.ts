// Label selectors as Kubernetes defines them (k8s.io/apimachinery/pkg/labels and metav1's
// LabelSelector): the string syntax of --default-connection-namespace-selector and the object of
// ClusterServiceConnection.spec.namespaceSelector, parsed to one selector and matched by one
// function. Tables of the grammar's cases (most from Kubernetes' own selector tests), then laws
// over generated selectors and label sets.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  describeFix,
  formatSelector,
  type Labels,
  labelArguments,
  labelKeyProblem,
  labelValueProblem,
  listSelectorProblem,
  matches,
  parseSelector,
  type Requirement,
  type Selector,
  selectorFromObject,
  unmet,
} from "../../src/crd/label-selector.ts";

const parsed = (text: string): Selector => {
  const result = parseSelector(text);
  if (!result.ok) throw new Error(`${text}: ${result.problem}`);
  return result.selector;
};
const problemOf = (text: string) => {
  const result = parseSelector(text);
  return result.ok ? undefined : result.problem;
};

describe("parseSelector: the string syntax", () => {
  it.each([
    ["", []],
    ["   ", []],
    ["x=a", [{ key: "x", operator: "In", values: ["a"] }]],
    ["x==a", [{ key: "x", operator: "In", values: ["a"] }]],
    ["x!=a", [{ key: "x", operator: "NotIn", values: ["a"] }]],
    ["x", [{ key: "x", operator: "Exists", values: [] }]],
    ["!x", [{ key: "x", operator: "DoesNotExist", values: [] }]],
    ["! x", [{ key: "x", operator: "DoesNotExist", values: [] }]],
    ["x in (a,b)", [{ key: "x", operator: "In", values: ["a", "b"] }]],
    ["x in(a)", [{ key: "x", operator: "In", values: ["a"] }]],
    ["x notin ( a , b )", [{ key: "x", operator: "NotIn", values: ["a", "b"] }]],
    ["x in (a,a,b)", [{ key: "x", operator: "In", values: ["a", "b"] }]],
    ["x=", [{ key: "x", operator: "In", values: [""] }]],
    [
      "x= ,z= ",
      [
        { key: "x", operator: "In", values: [""] },
        { key: "z", operator: "In", values: [""] },
      ],
    ],
    ["x in ()", [{ key: "x", operator: "In", values: [""] }]],
    ["x in (,a)", [{ key: "x", operator: "In", values: ["", "a"] }]],
    ["x in (a,)", [{ key: "x", operator: "In", values: ["a", ""] }]],
    // Keywords are names where a name is expected.
    ["in", [{ key: "in", operator: "Exists", values: [] }]],
    ["in in (notin)", [{ key: "in", operator: "In", values: ["notin"] }]],
    ["x=in", [{ key: "x", operator: "In", values: ["in"] }]],
    [
      "dms.dev/tenant=platform,tier notin (dev),!quarantine,team",
      [
        { key: "dms.dev/tenant", operator: "In", values: ["platform"] },
        { key: "tier", operator: "NotIn", values: ["dev"] },
        { key: "quarantine", operator: "DoesNotExist", values: [] },
        { key: "team", operator: "Exists", values: [] },
      ],
    ],
  ] as [string, Requirement[]][])("%j", (text, requirements) => {
    expect(parseSelector(text)).toEqual({ ok: true, selector: requirements });
  });

  it.each([
    ["x=a||y=b", /label value "a\|\|y" must be empty or begin/],
    ["x==a==b", /expected "," or the end, found "=="/],
    ["!x=a", /expected "," or the end, found "="/],
    ["x=a,", /expected a requirement after ","/],
    [",x=a", /expected a label key, found ","/],
    ["x in (a", /in a value list, found the end/],
    ["x in a", /expected "\(" after in\/notin, found "a"/],
    ["x in (a b)", /"," or "\)" in a value list, found "b"/],
    ["x=(a)", /expected a value, found "\("/],
    ["x y", /expected an operator .* after x, found "y"/],
    ["x>1", /operator ">" is not supported here/],
    ["x<1", /operator "<" is not supported here/],
    ["x=a b", /expected "," or the end, found "b"/],
    ["-x=a", /label key "-x": its name must begin and end with an alphanumeric/],
    ["a/b/c=d", /label key "a\/b\/c"/],
    ["Example.com/x=a", /its prefix must be a DNS subdomain/],
    ["/x=a", /the prefix before "\/" is empty/],
    ["x/=a", /the name is empty/],
    [`x=${"v".repeat(64)}`, /longer than 63 characters/],
    [`${"k".repeat(64)}=a`, /its name is longer than 63 characters/],
    [`${"p".repeat(254)}/k=a`, /its prefix is longer than 253 characters/],
    ["x=-a", /label value "-a" must be empty or begin and end with an alphanumeric/],
    ["x in (a,-b)", /label value "-b"/],
  ])("refuses %j, saying where", (text, problem) => {
    expect(problemOf(text)).toMatch(problem);
  });
});

describe("matches: Kubernetes' semantics", () => {
  it.each([
    ["", {}, true],
    ["", { x: "y" }, true],
    ["x=y", { x: "y" }, true],
    ["x=y", { x: "z" }, false],
    ["x=y", {}, false],
    ["x!=y", {}, true], // absent is "not y"
    ["x!=y", { x: "z" }, true],
    ["x!=y", { x: "y" }, false],
    ["x in (y,z)", { x: "z" }, true],
    ["x in (y,z)", { x: "w" }, false],
    ["x in (y,z)", {}, false],
    ["x notin (y,z)", {}, true],
    ["x notin (y,z)", { x: "y" }, false],
    ["x", { x: "" }, true],
    ["x", { y: "x" }, false],
    ["!x", { y: "x" }, true],
    ["!x", { x: "" }, false],
    ["x=", { x: "" }, true],
    ["x=", {}, false],
    ["x=y,z", { x: "y" }, false],
    ["x=y,z", { x: "y", z: "1" }, true],
    // A label named like an Object.prototype member is a label like any other.
    ["constructor", {}, false],
    ["!toString", {}, true],
  ] as [string, Labels, boolean][])("%j on %j: %s", (text, labels, expected) => {
    expect(matches(parsed(text), labels)).toBe(expected);
  });
});

describe("selectorFromObject: a metav1.LabelSelector", () => {
  it("reads matchLabels as equalities and matchExpressions as written; {} selects everything", () => {
    expect(selectorFromObject({})).toEqual({ ok: true, selector: [] });
    const result = selectorFromObject({
      matchLabels: { team: "a" },
      matchExpressions: [
        { key: "tier", operator: "NotIn", values: ["dev", "dev"] },
        { key: "quarantine", operator: "DoesNotExist" },
      ],
    });
    expect(result).toEqual({
      ok: true,
      selector: [
        { key: "team", operator: "In", values: ["a"] },
        { key: "tier", operator: "NotIn", values: ["dev"] },
        { key: "quarantine", operator: "DoesNotExist", values: [] },
      ],
    });
  });

  it.each([
    [{ matchExpressions: [{ key: "x", operator: "Gt", values: ["1"] }] }, /operator "Gt" is not one of In/],
    [{ matchExpressions: [{ key: "x", operator: "In", values: [] }] }, /In needs at least one value/],
    [{ matchExpressions: [{ key: "x", operator: "In" }] }, /In needs at least one value/],
    [{ matchExpressions: [{ key: "x", operator: "Exists", values: ["a"] }] }, /Exists takes no values/],
    [{ matchExpressions: [{ key: "-x", operator: "Exists" }] }, /matchExpressions\[0\]: label key "-x"/],
    [{ matchLabels: { "a b": "c" } }, /matchLabels: label key "a b"/],
    [{ matchLabels: { x: "a b" } }, /matchLabels: label value "a b"/],
  ])("refuses %j", (obj, problem) => {
    const result = selectorFromObject(obj);
    expect(result.ok ? undefined : result.problem).toMatch(problem);
  });
});

describe("what a refused namespace is told", () => {
  it("names each failing requirement, what the namespace has, and the kubectl label arguments", () => {
    const selector = parsed("team in (a,b),tier=prod,!quarantine,env notin (dev),owner");
    const labels = { team: "c", quarantine: "yes", env: "dev", tier: "prod" };
    const failed = unmet(selector, labels);
    expect(failed.map((r) => r.key)).toEqual(["team", "quarantine", "env", "owner"]);
    expect(describeFix(failed, labels)).toBe(
      "label team with one of a, b (it has team=c); no label quarantine (it has quarantine=yes); label env absent or not dev (it has env=dev); label owner (any value)",
    );
    expect(labelArguments(failed)).toBe("team=<a|b> quarantine- env- owner=<value>");
    expect(labelArguments(unmet(parsed("tier=prod"), {}))).toBe("tier=prod");
  });
});

// Generators of what Kubernetes accepts: label keys (with and without a prefix) and values.
const alnum = fc.constantFrom(..."abcxyzAZ09");
const inner = fc.constantFrom(..."abz09-_.");
const labelName = fc
  .tuple(alnum, fc.array(inner, { maxLength: 8 }), alnum, fc.boolean())
  .map(([a, mid, z, short]) => (short ? a : `${a}${mid.join("")}${z}`));
const dnsLabel = fc
  .tuple(
    fc.constantFrom(..."abz09"),
    fc.array(fc.constantFrom(..."az09-"), { maxLength: 5 }),
    fc.constantFrom(..."az9"),
  )
  .map(([a, mid, z]) => `${a}${mid.join("")}${z}`);
const labelKey = fc.oneof(
  labelName,
  fc
    .tuple(fc.array(dnsLabel, { minLength: 1, maxLength: 3 }), labelName)
    .map(([p, n]) => `${p.join(".")}/${n}`),
);
const labelValue = fc.oneof(fc.constant(""), labelName);
const requirement: fc.Arbitrary<Requirement> = fc.oneof(
  fc.record({
    key: labelKey,
    operator: fc.constantFrom("In" as const, "NotIn" as const),
    values: fc.uniqueArray(labelValue, { minLength: 1, maxLength: 4 }),
  }),
  fc.record({
    key: labelKey,
    operator: fc.constantFrom("Exists" as const, "DoesNotExist" as const),
    values: fc.constant([]),
  }),
);
const selector = fc.array(requirement, { maxLength: 5 });
/** Label sets that often share keys and values with the selectors generated alongside. */
const labelsFor = (s: Selector) =>
  fc.dictionary(
    fc.oneof(labelKey, ...(s.length > 0 ? [fc.constantFrom(...s.map((r) => r.key))] : [])),
    fc.oneof(
      labelValue,
      ...(s.some((r) => r.values.length > 0) ? [fc.constantFrom(...s.flatMap((r) => r.values))] : []),
    ),
    { maxKeys: 6 },
  );
const withLabels = selector.chain((s) => fc.tuple(fc.constant(s), labelsFor(s)));

describe("laws", () => {
  it("generated keys and values are ones Kubernetes accepts (the generators are honest)", () => {
    fc.assert(fc.property(labelKey, labelValue, (k, v) => !labelKeyProblem(k) && !labelValueProblem(v)));
  });

  it("formatSelector writes what parseSelector reads back to the same selector", () => {
    fc.assert(
      fc.property(selector, (s) => {
        expect(parseSelector(formatSelector(s))).toEqual({ ok: true, selector: s });
      }),
    );
  });

  it("the object form and the string form of one selector match the same label sets", () => {
    fc.assert(
      fc.property(withLabels, ([s, labels]) => {
        const obj = selectorFromObject({
          matchExpressions: s.map((r) => ({ key: r.key, operator: r.operator, values: [...r.values] })),
        });
        expect(obj.ok && matches(obj.selector, labels)).toBe(matches(parsed(formatSelector(s)), labels));
      }),
    );
  });

  it("a selector matches exactly when no requirement is unmet; one more requirement never widens it", () => {
    fc.assert(
      fc.property(withLabels, requirement, ([s, labels], extra) => {
        expect(matches(s, labels)).toBe(unmet(s, labels).length === 0);
        if (matches([...s, extra], labels)) expect(matches(s, labels)).toBe(true);
      }),
    );
  });

  it("NotIn is the negation of In, DoesNotExist of Exists", () => {
    const negate: Record<Requirement["operator"], Requirement["operator"]> = {
      In: "NotIn",
      NotIn: "In",
      Exists: "DoesNotExist",
      DoesNotExist: "Exists",
    };
    fc.assert(
      fc.property(withLabels, ([s, labels]) => {
        for (const r of s)
          expect(matches([{ ...r, operator: negate[r.operator] }], labels)).toBe(!matches([r], labels));
      }),
    );
  });

  it("any text parses or gives a problem: never a throw", () => {
    const text = fc.oneof(
      fc.string({ maxLength: 40 }),
      fc
        .array(
          fc.constantFrom("x", "a/b", "=", "==", "!=", "!", "(", ")", ",", " ", "in", "notin", "-", ">"),
          { maxLength: 12 },
        )
        .map((t) => t.join("")),
    );
    fc.assert(
      fc.property(text, (t) => {
        const result = parseSelector(t);
        if (result.ok) expect(parseSelector(formatSelector(result.selector))).toEqual(result);
        else expect(result.problem.length).toBeGreaterThan(0);
      }),
    );
  });
});

describe("listSelectorProblem: a listing's -l", () => {
  it("refuses a Gt/Lt value with a sign, which is no label value (labels.Parse checks both)", () => {
    expect(listSelectorProblem("n<-1")).toBe(
      'label value "-1" must be empty or begin and end with an alphanumeric character, with "-", "_", "." or alphanumerics between',
    );
    expect(listSelectorProblem("n > +3,tier=web")).toMatch(/^label value "\+3" must be empty/);
  });

  it("takes what parseSelector takes, and Gt/Lt with an integer, as the API server does", () => {
    for (const text of [
      "",
      "a=b,c in (x,y),!d",
      "replicas>2",
      "n<0,tier=web",
      "n > 007",
      "n<9223372036854775807",
    ])
      expect(listSelectorProblem(text), text).toBeUndefined();
    // parseSelector still refuses them (a namespace selector object has no such operator).
    expect(problemOf("replicas>2")).toMatch(/not supported here/);
  });

  it("takes labels.Parse's white space only (space, tab, CR, LF): any other is part of a word", () => {
    expect(listSelectorProblem("x\t=\r\na ,\tn > 1")).toBeUndefined();
    expect(parseSelector("x\t=\r\na").ok).toBe(true);
    for (const text of ["team=a\u00a0", "team\u000b=a", "team=\u000ca", "n>1\u2003", "x in (a,\u3000b)"]) {
      expect(listSelectorProblem(text), JSON.stringify(text)).toBeDefined();
      expect(parseSelector(text).ok, JSON.stringify(text)).toBe(false);
    }
  });

  it("says what is wrong with anything else", () => {
    expect(listSelectorProblem("a in (b")).toBe('expected "," or ")" in a value list, found the end');
    expect(listSelectorProblem("n>x")).toBe(
      `for 'Gt', 'Lt' operators, the value must be an integer, found "x"`,
    );
    expect(listSelectorProblem("n>")).toBe("expected an integer, found the end");
    expect(listSelectorProblem("n>9223372036854775808")).toBe(
      `for 'Gt', 'Lt' operators, the value must be an integer, found "9223372036854775808"`,
    );
    expect(listSelectorProblem("Bad Key=1")).toBe(
      'expected an operator (=, ==, !=, in, notin, >, <), "," or the end after Bad, found "Key"',
    );
  });
});
