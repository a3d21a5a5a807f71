/**
 * What a failed attempt means (transport.ts): the {@link ServiceError} of an error answer, of a
 * connection that failed or timed out, or of an answer past its bounds, its detail redacted of the
 * key and cut; and whether the retry loop may try again ({@link AttemptFailure}) or must stop.
 * Nothing here runs for an answered success.
 */
import { AbortError } from "p-retry";
import { redactProxyUrl } from "./agent.ts";
import type { OverflowError } from "./errors.ts";
import {
  kindOfStatus,
  MAX_RESPONSE_BYTES_SETTING,
  parseRetryAfter,
  renderDetail,
  ServiceError,
  truncate,
} from "./errors.ts";
import type { ExchangeAnswer, ExchangeError } from "./exchange.ts";
import { redactAndTruncate, redactSecrets } from "./redact.ts";
import { describeTlsFailure, FLAG_TLS_FIXES, FLAG_TLS_FIXES_WITH_CA, tlsFailureOf } from "./tls.ts";

/** What of the transport's settings reading a failure needs. */
export interface FailureSettings {
  baseUrl: string;
  apiKey: string | undefined;
  caBundle: string | undefined;
  timeoutMs: number;
  connectTimeoutMs?: number | undefined;
  maxRetryAfterMs: number;
  /** The client's rate limit, paused when the service asks for a pause (Retry-After). */
  bucket: { pause(ms: number): void };
}

/** The request that failed, as a failure names it. */
export interface FailedRequest {
  method: string;
  route: string;
  /** True for reads and DELETE: safe to repeat after a timeout or a lost connection. */
  idempotent: boolean;
}

// Statuses a repeat can cure. A write is repeated only where the service cannot have acted.
const RETRY_READ = new Set([429, 500, 502, 503, 504]);
const RETRY_WRITE = new Set([429, 503]);
// Failures that happen before a byte of the request reaches the service.
const NOT_SENT = new Set(["ECONNREFUSED", "ENOTFOUND", "EAI_AGAIN", "ENETUNREACH", "EHOSTUNREACH"]);

/**
 * The most of an error answer's detail a {@link ServiceError} keeps: as much as any reader looks
 * at (a condition's message, the probe's read, the name-reserved check: 4,096 characters each).
 */
export const MAX_ERROR_DETAIL = 4_096;
/** The longest error answer read as JSON to find its `detail` (a longer one is shown as text). */
const MAX_PARSED_ERROR_BODY = 64 * 1024;

/** Why an attempt failed, and whether the retry loop may try again. */
export class AttemptFailure extends Error {
  readonly error: ServiceError;
  constructor(error: ServiceError) {
    super(error.message);
    this.error = error;
  }
}

/**
 * The failure of an answer whose status is not a success: its {@link ServiceError} (a 429 with
 * `Retry-After` pauses the client's rate limit), wrapped for the retry loop ({@link failure}).
 */
export function errorAnswer(request: FailedRequest, response: ExchangeAnswer, s: FailureSettings): Error {
  const { method, route } = request;
  const status = response.statusCode;
  const retryAfter = header(response.headers["retry-after"]);
  const retryAfterSeconds = parseRetryAfter(retryAfter, Date.now());
  const kind = kindOfStatus(status);
  // The service rate limits the client, not one request: everyone of this client waits.
  if (kind === "rate_limited" && retryAfterSeconds !== undefined) s.bucket.pause(retryAfterSeconds * 1000);
  const retryable = kind === "rate_limited" || kind === "unavailable" || kind === "timeout";
  const maybeApplied = mayHaveApplied(request, status);
  const error = new ServiceError({
    kind,
    method,
    route,
    status,
    detail: errorDetail(s, response.body.toString("utf8"), status),
    retryable,
    maybeApplied,
    ...(retryAfterSeconds === undefined ? {} : { retryAfterSeconds }),
  });
  return failure(error, request, s);
}

/**
 * Whether a write answered `status` may have been applied: a success (its answer unread, or cut
 * off at a bound, is lost, not a refusal), or a 5xx but those a write is repeated on.
 */
const mayHaveApplied = (request: FailedRequest, status: number | undefined): boolean =>
  !request.idempotent &&
  (status === undefined || (status >= 200 && status < 300) || (status >= 500 && !RETRY_WRITE.has(status)));

/** Wraps `error` for p-retry: an {@link AttemptFailure} when a repeat may help, else final. */
export function failure(error: ServiceError, request: FailedRequest, s: FailureSettings): Error {
  const repeatable =
    error.status === undefined
      ? error.retryable && (request.idempotent || !error.maybeApplied)
      : (request.idempotent ? RETRY_READ : RETRY_WRITE).has(error.status);
  const tooLong = error.retryAfterSeconds !== undefined && error.retryAfterSeconds * 1000 > s.maxRetryAfterMs;
  return repeatable && !tooLong ? new AttemptFailure(error) : new AbortError(error);
}

