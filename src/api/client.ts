/**
 * The Deployment Management Service client: every operation of the spec plus create and delete,
 * typed with the wire model, input checked before sending, answers validated on arrival.
 */
import type { Logger } from "pino";
import { type ApiClock, systemApiClock } from "../runtime/clock.ts";
import { VERSION } from "../version.ts";
import type { AddressPolicy } from "./address-policy.ts";
import type { ProxyEnv } from "./agent.ts";
import {
  DEFAULT_MAX_RESPONSE_BYTES,
  isRouteMissing,
  isServiceError,
  RequestValidationError,
  RevisionsRouteMissingError,
  RouteMissingError,
  type RouteMissingErrorClass,
  ServiceError,
} from "./errors.ts";
import { paginate } from "./pagination.ts";
import { TokenBucket } from "./rate-limit.ts";
import { REDEPLOY_ROUTE, RedeployRouteMissingError } from "./redeploy.ts";
import { processResponseMemory, type ResponseMemory } from "./response-memory.ts";
import {
  newestFirst,
  type RevisionListing,
  type RevisionRow,
  readRevisionItem,
  rowId,
} from "./revision-listing.ts";
import {
  type LogPage,
  type LogQuery,
  LogsRouteMissingError,
  MAX_LOG_LIMIT,
  REVISION_LOGS_ROUTE,
  readLogPage,
} from "./revision-logs.ts";
import {
  type ResponseObservation,
  type RetryEvent,
  Transport,
  type TransportRequest,
  type TransportResponse,
  type TransportSettings,
  type WriteGrant,
} from "./transport.ts";
import {
  checkFilters,
  checkOffset,
  checkPageSize,
  checkRequestBody,
  checkUuid,
  readDeployment,
  unknownDeploymentValues,
  unknownRevisionValues,
} from "./validate.ts";
import type {
  CreateDeploymentBody,
  Deployment,
  DeploymentFilters,
  ForgeRepo,
  OAuthProvider,
  PatchDeploymentBody,
  Revision,
  UnknownValue,
  UnreadableDeployment,
} from "./wire.ts";
import type { WireCheckName } from "./wire-checks.ts";
import { PAGE_LIMIT, PROVIDER_DEFAULTS, ROUTES } from "./wire-values.ts";

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
  /** The memory the answers in flight may take together; default the process's (response-memory.ts). */
  responseMemory?: ResponseMemory;
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
  onResponse?: (observation: ResponseObservation) => void;
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

/** Paging and cancellation options of {@link ServiceClient.listDeployments}. */
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
  /** Retries of each page; default the client's `pageRetries`. */
  pageRetries?: number;
}

/** Bounds and cancellation of {@link ServiceClient.listRevisions}. */
export interface ListRevisionsOptions {
  /** Page size sent as `limit` (1–100); default 100. */
  pageSize?: number;
  /** Rows read at most (default 1,000): past them the listing is cut and says so. */
  maxItems?: number;
  signal?: AbortSignal;
}

/** Cancellation of a single call. */
export interface CallOptions {
  signal?: AbortSignal;
}

/** Options of {@link ServiceClient.deleteDeployment}. */
export interface DeleteDeploymentOptions extends CallOptions {
  /** Delete the deployment's tracing project too (`delete_tracing_project=true`); default false. */
  deleteTracingProject?: boolean;
}

/** An OAuth provider with the spec's documented defaults filled in. */
export type ResolvedOAuthProvider = OAuthProvider & {
  token_endpoint_auth_method: string;
  is_dynamic_client: boolean;
};

const { DEPLOYMENTS, DEPLOYMENT, REVISION, REVISIONS, CREATE_REVISION, REPOS, PROVIDERS } = ROUTES;

/**
 * The service has no rebuild route (POST /v2/deployments/{deployment_id}/revisions): a caller
 * should say so, write nothing else for the request, and stop asking.
 */
export class RebuildRouteMissingError extends RouteMissingError {
  override readonly name = "RebuildRouteMissingError";
  constructor(cause: ServiceError) {
    super("rebuild", cause);
  }
}

