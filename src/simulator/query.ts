/**
 * The query of GET /v2/deployments, parsed and validated as FastAPI would: the last value of a
 * repeated parameter wins, unknown parameters are ignored, bad values give 422 issues under
 * `["query", name]`.
 */
import { DEPLOYMENT_TYPES, type DeploymentType, PAGE_LIMIT } from "../api/wire.ts";
import { ServiceError, type ValidationIssue } from "./errors.ts";
import { expectedList } from "./validation.ts";

/** A validated listing query. Absent filters are `undefined`; list filters are split and trimmed. */
export interface ListQuery {
  limit: number;
  offset: number;
  nameContains?: string;
  status?: string;
  remoteReconciled?: boolean;
  tagValueIds?: ReadonlySet<string>;
  imageVersion?: string;
  deploymentType?: DeploymentType;
  deploymentIds?: ReadonlySet<string>;
}

const INTEGER = /^[+-]?\d+$/;
const TRUE = new Set(["true", "1", "yes", "on", "t", "y"]);
const FALSE = new Set(["false", "0", "no", "off", "f", "n"]);
const DEPLOYMENT_TYPE_SET: ReadonlySet<string> = new Set(DEPLOYMENT_TYPES);

/** A query boolean as FastAPI (pydantic) reads one (`true`, `1`, `yes`, `on`, …), or undefined. */
export function parseBoolean(raw: string): boolean | undefined {
  const lower = raw.trim().toLowerCase();
  return TRUE.has(lower) ? true : FALSE.has(lower) ? false : undefined;
}

/** Parses the part of a URL after `?`; throws a 422 {@link ServiceError} listing every bad parameter. */
export function parseListQuery(search: string): ListQuery {
  const query: ListQuery = { limit: PAGE_LIMIT.default, offset: 0 };
  if (search === "") return query;
  const params = new Map<string, string>();
  for (const [key, value] of new URLSearchParams(search)) params.set(key, value);
  const issues: ValidationIssue[] = [];

  const limit = params.get("limit");
  if (limit !== undefined) {
    const n = parseInteger("limit", limit, issues);
    if (n !== undefined && checkRange("limit", n, PAGE_LIMIT.min, PAGE_LIMIT.max, issues)) query.limit = n;
  }
  const offset = params.get("offset");
  if (offset !== undefined) {
    const n = parseInteger("offset", offset, issues);
    if (n !== undefined && checkRange("offset", n, 0, undefined, issues)) query.offset = n;
  }
  const remote = params.get("remote_reconciled");
  if (remote !== undefined) {
    const value = parseBoolean(remote);
    if (value !== undefined) query.remoteReconciled = value;
    else {
      issues.push({
        loc: ["query", "remote_reconciled"],
        msg: "Input should be a valid boolean, unable to interpret input",
        type: "bool_parsing",
      });
    }
  }
  const type = params.get("deployment_type");
  if (type !== undefined) {
    if (DEPLOYMENT_TYPE_SET.has(type)) query.deploymentType = type as DeploymentType;
    else {
      const expected = expectedList(DEPLOYMENT_TYPES);
      issues.push({
        loc: ["query", "deployment_type"],
        msg: `Input should be ${expected}`,
        type: "enum",
        ctx: { expected },
      });
    }
  }
  if (issues.length > 0) throw new ServiceError(422, issues);

  query.nameContains = params.get("name_contains");
  query.status = params.get("status");
  query.imageVersion = params.get("image_version");
  query.tagValueIds = commaSet(params.get("tag_value_ids"));
  // Ids are uuids, stored lower-case; an id in upper case names the same deployment.
  query.deploymentIds = commaSet(params.get("deployment_ids")?.toLowerCase());
  return query;
}

function parseInteger(name: string, raw: string, issues: ValidationIssue[]): number | undefined {
  const trimmed = raw.trim();
  const n = INTEGER.test(trimmed) ? Number(trimmed) : Number.NaN;
  if (Number.isSafeInteger(n)) return n;
  issues.push({
    loc: ["query", name],
    msg: "Input should be a valid integer, unable to parse string as an integer",
    type: "int_parsing",
  });
  return undefined;
}

function checkRange(
  name: string,
  n: number,
  min: number,
  max: number | undefined,
  issues: ValidationIssue[],
): boolean {
  const broken = (type: string, words: string, bound: number, ctx: Record<string, number>) => {
    issues.push({ loc: ["query", name], msg: `Input should be ${words} ${bound}`, type, ctx });
    return false;
  };
  if (n < min) return broken("greater_than_equal", "greater than or equal to", min, { ge: min });
  if (max !== undefined && n > max)
    return broken("less_than_equal", "less than or equal to", max, { le: max });
  return true;
}

/** `a, b,,c` → {a, b, c}; an empty list means "no filter" (undefined). */
function commaSet(raw: string | undefined): ReadonlySet<string> | undefined {
  if (raw === undefined) return undefined;
  const items = raw
    .split(",")
    .map((s) => s.trim())
    .filter((s) => s !== "");
  return items.length === 0 ? undefined : new Set(items);
}
