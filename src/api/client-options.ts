/**
 * How a `ServiceClient` (client.ts) reaches the service and how hard it pushes it: its options, and the
 * transport's settings they resolve to, every default applied (read once, when a client is made);
 * the options of the deployments' calls.
 */
import type { Logger } from "pino";
import { type ApiClock, systemApiClock } from "../runtime/clock.ts";
import type { ServiceCall } from "../runtime/metrics.ts";
import { VERSION } from "../version.ts";
import type { AddressPolicy } from "./address-policy.ts";
import type { ProxyEnv } from "./agent.ts";
import { ResponseMemory, TokenBucket } from "./budgets.ts";
import { DEFAULT_MAX_RESPONSE_BYTES, type ServiceError } from "./errors.ts";
import type { UnknownValue, UnreadableDeployment } from "./wire.ts";

/** Settings of a `Transport` (transport.ts); every field is resolved (defaults applied by the client). */
export interface TransportSettings {
  baseUrl: string;
  apiKey: string | undefined;
  tenantId: string | undefined;
  apiKeyHeader: string;
  tenantHeader: string;
  insecureSkipTlsVerify: boolean;
  /** PEM certificates trusted besides Node's default roots (a private CA); undefined: none. */
  caBundle: string | undefined;
  /** The proxy variables the calls honour (HTTPS_PROXY, NO_PROXY, …); undefined: no proxy. */
  proxyEnv: ProxyEnv | undefined;
  /** The addresses the calls may connect to (address-policy.ts); undefined: any. */
  addressPolicy?: AddressPolicy | undefined;
  timeoutMs: number;
  /** Bytes a response body may have after decompression; a larger one fails `too_large`. */
  maxResponseBytes: number;
  /** The weight the answers in flight may hold together, shared by every client of the process. */
  memory: ResponseMemory;
  /** Whose answers these are in `memory` (see `ServiceClientOptions.responseMemoryOwner`). */
  memoryOwner: string | undefined;
  retries: number;
  retryBaseDelayMs: number;
  retryMaxDelayMs: number;
  maxRetryAfterMs: number;
  bucket: TokenBucket;
  /** Sent as `User-Agent` on every request: `dms-operator/<version> (<pod name>)` in the operator. */
  userAgent: string;
  /** Asked before each write goes out (see {@link WriteGrant}). */
  writeGate: (() => WriteGrant) | undefined;
  clock: ApiClock;
  random: () => number;
  logger: Logger | undefined;
  /** Told once per HTTP exchange (each retry attempt counts), for the metrics. */
  onResponse: ((call: ServiceCall) => void) | undefined;
  /** Called before each wait for a retry (a command tells its user); undefined: none. */
  onRetry?: ((event: RetryEvent) => void) | undefined;
  /** Time to open the connection, within `timeoutMs`; undefined: only `timeoutMs` bounds it. */
  connectTimeoutMs?: number | undefined;
}

/** A failed attempt about to be retried: what failed, and how long the wait before the next one is. */
export interface RetryEvent {
  method: string;
  route: string;
  /** The attempt that failed, from 1. */
  attempt: number;
  /** Attempts left after the one to come. */
  retriesLeft: number;
  waitMs: number;
  error: ServiceError;
}

/**
 * Whether a write may go out now: `refuse` (why not: it fails `unavailable`, unsent), or
 * `withinMs` (it must end within that time: its timeout is cut to it); undefined: no limit.
 */
export type WriteGrant =
  | { refuse: string }
  | {
      withinMs: number;
      /**
       * Called once when the write ends: 0 when it was answered or never sent, else the timeout
       * it was given (unanswered, it may still run at the service about that long).
       */
      ended?(mayRunForMs: number): void;
    }
  | undefined;

