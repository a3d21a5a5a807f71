/**
 * Kubernetes label selectors, in both of their spellings: the `metav1.LabelSelector` object
 * (`matchLabels`, `matchExpressions`) of `ClusterServiceConnection.spec.namespaceSelector`, and
 * the string syntax of `--default-connection-namespace-selector` (`a=b,c in (x,y),!d`). Both
 * become one {@link Selector}, matched by one function. Pure.
 *
 * The string syntax follows `k8s.io/apimachinery/pkg/labels.Parse`: `k`, `!k`, `k=v`, `k==v`,
 * `k!=v`, `k in (v1,v2)`, `k notin (v1)`, comma-joined; an empty string selects everything; keys
 * and values are checked as Kubernetes checks label keys and values. Its `>` and `<` are refused
 * (a LabelSelector object has no such operator, and a namespace label is rarely a number). No npm
 * package parses this syntax (the Kubernetes client passes selectors to the API server as text).
 */

/** The operators of a `matchExpressions` entry; `=`/`==` and `!=` become `In`/`NotIn` of one value. */
export const SELECTOR_OPERATORS = ["In", "NotIn", "Exists", "DoesNotExist"] as const;
export type SelectorOperator = (typeof SELECTOR_OPERATORS)[number];

/** One requirement: all of a selector's must hold. `values` is empty for Exists and DoesNotExist. */
export interface Requirement {
  key: string;
  operator: SelectorOperator;
  values: readonly string[];
}

/** A parsed selector: the requirements that must all hold (none: every label set matches). */
export type Selector = readonly Requirement[];

/** A `metav1.LabelSelector` as it is written in a resource. */
export interface LabelSelectorObject {
  matchLabels?: Readonly<Record<string, string>>;
  matchExpressions?: readonly { key: string; operator: string; values?: readonly string[] }[];
}

/** Labels of an object (a namespace). */
export type Labels = Readonly<Record<string, string>>;

/** A selector, or what is wrong with its text or object. */
export type SelectorResult = { ok: true; selector: Selector } | { ok: false; problem: string };

/** Longest label key: a DNS subdomain prefix (253), a slash and a name (63). */
export const MAX_LABEL_KEY_LENGTH = 317;
/** Longest label key prefix (a DNS subdomain). */
export const MAX_LABEL_PREFIX_LENGTH = 253;
/** Longest label name (the part after the prefix), and longest label value. */
export const MAX_LABEL_NAME_LENGTH = 63;
export const MAX_LABEL_VALUE_LENGTH = 63;

/** A label name (and a non-empty value): alphanumerics at both ends, `-_.` between. */
export const LABEL_NAME_PATTERN = "^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$";
/** A DNS subdomain, the prefix of a label key. */
export const LABEL_PREFIX_PATTERN = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$";
const NAME = new RegExp(LABEL_NAME_PATTERN);
const PREFIX = new RegExp(LABEL_PREFIX_PATTERN);

/** What is wrong with a label key, or undefined when it is one Kubernetes accepts. */
export function labelKeyProblem(key: string): string | undefined {
  const slash = key.indexOf("/");
  const prefix = slash < 0 ? undefined : key.slice(0, slash);
  const name = slash < 0 ? key : key.slice(slash + 1);
  const shown = JSON.stringify(key);
  if (prefix !== undefined) {
    if (prefix === "") return `label key ${shown}: the prefix before "/" is empty`;
    if (prefix.length > MAX_LABEL_PREFIX_LENGTH)
      return `label key ${shown}: its prefix is longer than ${MAX_LABEL_PREFIX_LENGTH} characters`;
    if (!PREFIX.test(prefix))
      return `label key ${shown}: its prefix must be a DNS subdomain (lower-case alphanumerics, "-" and ".")`;
  }
  if (name === "") return `label key ${shown}: the name is empty`;
  if (name.length > MAX_LABEL_NAME_LENGTH)
    return `label key ${shown}: its name is longer than ${MAX_LABEL_NAME_LENGTH} characters`;
  if (!NAME.test(name))
    return `label key ${shown}: its name must begin and end with an alphanumeric character, with "-", "_", "." or alphanumerics between (and at most one "/")`;
  return undefined;
}

