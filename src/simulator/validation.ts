/**
 * Request validation with FastAPI's (pydantic v2) error vocabulary: TypeBox errors become
 * `{loc, msg, type}` issues. Schemas are compiled once, at module load, so the request path
 * never compiles anything.
 */
import type { TSchema } from "@sinclair/typebox";
import { type TypeCheck, TypeCompiler } from "@sinclair/typebox/compiler";
import { type ValueError, ValueErrorType } from "@sinclair/typebox/errors";
import { isUuid } from "../api/wire.ts";
import {
  type CreateDeploymentBody,
  CreateDeploymentBodySchema,
  type PatchDeploymentBody,
  PatchDeploymentBodySchema,
} from "../api/wire-requests.ts";
import { ServiceError, type ValidationIssue } from "./errors.ts";

/** Compiled checker of POST /v2/deployments bodies. */
export const createBodyCheck: TypeCheck<typeof CreateDeploymentBodySchema> =
  TypeCompiler.Compile(CreateDeploymentBodySchema);
/** Compiled checker of PATCH /v2/deployments/{id} bodies. */
export const patchBodyCheck: TypeCheck<typeof PatchDeploymentBodySchema> =
  TypeCompiler.Compile(PatchDeploymentBodySchema);

const MAX_ISSUES = 50;

/**
 * The issues of `value` against `check`, each `loc` prefixed with `prefix` (e.g. `["body"]`).
 * Empty when the value is valid. At most 50 issues, deduplicated by location and type.
 */
export function issuesOf<T extends TSchema>(
  check: TypeCheck<T>,
  value: unknown,
  prefix: readonly (string | number)[],
): ValidationIssue[] {
  if (check.Check(value)) return [];
  const out: ValidationIssue[] = [];
  const seen = new Set<string>();
  for (const error of check.Errors(value)) {
    for (const issue of describe(error, prefix)) {
      const key = `${JSON.stringify(issue.loc)}|${issue.type}`;
      if (seen.has(key)) continue;
      seen.add(key);
      out.push(issue);
      if (out.length >= MAX_ISSUES) return out;
    }
  }
  return out;
}

/** Validates a parsed JSON body; throws a 422 {@link ServiceError} naming each bad field. */
export function parseCreateBody(value: unknown): CreateDeploymentBody {
  const issues = issuesOf(createBodyCheck, value, ["body"]);
  // As the service: these must be present on create, if empty (`{}`, `{}`, `[]`).
  if (typeof value === "object" && value !== null)
    for (const field of CREATE_REQUIRED)
      if (!(field in value)) issues.push({ loc: ["body", field], msg: "Field required", type: "missing" });
  if (issues.length > 0) throw new ServiceError(422, issues);
  return value as CreateDeploymentBody;
}

/** Fields the service requires in a create body although our shared schema makes them optional. */
const CREATE_REQUIRED = ["source_config", "source_revision_config", "secrets"] as const;

/** Validates a parsed JSON PATCH body; `pathIssues` (a bad id) are reported with it, as FastAPI does. */
export function parsePatchBody(value: unknown, pathIssues: ValidationIssue[] = []): PatchDeploymentBody {
  const issues = [...pathIssues, ...issuesOf(patchBodyCheck, value, ["body"])];
  if (issues.length > 0) throw new ServiceError(422, issues);
  return value as PatchDeploymentBody;
}

/**
 * True when `value` is one of `values`: narrows a string that a compiled schema already checked
 * (TypeBox types a union of literals as `string`) without an unchecked cast.
 */
export function oneOf<T extends string>(values: readonly T[], value: string | null | undefined): value is T {
  return typeof value === "string" && (values as readonly string[]).includes(value);
}

/** The issue for a path parameter that must be a uuid, or none. */
export function uuidPathIssues(name: string, value: string): ValidationIssue[] {
  return isUuid(value) ? [] : [uuidIssue(["path", name])];
}

/** pydantic's wording for a string that is not a uuid. */
export const uuidIssue = (loc: (string | number)[]): ValidationIssue => ({
  loc,
  msg: "Input should be a valid UUID",
  type: "uuid_parsing",
});

/** `'a', 'b' or 'c'`: how pydantic lists the permitted literals. */
export function expectedList(values: readonly unknown[]): string {
  const quoted = values.map((v) => (typeof v === "string" ? `'${v}'` : String(v)));
  if (quoted.length <= 1) return quoted.join("");
  return `${quoted.slice(0, -1).join(", ")} or ${quoted.at(-1)}`;
}

