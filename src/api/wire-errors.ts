/**
 * What is wrong with a value that a schema of wire.ts refuses, in words naming the field, from
 * TypeBox's errors; and the check of a request body before a write. Loaded by validate.ts only
 * then: an answer that passes its compiled check (wire-checks.ts) never loads TypeBox.
 */

import type { TSchema } from "@sinclair/typebox";
import { type ValueError, ValueErrorType } from "@sinclair/typebox/errors";
import { Value } from "@sinclair/typebox/value";
import { RequestValidationError } from "./errors.ts";
import { cutToLength } from "./printable.ts";
import { WIRE_SCHEMAS, type WireSchemaName } from "./wire-schemas.ts";

/** TypeBox's first error of `value` against the schema `name`; undefined when there is none. */
export function firstError(name: WireSchemaName, value: unknown): ValueError | undefined {
  return Value.Errors(WIRE_SCHEMAS[name], value).First();
}

/** `<root><path>: <problem>` of the first error (a union's deepest); undefined when there is none. */
export function describeFirstError(name: WireSchemaName, value: unknown, root: string): string | undefined {
  const first = firstError(name, value);
  return first ? describeError(root, deepest(first)) : undefined;
}

/** The path and the problem of the first error (a union's deepest); undefined when there is none. */
export function firstProblem(name: WireSchemaName, value: unknown): [string, string] | undefined {
  const first = firstError(name, value);
  return first ? splitError("", deepest(first)) : undefined;
}

/**
 * Throws a {@link RequestValidationError} naming the first field of `value` (under the name
 * `parameter`) that the schema `name` rejects; returns nothing when the value is valid.
 */
export function checkValue(name: WireSchemaName, value: unknown, parameter: string): void {
  if (Value.Check(WIRE_SCHEMAS[name], value)) return;
  const first = firstError(name, value);
  if (!first) throw new RequestValidationError(parameter, "does not match the request shape");
  const [path, problem] = splitError(parameter, first);
  throw new RequestValidationError(path, problem);
}

/**
 * The error that says what is really wrong: for a value that failed a union (`T | null`) because
 * of a field deep inside it, that field's error rather than "expected object or null, got an object".
 */
function deepest(error: ValueError): ValueError {
  if (error.type !== ValueErrorType.Union) return error;
  for (const variant of error.errors) {
    const inner = variant.First();
    if (inner && inner.path.length > error.path.length) return deepest(inner);
  }
  return error;
}

function describeError(root: string, error: ValueError): string {
  const [path, problem] = splitError(root, error);
  return `${path}: ${problem}`;
}

function splitError(root: string, error: ValueError): [string, string] {
  const path = root + pointerToPath(error.path);
  if (error.type === ValueErrorType.ObjectRequiredProperty) return [path, "required field is missing"];
  if (error.type === ValueErrorType.ObjectAdditionalProperties) return [path, "unknown field"];
  // A secret's value must never reach an error message, even a malformed one.
  const got = /\.secrets\b/.test(path) ? "" : `, got ${show(error.value)}`;
  return [path, `expected ${expected(error.schema)}${got}`];
}

/** `/resources/2/status` → `.resources[2].status`. */
function pointerToPath(pointer: string): string {
  if (pointer === "") return "";
  return pointer
    .split("/")
    .slice(1)
    .map((raw) => raw.replace(/~1/g, "/").replace(/~0/g, "~"))
    .map((part) => (/^\d+$/.test(part) ? `[${part}]` : `.${part}`))
    .join("");
}

function expected(schema: TSchema): string {
  if (Array.isArray(schema.anyOf)) {
    const members = schema.anyOf as TSchema[];
    const consts = members.filter((m) => "const" in m).map((m) => JSON.stringify(m.const));
    if (consts.length === members.length) return `one of ${consts.join(", ")}`;
    return members.map(expected).join(" or ");
  }
  if ("const" in schema) return JSON.stringify(schema.const);
  if (typeof schema.format === "string") return `a ${schema.format} string`;
  if (typeof schema.type === "string")
    return schema.type === "null" ? "null" : `a value of type ${schema.type}`;
  return "a different value";
}

/** Characters of a value a message echoes, the mark of a cut included. */
const SHOWN_CHARS = 60;

function show(value: unknown): string {
  if (value === undefined) return "nothing";
  // Only scalars are echoed: an object could hold secret values.
  if (Array.isArray(value)) return "an array";
  if (typeof value === "object" && value !== null) return "an object";
  const text = JSON.stringify(value) ?? String(value);
  return cutToLength(text, SHOWN_CHARS);
}
