/**
 * Typed failures of the service client. Callers branch on {@link ServiceError.kind} and
 * {@link ServiceError.retryable}; messages are one line, readable by a person, and never carry
 * the API key (the transport redacts it before an error is built).
 */
import { isRecord } from "../runtime/json.ts";
import { cutToLength } from "./printable.ts";

/** What went wrong, coarse enough for a controller to branch on. */
export type ServiceErrorKind =
  /** 401 or 403: the key or tenant is wrong or lacks permission. A retry will not help. */
  | "unauthorized"
  /** 400 or 422: the service rejected what we sent. A retry will not help. */
  | "invalid"
  /** 404: the thing does not exist (for DELETE this is success and never thrown). */
  | "not_found"
  /** 409: the request conflicts with the service's state (e.g. a name already taken). */
  | "conflict"
  /** 429: slow down; see {@link ServiceError.retryAfterSeconds}. */
  | "rate_limited"
  /** 5xx: the service or a gateway in front of it failed. */
  | "unavailable"
  /** Another 4xx status the client has no specific meaning for (e.g. 405 for an unsupported route). */
  | "rejected"
  /** No complete response within the request timeout. */
  | "timeout"
  /** The connection failed or was lost (refused, reset, DNS, a TLS handshake, a proxy). */
  | "network"
  /**
   * The service's TLS certificate was not accepted (unknown authority, expired, not yet valid,
   * issued for another host): {@link ServiceError.tlsCode} says which. A retry will not help.
   */
  | "tls"
  /** The response was not what the spec promises (bad JSON, missing field, wrong type). */
  | "bad_response"
  /**
   * The answer was larger than the operator accepts (`--max-response-bytes`, or the memory the
   * answers in flight may take): the request was cut off. Repeating it will not make it smaller.
   */
  | "too_large";

/** The setting that bounds a response body, as a `too_large` failure names it. */
export const MAX_RESPONSE_BYTES_SETTING = "--max-response-bytes / DMS_MAX_RESPONSE_BYTES";

/**
 * Default of `--max-response-bytes`: 8 MiB. The largest honest answer measured, a listing page
 * of 100 deployments with every field of the spec filled with long values (64 secret names, 32
 * secret references, 16 labels and annotations, three containers of 16 environment variables
 * each), is 4.1 MB (test/contract/response-bounds.test.ts): twice that, and still within the
 * memory answers in flight may take under the shipped heap limit (see budgets.ts).
 */
export const DEFAULT_MAX_RESPONSE_BYTES = 8 * 1024 * 1024;

/** Construction data of a {@link ServiceError}. */
export interface ServiceErrorInit {
  kind: ServiceErrorKind;
  method: string;
  /** The route template, e.g. `/v2/deployments/{deployment_id}`: never the concrete URL. */
  route: string;
  status?: number;
  detail: string;
  retryable: boolean;
  retryAfterSeconds?: number;
  maybeApplied?: boolean;
  cause?: unknown;
  /** For a `tls` failure: Node's error code (`CERT_HAS_EXPIRED`, …). */
  tlsCode?: string;
}

/**
 * A failed call to the service.
 *
 * Contract: `message` is a single line `METHOD route: [status ]kind: detail` with the detail cut
 * to 500 characters; `detail` is the service's own explanation (FastAPI validation lists
 * rendered as `loc: msg; loc: msg`, redacted of the key and cut to 4,096 characters by the
 * transport) or ours. Where the detail may quote secret values the caller
 * sent, redact `detail` and cut it afterwards (a value cut in two would escape redaction, so do
 * not redact `message`);
 * `retryable` says whether repeating the same call later can help; `maybeApplied` is true when a
 * write (POST/PATCH) may have reached the service although no answer came back, so the caller
 * must re-read before deciding to repeat it.
 */
export class ServiceError extends Error {
  override readonly name = "ServiceError";
  readonly kind: ServiceErrorKind;
  readonly method: string;
  readonly route: string;
  readonly status: number | undefined;
  readonly detail: string;
  readonly retryable: boolean;
  /** Seconds the service asked us to wait (from `Retry-After`), when it said so. */
  readonly retryAfterSeconds: number | undefined;
  readonly maybeApplied: boolean;
  /** For a `tls` failure: Node's error code, to name its cause (see `tlsFailureOf`, tls.ts). */
  readonly tlsCode: string | undefined;

  constructor(init: ServiceErrorInit) {
    const status = init.status === undefined ? "" : `${init.status} `;
    super(`${init.method} ${init.route}: ${status}${init.kind}: ${oneLine(truncate(init.detail))}`, {
      cause: init.cause,
    });
    this.kind = init.kind;
    this.method = init.method;
    this.route = init.route;
    this.status = init.status;
    this.detail = init.detail;
    this.retryable = init.retryable;
    this.retryAfterSeconds = init.retryAfterSeconds;
    this.maybeApplied = init.maybeApplied ?? false;
    this.tlsCode = init.tlsCode;
  }
}