function pathToLoc(path: string, prefix: readonly (string | number)[]): (string | number)[] {
  const loc: (string | number)[] = [...prefix];
  if (path === "") return loc;
  for (const raw of path.slice(1).split("/")) {
    const part = raw.replaceAll("~1", "/").replaceAll("~0", "~");
    loc.push(/^(0|[1-9]\d*)$/.test(part) ? Number(part) : part);
  }
  return loc;
}

const isNullSchema = (schema: TSchema): boolean => schema.type === "null";
const isLiteral = (schema: TSchema): boolean => "const" in schema;

/** Turns one TypeBox error into pydantic-style issues; unions are unwrapped to their real cause. */
function describe(error: ValueError, prefix: readonly (string | number)[]): ValidationIssue[] {
  const loc = pathToLoc(error.path, prefix);
  const schema = error.schema;
  switch (error.type) {
    case ValueErrorType.ObjectRequiredProperty:
      return [{ loc, msg: "Field required", type: "missing" }];
    case ValueErrorType.ObjectAdditionalProperties:
      return [{ loc, msg: "Extra inputs are not permitted", type: "extra_forbidden" }];
    case ValueErrorType.String:
      return [{ loc, msg: "Input should be a valid string", type: "string_type" }];
    case ValueErrorType.StringMinLength: {
      const min = Number(schema.minLength);
      const unit = min === 1 ? "character" : "characters";
      return [
        {
          loc,
          msg: `String should have at least ${min} ${unit}`,
          type: "string_too_short",
          ctx: { min_length: min },
        },
      ];
    }
    case ValueErrorType.StringFormat:
      if (schema.format === "date-time") {
        return [{ loc, msg: "Input should be a valid datetime", type: "datetime_parsing" }];
      }
      return [uuidIssue(loc)];
    case ValueErrorType.Number:
      return [{ loc, msg: "Input should be a valid number", type: "float_type" }];
    case ValueErrorType.Integer:
      return [{ loc, msg: "Input should be a valid integer", type: "int_type" }];
    case ValueErrorType.NumberMinimum:
    case ValueErrorType.IntegerMinimum:
      return [bound(loc, "greater_than_equal", "greater than or equal to", "ge", schema.minimum)];
    case ValueErrorType.NumberMaximum:
    case ValueErrorType.IntegerMaximum:
      return [bound(loc, "less_than_equal", "less than or equal to", "le", schema.maximum)];
    case ValueErrorType.Boolean:
      return [{ loc, msg: "Input should be a valid boolean", type: "bool_type" }];
    case ValueErrorType.Object:
      return [
        {
          loc,
          msg: "Input should be a valid dictionary or object to extract fields from",
          type: "model_attributes_type",
        },
      ];
    case ValueErrorType.Array:
      return [{ loc, msg: "Input should be a valid list", type: "list_type" }];
    case ValueErrorType.Literal:
      return [literalIssue(loc, [schema.const])];
    case ValueErrorType.Union:
      return describeUnion(error, loc, prefix);
    default:
      return [{ loc, msg: `Value error, ${error.message}`, type: "value_error" }];
  }
}

function bound(loc: (string | number)[], type: string, words: string, key: string, limit: unknown) {
  return { loc, msg: `Input should be ${words} ${String(limit)}`, type, ctx: { [key]: limit } };
}

function literalIssue(loc: (string | number)[], values: readonly unknown[]): ValidationIssue {
  const expected = expectedList(values);
  return { loc, msg: `Input should be ${expected}`, type: "literal_error", ctx: { expected } };
}

/** Literal values of a union of literals (possibly nested, possibly nullable), or undefined. */
function literalValues(schema: TSchema): unknown[] | undefined {
  if (isLiteral(schema)) return [schema.const];
  if (!Array.isArray(schema.anyOf)) return undefined;
  const values: unknown[] = [];
  for (const variant of schema.anyOf as TSchema[]) {
    if (isNullSchema(variant)) continue;
    const inner = literalValues(variant);
    if (inner === undefined) return undefined;
    values.push(...inner);
  }
  return values;
}

function describeUnion(
  error: ValueError,
  loc: (string | number)[],
  prefix: readonly (string | number)[],
): ValidationIssue[] {
  const literals = literalValues(error.schema);
  if (literals !== undefined) return [literalIssue(loc, literals)];
  const variants = (error.schema.anyOf ?? []) as TSchema[];
  const real = variants.flatMap((variant, index) => (isNullSchema(variant) ? [] : [index]));
  const only = real.length === 1 ? real[0] : undefined;
  const iterator = only === undefined ? undefined : error.errors[only];
  if (iterator === undefined) {
    return [{ loc, msg: "Input does not match any allowed type", type: "union_tag_invalid" }];
  }
  // `T | null` with a wrong value: pydantic reports the error of T, not of the union.
  return [...iterator].flatMap((inner) => describe(inner, prefix));
}
