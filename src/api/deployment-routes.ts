/**
 * The deployments' routes of the service (GET, POST /v2/deployments; PATCH, DELETE
 * /v2/deployments/{deployment_id}) and the listing's pages: what a reconcile calls. Typed with the
 * wire model, input checked before sending, each deployment answered read tolerantly and its
 * values the spec does not list reported. `ServiceClient` (client.ts) adds the other routes.
 *
 * Offset pagination as the spec describes it, made safe against a service that does not say how
 * a listing ends ({@link paginate}): follow the response's `offset`, and stop on the first empty
 * page, on an offset that does not move forward, or on a short page when the caller has enough.
 */
import type { Logger } from "pino";
import {
  type CallOptions,
  type DeleteDeploymentOptions,
  type ListDeploymentsOptions,
  type ServiceClientOptions,
  transportSettings,
} from "./client-options.ts";
import { ServiceError } from "./errors.ts";
import { Transport } from "./transport.ts";
import {
  checkFilters,
  checkOffset,
  checkPageSize,
  checkRequestBody,
  checkUuid,
  filterQuery,
  readDeployment,
  unknownDeploymentValues,
  unreadableAnswer,
} from "./validate.ts";
import type { Deployment, UnknownValue, UnreadableDeployment } from "./wire.ts";
import type { CreateDeploymentBody, DeploymentFilters, PatchDeploymentBody } from "./wire-requests.ts";
import { PAGE_LIMIT, ROUTES } from "./wire-values.ts";

const { DEPLOYMENTS, DEPLOYMENT } = ROUTES;

/** Unreadable items of a listing logged one by one; the rest in one line (all go to `onUnreadable`). */
export const UNREADABLE_WARNINGS = 3;

/**
 * The deployments' calls of a client of one service endpoint (one key, one tenant): see
 * `ServiceClient` (client.ts) for the contract of every method.
 */
export class DeploymentRoutes {
  /** Sends every request of this client (it holds the key, privately). */
  protected readonly transport: Transport;
  protected readonly pageRetries: number;
  protected readonly logger: Logger | undefined;
  readonly #maxPages: number;
  readonly #onUnknownValue: ((value: UnknownValue) => void) | undefined;
  readonly #onUnreadable: ((item: UnreadableDeployment) => void) | undefined;
  /** The most items a page held, by `limit` (see `enoughAfterShortPage`). */
  readonly #longestPage = new Map<number, number>();
  /** Unknown values already logged: each is logged once per client, counted every time. */
  readonly #loggedUnknown = new Set<string>();
  /** The endpoint this client talks to (no secrets). */
  readonly baseUrl: string;

  constructor(options: ServiceClientOptions) {
    this.baseUrl = options.baseUrl.replace(/\/+$/, "");
    this.#maxPages = options.maxPages ?? 1000;
    this.pageRetries = options.pageRetries ?? options.retries ?? 4;
    this.logger = options.logger;
    this.#onUnknownValue = options.onUnknownValue;
    this.#onUnreadable = options.onUnreadable;
    this.transport = new Transport(transportSettings(options, this.baseUrl));
  }