/** What is wrong with a label value, or undefined when it is one Kubernetes accepts (`""` is). */
export function labelValueProblem(value: string): string | undefined {
  const shown = JSON.stringify(value);
  if (value.length > MAX_LABEL_VALUE_LENGTH)
    return `label value ${shown} is longer than ${MAX_LABEL_VALUE_LENGTH} characters`;
  if (value !== "" && !NAME.test(value))
    return `label value ${shown} must be empty or begin and end with an alphanumeric character, with "-", "_", "." or alphanumerics between`;
  return undefined;
}

/** True when `labels` satisfy every requirement of `selector`. */
export function matches(selector: Selector, labels: Labels): boolean {
  return selector.every((r) => holds(r, labels));
}

/** The requirements of `selector` that `labels` do not satisfy (none when it matches). */
export function unmet(selector: Selector, labels: Labels): Requirement[] {
  return selector.filter((r) => !holds(r, labels));
}

function holds(r: Requirement, labels: Labels): boolean {
  const has = Object.hasOwn(labels, r.key);
  switch (r.operator) {
    case "In":
      return has && r.values.includes(labels[r.key] ?? "");
    case "NotIn":
      return !has || !r.values.includes(labels[r.key] ?? "");
    case "Exists":
      return has;
    case "DoesNotExist":
      return !has;
  }
}

/**
 * A selector in the string syntax, as messages show it (and as {@link parseSelector} reads it
 * back to an equal selector): `a=b`, `a!=b`, `a in (x,y)`, `a notin (x,y)`, `a`, `!a`.
 */
export function formatSelector(selector: Selector): string {
  return selector.map(formatRequirement).join(",");
}

function formatRequirement(r: Requirement): string {
  const [only, ...more] = r.values;
  switch (r.operator) {
    case "Exists":
      return r.key;
    case "DoesNotExist":
      return `!${r.key}`;
    case "In":
      return only !== undefined && more.length === 0
        ? `${r.key}=${only}`
        : `${r.key} in (${r.values.join(",")})`;
    case "NotIn":
      return only !== undefined && more.length === 0
        ? `${r.key}!=${only}`
        : `${r.key} notin (${r.values.join(",")})`;
  }
}

/**
 * What labels would satisfy the requirements `labels` fail, said for a person: `label team=a`,
 * `label tier with one of a, b`, `no label quarantine (it has quarantine=yes)`, …
 */
export function describeFix(failed: readonly Requirement[], labels: Labels): string {
  return failed.map((r) => fixOf(r, labels)).join("; ");
}

function fixOf(r: Requirement, labels: Labels): string {
  const has = Object.hasOwn(labels, r.key) ? ` (it has ${r.key}=${labels[r.key]})` : "";
  const [only, ...more] = r.values;
  if (r.operator === "Exists") return `label ${r.key} (any value)`;
  if (r.operator === "DoesNotExist") return `no label ${r.key}${has}`;
  if (r.operator === "NotIn") return `label ${r.key} absent or not ${r.values.join(", ")}${has}`;
  return only !== undefined && more.length === 0
    ? `label ${r.key}=${only}${has}`
    : `label ${r.key} with one of ${r.values.join(", ")}${has}`;
}

/**
 * The selector of a `metav1.LabelSelector` object, checked as the API server checks one:
 * `matchLabels` are `In` of one value; `In`/`NotIn` need values, `Exists`/`DoesNotExist` none.
 * The CRD already refuses what this refuses; the check stands for objects that bypassed it.
 */
export function selectorFromObject(obj: LabelSelectorObject): SelectorResult {
  const requirements: Requirement[] = [];
  for (const [key, value] of Object.entries(obj.matchLabels ?? {})) {
    const problem = labelKeyProblem(key) ?? labelValueProblem(value);
    if (problem) return { ok: false, problem: `matchLabels: ${problem}` };
    requirements.push({ key, operator: "In", values: [value] });
  }
  for (const [i, e] of (obj.matchExpressions ?? []).entries()) {
    const at = `matchExpressions[${i}]`;
    const operator = SELECTOR_OPERATORS.find((o) => o === e.operator);
    if (!operator)
      return {
        ok: false,
        problem: `${at}.operator ${JSON.stringify(e.operator)} is not one of ${SELECTOR_OPERATORS.join(", ")}`,
      };
    const values = [...new Set(e.values ?? [])];
    const problem = labelKeyProblem(e.key) ?? values.map(labelValueProblem).find((p) => p !== undefined);
    if (problem) return { ok: false, problem: `${at}: ${problem}` };
    const needsValues = operator === "In" || operator === "NotIn";
    if (needsValues && values.length === 0)
      return { ok: false, problem: `${at}: operator ${operator} needs at least one value` };
    if (!needsValues && values.length > 0)
      return { ok: false, problem: `${at}: operator ${operator} takes no values` };
    requirements.push({ key: e.key, operator, values });
  }
  return { ok: true, selector: requirements };
}

