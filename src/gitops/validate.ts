/**
 * Checks a Deployment resource as `kubectl apply` would have the API server check it: the CRD's
 * OpenAPI schema (the very TypeBox schema the CRD is generated from: types, whole numbers, bounds,
 * enums, patterns, lengths, required fields), unknown fields (kubectl's default strict validation
 * refuses them), and the CRD's own CEL rules and list keys that need no previous object
 * (`crd-rules.ts`; the immutability rules need the live object: `plan` checks those separately). Pure.
 */

import { KindGuard, type TSchema } from "@sinclair/typebox";
import { Value, ValueErrorType } from "@sinclair/typebox/value";
import { DeploymentResourceSchema, DeploymentSpecSchema } from "../crd/schema.ts";
import { isRecord } from "../runtime/json.ts";
import { crdRuleViolations, type DocPath, type RuleViolation, showPath } from "./crd-rules.ts";
import { isObjectName } from "./names.ts";

export type { DocPath };

/** One reason the resource would be refused, at the path of the offending node. */
export type Violation = RuleViolation;

/**
 * Every violation of `value` as a Deployment resource, in document order of discovery: schema
 * errors, unknown fields under `spec`, the CEL rules, and a missing or invalid `metadata.name`.
 * An empty list means the API server would accept it on create. As the API server does, the CEL
 * rules are not run on a document a blocking check refused (a type, a bound, a required field, an
 * enum: its size is unbounded there), which then says so after its errors, nor on one with an
 * unknown field.
 */
export function validateResource(value: unknown): Violation[] {
  const structural = schemaViolations(value);
  const out: Violation[] = [...structural.violations];
  if (!isRecord(value)) return out;
  const metadata = value.metadata;
  const name = isRecord(metadata) ? metadata.name : undefined;
  if (name === undefined) out.push({ path: ["metadata"], message: "metadata.name is required" });
  else if (typeof name === "string" && !isObjectName(name))
    out.push({
      path: ["metadata", "name"],
      message: `${JSON.stringify(name)} is not a valid Kubernetes object name (lower-case letters, digits, '-' and '.', at most 253 characters); keep the service's name in spec.name`,
    });
  const unknown = isRecord(value.spec) ? unknownFields(DeploymentSpecSchema, value.spec, ["spec"]) : [];
  out.push(...unknown);
  // An unknown field is refused before any check (kubectl's strict field validation): no rule runs.
  out.push(...crdRuleViolations(value, !structural.blocking && unknown.length === 0));
  if (structural.blocking) out.push({ path: [], message: RULES_NOT_CHECKED });
  return out;
}

/** The API server's words when a blocking error kept it from running the CEL rules. */
export const RULES_NOT_CHECKED =
  "some validation rules were not checked because the object was invalid; correct the existing errors to complete validation";

/**
 * The schema errors after which the API server still runs the CEL rules (its `Invalid` errors: a
 * pattern, a bound on a number, a minimum length); every other kind blocks them (a type or a
 * format, `maxItems`, `maxLength`, `maxProperties`, a required field, an enum).
 */
const NON_BLOCKING = new Set<ValueErrorType>([
  ValueErrorType.ArrayMinItems,
  ValueErrorType.ArrayUniqueItems,
  ValueErrorType.IntegerExclusiveMaximum,
  ValueErrorType.IntegerExclusiveMinimum,
  ValueErrorType.IntegerMaximum,
  ValueErrorType.IntegerMinimum,
  ValueErrorType.IntegerMultipleOf,
  ValueErrorType.NumberExclusiveMaximum,
  ValueErrorType.NumberExclusiveMinimum,
  ValueErrorType.NumberMaximum,
  ValueErrorType.NumberMinimum,
  ValueErrorType.NumberMultipleOf,
  ValueErrorType.ObjectMinProperties,
  ValueErrorType.StringMinLength,
  ValueErrorType.StringPattern,
]);

