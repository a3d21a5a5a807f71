/**
 * The Deployment Management Service client: every operation of the spec plus create and delete,
 * typed with the wire model, input checked before sending, answers validated on arrival. The
 * deployments' calls, what a reconcile makes, are deployment-routes.ts's; the revisions, their
 * logs, redeploys, rebuilds, providers and repositories are here.
 */

import type { CallOptions } from "./client-options.ts";
import { DeploymentRoutes, paginate, signalOf } from "./deployment-routes.ts";
import {
  isRouteMissing,
  isServiceError,
  RequestValidationError,
  RevisionsRouteMissingError,
  RouteMissingError,
  type RouteMissingErrorClass,
  ServiceError,
} from "./errors.ts";
import { REDEPLOY_ROUTE, RedeployRouteMissingError } from "./redeploy.ts";
import {
  newestFirst,
  type RevisionListing,
  type RevisionRow,
  readRevisionItem,
  readSingleRevision,
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
import type { TransportRequest, TransportResponse } from "./transport.ts";
import { checkPageSize, checkUuid, readableItems, unknownRevisionValues } from "./validate.ts";
import type { Deployment, ForgeRepo, OAuthProvider, Revision } from "./wire.ts";
import type { WireCheckName } from "./wire-checks.ts";
import { PAGE_LIMIT, PROVIDER_DEFAULTS, ROUTES } from "./wire-values.ts";

export type { ServiceClientOptions } from "./client-options.ts";
export { UNREADABLE_WARNINGS } from "./deployment-routes.ts";

/** Bounds and cancellation of {@link ServiceClient.listRevisions}. */
export interface ListRevisionsOptions {
  /** Page size sent as `limit` (1–100); default 100. */
  pageSize?: number;
  /** Rows read at most (default 1,000): past them the listing is cut and says so. */
  maxItems?: number;
  signal?: AbortSignal;
}

/** An OAuth provider with the spec's documented defaults filled in. */
export type ResolvedOAuthProvider = OAuthProvider & {
  token_endpoint_auth_method: string;
  is_dynamic_client: boolean;
};

const { REVISION, REVISIONS, CREATE_REVISION, REPOS, PROVIDERS } = ROUTES;

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
 * A client of one service endpoint (one key, one tenant).
 *
 * Contract of every method: input is checked first and a bad value throws
 * `RequestValidationError` without any request; failures throw `ServiceError` (see errors.ts)
 * after the retries the failure allows; an aborted `signal` rejects with its reason. The key is
 * held privately: it does not appear in `util.inspect(client)`, logs or error messages.
 */
export class ServiceClient extends DeploymentRoutes {
  /**
   * GET /v2/auth/providers, with `token_endpoint_auth_method` and `is_dynamic_client` defaulted;
   * a provider that does not read as one is skipped.
   */
  async listProviders(opts: CallOptions = {}): Promise<ResolvedOAuthProvider[]> {
    const { body } = await this.transport.send({
      method: "GET",
      route: PROVIDERS,
      path: PROVIDERS,
      schema: "ItemList",
      idempotent: true,
      ...signalOf(opts),
    });
    return readableItems("OAuthProvider", body).map((p) => ({
      ...p,
      token_endpoint_auth_method:
        p.token_endpoint_auth_method ?? PROVIDER_DEFAULTS.token_endpoint_auth_method,
      is_dynamic_client: p.is_dynamic_client ?? PROVIDER_DEFAULTS.is_dynamic_client,
    }));
  }

  /**
   * GET /v1/integrations/forge/github/{integration_id}/repos; `integrationId` must be a uuid. A
   * repository that does not read as one is skipped.
   */
  async listRepos(integrationId: string, opts: CallOptions = {}): Promise<ForgeRepo[]> {
    checkUuid(integrationId, "integrationId");
    const { body } = await this.transport.send({
      method: "GET",
      route: REPOS,
      path: REPOS.replace("{integration_id}", encodeURIComponent(integrationId)),
      schema: "ItemList",
      idempotent: true,
      ...signalOf(opts),
    });
    return readableItems("ForgeRepo", body);
  }

  /**
   * GET /v2/deployments/{deployment_id}/revisions/{revision_id} (not in the shared spec).
   * Read for its `id` and `status`, what its callers rely on (the revision tracker's look, the
   * logs command's wait): an answer with another field odd is read as those two alone, never
   * failed whole (a failed build would then be told only by the rollout's timeout).
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
      { method: "GET", route: REVISION, schema: "Any", idempotent: true },
      RevisionsRouteMissingError,
      opts,
    );
    if (answer === undefined) return undefined;
    const revision = await readSingleRevision(answer.body, {
      method: "GET",
      route: REVISION,
      status: answer.status,
    });
    for (const value of unknownRevisionValues(revision)) this.reportUnknown(value);
    return revision;
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
      const paging = { retries: this.pageRetries, keep: limit, ...signalOf(opts) };
      const { rows, offset } = await this.#revisionPage(deploymentId, start, limit, paging);
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
      onEarlyEnd: (reason) => this.logger?.warn({ route: REVISIONS }, `listing ended early: ${reason}`),
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
   * answered (past `keep`, where the rows read end). Throws {@link RevisionsRouteMissingError}
   * when the service has no such route.
   */
  async #revisionPage(
    deploymentId: string,
    offset: number,
    limit: number,
    opts: CallOptions & { retries?: number; keep?: number },
  ): Promise<{ rows: RevisionRow[]; offset: number | undefined }> {
    const { body } = await this.transport
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
      if (row.ok) for (const value of unknownRevisionValues(row.revision)) this.reportUnknown(value);
    const cut = items.length < body.resources.length;
    return { rows, offset: cut ? offset + items.length : (body.offset ?? undefined) };
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
    return this.readOne(answer, "POST", REDEPLOY_ROUTE);
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
      const response = await this.transport.send({
        method: "POST",
        route: CREATE_REVISION,
        path: CREATE_REVISION.replace("{deployment_id}", encodeURIComponent(deploymentId)),
        body: {},
        schema: "Revision",
        idempotent: false,
        ...signalOf(opts),
      });
      for (const value of unknownRevisionValues(response.body)) this.reportUnknown(value);
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
      return await this.transport.send({ ...request, path, ...signalOf(opts) });
    } catch (error) {
      // A 404 naming the deployment or revision, not the generic one of an unknown path.
      if (isServiceError(error, "not_found") && !isRouteMissing(error)) return undefined;
      throw routeFailure(error, Missing);
    }
  }
}

/**
 * What a call to a route outside the shared spec throws for its failure `error`: a `Missing` error
 * when the service has no such route (405, or the generic 404 "Not Found" of an unknown path),
 * else `error` itself.
 */
function routeFailure(error: unknown, Missing: RouteMissingErrorClass): unknown {
  return isRouteMissing(error) ? new Missing(error) : error;
}
