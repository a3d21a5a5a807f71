/**
 * The Deployment Management Service client: every operation of the spec plus create and delete,
 * typed with the wire model, input checked before sending, answers validated on arrival.
 */
import type { Logger } from "pino";
import { type ApiClock, systemApiClock } from "./clock.ts";
import { paginate } from "./pagination.ts";
import { TokenBucket } from "./rate-limit.ts";
import { type ResponseObservation, Transport, type TransportSettings } from "./transport.ts";
import { checkFilters, checkOffset, checkPageSize, checkRequestBody, checkUuid } from "./validate.ts";
import {
  type CreateDeploymentBody,
  CreateDeploymentBodySchema,
  type Deployment,
  type DeploymentFilters,
  DeploymentPageSchema,
  DeploymentSchema,
  type ForgeRepo,
  ForgeRepoListSchema,
  type OAuthProvider,
  PAGE_LIMIT,
  type PatchDeploymentBody,
  PatchDeploymentBodySchema,
  PROVIDER_DEFAULTS,
  ProviderListSchema,
} from "./wire.ts";

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
  /** Timeout of each HTTP request, body included; default 10 000. */
  timeoutMs?: number;
  /** Retries of a retryable failure; default 4. */
  retries?: number;
  /** Requests per second of the token bucket shared by all callers of this client; default 20. */
  qps?: number;
  /** Bucket size; default 40. */
  burst?: number;
  /** Receives debug lines per request and a warning per retry; never the key. */
  logger?: Logger;
  /** Metrics hook, called once per HTTP exchange. */
  onResponse?: (observation: ResponseObservation) => void;
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
}

/** Cancellation of a single call. */
export interface CallOptions {
  signal?: AbortSignal;
}

/** An OAuth provider with the spec's documented defaults filled in. */
export type ResolvedOAuthProvider = OAuthProvider & {
  token_endpoint_auth_method: string;
  is_dynamic_client: boolean;
};