/** How to reach the service and how hard to push it. */
export interface ServiceClientOptions {
  /** e.g. `https://api.example.com` (a path prefix is kept; a trailing slash is ignored). */
  baseUrl: string;
  apiKey?: string;
  tenantId?: string;
  /** Header carrying the key; default `X-Api-Key`. */
  apiKeyHeader?: string;
  /** Header carrying the tenant id; default `X-Tenant-Id`. */
  tenantHeader?: string;
  /** Accept any TLS certificate (self-signed endpoints); default false. */
  insecureSkipTlsVerify?: boolean;
  /**
   * PEM certificates to trust besides Node's default roots (a private CA of a self-hosted
   * service); checked by the caller (`parseCaBundle`, tls.ts). Default: none.
   */
  caBundle?: string;
  /**
   * Proxy variables for the service's calls (`HTTPS_PROXY`, `NO_PROXY`, …: `proxyEnvOf`,
   * agent.ts); default none: no proxy. Never read from the process by the client itself.
   */
  proxyEnv?: ProxyEnv;
  /** The addresses the calls may connect to (address-policy.ts); default any (the CLI's). */
  addressPolicy?: AddressPolicy;
  /** Timeout of each HTTP request, body included; default 10 000. */
  timeoutMs?: number;
  /** Retries of a retryable failure; default 4. */
  retries?: number;
  /**
   * Bytes a response body may have after decompression; past it the request is cut off and
   * fails `too_large`. Default {@link DEFAULT_MAX_RESPONSE_BYTES} (8 MiB).
   */
  maxResponseBytes?: number;
  /** The memory the answers in flight may take together; default the process's (budgets.ts). */
  responseMemory?: ResponseMemory;
  /**
   * Whose answers this client's are, in `responseMemory`: a tenant (the operator: a namespace for
   * its ServiceConnections, the connection for a shared one), whose answers together hold at most
   * its share (`OWNER_SHARE`). None: held to the whole budget (the CLI's one client).
   */
  responseMemoryOwner?: string;
  /**
   * Retries of one page of a listing after a 429, a 5xx or a lost connection (honouring
   * `Retry-After`), even when `retries` is 0: a listing of many pages must not be given up for
   * one bad answer. Default: `retries`.
   */
  pageRetries?: number;
  /** Requests per second of the token bucket shared by all callers of this client; default 20. */
  qps?: number;
  /** Bucket size; default 40. */
  burst?: number;
  /** This process's part of `qps` and `burst`, read as it changes (sharded replicas); default 1. */
  qpsShare?: () => number;
  /** The `User-Agent` of every request; default `dms-operator/<version>`. */
  userAgent?: string;
  /**
   * Asked before each write (POST, PATCH, DELETE) goes out (a sharded replica's Lease): `refuse`
   * fails it `unavailable` unsent; `withinMs` cuts its timeout so that it ends within that time.
   * Default none: every write goes, with the whole timeout.
   */
  writeGate?: () => WriteGrant;
  /** Receives debug lines per request and a warning per retry; never the key. */
  logger?: Logger;
  /** Metrics hook, called once per HTTP exchange. */
  onResponse?: (call: ServiceCall) => void;
  /** Called before each wait for a retry, with what failed and the wait (a command tells its user). */
  onRetry?: (event: RetryEvent) => void;
  /** Time to open a connection, within `timeoutMs`; default none (only `timeoutMs` bounds it). */
  connectTimeoutMs?: number;
  /** Metrics hook, called for every enum value read outside the spec's list (kept raw). */
  onUnknownValue?: (value: UnknownValue) => void;
  /** Metrics hook, called for every deployment of a listing skipped as unreadable. */
  onUnreadable?: (item: UnreadableDeployment) => void;
  /** First retry back-off in ms (doubles per attempt, with jitter); default 250. */
  retryBaseDelayMs?: number;
  /** Cap of the back-off in ms; default 10 000. */
  retryMaxDelayMs?: number;
  /** A `Retry-After` longer than this is not waited out but thrown as `rate_limited`; default 60 000. */
  maxRetryAfterMs?: number;
  /** Pages a listing may take before it is declared endless; default 1 000. */
  maxPages?: number;
  /** Time source for the rate limit and back-off; default the real clock. */
  clock?: ApiClock;
  /** Source of jitter in [0, 1); default Math.random. */
  random?: () => number;
}

