/**
 * Checks a Deployment resource as `kubectl apply` would have the API server check it: the CRD's
 * OpenAPI schema (the very TypeBox schema the CRD is generated from), unknown fields (kubectl's
 * default strict validation refuses them), and the CRD's CEL rules that need no previous object
 * (the immutability rules need the live object; `plan` checks those separately). Pure.
 */

import { KindGuard, type TSchema } from "@sinclair/typebox";
import { Value } from "@sinclair/typebox/value";
import { ORDERED_PAIRS } from "../crd/resource-spec-schema.ts";
import { DeploymentResourceSchema, DeploymentSpecSchema } from "../crd/schema.ts";
import { isRecord } from "../json.ts";
import { isObjectName } from "./names.ts";

/** A path into the document: object keys and list indexes. */
export type DocPath = readonly (string | number)[];

/** One reason the resource would be refused, at the path of the offending node. */
export interface Violation {
  path: DocPath;
  message: string;
}

/** `spec.secrets[0].name`-style rendering of a path. */
export function showPath(path: DocPath): string {
  let out = "";
  for (const part of path) out += typeof part === "number" ? `[${part}]` : out === "" ? part : `.${part}`;
  return out === "" ? "(document)" : out;
}

/**
 * Every violation of `value` as a Deployment resource, in document order of discovery: schema
 * errors, unknown fields under `spec`, the CEL rules, and a missing or invalid `metadata.name`.
 * An empty list means the API server would accept it on create.
 */
export function validateResource(value: unknown): Violation[] {
  const out: Violation[] = [...schemaViolations(value)];
  if (!isRecord(value)) return out;
  const metadata = value.metadata;
  const name = isRecord(metadata) ? metadata.name : undefined;
  if (name === undefined) out.push({ path: ["metadata"], message: "metadata.name is required" });
  else if (typeof name === "string" && !isObjectName(name))
    out.push({
      path: ["metadata", "name"],
      message: `${JSON.stringify(name)} is not a valid Kubernetes object name (lower-case letters, digits, '-' and '.', at most 253 characters); keep the service's name in spec.name`,
    });
  if (isRecord(value.spec)) {
    out.push(...unknownFields(DeploymentSpecSchema, value.spec, ["spec"]));
    out.push(...ruleViolations(value.spec));
  }
  return out;
}

function schemaViolations(value: unknown): Violation[] {
  const seen = new Set<string>();
  const out: Violation[] = [];
  const missing = new Set<string>();
  for (const error of Value.Errors(DeploymentResourceSchema, value)) {
    const path = pointerPath(error.path);
    const message = describeError(error.schema, error.message);
    const key = `${error.path}\u0000${message}`;
    // A missing field also fails its type check: saying it is missing is enough.
    if (seen.has(key) || missing.has(error.path)) continue;
    seen.add(key);
    if (message === REQUIRED) missing.add(error.path);
    out.push({ path, message: `${showPath(path)}: ${message}` });
  }
  return out;
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
        const known = Object.keys(schema.properties).join(", ");
        out.push({
          path: [...path, key],
          message: `${showPath([...path, key])}: unknown field (known here: ${known})`,
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

/** The CRD's CEL rules on `spec` (see docs/crd-validation.md), with the CRD's wording. */
function ruleViolations(spec: Record<string, unknown>): Violation[] {
  const out: Violation[] = [];
  const secrets = Array.isArray(spec.secrets) ? spec.secrets : [];
  secrets.forEach((entry, i) => {
    if (isRecord(entry) && (entry.value === undefined) === (entry.valueFrom === undefined))
      out.push({
        path: ["spec", "secrets", i],
        message: `spec.secrets[${i}]: set exactly one of value or valueFrom.secretKeyRef`,
      });
  });
  out.push(...duplicateNames(spec.secrets, ["spec", "secrets"]));
  out.push(...duplicateNames(spec.secretReferences, ["spec", "secretReferences"]));
  if (spec.secretReferences !== undefined && spec.source !== "external_docker")
    out.push({
      path: ["spec", "secretReferences"],
      message:
        "spec.secretReferences is allowed only with spec.source external_docker: remove it or use spec.secrets",
    });
  if (spec.github !== undefined) {
    if (spec.source !== "github" && spec.revisionSource !== "github")
      out.push({
        path: ["spec", "github"],
        message:
          "spec.github is allowed only with spec.source github (or spec.revisionSource github): remove it",
      });
    const sc = spec.sourceConfig;
    if (isRecord(sc) && (sc.repoUrl !== undefined || sc.integrationId !== undefined))
      out.push({
        path: ["spec", "github"],
        message:
          "spec.github sets sourceConfig.repoUrl and sourceConfig.integrationId: remove those two or remove spec.github",
      });
  }
  const rs = isRecord(spec.sourceConfig) ? spec.sourceConfig.resourceSpec : undefined;
  if (isRecord(rs)) {
    for (const [low, high] of ORDERED_PAIRS) {
      const a = rs[low];
      const b = rs[high];
      if (typeof a === "number" && typeof b === "number" && a > b)
        out.push({
          path: ["spec", "sourceConfig", "resourceSpec", low],
          message: `spec.sourceConfig.resourceSpec.${low} must not exceed spec.sourceConfig.resourceSpec.${high}: lower ${low} or raise ${high}`,
        });
    }
  }
  return out;
}

function duplicateNames(list: unknown, path: DocPath): Violation[] {
  if (!Array.isArray(list)) return [];
  const first = new Map<string, number>();
  const out: Violation[] = [];
  list.forEach((entry, i) => {
    if (!isRecord(entry) || typeof entry.name !== "string") return;
    const at = first.get(entry.name);
    if (at === undefined) first.set(entry.name, i);
    else
      out.push({
        path: [...path, i, "name"],
        message: `${showPath([...path, i, "name"])}: duplicate name ${JSON.stringify(entry.name)} (also at ${showPath([...path, at])})`,
      });
  });
  return out;
}