/** The {@link ServiceError} of an exchange that failed: no connection, a timeout, TLS, a proxy. */
export function transportError(
  request: FailedRequest,
  error: ExchangeError,
  s: FailureSettings,
): ServiceError {
  const code = typeof error.code === "string" ? error.code : "";
  // A scrubbed copy, with nothing of the request attached.
  const cause = Object.assign(new Error(redact(s, error.message)), { code });
  const timeout = error.name === "TimeoutError" || code === "ETIMEDOUT";
  const sent = !NOT_SENT.has(code) && (error.written === true || timeout);
  const maybeApplied = !request.idempotent && sent;
  const host = URL.parse(s.baseUrl)?.hostname ?? s.baseUrl;
  const fixes = s.caBundle === undefined ? FLAG_TLS_FIXES : FLAG_TLS_FIXES_WITH_CA;
  const certificate = tlsFailureOf(code, host, fixes);
  const tls = certificate !== undefined || /CERT|SSL|TLS|SELF_SIGNED|UNABLE_TO_VERIFY/.test(code);
  const connecting = timeout && error.event === "connect";
  const detail = connecting
    ? `no connection within ${s.connectTimeoutMs} ms`
    : timeout
      ? `no complete response within ${s.timeoutMs} ms`
      : certificate
        ? describeTlsFailure(certificate)
        : tls
          ? `TLS handshake failed (${code}): ${redact(s, error.message)}`
          : code.startsWith("ERR_PROXY")
            ? `the proxy failed (${code}): ${redact(s, redactProxyUrl(error.message))}; check HTTPS_PROXY / HTTP_PROXY, or add the service's host to NO_PROXY`
            : `${code || "connection failed"}: ${redact(s, error.message)}`;
  return new ServiceError({
    kind: timeout ? "timeout" : certificate ? "tls" : "network",
    method: request.method,
    route: request.route,
    detail: maybeApplied ? `${detail}; the request may have been applied` : detail,
    retryable: !tls,
    maybeApplied,
    cause,
    ...(certificate ? { tlsCode: certificate.code } : {}),
  });
}

/**
 * The detail of an error answer: rendered ({@link renderDetail}), then redacted of the key and
 * cut to {@link MAX_ERROR_DETAIL} in one step (`redactAndTruncate`), which searches only as far
 * as what is kept could reach: an answer of 8 MiB costs what a short one does, and a key that
 * straddles the cut is covered whole, none of it kept. Only a body of at most
 * {@link MAX_PARSED_ERROR_BODY} characters is read as JSON; a longer one shows its start as text.
 */
function errorDetail(s: FailureSettings, body: string, status: number): string {
  const text = renderDetail(
    body.length <= MAX_PARSED_ERROR_BODY ? body : body.slice(0, MAX_PARSED_ERROR_BODY),
    `HTTP ${status}`,
  );
  const key = s.apiKey;
  return key
    ? redactAndTruncate(text, [key], MAX_ERROR_DETAIL, "[REDACTED]")
    : truncate(text, MAX_ERROR_DETAIL);
}

function redact(s: FailureSettings, text: string): string {
  const key = s.apiKey;
  return key ? redactSecrets(text, [key], "[REDACTED]") : text;
}

/** The budget a memory bound was: the whole process's, or the connection's tenant's half of it. */
const budgetOf = (tenant: true | undefined) =>
  tenant
    ? "the share of this connection's tenant (its namespace's ServiceConnections, or the shared connection): half of a third of the heap limit"
    : "a third of the heap limit";

/**
 * The `too_large` {@link ServiceError} of an answer cut off at one of its bounds: a write's,
 * unless its status refused it, `maybeApplied`.
 */
export function tooLargeError(request: FailedRequest, error: OverflowError): ServiceError {
  const { overflow } = error;
  const detail =
    overflow.bound === "bytes"
      ? `the answer was larger than ${overflow.limit} bytes (${MAX_RESPONSE_BYTES_SETTING}); the request was cut off. Check that the base URL is the service's, or raise the limit`
      : overflow.bound === "depth"
        ? `the answer nested its JSON deeper than ${overflow.limit} levels; the request was cut off. Check that the base URL is the service's`
        : overflow.bound === "codings"
          ? `the answer was encoded more than ${overflow.limit} times over (Content-Encoding); it was not read. Check that the base URL is the service's`
          : overflow.shared
            ? `the answers in flight together would take more than ${overflow.limit} bytes of memory once parsed (${budgetOf(overflow.tenant)}); the request was cut off and is tried again later. If it persists, raise --max-old-space-size in NODE_OPTIONS with the memory limit`
            : `the answer would take more than ${overflow.limit} bytes of memory once parsed (${budgetOf(overflow.tenant)}, shared by its answers in flight); the request was cut off. Check that the base URL is the service's, or raise --max-old-space-size in NODE_OPTIONS with the memory limit`;
  return new ServiceError({
    kind: "too_large",
    method: request.method,
    route: request.route,
    detail,
    retryable: false,
    maybeApplied: mayHaveApplied(request, error.status),
  });
}

function header(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}