const DEPLOYMENTS = "/v2/deployments";
const DEPLOYMENT = "/v2/deployments/{deployment_id}";
const REPOS = "/v1/integrations/forge/github/{integration_id}/repos";
const PROVIDERS = "/v2/auth/providers";

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
  readonly #logger: Logger | undefined;
  /** The endpoint this client talks to (no secrets). */
  readonly baseUrl: string;

  constructor(options: ServiceClientOptions) {
    const clock = options.clock ?? systemApiClock;
    this.baseUrl = options.baseUrl.replace(/\/+$/, "");
    this.#maxPages = options.maxPages ?? 1000;
    this.#logger = options.logger;
    const settings: TransportSettings = {
      baseUrl: this.baseUrl,
      apiKey: options.apiKey,
      tenantId: options.tenantId,
      apiKeyHeader: options.apiKeyHeader ?? "X-Api-Key",
      tenantHeader: options.tenantHeader ?? "X-Tenant-Id",
      insecureSkipTlsVerify: options.insecureSkipTlsVerify ?? false,
      timeoutMs: options.timeoutMs ?? 10_000,
      retries: options.retries ?? 4,
      retryBaseDelayMs: options.retryBaseDelayMs ?? 250,
      retryMaxDelayMs: options.retryMaxDelayMs ?? 10_000,
      maxRetryAfterMs: options.maxRetryAfterMs ?? 60_000,
      bucket: new TokenBucket({ qps: options.qps ?? 20, burst: options.burst ?? 40, clock }),
      clock,
      random: options.random ?? Math.random,
      logger: options.logger,
      onResponse: options.onResponse,
    };
    this.#transport = new Transport(settings);
  }

  /** GET /v2/auth/providers, with `token_endpoint_auth_method` and `is_dynamic_client` defaulted. */
  async listProviders(opts: CallOptions = {}): Promise<ResolvedOAuthProvider[]> {
    const { body } = await this.#transport.send({
      method: "GET",
      route: PROVIDERS,
      path: PROVIDERS,
      schema: ProviderListSchema,
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
      schema: ForgeRepoListSchema,
      idempotent: true,
      ...signalOf(opts),
    });
    return body;
  }

  /**
   * Every deployment matching `filters`, page by page (GET /v2/deployments), each once.
   *
   * Contract: the filters and paging options are checked when iteration starts, before any
   * request; pages are fetched lazily; see `paginate` for how the end is detected.
   */
  listDeployments(
    filters: DeploymentFilters = {},
    opts: ListDeploymentsOptions = {},
  ): AsyncIterable<Deployment> {
    const pageSize = opts.pageSize ?? PAGE_LIMIT.max;
    const offset = opts.offset ?? 0;
    const query = filterQuery(filters);
    const pages = (start: number, limit: number) =>
      this.#transport
        .send({
          method: "GET",
          route: DEPLOYMENTS,
          path: DEPLOYMENTS,
          searchParams: { ...query, limit: String(limit), offset: String(start) },
          schema: DeploymentPageSchema,
          idempotent: true,
          ...signalOf(opts),
        })
        .then(({ body }) => ({ items: body.resources, nextOffset: body.offset }));
    const maxPages = this.#maxPages;
    const logger = this.#logger;
    return {
      async *[Symbol.asyncIterator]() {
        checkFilters(filters);
        checkPageSize(pageSize, "pageSize");
        checkOffset(offset, "offset");
        yield* paginate(pages, {
          offset,
          limit: pageSize,
          maxPages,
          idOf: (d) => d.id,
          route: DEPLOYMENTS,
          onEarlyEnd: (reason) => logger?.warn({ route: DEPLOYMENTS }, `listing ended early: ${reason}`),
        });
      },
    };
  }

  /** All of {@link listDeployments} in one array. */
  async listAllDeployments(
    filters: DeploymentFilters = {},
    opts: ListDeploymentsOptions = {},
  ): Promise<Deployment[]> {
    const all: Deployment[] = [];
    for await (const deployment of this.listDeployments(filters, opts)) all.push(deployment);
    return all;
  }

  /**
   * The deployment with this id, or undefined when the service has none. The spec has no GET by
   * id, so this lists with the `deployment_ids` filter and matches the id exactly (a service
   * that ignored the filter would still give the right answer, only slower).
   */
  async getDeployment(id: string, opts: CallOptions = {}): Promise<Deployment | undefined> {
    checkUuid(id, "id");
    for await (const deployment of this.listDeployments({ deployment_ids: [id] }, signalOf(opts))) {
      if (deployment.id === id) return deployment;
    }
    return undefined;
  }

  /**
   * POST /v2/deployments. The body's shape is our assumption (the spec does not show it): see
   * `CreateDeploymentBodySchema` in wire.ts. A timeout or lost connection is not retried and
   * throws with `maybeApplied: true`: look the name up before creating again.
   */
  async createDeployment(body: CreateDeploymentBody, opts: CallOptions = {}): Promise<Deployment> {
    checkRequestBody(CreateDeploymentBodySchema, body, "body");
    const response = await this.#transport.send({
      method: "POST",
      route: DEPLOYMENTS,
      path: DEPLOYMENTS,
      body,
      schema: DeploymentSchema,
      idempotent: false,
      ...signalOf(opts),
    });
    return response.body;
  }

  /**
   * PATCH /v2/deployments/{deployment_id}; returns the updated deployment. Not repeated after a
   * timeout or lost connection (a repeat could make a second revision): such a failure throws
   * with `maybeApplied: true`.
   */
  async patchDeployment(id: string, body: PatchDeploymentBody, opts: CallOptions = {}): Promise<Deployment> {
    checkUuid(id, "id");
    checkRequestBody(PatchDeploymentBodySchema, body, "body");
    const response = await this.#transport.send({
      method: "PATCH",
      route: DEPLOYMENT,
      path: DEPLOYMENT.replace("{deployment_id}", encodeURIComponent(id)),
      body,
      schema: DeploymentSchema,
      idempotent: false,
      ...signalOf(opts),
    });
    return response.body;
  }

  /** DELETE /v2/deployments/{deployment_id}. Resolves when the deployment is gone or going (2xx or 404). */
  async deleteDeployment(id: string, opts: CallOptions = {}): Promise<void> {
    checkUuid(id, "id");
    await this.#transport.send({
      method: "DELETE",
      route: DEPLOYMENT,
      path: DEPLOYMENT.replace("{deployment_id}", encodeURIComponent(id)),
      schema: undefined,
      alsoOk: [404],
      idempotent: true,
      ...signalOf(opts),
    });
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

function signalOf(opts: { signal?: AbortSignal }): { signal?: AbortSignal } {
  return opts.signal ? { signal: opts.signal } : {};
}
