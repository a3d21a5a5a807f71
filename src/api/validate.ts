/**
 * Checks at the edge: responses against the wire schemas (so a malformed answer fails here,
 * naming the field, not three layers later) and the caller's input before anything is sent.
 *
 * An answer, and the body of a write, is checked by the compiled check of its schema
 * (wire-checks.ts), TypeBox's own code generated ahead of time as a module's functions (which
 * Node's compile cache serves, as it would not code made with `new Function`); TypeBox itself,
 * and the schemas, load only to say what is wrong with an answer or a body that failed its check
 * (wire-errors.ts). A command that reads the service, and a reconcile that writes to it, thus run
 * without TypeBox's two hundred modules.
 */
import { isRecord } from "../runtime/json.ts";
import { RequestValidationError, ServiceError } from "./errors.ts";
import { cutToLength } from "./printable.ts";
import type { Deployment, Revision, UnknownValue, UnreadableDeployment } from "./wire.ts";
import { WIRE_CHECKS, type WireCheckName } from "./wire-checks.ts";
import type { DeploymentFilters } from "./wire-requests.ts";
import type { WireBody } from "./wire-schemas.ts";
import {
  DEPLOYMENT_SOURCES,
  DEPLOYMENT_STATUSES,
  DEPLOYMENT_TYPES,
  isUuid,
  PAGE_LIMIT,
  REVISION_STATUSES,
} from "./wire-values.ts";

const compiled = new Map<WireCheckName, (value: unknown) => boolean>();

/** The one format a check asks about: `uuid`, as wire.ts registers it with TypeBox. */
const format = (name: string, value: string): boolean => name === "uuid" && isUuid(value);

/** Whether `value` matches wire-schemas.ts's schema `name`: its check, compiled on first use. */
export function matchesWire(name: WireCheckName, value: unknown): boolean {
  let check = compiled.get(name);
  if (check === undefined) {
    // The factory TypeBox's TypeCompiler.Compile builds from the same code, given only `format`:
    // no check calls `kind` or `hash`, nor `format` but for `uuid` (scripts/wire-checks.ts refuses
    // one that would).
    check = WIRE_CHECKS[name](format) as (value: unknown) => boolean;
    compiled.set(name, check);
  }
  return check(value);
}

/**
 * The items of a listing that match the schema `name`, in their order: an odd item (a provider
 * without its client id, a repository without a default branch) is skipped, never the whole
 * listing failed for it, as a deployment listing skips its own.
 */
export function readableItems<N extends WireCheckName>(name: N, items: readonly unknown[]): WireBody<N>[] {
  return items.filter((item): item is WireBody<N> => matchesWire(name, item));
}

/** The successful answer to a call: `idempotent: false` for a write (POST, PATCH). */
export interface Answered {
  method: string;
  route: string;
  status: number;
  idempotent?: boolean | undefined;
}

/**
 * The `bad_response` {@link ServiceError} of a successful answer the client cannot read. A write
 * the service answered with a success was applied whatever the body says: `maybeApplied`, so
 * that the caller reads before it repeats the write (a rebuild, a create) rather than repeating it.
 */
export function unreadableAnswer(answered: Answered, detail: string): ServiceError {
  const { method, route, status, idempotent } = answered;
  const maybeApplied = idempotent === false;
  return new ServiceError({
    kind: "bad_response",
    method,
    route,
    status,
    detail,
    retryable: false,
    maybeApplied,
  });
}

/**
 * Returns `value` typed as the schema's static type, or throws {@link unreadableAnswer} with a
 * detail that names the first failing field, e.g.
 * `response.resources[2].status: expected one of "READY", ..., got "BOGUS"`.
 */
export async function checkResponse<N extends WireCheckName>(
  name: N,
  value: unknown,
  answered: Answered,
): Promise<WireBody<N>> {
  if (matchesWire(name, value)) return value as WireBody<N>;
  const { describeFirstError } = await import("./wire-errors.ts");
  const detail = describeFirstError(name, value, "response") ?? "response: does not match the expected shape";
  throw unreadableAnswer(answered, detail);
}

/**
 * The body of a successful answer, `text`, parsed and checked by {@link checkResponse}; a body
 * that is not JSON throws {@link unreadableAnswer} too.
 */