/** Tokens of the string syntax. */
type Token =
  | { kind: "identifier"; text: string }
  | { kind: "=" | "==" | "!=" | "!" | "(" | ")" | "," | ">" | "<" }
  | { kind: "end" };

const SYMBOLS = ["!=", "==", "=", "!", "(", ")", ",", ">", "<"] as const;
const SPECIAL = new Set(["=", "!", "(", ")", ",", ">", "<"]);
/** labels.Parse's white space: any other character (a no-break space, a form feed) is part of a word. */
const SPACE = /[ \t\r\n]/;

/** Splits `text` into tokens: the symbols, and runs of anything else that is not white space. */
function tokenize(text: string): Token[] {
  const tokens: Token[] = [];
  let i = 0;
  while (i < text.length) {
    const ch = text.charAt(i);
    if (SPACE.test(ch)) {
      i += 1;
      continue;
    }
    const symbol = SYMBOLS.find((s) => text.startsWith(s, i));
    if (symbol) {
      tokens.push({ kind: symbol });
      i += symbol.length;
      continue;
    }
    let end = i;
    while (end < text.length && !SPACE.test(text.charAt(end)) && !SPECIAL.has(text.charAt(end))) end += 1;
    tokens.push({ kind: "identifier", text: text.slice(i, end) });
    i = end;
  }
  tokens.push({ kind: "end" });
  return tokens;
}

/** How a problem shows a token. */
function shown(t: Token): string {
  if (t.kind === "identifier") return JSON.stringify(t.text);
  return t.kind === "end" ? "the end" : `"${t.kind}"`;
}

/** A problem found while parsing: thrown inside the parser, returned by {@link parseSelector}. */
class SyntaxProblem extends Error {}

/**
 * Parses the label-selector string syntax (see the module comment). A problem names what was
 * found where and what was expected; key and value problems say how Kubernetes spells them.
 */
export function parseSelector(text: string): SelectorResult {
  return parse(text, false);
}

/**
 * What is wrong with `text` as a `-l` selector of a listing, or undefined: the string syntax as
 * {@link parseSelector} reads it, and `k>1`, `k<1` as the API server's `labels.Parse` takes them
 * (Gt and Lt: a value that is both an int64 and a label value, so digits only: `k>-1` is refused).
 */
export function listSelectorProblem(text: string): string | undefined {
  const parsed = parse(text, true);
  return parsed.ok ? undefined : parsed.problem;
}

/** A requirement of a listing's selector: also Gt and Lt of an integer, which a Selector has not. */
type ListRequirement = Requirement | { key: string; operator: "Gt" | "Lt"; values: readonly [string] };

/** Largest value of `strconv.ParseInt(v, 10, 64)`, which Gt and Lt values must pass. */
const MAX_INT64 = 2n ** 63n - 1n;

/**
 * The parser of {@link parseSelector}; with `comparisons`, of {@link listSelectorProblem}, which
 * takes `>` and `<` too.
 */
