/**
 * The Deployment CRD's own validation rules, evaluated on a document as the API server would on
 * create: every `x-kubernetes-validations` CEL rule of the rendered schema (with a CEL
 * implementation, not a second hand-written copy of the rules), and the `x-kubernetes-list-type:
 * map` keys. Transition rules (those reading `oldSelf`) are skipped: a file has no previous
 * object; `plan` checks immutability against the live resource separately. Pure.
 *
 * Bounds: the CEL rules run only on a document that passed the schema's blocking checks
 * (`maxItems`, `maxLength`, `maxProperties`, types, required fields, enums), as the API server
 * runs them, so their work is bounded by the CRD's own bounds, as the API server's cost budget
 * bounds it; each expression is compiled once per process. The list keys are checked in any case,
 * in linear time.
 */
import { Environment, type ParseResult } from "@marcbachmann/cel-js";
import { openApiSchema } from "../crd/render.ts";
import { isRecord } from "../runtime/json.ts";

/** A path into the document: object keys and list indexes. */
export type DocPath = readonly (string | number)[];

/** One rule the document breaks, at the path of the offending node. */
export interface RuleViolation {
  path: DocPath;
  message: string;
}

interface Rule {
  rule: string;
  message?: string;
  fieldPath?: string;
}

/** The CEL environment of the API server as far as the CRDs use it: `self`, standard macros, strings. */
const env = new Environment({ unlistedVariablesAreDyn: true, homogeneousAggregateLiterals: false });
const compiled = new Map<string, ParseResult>();

function compile(rule: string): ParseResult {
  let found = compiled.get(rule);
  if (!found) {
    found = env.parse(rule);
    compiled.set(rule, found);
  }
  return found;
}

let deploymentSchema: Record<string, unknown> | undefined;

/** The Deployment CRD's `openAPIV3Schema`, rendered once, as `crds/` holds it. */
function schemaOfDeployment(): Record<string, unknown> {
  deploymentSchema ??= openApiSchema();
  return deploymentSchema;
}

/**
 * The CRD rules `value` (a whole Deployment resource) breaks: its list keys, and its CEL rules
 * when `celRules` (false when the schema's blocking checks refused it: its size is unbounded).
 */
export function crdRuleViolations(value: unknown, celRules: boolean): RuleViolation[] {
  const out: RuleViolation[] = [];
  walk(schemaOfDeployment(), value, [], celRules, out);
  return out;
}

/** Whether `rule` is a transition rule: it needs the previous object, which a file does not have. */
export function isTransitionRule(rule: string): boolean {
  return /\boldSelf\b/.test(rule);
}

function walk(
  schema: Record<string, unknown>,
  value: unknown,
  path: DocPath,
  celRules: boolean,
  out: RuleViolation[],
): void {
  if (value === undefined) return;
  const properties = schema.properties;
  if (isRecord(properties) && isRecord(value)) {
    for (const [key, child] of Object.entries(properties))
      if (isRecord(child)) walk(child, value[key], [...path, key], celRules, out);
  }
  const additional = schema.additionalProperties;
  if (isRecord(additional) && isRecord(value)) {
    for (const [key, child] of Object.entries(value)) walk(additional, child, [...path, key], celRules, out);
  }
  const items = schema.items;
  if (isRecord(items) && Array.isArray(value)) {
    value.forEach((item, i) => {
      walk(items, item, [...path, i], celRules, out);
    });
    if (schema["x-kubernetes-list-type"] === "map") out.push(...duplicateKeys(schema, value, path));
  }
  const rules = schema["x-kubernetes-validations"];
  if (!celRules || !Array.isArray(rules)) return;
  for (const rule of rules as Rule[]) {
    if (isTransitionRule(rule.rule)) continue;
    const at = rule.fieldPath ? [...path, ...fieldPathOf(rule.fieldPath)] : path;
    let ok: unknown;
    try {
      ok = compile(rule.rule)({ self: celValue(value) });
    } catch (error) {
      const why = (error instanceof Error ? error.message : String(error)).split("\n")[0];
      out.push({
        path: at,
        message: `${showPath(at)}: the CRD rule ${rule.rule} could not be evaluated: ${why}`,
      });
      continue;
    }
    if (ok !== true) out.push({ path: at, message: messageAt(at, rule) });
  }
}

/** The CEL values of the document's objects, made once per object however many rules read it. */
const celValues = new WeakMap<object, unknown>();

/**
 * `value` as the CEL evaluator reads it: every object a `Map`. A plain object is taken for a CEL
 * map only while its `constructor` is `Object`, so an object with a key of that name (a label
 * `constructor: x`, which the API server accepts) could not be evaluated; a Map has no such keys.
 */
function celValue(value: unknown): unknown {
  if (Array.isArray(value)) {
    const known = celValues.get(value);
    if (known !== undefined) return known;
    const items = value.map(celValue);
    celValues.set(value, items);
    return items;
  }
  if (!isRecord(value)) return value;
  const known = celValues.get(value);
  if (known !== undefined) return known;
  const map = new Map(Object.entries(value).map(([k, v]) => [k, celValue(v)]));
  celValues.set(value, map);
  return map;
}

/** `.a.b` (a rule's fieldPath, relative to the node) as a path. */
function fieldPathOf(fieldPath: string): string[] {
  return fieldPath.split(".").filter((p) => p !== "");
}

/**
 * The rule's message at `path`. The CRD's messages start with the field they concern, written
 * with `[]` for a list index (`spec.secrets[]: …`): that start is given its concrete indexes;
 * a message naming no field is put after the path.
 */
function messageAt(path: DocPath, rule: Rule): string {
  const message = rule.message ?? `failed rule: ${rule.rule}`;
  const concrete = showPath(path);
  const generic = concrete.replace(/\[\d+\]/g, "[]");
  if (message.startsWith(`${generic}:`) || message.startsWith(`${generic} `))
    return `${concrete}${message.slice(generic.length)}`;
  return `${concrete}: ${message}`;
}

/** Items of a `list-type: map` list that repeat an earlier item's keys, as the API server refuses them. */
function duplicateKeys(
  schema: Record<string, unknown>,
  list: readonly unknown[],
  path: DocPath,
): RuleViolation[] {
  const keys = Array.isArray(schema["x-kubernetes-list-map-keys"])
    ? (schema["x-kubernetes-list-map-keys"] as string[])
    : [];
  const first = new Map<string, number>();
  const out: RuleViolation[] = [];
  list.forEach((item, i) => {
    if (!isRecord(item)) return;
    const key = JSON.stringify(keys.map((k) => item[k] ?? null));
    const at = first.get(key);
    if (at === undefined) {
      first.set(key, i);
      return;
    }
    const field = keys.length === 1 && keys[0] !== undefined ? [...path, i, keys[0]] : [...path, i];
    const shown = keys.length === 1 ? JSON.stringify(item[keys[0] ?? ""]) : key;
    out.push({
      path: field,
      message: `${showPath(field)}: duplicate ${keys.join(", ")} ${shown} (also at ${showPath([...path, at])})`,
    });
  });
  return out;
}

/** `spec.secrets[0].name`-style rendering of a path. */
export function showPath(path: DocPath): string {
  let out = "";
  for (const part of path) out += typeof part === "number" ? `[${part}]` : out === "" ? part : `.${part}`;
  return out === "" ? "(document)" : out;
}