export async function parseResponse<N extends WireCheckName>(
  name: N,
  text: string,
  answered: Answered,
): Promise<WireBody<N>> {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    // No cause: V8's SyntaxError message quotes part of the body, which may hold secret values.
    throw unreadableAnswer(answered, `response body is not JSON (${text.length} bytes)`);
  }
  return checkResponse(name, value, answered);
}

/**
 * A deployment as the service sent it, read tolerantly: a `null` `source_config`,
 * `source_revision_config` or `secrets` reads as empty, a `null` secret value as none, a missing
 * revision id as `null`; then the value must match {@link DeploymentSchema} (what the operator
 * relies on). Returns the deployment, or what made it unreadable. Never mutates `value`.
 */
export async function readDeployment(
  value: unknown,
): Promise<{ ok: true; deployment: Deployment } | { ok: false; unreadable: UnreadableDeployment }> {
  const repaired = isRecord(value) ? repairDeployment(value) : value;
  if (matchesWire("Deployment", repaired)) return { ok: true, deployment: repaired as Deployment };
  const { firstProblem } = await import("./wire-errors.ts");
  const [path, problem] = firstProblem("Deployment", repaired) ?? ["", "is not an object"];
  const field = cutToLength(path.replace(/^\./, "") || "(the item)", 256);
  // Kept to say which deployment is unreadable, so bounded: a name or id longer than any the
  // operator asks about (a name of 253, an id of 36) is cut, and then matches none of them.
  const name = isRecord(value) && typeof value.name === "string" ? cutToLength(value.name, 253) : undefined;
  const id =
    isRecord(value) && typeof value.id === "string" && value.id !== ""
      ? cutToLength(value.id, 64)
      : undefined;
  const who = name !== undefined ? `"${name}"` : id !== undefined ? id : "(no name)";
  return {
    ok: false,
    unreadable: {
      ...(name === undefined ? {} : { name }),
      ...(id === undefined ? {} : { id }),
      field,
      message: `the service's deployment ${who} cannot be read: ${field}: ${problem}`,
    },
  };
}

function repairDeployment(value: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = { ...value };
  if (out.source_config === null) out.source_config = {};
  if (out.source_revision_config === null) out.source_revision_config = {};
  if (out.secrets === null) out.secrets = [];
  if (Array.isArray(out.secrets)) {
    out.secrets = out.secrets.map((s: unknown) => {
      if (!isRecord(s) || s.value !== null) return s;
      const { value: _masked, ...rest } = s;
      return rest;
    });
  }
  for (const key of ["latest_revision_id", "active_revision_id"]) if (out[key] === undefined) out[key] = null;
  return out;
}

/** The values of `deployment`'s enum fields that the spec does not list (kept raw, reported). */
export function unknownDeploymentValues(deployment: Deployment): UnknownValue[] {
  const found: UnknownValue[] = [];
  if (!(DEPLOYMENT_STATUSES as readonly string[]).includes(deployment.status))
    found.push(unknownValue("deployment.status", deployment.status));
  if (!(DEPLOYMENT_SOURCES as readonly string[]).includes(deployment.source))
    found.push(unknownValue("deployment.source", deployment.source));
  return found;
}

/** The longest value an {@link UnknownValue} reports (the logs remember it, a metric labels it). */
const UNKNOWN_VALUE_CHARS = 64;

/** An unknown value as reported: cut to {@link UNKNOWN_VALUE_CHARS}, a string of its own. */
const unknownValue = (field: string, value: string): UnknownValue => ({
  field,
  value: cutToLength(value, UNKNOWN_VALUE_CHARS),
});

/** The value of `revision.status` when the service's list does not hold it. */
export function unknownRevisionValues(revision: Revision): UnknownValue[] {
  return (REVISION_STATUSES as readonly string[]).includes(revision.status)
    ? []
    : [unknownValue("revision.status", revision.status)];
}

/**
 * Throws a {@link RequestValidationError} naming the first field of `value` (under the name
 * `parameter`) that the request schema `name` rejects; returns nothing when the body is valid.
 * Loads TypeBox only for a body that fails its compiled check.
 */
export async function checkRequestBody(
  name: WireCheckName,
  value: unknown,
  parameter: string,
): Promise<void> {
  if (matchesWire(name, value)) return;
  const { checkValue } = await import("./wire-errors.ts");
  checkValue(name, value, parameter);
}

