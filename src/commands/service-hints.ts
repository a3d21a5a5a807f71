/**
 * What a command tells its user about a call to the service beyond the error itself: a line per
 * retry (why it waits, and how long), and after a failure the flag or variable to check. Light on
 * purpose (types and setting names only): the program's error report loads it for every command.
 */
import type { RetryEvent } from "../api/client-options.ts";
import type { ServiceError } from "../api/errors.ts";
import { flagOf, SERVICE_ENV } from "../config.ts";

/** `retrying in 2 s: connection refused (GET /v2/deployments; 3 retries left)`. */
export function retryLine(e: RetryEvent): string {
  const wait = e.waitMs >= 1000 ? `${Math.round(e.waitMs / 1000)} s` : `${(e.waitMs / 1000).toFixed(1)} s`;
  const left = e.retriesLeft === 1 ? "1 retry left" : `${e.retriesLeft} retries left`;
  return `retrying in ${wait}: ${failureText(e.error)} (${e.method} ${e.route}; ${left})`;
}

const NETWORK_CODES: Readonly<Record<string, string>> = {
  ECONNREFUSED: "connection refused",
  ECONNRESET: "connection reset",
  ENOTFOUND: "host not found",
  EAI_AGAIN: "host name lookup failed (temporarily)",
  EHOSTUNREACH: "host unreachable",
  ENETUNREACH: "network unreachable",
  EPIPE: "connection closed",
};

/** A failure in a few words: `connection refused`, `503 unavailable`, `no connection within 5000 ms`. */
function failureText(error: ServiceError): string {
  if (error.status !== undefined) {
    const pause =
      error.retryAfterSeconds === undefined ? "" : ` (the service asked for ${error.retryAfterSeconds} s)`;
    return `${error.status} ${error.kind.replace("_", " ")}${pause}`;
  }
  const code = (error.cause as { code?: unknown } | undefined)?.code;
  if (typeof code === "string" && NETWORK_CODES[code]) return NETWORK_CODES[code];
  return error.detail.split(": ")[0] ?? error.kind;
}

/**
 * What to check after a failed call, naming the flag or variable: a 401/403 the API key and
 * tenant; a refused connection the base URL; a 404 on a route that takes no id (or the generic "Not Found" of an unknown path) the
 * path of the base URL. Undefined when there is nothing to add.
 */
export function serviceErrorHint(error: ServiceError): string | undefined {
  const setting = (key: keyof typeof SERVICE_ENV) => `${flagOf(key)} / ${SERVICE_ENV[key]}`;
  if (error.kind === "unauthorized")
    return error.status === 403
      ? `the API key was accepted but may not do this: check the key's permissions and ${setting("tenantId")} (or the Secret of the connection used)`
      : `the service did not accept the API key: check ${setting("apiKeyFile")} or ${setting("apiKey")}, and ${setting("apiKeyHeader")} if the service reads another header (with --connection: the connection's Secret)`;
  // A refused connection the command did not retry (`--retries 0`): said as the first refusal is.
  if (error.kind === "network" && (error.cause as { code?: unknown } | undefined)?.code === "ECONNREFUSED")
    return `nothing listens there; check ${setting("baseUrl")} (its host and port; with --connection: the connection's spec.baseUrl), and that the service (or the simulator) is running`;
  const generic = /^\s*"?not found"?\s*$/i.test(error.detail);
  if (error.status === 404 && (!error.route.includes("{") || generic)) {
    const version = /^\/v\d+\//.exec(error.route)?.[0] ?? "/";
    return `the service has no ${error.route}: check the path of ${setting("baseUrl")}: the routes are {base_url}${version}..., so give the URL they hang off (e.g. https://api.example.com, without ${version.replace(/\/$/, "")} or a path of its own unless the service lives under one)`;
  }
  return undefined;
}
