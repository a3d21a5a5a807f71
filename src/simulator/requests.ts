/**
 * The simulator's own record of the requests its service routes received: counts per route and
 * status, and the latest requests one by one (when each arrived, what it asked, how it was
 * answered). Tests and benchmarks read it to say which calls the operator made, and when, without
 * relying on the operator's own account of them. `/_sim/` routes are not recorded.
 */

/** One request to a service route. */
export interface SimRequest {
  /** When it arrived, in ms on the simulator's clock. */
  at: number;
  method: string;
  /** Its route as the counters name it: `PATCH /v2/deployments/{deployment_id}`, `GET (unmatched)`. */
  route: string;
  /** Path and query as requested. */
  url: string;
  /** The request's `User-Agent` (cut to 200 characters), absent when it sent none. */
  userAgent?: string;
  /** The status answered (`"200"`), `"reset"` for a connection dropped by a fault, absent while pending. */
  status?: string;
  /** When it was answered (or reset), in ms on the simulator's clock; absent while pending. */
  answeredAt?: number;
  /**
   * True when the client closed the connection before the answer was fully written (it did not
   * read it all): what a client that cuts off an oversized answer does.
   */
  closedEarly?: boolean;
}

/** Which requests {@link RequestRecord.requests} returns; every field given must match. */
export interface RequestFilter {
  route?: string;
  method?: string;
  /** Only those that arrived at this time or later (simulator clock). */
  since?: number;
}

/** The record behind `counters()` and `requests()` of a running simulator. */
export class RequestRecord {
  readonly #limit: number;
  readonly #now: () => number;
  #counts = new Map<string, Map<string, number>>();
  #latest: SimRequest[] = [];

  /** Keeps the latest `limit` requests one by one; the counts have no limit. */
  constructor(now: () => number, limit = 10_000) {
    this.#now = now;
    this.#limit = limit;
  }

  /** A request arrived; answer it with {@link answered}. */
  arrived(method: string, route: string, url: string, userAgent?: string): SimRequest {
    const request: SimRequest = { at: this.#now(), method, route, url };
    if (userAgent !== undefined) request.userAgent = userAgent.slice(0, 200);
    this.#latest.push(request);
    // Trimmed in batches, so that recording stays O(1) amortized.
    if (this.#latest.length >= 2 * this.#limit) this.#latest = this.#latest.slice(-this.#limit);
    return request;
  }

  /** The client closed `request`'s connection before its answer was fully written. */
  closedEarly(request: SimRequest): void {
    request.closedEarly = true;
  }

  /** `request` was answered with `status` (or `"reset"`): it counts from now on. */
  answered(request: SimRequest, status: string): void {
    request.status = status;
    request.answeredAt = this.#now();
    let byStatus = this.#counts.get(request.route);
    if (byStatus === undefined) {
      byStatus = new Map();
      this.#counts.set(request.route, byStatus);
    }
    byStatus.set(status, (byStatus.get(status) ?? 0) + 1);
  }

  /** Answers per route and status: `{"PATCH /v2/deployments/{deployment_id}": {"200": 3}}`. */
  counters(): Record<string, Record<string, number>> {
    return Object.fromEntries(
      [...this.#counts].map(([route, byStatus]) => [route, Object.fromEntries(byStatus)]),
    );
  }

  /** The latest requests matching `filter`, oldest first (copies: later answers do not show). */
  requests(filter: RequestFilter = {}): SimRequest[] {
    return this.#latest
      .slice(-this.#limit)
      .filter(
        (r) =>
          (filter.route === undefined || r.route === filter.route) &&
          (filter.method === undefined || r.method === filter.method) &&
          (filter.since === undefined || r.at >= filter.since),
      )
      .map((r) => ({ ...r }));
  }

  /** Forgets the counts and the requests. */
  reset(): void {
    this.#counts = new Map();
    this.#latest = [];
  }
}