/** Throws unless `value` is an integer page size within the spec's 1–100. */
export function checkPageSize(value: number, parameter: string): void {
  if (!Number.isInteger(value) || value < PAGE_LIMIT.min || value > PAGE_LIMIT.max) {
    throw new RequestValidationError(
      parameter,
      `must be an integer from ${PAGE_LIMIT.min} to ${PAGE_LIMIT.max} (the service's limit), got ${value}`,
    );
  }
}

/** Throws unless `value`, a listing's `offset`, is an integer ≥ 0. */
export function checkOffset(value: number): void {
  if (!Number.isInteger(value) || value < 0) {
    throw new RequestValidationError("offset", `must be an integer >= 0, got ${value}`);
  }
}

/** Throws unless `value` is a uuid such as `0b6f3c2e-7d2a-4c59-9b8e-3f1a2b4c5d6e`. */
export function checkUuid(value: string, parameter: string): void {
  if (typeof value !== "string" || !isUuid(value)) {
    throw new RequestValidationError(
      parameter,
      `must be a uuid like 0b6f3c2e-7d2a-4c59-9b8e-3f1a2b4c5d6e, got ${JSON.stringify(value)}`,
    );
  }
}

/** Query parameters of the listing filters; arrays are joined with commas, booleans as true/false. */
export function filterQuery(filters: DeploymentFilters): Record<string, string> {
  const query: Record<string, string> = {};
  if (filters.name_contains !== undefined) query.name_contains = filters.name_contains;
  if (filters.status !== undefined) query.status = filters.status;
  if (filters.remote_reconciled !== undefined) query.remote_reconciled = String(filters.remote_reconciled);
  if (filters.tag_value_ids !== undefined) query.tag_value_ids = filters.tag_value_ids.join(",");
  if (filters.image_version !== undefined) query.image_version = filters.image_version;
  if (filters.deployment_type !== undefined) query.deployment_type = filters.deployment_type;
  if (filters.deployment_ids !== undefined) query.deployment_ids = filters.deployment_ids.join(",");
  return query;
}

/** Throws on the first listing filter the service would reject or that cannot be sent as written. */
export function checkFilters(filters: DeploymentFilters): void {
  const known = new Set([
    "name_contains",
    "status",
    "remote_reconciled",
    "tag_value_ids",
    "image_version",
    "deployment_type",
    "deployment_ids",
  ]);
  for (const key of Object.keys(filters)) {
    if (!known.has(key)) {
      throw new RequestValidationError(`filters.${key}`, `unknown filter; known: ${[...known].join(", ")}`);
    }
  }
  const { status, deployment_type, remote_reconciled, name_contains, image_version } = filters;
  // `status` is a free string in the spec: the service has values beyond the documented ones.
  if (status !== undefined && (typeof status !== "string" || status === ""))
    throw new RequestValidationError(
      "filters.status",
      `must be a status such as ${DEPLOYMENT_STATUSES.join(", ")}`,
    );
  if (deployment_type !== undefined) checkOneOf(deployment_type, DEPLOYMENT_TYPES, "filters.deployment_type");
  if (remote_reconciled !== undefined && typeof remote_reconciled !== "boolean") {
    throw new RequestValidationError("filters.remote_reconciled", "must be true or false");
  }
  for (const [name, value] of [
    ["name_contains", name_contains],
    ["image_version", image_version],
  ] as const) {
    if (value !== undefined && typeof value !== "string") {
      throw new RequestValidationError(`filters.${name}`, "must be a string");
    }
  }
  for (const name of ["deployment_ids", "tag_value_ids"] as const) {
    const ids = filters[name];
    if (ids !== undefined && (!Array.isArray(ids) || ids.length === 0)) {
      throw new RequestValidationError(
        `filters.${name}`,
        "must be a non-empty list of ids (omit the filter to match all)",
      );
    }
  }
  filters.deployment_ids?.forEach((id, i) => {
    checkUuid(id, `filters.deployment_ids[${i}]`);
  });
  filters.tag_value_ids?.forEach((id, i) => {
    if (typeof id !== "string" || id === "" || id.includes(",")) {
      throw new RequestValidationError(
        `filters.tag_value_ids[${i}]`,
        "must be a non-empty id without commas (ids are sent comma-separated)",
      );
    }
  });
}

function checkOneOf(value: string, allowed: readonly string[], parameter: string): void {
  if (!allowed.includes(value)) {
    throw new RequestValidationError(
      parameter,
      `must be one of ${allowed.join(", ")}, got ${JSON.stringify(value)}`,
    );
  }
}