function parse(text: string, comparisons: false): SelectorResult;
function parse(
  text: string,
  comparisons: true,
): { ok: true; selector: readonly ListRequirement[] } | { ok: false; problem: string };
function parse(
  text: string,
  comparisons: boolean,
): { ok: true; selector: readonly ListRequirement[] } | { ok: false; problem: string } {
  const tokens = tokenize(text);
  let at = 0;
  const peek = (): Token => tokens[at] ?? { kind: "end" };
  const next = (): Token => {
    const t = peek();
    at += 1;
    return t;
  };
  const fail = (message: string): never => {
    throw new SyntaxProblem(message);
  };
  const identifier = (what: string): string => {
    const t = next();
    return t.kind === "identifier" ? t.text : fail(`expected ${what}, found ${shown(t)}`);
  };
  const key = (): string => {
    const k = identifier("a label key");
    const problem = labelKeyProblem(k);
    return problem ? fail(problem) : k;
  };
  const value = (v: string): string => {
    const problem = labelValueProblem(v);
    return problem ? fail(problem) : v;
  };
  /** `(v1,v2)`: empty entries are the empty value, as in Kubernetes (`()` is `("")`). */
  const valueList = (): string[] => {
    const open = next();
    if (open.kind !== "(") fail(`expected "(" after in/notin, found ${shown(open)}`);
    const values: string[] = [];
    let expectValue = true;
    for (;;) {
      const t = next();
      if (t.kind === ")") {
        if (expectValue) values.push("");
        return [...new Set(values)];
      }
      if (t.kind === "," && expectValue) values.push("");
      else if (t.kind === "identifier" && expectValue) values.push(value(t.text));
      else if (t.kind !== ",")
        fail(`expected ${expectValue ? "a value, " : ""}"," or ")" in a value list, found ${shown(t)}`);
      expectValue = t.kind === ",";
    }
  };
  /** The value after `=`, `==` or `!=`: absent (the end or a comma) is the empty value. */
  const exactValue = (): string => {
    const t = peek();
    if (t.kind === "end" || t.kind === ",") return "";
    return value(identifier("a value"));
  };
  const requirement = (): ListRequirement => {
    if (peek().kind === "!") {
      next();
      return { key: key(), operator: "DoesNotExist", values: [] };
    }
    const k = key();
    const op = peek();
    if (op.kind === "end" || op.kind === ",") return { key: k, operator: "Exists", values: [] };
    next();
    if (op.kind === "=" || op.kind === "==") return { key: k, operator: "In", values: [exactValue()] };
    if (op.kind === "!=") return { key: k, operator: "NotIn", values: [exactValue()] };
    if (op.kind === "identifier" && (op.text === "in" || op.text === "notin"))
      return { key: k, operator: op.text === "in" ? "In" : "NotIn", values: valueList() };
    if ((op.kind === ">" || op.kind === "<") && comparisons) {
      const v = identifier("an integer");
      if (!/^[-+]?\d+$/.test(v) || BigInt(v) > MAX_INT64 || BigInt(v) < -MAX_INT64 - 1n)
        fail(`for 'Gt', 'Lt' operators, the value must be an integer, found ${JSON.stringify(v)}`);
      return { key: k, operator: op.kind === ">" ? "Gt" : "Lt", values: [value(v)] };
    }
    if (op.kind === ">" || op.kind === "<")
      return fail(`operator "${op.kind}" is not supported here: use in (…) or notin (…)`);
    return fail(
      `expected an operator (=, ==, !=, in, notin${comparisons ? ", >, <" : ""}), "," or the end after ${k}, found ${shown(op)}`,
    );
  };
  try {
    const requirements: ListRequirement[] = [];
    if (peek().kind === "end") return { ok: true, selector: requirements };
    for (;;) {
      requirements.push(requirement());
      const t = next();
      if (t.kind === "end") return { ok: true, selector: requirements };
      if (t.kind !== ",") fail(`expected "," or the end, found ${shown(t)}`);
      if (peek().kind === "end") fail(`expected a requirement after ",", found the end`);
    }
  } catch (error) {
    if (error instanceof SyntaxProblem) return { ok: false, problem: error.message };
    throw error;
  }
}

/**
 * The `kubectl label namespace <ns> …` arguments that would satisfy the requirements `failed`:
 * `key=value`, `key-` to remove, `key=<value>` where any value (or one of several) will do.
 */
export function labelArguments(failed: readonly Requirement[]): string {
  return failed
    .map((r) => {
      const [only, ...more] = r.values;
      if (r.operator === "DoesNotExist" || r.operator === "NotIn") return `${r.key}-`;
      if (r.operator === "Exists") return `${r.key}=<value>`;
      return only !== undefined && more.length === 0
        ? `${r.key}=${only}`
        : `${r.key}=<${r.values.join("|")}>`;
    })
    .join(" ");
}