/**
 * What of `error` the operator's log may carry: of a {@link ServiceError}, the call, its status
 * and kind (its detail is the service's text, which may quote a secret or anything else), and of
 * any other error its message (the operator's own words).
 */
export function loggedError(error: unknown): string {
  if (error instanceof ServiceError) {
    const status = error.status === undefined ? "" : `${error.status} `;
    return `${error.method} ${error.route}: ${status}${error.kind}`;
  }
  return error instanceof Error ? error.message : String(error);
}

/**
 * `error` with a service's detail cut to `max` characters, for an error kept for a while (a
 * connection's failed listing, until the next one): a server may answer MiBs of detail, and only
 * its start is ever shown. Any other error is returned as it is.
 */
export function withDetailCut(error: unknown, max: number): unknown {
  if (!(error instanceof ServiceError) || error.detail.length <= max) return error;
  return new ServiceError({
    kind: error.kind,
    method: error.method,
    route: error.route,
    ...(error.status === undefined ? {} : { status: error.status }),
    detail: cutToLength(error.detail, max),
    retryable: error.retryable,
    ...(error.retryAfterSeconds === undefined ? {} : { retryAfterSeconds: error.retryAfterSeconds }),
    maybeApplied: error.maybeApplied,
    ...(error.tlsCode === undefined ? {} : { tlsCode: error.tlsCode }),
  });
}

/**
 * The service lacks one of the routes the client calls that are not in the shared spec: it
 * answered 405, or a 404 whose detail is the generic "Not Found" of an unknown path (see
 * {@link isRouteMissing}). A caller should stop asking. Each such route has its subclass, for
 * callers to branch on: {@link RevisionsRouteMissingError}, `LogsRouteMissingError`
 * (revision-logs.ts), `RedeployRouteMissingError` (redeploy.ts).
 */
export class RouteMissingError extends Error {
  override readonly name: string = "RouteMissingError";
  readonly status: number | undefined;
  /** `what` names the route in the message: `the service has no ${what} route (…)`. */
  constructor(what: string, cause: ServiceError) {
    super(`the service has no ${what} route (${cause.method} ${cause.route} answered ${cause.status})`, {
      cause,
    });
    this.status = cause.status;
  }
}

/** A {@link RouteMissingError} class: built from the failure that showed the route missing. */
export type RouteMissingErrorClass = new (cause: ServiceError) => RouteMissingError;

/**
 * True when `error` says the service has no such route: a 405, or a 404 whose detail is the
 * generic "Not Found" of an unknown path (not one naming a missing deployment or revision).
 */
export function isRouteMissing(error: unknown): error is ServiceError {
  if (isServiceError(error, "rejected")) return error.status === 405;
  return isServiceError(error, "not_found") && isGenericNotFound(error.detail);
}

/** The detail of a 404 for an unknown path ("Not Found"), not one naming a missing thing. */
function isGenericNotFound(detail: string): boolean {
  return /^\s*not found\s*$/i.test(detail) || detail === "HTTP 404";
}

/**
 * The service has no revisions route (GET /v2/deployments/{deployment_id}/revisions[/{revision_id}]):
 * a caller tracking revisions should stop asking.
 */
export class RevisionsRouteMissingError extends RouteMissingError {
  override readonly name = "RevisionsRouteMissingError";
  constructor(cause: ServiceError) {
    super("revisions", cause);
  }
}

/**
 * Input rejected by the client before any request was sent.
 *
 * Contract: `parameter` names the offending argument as the caller wrote it (e.g. `limit`,
 * `filters.status`, `body.source_config.integration_id`); the message says what is allowed.
 */
export class RequestValidationError extends Error {
  override readonly name = "RequestValidationError";
  readonly parameter: string;

  constructor(parameter: string, problem: string) {
    super(`${parameter}: ${problem}`);
    this.parameter = parameter;
  }
}

/**
 * The whole text of `error`: for a {@link ServiceError}, its message with the detail uncut (redact
 * it, then cut it); for another error, its message.
 */
export function wholeMessage(error: unknown): string {
  if (error instanceof ServiceError) {
    const status = error.status === undefined ? "" : `${error.status} `;
    return `${error.method} ${error.route}: ${status}${error.kind}: ${oneLine(error.detail)}`;
  }
  return error instanceof Error ? error.message : String(error);
}

/** True when `error` is a {@link ServiceError} of one of `kinds` (any kind when none is given). */
export function isServiceError(error: unknown, ...kinds: ServiceErrorKind[]): error is ServiceError {
  return error instanceof ServiceError && (kinds.length === 0 || kinds.includes(error.kind));
}