/** Paging and cancellation options of `DeploymentRoutes.listDeployments`. */
export interface ListDeploymentsOptions {
  /** Page size sent as `limit` (1–100); default 100, the fewest requests. */
  pageSize?: number;
  /** Offset of the first page; default 0. */
  offset?: number;
  signal?: AbortSignal;
  /**
   * Told about each deployment of a page that cannot be understood (say, no `id`). Such an item
   * is skipped, logged as a warning naming the field and the deployment (the first few of a
   * listing; then a count), and the rest of the page is used.
   */
  onUnreadable?: (item: UnreadableDeployment) => void;
  /**
   * Asked after a page holding fewer items than the longest page this client was answered to the
   * same `limit` (the service has shown it fills a page that long when it has the items, so the
   * shorter one is its last): true ends the listing there, without the empty page that proves the
   * end. A lookup by name that found its name needs no more (the service refuses a second
   * deployment of a name). Unset: every listing ends on an empty page.
   */
  enoughAfterShortPage?: () => boolean;
}

/** Cancellation of a single call. */
export interface CallOptions {
  signal?: AbortSignal;
}

/** Options of `DeploymentRoutes.deleteDeployment`. */
export interface DeleteDeploymentOptions extends CallOptions {
  /** Delete the deployment's tracing project too (`delete_tracing_project=true`); default false. */
  deleteTracingProject?: boolean;
}

/** The transport's settings of `options`, every default applied; `baseUrl` without its trailing slashes. */
export function transportSettings(options: ServiceClientOptions, baseUrl: string): TransportSettings {
  const clock = options.clock ?? systemApiClock;
  return {
    baseUrl,
    apiKey: options.apiKey,
    tenantId: options.tenantId,
    apiKeyHeader: options.apiKeyHeader ?? "X-Api-Key",
    tenantHeader: options.tenantHeader ?? "X-Tenant-Id",
    insecureSkipTlsVerify: options.insecureSkipTlsVerify ?? false,
    caBundle: options.caBundle,
    proxyEnv: options.proxyEnv,
    addressPolicy: options.addressPolicy,
    timeoutMs: options.timeoutMs ?? 10_000,
    maxResponseBytes: options.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES,
    memory: options.responseMemory ?? processResponseMemory(),
    memoryOwner: options.responseMemoryOwner,
    retries: options.retries ?? 4,
    retryBaseDelayMs: options.retryBaseDelayMs ?? 250,
    retryMaxDelayMs: options.retryMaxDelayMs ?? 10_000,
    maxRetryAfterMs: options.maxRetryAfterMs ?? 60_000,
    bucket: new TokenBucket({
      qps: options.qps ?? 20,
      burst: options.burst ?? 40,
      clock,
      ...(options.qpsShare ? { share: options.qpsShare } : {}),
    }),
    userAgent: options.userAgent ?? `dms-operator/${VERSION}`,
    writeGate: options.writeGate,
    clock,
    random: options.random ?? Math.random,
    logger: options.logger,
    onResponse: options.onResponse,
    onRetry: options.onRetry,
    connectTimeoutMs: options.connectTimeoutMs,
  };
}

/** Share of V8's heap limit the answers in flight may take together. */
export const HEAP_SHARE = 1 / 3;

let shared: ResponseMemory | undefined;

/**
 * The process's budget: {@link HEAP_SHARE} of V8's heap limit (about 33 MiB under the shipped
 * `--max-old-space-size=96`). Every client uses it unless given another.
 */
export function processResponseMemory(): ResponseMemory {
  shared ??= new ResponseMemory(
    Math.floor(process.getBuiltinModule("node:v8").getHeapStatistics().heap_size_limit * HEAP_SHARE),
  );
  return shared;
}