  /** Closes this client for good: see {@link Transport.close}. */
  close = (why: string): void => this.transport.close(why);

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
   * the rest of the page is used; a page is read to `limit` items (the rest of a longer one asked
   * for again from there: it costs a page's work). A page that fails with a 429, a 5xx or a lost
   * connection is retried up to `pageRetries` times.
   */
  listDeployments(
    filters: DeploymentFilters = {},
    opts: ListDeploymentsOptions = {},
  ): AsyncIterable<Deployment> {
    const pageSize = opts.pageSize ?? PAGE_LIMIT.max;
    const offset = opts.offset ?? 0;
    const query = filterQuery(filters);
    const pages = async (start: number, limit: number) => {
      const { body } = await this.transport.send({
        method: "GET",
        route: DEPLOYMENTS,
        path: DEPLOYMENTS,
        searchParams: { ...query, limit: String(limit), offset: String(start) },
        schema: "DeploymentPage",
        idempotent: true,
        retries: this.pageRetries,
        ...signalOf(opts),
      });
      const [items, answered]: [Deployment[], unknown[]] = [[], body.resources.slice(0, limit)];
      for (const [i, read] of (await Promise.all(answered.map(readDeployment))).entries()) {
        if (read.ok) items.push(this.#noticeUnknown(read.deployment));
        else this.#skip(read.unreadable, start + i, skipped++ < UNREADABLE_WARNINGS, opts.onUnreadable);
      }
      const [count, longest] = [answered.length, this.#longestPage.get(limit) ?? 0];
      this.#longestPage.set(limit, Math.max(longest, count));
      const last = count < longest ? opts.enoughAfterShortPage : undefined;
      // Past the limit, the items read; no offset (or `null`), the items answered, as a revision's.
      const nextOffset = body.resources.length > limit ? start + limit : (body.offset ?? start + count);
      return { items, nextOffset, skipped: count - items.length, ...(last ? { last } : {}) };
    };
    // Unreadable items of this listing: a server may answer every page full of them, so only the
    // first few are logged one by one.
    let skipped = 0;
    const maxPages = this.#maxPages;
    const logger = this.logger;
    return {
      async *[Symbol.asyncIterator]() {
        checkFilters(filters);
        checkPageSize(pageSize, "pageSize");
        checkOffset(offset);
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
      if (!ids.has(deployment.id)) all.push(deployment);
      ids.add(deployment.id);
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
    for await (const deployment of listing) if (deployment.id === id) return deployment;
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
   * POST /v2/deployments. The body's shape is our assumption (the spec does not show it): see
   * `CreateDeploymentBodySchema` in wire-requests.ts. A timeout or lost connection is not retried and
   * throws with `maybeApplied: true`: look the name up before creating again.
   */
  async createDeployment(body: CreateDeploymentBody, opts: CallOptions = {}): Promise<Deployment> {
    await checkRequestBody("CreateDeploymentBody", body, "body");
    const response = await this.transport.send({
      method: "POST",
      route: DEPLOYMENTS,
      path: DEPLOYMENTS,
      body: withCreateDefaults(body),
      schema: "Any",
      idempotent: false,
      ...signalOf(opts),
    });
    return this.readOne(response, "POST", DEPLOYMENTS);
  }

  /**
   * PATCH /v2/deployments/{deployment_id}; returns the updated deployment. Not repeated after a
   * timeout or lost connection (a repeat could make a second revision): such a failure throws
   * with `maybeApplied: true`.
   */
  async patchDeployment(id: string, body: PatchDeploymentBody, opts: CallOptions = {}): Promise<Deployment> {
    checkUuid(id, "id");
    await checkRequestBody("PatchDeploymentBody", body, "body");
    const response = await this.transport.send({
      method: "PATCH",
      route: DEPLOYMENT,
      path: DEPLOYMENT.replace("{deployment_id}", encodeURIComponent(id)),
      body,
      schema: "Any",
      idempotent: false,
      ...signalOf(opts),
    });
    return this.readOne(response, "PATCH", DEPLOYMENT);
  }

  /**
   * DELETE /v2/deployments/{deployment_id}. Resolves when the deployment is gone or going (2xx or
   * 404). With `deleteTracingProject`, sends `delete_tracing_project=true` (a query parameter of
   * the service's public API reference, not of the shared spec; default false): the tracing
   * project the service made with the deployment goes too, and the name can be created again.
   */
  async deleteDeployment(id: string, opts: DeleteDeploymentOptions = {}): Promise<void> {
    checkUuid(id, "id");
    await this.transport.send({
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

  /**
   * The deployment a write answered with: read tolerantly, or a `bad_response` naming the field
   * (`maybeApplied`: the write was applied, see {@link unreadableAnswer}).
   */
  protected async readOne(answer: { status: number; body: unknown }, method: string, route: string) {
    const read = await readDeployment(answer.body);
    if (read.ok) return this.#noticeUnknown(read.deployment);
    const answered = { method, route, status: answer.status, idempotent: false };
    throw unreadableAnswer(answered, read.unreadable.message);
  }

  #noticeUnknown(deployment: Deployment): Deployment {
    for (const value of unknownDeploymentValues(deployment)) this.reportUnknown(value);
    return deployment;
  }

  protected reportUnknown(value: UnknownValue): void {
    this.#onUnknownValue?.(value);
    const key = `${value.field}=${value.value}`;
    if (this.#loggedUnknown.has(key) || this.#loggedUnknown.size > 100) return;
    this.#loggedUnknown.add(key);
    this.logger?.warn(
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
      this.logger?.warn(
        { route: DEPLOYMENTS, position, field: item.field, deployment: item.name ?? item.id },
        `skipped a deployment of the listing: ${item.message}`,
      );
    this.#onUnreadable?.(item);
    callback?.(item);
  }
}

/** `{ signal }` when `opts` has one, else nothing. */
export function signalOf(opts: { signal?: AbortSignal }): { signal?: AbortSignal } {
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

/** One page as the fetcher returns it: the items and the offset to request next. */
export interface FetchedPage<T> {
  items: readonly T[];
  nextOffset: number;
  /** Items of the page the fetcher could not read and left out: the page was not empty. */
  skipped?: number;
  /** Asked once the page's items were taken: true ends the listing after it. */
  last?: () => boolean;
}

/** Options of {@link paginate}. */
export interface PaginateOptions<T> {
  /** Offset of the first page. */
  offset: number;
  /** Page size sent as `limit`. */
  limit: number;
  /** Upper bound on the pages fetched; exceeding it throws rather than loop or truncate silently. */
  maxPages: number;
  /** Identity of an item, used to never yield one twice. */
  idOf: (item: T) => string;
  /** Told when the listing ended for a reason other than an empty page. */
  onEarlyEnd?: (reason: string) => void;
  /** Route reported in the error thrown when `maxPages` is exceeded. */
  route: string;
}

/**
 * Yields every item of every page, in order, once.
 *
 * Contract: fetches pages lazily (the next page only after the consumer has taken the current
 * one's items); ends on an empty page (one whose items were all skipped as unreadable is not
 * empty), on a response offset not greater than the requested one, on a page made only of items
 * of the page before (a service ignoring `offset`), or after a page whose `last` says so; never
 * yields an id twice within a page or from one page to the next (what a listing shifted by an
 * insert repeats); throws a `bad_response` ServiceError after `maxPages` pages instead of looping.
 * A page shorter than `limit` does not end the listing by itself: the service may cap pages.
 * Only the ids of the last page are kept, not those of the whole listing: a server answering
 * 1,000 pages costs one page's ids. A caller that must never see an id twice from a hostile
 * server repeating an older page keeps its own set (it holds the items anyway).
 */
export async function* paginate<T>(
  fetchPage: (offset: number, limit: number) => Promise<FetchedPage<T>>,
  options: PaginateOptions<T>,
): AsyncGenerator<T, void, undefined> {
  let previous = new Set<string>();
  let offset = options.offset;
  for (let pages = 1; ; pages++) {
    if (pages > options.maxPages) {
      throw new ServiceError({
        kind: "bad_response",
        method: "GET",
        route: options.route,
        detail: `the listing did not end after ${options.maxPages} pages (last offset ${offset})`,
        retryable: false,
      });
    }
    const page = await fetchPage(offset, options.limit);
    const skipped = page.skipped ?? 0;
    if (page.items.length === 0 && skipped === 0) return;
    let fresh = 0;
    const current = new Set<string>();
    for (const item of page.items) {
      const id = options.idOf(item);
      if (previous.has(id) || current.has(id)) continue;
      current.add(id);
      fresh++;
      yield item;
    }
    previous = current;
    if (page.last?.()) return;
    if (fresh === 0 && skipped === 0) {
      options.onEarlyEnd?.(`page at offset ${offset} held only items already listed`);
      return;
    }
    if (page.nextOffset <= offset) {
      options.onEarlyEnd?.(`response offset ${page.nextOffset} did not advance past ${offset}`);
      return;
    }
    offset = page.nextOffset;
  }
}