function schemaViolations(value: unknown): { violations: Violation[]; blocking: boolean } {
  const seen = new Set<string>();
  const out: Violation[] = [];
  const missing = new Set<string>();
  let blocking = false;
  for (const error of Value.Errors(DeploymentResourceSchema, value)) {
    // A map's key of more than its bound (`BoundedMap`'s key pattern): the CRD states that bound as
    // a CEL rule, whose message says it, not as a schema check.
    if (error.type === ValueErrorType.ObjectAdditionalProperties) continue;
    if (!NON_BLOCKING.has(error.type)) blocking = true;
    const path = pointerPath(error.path);
    const message = describeError(error.schema, error.message);
    const key = `${error.path}\u0000${message}`;
    // A missing field also fails its type check: saying it is missing is enough.
    if (seen.has(key) || missing.has(error.path)) continue;
    seen.add(key);
    if (message === REQUIRED) missing.add(error.path);
    out.push({ path, message: `${showPath(path)}: ${message}` });
  }
  return { violations: out, blocking };
}

function pointerPath(pointer: string): DocPath {
  if (pointer === "") return [];
  return pointer
    .slice(1)
    .split("/")
    .map((p) => p.replace(/~1/g, "/").replace(/~0/g, "~"))
    .map((p) => (/^(0|[1-9]\d*)$/.test(p) ? Number(p) : p));
}

const REQUIRED = "required field is missing";

function describeError(schema: TSchema, message: string): string {
  if (message === "Expected required property") return REQUIRED;
  if (KindGuard.IsUnion(schema) && schema.anyOf.every((s) => KindGuard.IsLiteral(s))) {
    return `must be one of ${schema.anyOf.map((s) => String(s.const)).join(", ")}`;
  }
  return message;
}

/** Fields the schema does not declare, where it declares its fields (preserved objects excepted). */
function unknownFields(schema: TSchema, value: unknown, path: DocPath): Violation[] {
  const out: Violation[] = [];
  if (KindGuard.IsObject(schema) && isRecord(value)) {
    for (const [key, child] of Object.entries(value)) {
      const childSchema = schema.properties[key];
      if (childSchema === undefined) {
        const names = Object.keys(schema.properties);
        const near = closestName(key, names);
        const hint = near === undefined ? "" : `did you mean \`${near}\`? `;
        out.push({
          path: [...path, key],
          message: `${showPath([...path, key])}: unknown field (${hint}known here: ${names.join(", ")})`,
        });
      } else out.push(...unknownFields(childSchema, child, [...path, key]));
    }
  } else if (KindGuard.IsArray(schema) && Array.isArray(value)) {
    value.forEach((item, i) => {
      out.push(...unknownFields(schema.items, item, [...path, i]));
    });
  }
  return out;
}

/** Longest field name compared for a suggestion (a tenant's key may be of any length). */
const MAX_SUGGESTED_LENGTH = 64;

/**
 * The name of `names` that `key` most likely misspells (`sourcConfig` → `sourceConfig`): the same
 * but for case, else the nearest within an edit distance of a third of its length (at least 1,
 * at most 3); undefined when none is that near.
 */
export function closestName(key: string, names: readonly string[]): string | undefined {
  if (key.length > MAX_SUGGESTED_LENGTH) return undefined;
  const sameButCase = names.find((n) => n.toLowerCase() === key.toLowerCase());
  if (sameButCase !== undefined) return sameButCase;
  const limit = Math.min(3, Math.max(1, Math.floor(key.length / 3)));
  let best: { name: string; distance: number } | undefined;
  for (const name of names) {
    const distance = editDistance(key, name);
    if (distance <= limit && (best === undefined || distance < best.distance)) best = { name, distance };
  }
  return best?.name;
}

/** Levenshtein distance of `a` and `b` (insertions, deletions, substitutions). */
function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++)
      current[j] = Math.min(
        (previous[j] ?? 0) + 1,
        (current[j - 1] ?? 0) + 1,
        (previous[j - 1] ?? 0) + (a[i - 1] === b[j - 1] ? 0 : 1),
      );
    previous = current;
  }
  return previous[b.length] ?? 0;
}