/**
 * Unreadable items of one listing logged one by one; the rest are counted in one line when the
 * listing ends (every one is still counted by the `onUnreadable` hook, the metrics).
 */
export const UNREADABLE_WARNINGS = 3;

/**
 * A client of one service endpoint (one key, one tenant).
 *
 * Contract of every method: input is checked first and a bad value throws
 * `RequestValidationError` without any request; failures throw `ServiceError` (see errors.ts)
 * after the retries the failure allows; an aborted `signal` rejects with its reason. The key is
 * held privately: it does not appear in `util.inspect(client)`, logs or error messages.
 */
export class ServiceClient {
  readonly #transport: Transport;
  readonly #maxPages: number;
  readonly #pageRetries: number;
  readonly #logger: Logger | undefined;
  readonly #onUnknownValue: ((value: UnknownValue) => void) | undefined;
  readonly #onUnreadable: ((item: UnreadableDeployment) => void) | undefined;
  /** Unknown values already logged: each is logged once per client, counted every time. */
  readonly #loggedUnknown = new Set<string>();
  /** The endpoint this client talks to (no secrets). */
  readonly baseUrl: string;

  constructor(options: ServiceClientOptions) {
    const clock = options.clock ?? systemApiClock;
    this.baseUrl = options.baseUrl.replace(/\/+$/, "");
    this.#maxPages = options.maxPages ?? 1000;
    this.#pageRetries = options.pageRetries ?? options.retries ?? 4;
    this.#logger = options.logger;
    this.#onUnknownValue = options.onUnknownValue;
    this.#onUnreadable = options.onUnreadable;
    const settings: TransportSettings = {
      baseUrl: this.baseUrl,
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
    this.#transport = new Transport(settings);
  }

  /** GET /v2/auth/providers, with `token_endpoint_auth_method` and `is_dynamic_client` defaulted. */
  async listProviders(opts: CallOptions = {}): Promise<ResolvedOAuthProvider[]> {
    const { body } = await this.#transport.send({
      method: "GET",
      route: PROVIDERS,
      path: PROVIDERS,
      schema: "ProviderList",
      idempotent: true,
      ...signalOf(opts),
    });
    return body.map((p) => ({
      ...p,
      token_endpoint_auth_method:
        p.token_endpoint_auth_method ?? PROVIDER_DEFAULTS.token_endpoint_auth_method,
      is_dynamic_client: p.is_dynamic_client ?? PROVIDER_DEFAULTS.is_dynamic_client,
    }));
  }

  /** GET /v1/integrations/forge/github/{integration_id}/repos; `integrationId` must be a uuid. */
  async listRepos(integrationId: string, opts: CallOptions = {}): Promise<ForgeRepo[]> {
    checkUuid(integrationId, "integrationId");
    const { body } = await this.#transport.send({
      method: "GET",
      route: REPOS,
      path: REPOS.replace("{integration_id}", encodeURIComponent(integrationId)),
      schema: "ForgeRepoList",
      idempotent: true,
      ...signalOf(opts),
    });
    return body;
  }

  /**
   * Every deployment matching `filters`, page by page (GET /v2/deployments), none repeated from
   * one page to the next (see `paginate`; only {@link listAllDeployments} catches a server
   * repeating an older page).
   *
   * Contract: the filters and paging options are checked when iteration starts, before any
   * request; pages are fetched lazily; see `paginate` for how the end is detected. Each item is
   * read tolerantly (`readDeployment`): one that still cannot be understood is skipped and
   * reported (`opts.onUnreadable`, the client's `onUnreadable` hook, and a warning for the first
   * {@link UNREADABLE_WARNINGS} of the listing, then one line counting them all when it ends) and
   * the rest of the page is used. A page that fails with a 429, a 5xx or a lost connection is retried up to
   * `pageRetries` times.
   */
  listDeployments(
    filters: DeploymentFilters = {},
    opts: ListDeploymentsOptions = {},
  ): AsyncIterable<Deployment> {
    const pageSize = opts.pageSize ?? PAGE_LIMIT.max;
    const offset = opts.offset ?? 0;
    const query = filterQuery(filters);
    const retries = opts.pageRetries ?? this.#pageRetries;
    const pages = async (start: number, limit: number) => {
      const { body } = await this.#transport.send({
        method: "GET",
        route: DEPLOYMENTS,
        path: DEPLOYMENTS,
        searchParams: { ...query, limit: String(limit), offset: String(start) },
        schema: "DeploymentPage",
        idempotent: true,
        retries,
        ...signalOf(opts),
      });
      const items: Deployment[] = [];
      for (const [i, read] of (await Promise.all(body.resources.map(readDeployment))).entries()) {
        if (read.ok) items.push(this.#noticeUnknown(read.deployment));
        else this.#skip(read.unreadable, start + i, skipped++ < UNREADABLE_WARNINGS, opts.onUnreadable);
      }
      return { items, nextOffset: body.offset, skipped: body.resources.length - items.length };
    };
    // Unreadable items of this listing: a server may answer every page full of them, so only the
    // first few are logged one by one.
    let skipped = 0;
    const maxPages = this.#maxPages;
    const logger = this.#logger;
    return {
      async *[Symbol.asyncIterator]() {
        checkFilters(filters);
        checkPageSize(pageSize, "pageSize");
        checkOffset(offset, "offset");
        try {
          yield* paginate(pages, {
            offset,
            limit: pageSize,
            maxPages,
            idOf: (d) => d.id,
            route: DEPLOYMENTS,
            onEarlyEnd: (reason) => logger?.warn({ route: DEPLOYMENTS }, `listing ended early: ${reason}`),
          });
        } finally {
          if (skipped > UNREADABLE_WARNINGS)
            logger?.warn(
              { route: DEPLOYMENTS, skipped },
              `skipped ${skipped} deployments of the listing that could not be read (the first ${UNREADABLE_WARNINGS} logged)`,
            );
        }
      },
    };
  }

  /** All of {@link listDeployments} in one array, each id once. */
  async listAllDeployments(
    filters: DeploymentFilters = {},
    opts: ListDeploymentsOptions = {},
  ): Promise<Deployment[]> {
    const all: Deployment[] = [];
    // It holds every item anyway: a server repeating an older page gives each once.
    const ids = new Set<string>();
    for await (const deployment of this.listDeployments(filters, opts)) {
      if (ids.has(deployment.id)) continue;
      ids.add(deployment.id);
      all.push(deployment);
    }
    return all;
  }

  /**
   * The deployment with this id, or undefined when the service has none. The spec has no GET by
   * id, so this lists with the `deployment_ids` filter and matches the id exactly (a service
   * that ignored the filter would still give the right answer, only slower).
   */
  async getDeployment(id: string, opts: CallOptions = {}): Promise<Deployment | undefined> {
    checkUuid(id, "id");
    // "Not found" would let a caller create a duplicate of what it merely could not read: the
    // first unreadable item that may be this id's says so (the others are not kept).
    let hidden: UnreadableDeployment | undefined;
    const mayBe = (item: UnreadableDeployment) =>
      item.id === undefined || item.id.toLowerCase() === id.toLowerCase();
    const listing = this.listDeployments(
      { deployment_ids: [id] },
      {
        ...signalOf(opts),
        onUnreadable: (item) => {
          if (hidden === undefined && mayBe(item)) hidden = item;
        },
      },
    );
    for await (const deployment of listing) {
      if (deployment.id === id) return deployment;
    }
    if (hidden) {
      throw new ServiceError({
        kind: "bad_response",
        method: "GET",
        route: DEPLOYMENTS,
        status: 200,
        detail: hidden.message,
        retryable: false,
      });
    }
    return undefined;
  }

  /**
   * GET /v2/deployments/{deployment_id}/revisions/{revision_id} (not in the shared spec).
   * Resolves undefined when the service says it has no such revision; throws
   * {@link RevisionsRouteMissingError} when the service has no such route (405, or a 404 whose
   * detail is the generic "Not Found" of an unknown path).
   */
  async getRevision(
    deploymentId: string,
    revisionId: string,
    opts: CallOptions = {},
  ): Promise<Revision | undefined> {
    checkUuid(deploymentId, "deploymentId");
    checkUuid(revisionId, "revisionId");
    const answer = await this.#sendForRevision(
      deploymentId,
      revisionId,
      { method: "GET", route: REVISION, schema: "Revision", idempotent: true },
      RevisionsRouteMissingError,
      opts,
    );
    if (answer === undefined) return undefined;
    for (const value of unknownRevisionValues(answer.body)) this.#reportUnknown(value);
    return answer.body;
  }

  /**
   * GET /v2/deployments/{deployment_id}/revisions (not in the shared spec), every page, newest
   * first. Assumed paged like the deployment listing (`limit`/`offset`, `{resources, offset}`):
   * see `paginate` for how the end is found. Each item is read on its own; one that is not a
   * revision is kept as an unreadable row. At most `maxItems` rows are read (then `truncated`).
   * Throws {@link RevisionsRouteMissingError} when the service has no such route (405, or the
   * generic 404 "Not Found" of an unknown path), and the `not_found` ServiceError when it says
   * the deployment does not exist.
   */
  async listRevisions(deploymentId: string, opts: ListRevisionsOptions = {}): Promise<RevisionListing> {
    checkUuid(deploymentId, "deploymentId");
    const pageSize = opts.pageSize ?? PAGE_LIMIT.max;
    checkPageSize(pageSize, "pageSize");
    const maxItems = opts.maxItems ?? 1000;
    if (!Number.isInteger(maxItems) || maxItems < 1)
      throw new RequestValidationError("maxItems", `must be an integer >= 1, got ${maxItems}`);
    const page = async (start: number, limit: number) => {
      const { rows, offset } = await this.#revisionPage(deploymentId, start, limit, {
        retries: this.#pageRetries,
        ...signalOf(opts),
      });
      return { items: rows, nextOffset: offset ?? start + rows.length };
    };
    const rows: RevisionRow[] = [];
    let truncated = false;
    const listing = paginate(page, {
      offset: 0,
      limit: pageSize,
      // Enough pages for maxItems, and one to learn that there were more.
      maxPages: Math.ceil(maxItems / pageSize) + 1,
      idOf: (row) => rowId(row, rows.length),
      route: REVISIONS,
      onEarlyEnd: (reason) => this.#logger?.warn({ route: REVISIONS }, `listing ended early: ${reason}`),
    });
    for await (const row of listing) {
      if (rows.length >= maxItems) {
        truncated = true;
        break;
      }
      rows.push(row);
    }
    return { rows: newestFirst(rows), truncated };
  }

  /**
   * GET /v2/deployments/{deployment_id}/revisions/{revision_id}/logs (from the service's public
   * documentation, not the shared spec): one page of a revision's build or deploy log, its
   * entries read tolerantly (see revision-logs.ts). Resolves undefined when the service says it
   * has no such revision; throws {@link LogsRouteMissingError} when it has no such route (405, or
   * a 404 whose detail is the generic "Not Found" of an unknown path), and a `bad_response`
   * when the answer holds no list of entries. The answer is bounded like every other
   * (`--max-response-bytes`); messages are kept whole, for the caller to redact before cutting.
   */
  async getRevisionLogs(
    deploymentId: string,
    revisionId: string,
    query: LogQuery,
    opts: CallOptions = {},
  ): Promise<LogPage | undefined> {
    checkUuid(deploymentId, "deploymentId");
    checkUuid(revisionId, "revisionId");
    if (
      query.limit !== undefined &&
      (!Number.isInteger(query.limit) || query.limit < 1 || query.limit > MAX_LOG_LIMIT)
    )
      throw new RequestValidationError("limit", `must be an integer from 1 to ${MAX_LOG_LIMIT}`);
    const searchParams: Record<string, string> = { type: query.type };
    if (query.order !== undefined) searchParams.order = query.order;
    if (query.limit !== undefined) searchParams.limit = String(query.limit);
    if (query.offset !== undefined) searchParams.offset = query.offset;
    const answer = await this.#sendForRevision(
      deploymentId,
      revisionId,
      { method: "GET", route: REVISION_LOGS_ROUTE, searchParams, schema: "Any", idempotent: true },
      LogsRouteMissingError,
      opts,
    );
    if (answer === undefined) return undefined;
    const page = readLogPage(answer.body);
    if (page) return page;
    throw new ServiceError({
      kind: "bad_response",
      method: "GET",
      route: REVISION_LOGS_ROUTE,
      status: 200,
      detail: 'expected {"logs": [...], "next_offset": ...}',
      retryable: false,
    });
  }

  /**
   * The first page of GET /v2/deployments/{deployment_id}/revisions (not in the shared spec),
   * newest first, in ONE request of `limit` rows (default 100): what a caller that must not walk
   * the whole listing reads (the redeploy check). Items are read one by one as in
   * {@link listRevisions}. Throws {@link RevisionsRouteMissingError} when the service has no such
   * route, the `not_found` ServiceError when it says the deployment does not exist.
   */
  async firstRevisionPage(
    deploymentId: string,
    opts: CallOptions & { limit?: number } = {},
  ): Promise<RevisionRow[]> {
    checkUuid(deploymentId, "deploymentId");
    const limit = opts.limit ?? PAGE_LIMIT.max;
    checkPageSize(limit, "limit");
    const { rows } = await this.#revisionPage(deploymentId, 0, limit, { ...signalOf(opts), keep: limit });
    return newestFirst(rows);
  }

  /**
   * One request for a page of GET /v2/deployments/{deployment_id}/revisions: `limit` rows from
   * `offset`, in the service's order, each item read on its own (one that is not a revision kept
   * as an unreadable row; only the first `keep`, when given), with the `offset` the service
   * answered. Throws {@link RevisionsRouteMissingError} when the service has no such route.
   */
  async #revisionPage(
    deploymentId: string,
    offset: number,
    limit: number,
    opts: CallOptions & { retries?: number; keep?: number },
  ): Promise<{ rows: RevisionRow[]; offset: number | undefined }> {
    const { body } = await this.#transport
      .send({
        method: "GET",
        route: REVISIONS,
        path: REVISIONS.replace("{deployment_id}", encodeURIComponent(deploymentId)),
        searchParams: { limit: String(limit), offset: String(offset) },
        schema: "RevisionPage",
        idempotent: true,
        ...(opts.retries === undefined ? {} : { retries: opts.retries }),
        ...signalOf(opts),
      })
      .catch((error: unknown) => {
        throw routeFailure(error, RevisionsRouteMissingError);
      });
    const items = opts.keep === undefined ? body.resources : body.resources.slice(0, opts.keep);
    const rows: RevisionRow[] = await Promise.all(items.map(readRevisionItem));
    for (const row of rows)
      if (row.ok) for (const value of unknownRevisionValues(row.revision)) this.#reportUnknown(value);
    return { rows, offset: body.offset };
  }

  /**
   * POST /v2/deployments/{deployment_id}/revisions/{revision_id}/redeploy (from the service's
   * public documentation, not the shared spec; see redeploy.ts): deploys an earlier revision
   * again, without a build. Returns the deployment answered; undefined when the service says it
   * has no such deployment or revision (a 404 naming it). Throws {@link RedeployRouteMissingError}
   * when the service has no such route (405, or the generic 404 "Not Found" of an unknown path).
   * Not repeated after a timeout or lost connection (a repeat could deploy twice): such a failure
   * throws with `maybeApplied: true`.
   */
  async redeploy(
    deploymentId: string,
    revisionId: string,
    opts: CallOptions = {},
  ): Promise<Deployment | undefined> {
    checkUuid(deploymentId, "deploymentId");
    checkUuid(revisionId, "revisionId");
    const answer = await this.#sendForRevision(
      deploymentId,
      revisionId,
      { method: "POST", route: REDEPLOY_ROUTE, schema: "Any", idempotent: false },
      RedeployRouteMissingError,
      opts,
    );
    if (answer === undefined) return undefined;
    return this.#readOne(answer.body, "POST", REDEPLOY_ROUTE);
  }

  /**
   * POST /v2/deployments/{deployment_id}/revisions with body `{}` (from the service's public
   * documentation, not the shared spec): a new revision of the deployment's current
   * configuration, e.g. a build of a tracked branch's new head. Returns the Revision answered;
   * undefined when the service says it has no such deployment (a 404 naming it). Throws
   * {@link RebuildRouteMissingError} when the service has no such route (405, or the generic 404
   * "Not Found" of an unknown path). Not repeated after a timeout or lost connection (a repeat
   * could build twice): such a failure throws with `maybeApplied: true`.
   */
  async createRevision(deploymentId: string, opts: CallOptions = {}): Promise<Revision | undefined> {
    checkUuid(deploymentId, "deploymentId");
    try {
      const response = await this.#transport.send({
        method: "POST",
        route: CREATE_REVISION,
        path: CREATE_REVISION.replace("{deployment_id}", encodeURIComponent(deploymentId)),
        body: {},
        schema: "Revision",
        idempotent: false,
        ...signalOf(opts),
      });
      for (const value of unknownRevisionValues(response.body)) this.#reportUnknown(value);
      return response.body;
    } catch (error) {
      if (isServiceError(error, "not_found") && !isRouteMissing(error)) return undefined;
      throw routeFailure(error, RebuildRouteMissingError);
    }
  }

  /**
   * One call to a route of a revision outside the shared spec (`request.route` holds
   * `{deployment_id}` and `{revision_id}`): the answer, or undefined when the service says it has
   * no such deployment or revision (a 404 naming it). Throws a `Missing` error when the service
   * has no such route (405, or the generic 404 "Not Found" of an unknown path).
   */
  async #sendForRevision<S extends WireCheckName>(
    deploymentId: string,
    revisionId: string,
    request: Omit<TransportRequest<S>, "path" | "signal">,
    Missing: RouteMissingErrorClass,
    opts: CallOptions,
  ): Promise<TransportResponse<S> | undefined> {
    const path = request.route
      .replace("{deployment_id}", encodeURIComponent(deploymentId))
      .replace("{revision_id}", encodeURIComponent(revisionId));
    try {
      return await this.#transport.send({ ...request, path, ...signalOf(opts) });
    } catch (error) {
      // A 404 naming the deployment or revision, not the generic one of an unknown path.
      if (isServiceError(error, "not_found") && !isRouteMissing(error)) return undefined;
      throw routeFailure(error, Missing);
    }
  }

  /**
   * POST /v2/deployments. The body's shape is our assumption (the spec does not show it): see
   * `CreateDeploymentBodySchema` in wire.ts. A timeout or lost connection is not retried and
   * throws with `maybeApplied: true`: look the name up before creating again.
   */
  async createDeployment(body: CreateDeploymentBody, opts: CallOptions = {}): Promise<Deployment> {
    await checkRequestBody("CreateDeploymentBody", body, "body");
    const response = await this.#transport.send({
      method: "POST",
      route: DEPLOYMENTS,
      path: DEPLOYMENTS,
      body: withCreateDefaults(body),
      schema: "Any",
      idempotent: false,
      ...signalOf(opts),
    });
    return this.#readOne(response.body, "POST", DEPLOYMENTS);
  }

  /**
   * PATCH /v2/deployments/{deployment_id}; returns the updated deployment. Not repeated after a
   * timeout or lost connection (a repeat could make a second revision): such a failure throws
   * with `maybeApplied: true`.
   */
  async patchDeployment(id: string, body: PatchDeploymentBody, opts: CallOptions = {}): Promise<Deployment> {
    checkUuid(id, "id");
    await checkRequestBody("PatchDeploymentBody", body, "body");
    const response = await this.#transport.send({
      method: "PATCH",
      route: DEPLOYMENT,
      path: DEPLOYMENT.replace("{deployment_id}", encodeURIComponent(id)),
      body,
      schema: "Any",
      idempotent: false,
      ...signalOf(opts),
    });
    return this.#readOne(response.body, "PATCH", DEPLOYMENT);
  }

  /**
   * DELETE /v2/deployments/{deployment_id}. Resolves when the deployment is gone or going (2xx or
   * 404). With `deleteTracingProject`, sends `delete_tracing_project=true` (a query parameter of
   * the service's public API reference, not of the shared spec; default false): the tracing
   * project the service made with the deployment goes too, and the name can be created again.
   */
  async deleteDeployment(id: string, opts: DeleteDeploymentOptions = {}): Promise<void> {
    checkUuid(id, "id");
    await this.#transport.send({
      method: "DELETE",
      route: DEPLOYMENT,
      path: DEPLOYMENT.replace("{deployment_id}", encodeURIComponent(id)),
      ...(opts.deleteTracingProject === true ? { searchParams: { delete_tracing_project: "true" } } : {}),
      schema: undefined,
      alsoOk: [404],
      idempotent: true,
      ...signalOf(opts),
    });
  }

  /** The deployment a write answered with: read tolerantly, or a `bad_response` naming the field. */
  async #readOne(body: unknown, method: string, route: string): Promise<Deployment> {
    const read = await readDeployment(body);
    if (read.ok) return this.#noticeUnknown(read.deployment);
    throw new ServiceError({
      kind: "bad_response",
      method,
      route,
      status: 200,
      detail: read.unreadable.message,
      retryable: false,
    });
  }

  #noticeUnknown(deployment: Deployment): Deployment {
    for (const value of unknownDeploymentValues(deployment)) this.#reportUnknown(value);
    return deployment;
  }

  #reportUnknown(value: UnknownValue): void {
    this.#onUnknownValue?.(value);
    const key = `${value.field}=${value.value}`;
    if (this.#loggedUnknown.has(key) || this.#loggedUnknown.size > 100) return;
    this.#loggedUnknown.add(key);
    this.#logger?.warn(
      { field: value.field, value: value.value },
      `the service answered ${value.field} ${JSON.stringify(value.value)}, which the spec does not list; kept as is`,
    );
  }

  #skip(
    item: UnreadableDeployment,
    position: number,
    log: boolean,
    callback: ((item: UnreadableDeployment) => void) | undefined,
  ): void {
    if (log)
      this.#logger?.warn(
        { route: DEPLOYMENTS, position, field: item.field, deployment: item.name ?? item.id },
        `skipped a deployment of the listing: ${item.message}`,
      );
    this.#onUnreadable?.(item);
    callback?.(item);
  }
}

/** Query parameters of the listing filters; arrays are joined with commas, booleans as true/false. */
function filterQuery(filters: DeploymentFilters): Record<string, string> {
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

/**
 * What a call to a route outside the shared spec throws for its failure `error`: a `Missing` error
 * when the service has no such route (405, or the generic 404 "Not Found" of an unknown path),
 * else `error` itself.
 */
function routeFailure(error: unknown, Missing: RouteMissingErrorClass): unknown {
  return isRouteMissing(error) ? new Missing(error) : error;
}

function signalOf(opts: { signal?: AbortSignal }): { signal?: AbortSignal } {
  return opts.signal ? { signal: opts.signal } : {};
}

/** `body` with `source_config`, `source_revision_config` and `secrets` present (empty when absent). */
function withCreateDefaults(body: CreateDeploymentBody): CreateDeploymentBody {
  return {
    ...body,
    source_config: body.source_config ?? {},
    source_revision_config: body.source_revision_config ?? {},
    secrets: body.secrets ?? [],
  };
}