/** The error kind of an HTTP status that is not a success. */
export function kindOfStatus(status: number): ServiceErrorKind {
  if (status === 401 || status === 403) return "unauthorized";
  if (status === 400 || status === 422) return "invalid";
  if (status === 404) return "not_found";
  if (status === 409) return "conflict";
  if (status === 429) return "rate_limited";
  if (status >= 500) return "unavailable";
  return "rejected";
}

/**
 * Renders a response body's `detail` readably.
 *
 * Contract: a string detail is returned as is; a FastAPI list `[{loc, msg, type}]` becomes
 * `body.source_config.repo_url: field required; query.limit: ...`; any other JSON is
 * stringified; an unparseable or empty body yields its text, or `fallback`. Nothing is cut: the
 * body is already bounded (`--max-response-bytes`), and only a caller that knows the secret
 * values may cut the text, after redacting them.
 */
export function renderDetail(body: string, fallback: string): string {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch {
    const text = body.trim();
    return text === "" ? fallback : text;
  }
  const detail = isRecord(parsed) && "detail" in parsed ? parsed.detail : parsed;
  if (typeof detail === "string") return detail === "" ? fallback : detail;
  if (Array.isArray(detail) && detail.length > 0) return detail.map(renderIssue).join("; ");
  if (detail === null || detail === undefined) return fallback;
  return JSON.stringify(detail);
}

function renderIssue(issue: unknown): string {
  if (!isRecord(issue)) return JSON.stringify(issue);
  const loc = Array.isArray(issue.loc) ? issue.loc.map(String).join(".") : "";
  const msg = typeof issue.msg === "string" ? issue.msg : JSON.stringify(issue);
  return loc === "" ? msg : `${loc}: ${msg}`;
}

/**
 * The longest pause a `Retry-After` is read as asking for (an hour): a service's answer is a
 * tenant's input, and a pause of years, or a date far ahead, would silence its connection (every
 * call failed at once, nothing sent) long after the service recovered. Past it, the connection
 * asks again once, and a service still rate limiting says so again.
 */
export const MAX_RETRY_AFTER_SECONDS = 3_600;

/**
 * Parses a `Retry-After` header: delay-seconds or an HTTP date (relative to `nowMs`, epoch ms).
 * Returns seconds (≥ 0, ≤ {@link MAX_RETRY_AFTER_SECONDS}), or undefined when the header is
 * absent or unparseable.
 */
export function parseRetryAfter(value: string | undefined, nowMs: number): number | undefined {
  if (value === undefined) return undefined;
  const text = value.trim();
  if (/^\d+(\.\d+)?$/.test(text)) return Math.min(Number(text), MAX_RETRY_AFTER_SECONDS);
  const date = Date.parse(text);
  if (Number.isNaN(date)) return undefined;
  return Math.min(Math.max(0, (date - nowMs) / 1000), MAX_RETRY_AFTER_SECONDS);
}

/** How much of the detail a {@link ServiceError}'s message shows. */
const MAX_DETAIL = 500;

/**
 * `text` cut to at most `max` characters, the last being `…` when it was cut (never inside a
 * surrogate pair). Redact secret values before cutting: a value cut in two would escape redaction.
 */
export function truncate(text: string, max = MAX_DETAIL): string {
  return cutToLength(text, max);
}

function oneLine(text: string): string {
  return text.replace(/\s*\n\s*/g, " ");
}

/**
 * Why an answer was refused: its size; its weight against the shared budget, alone (`shared`
 * false) or with the answers in flight beside it (`shared` true); its JSON's nesting (`depth`).
 */
export type Overflow =
  | { bound: "bytes"; limit: number }
  | { bound: "depth"; limit: number }
  /** The codings of its `Content-Encoding`, before any was undone. */
  | { bound: "codings"; limit: number }
  /** `tenant`: the bound was the share of the answers of the connection's tenant (`OWNER_SHARE`). */
  | { bound: "memory"; limit: number; shared: boolean; tenant?: true };

const UNITS: Record<Overflow["bound"], string> = {
  bytes: "bytes",
  depth: "levels",
  codings: "codings",
  memory: "bytes",
};

/** An answer exceeded a bound; the reading stopped there. */
export class OverflowError extends Error {
  override readonly name = "OverflowError";
  readonly overflow: Overflow;
  /** The status of the answer cut off, once its head was read. */
  status: number | undefined;
  constructor(overflow: Overflow) {
    super(`the answer exceeded its ${overflow.bound} bound of ${overflow.limit} ${UNITS[overflow.bound]}`);
    this.overflow = overflow;
  }
}
