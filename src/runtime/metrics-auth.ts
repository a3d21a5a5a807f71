/**
 * Who may read `/metrics`: each scrape's bearer token is reviewed by the API server (a
 * TokenReview), and the user it names must be allowed `get` on the non-resource path (a
 * SubjectAccessReview), as controller-runtime's `filters.WithAuthenticationAndAuthorization` and
 * kube-rbac-proxy do. Grant it by binding the ClusterRole `dms-operator-metrics-reader`.
 *
 * The answers are cached briefly by a hash of the token (never the token itself), so a Prometheus
 * scraping every replica every few seconds costs the API server two reviews per token per cache
 * period, not two per scrape. The reviews run a few at a time, each under a deadline: a slow or
 * unavailable API server fails the scrape, never the probes, and never holds unbounded work.
 */
import { createHash } from "node:crypto";
import type { Logger } from "pino";
import { pino } from "pino";
import { type Clock, systemClock } from "./clock.ts";

/** A user as a TokenReview names it: what a SubjectAccessReview is then asked about. */
export interface ReviewedUser {
  username: string;
  uid?: string;
  groups: string[];
  extra: Record<string, string[]>;
}

/** What a scrape asks to do: a non-resource request (`get /metrics`). */
export interface NonResourceAttributes {
  path: string;
  verb: string;
}

/**
 * The API server's reviews, as the `/metrics` filter needs them.
 *
 * Contract: `authenticate` resolves the token's user, or `undefined` when the API server does not
 * authenticate the token; `authorize` resolves whether `user` may do `attributes` (and the
 * authorizer's reason, if any). Both reject when the API server cannot say (unreachable, 5xx,
 * `signal` aborted), with {@link ReviewRefusedError} when it refuses the operator the review itself.
 */
export interface ReviewPort {
  authenticate(token: string, signal: AbortSignal): Promise<ReviewedUser | undefined>;
  authorize(
    user: ReviewedUser,
    attributes: NonResourceAttributes,
    signal: AbortSignal,
  ): Promise<{ allowed: boolean; reason?: string }>;
}

/**
 * The API server refused the operator a review (HTTP 401/403): its ServiceAccount lacks `create`
 * on `tokenreviews` or `subjectaccessreviews`. A misconfiguration, answered 500, not an outage.
 */
export class ReviewRefusedError extends Error {
  override readonly name = "ReviewRefusedError";
}

/** The answer to one scrape: 200 lets it read the metrics; any other status is sent with `message`. */
export interface ScrapeDecision {
  status: 200 | 401 | 403 | 500 | 503;
  message: string;
}

/** Options of {@link MetricsAuthenticator}. */
export interface MetricsAuthenticatorOptions {
  reviews: ReviewPort;
  /** How long an answer (allowed, denied, or not authenticated) is reused. Default 10 s. */
  cacheTtlMs?: number;
  /** Most answers kept; the least recently used goes first. Default 1024. */
  cacheSize?: number;
  /** Reviews in flight at once. Default 4. */
  maxConcurrent?: number;
  /** Scrapes waiting for a review slot; past it a scrape is answered 503 at once. Default 64. */
  maxWaiting?: number;
  /** Longest a scrape waits for its reviews (slot included). Default 5 s. */
  reviewTimeoutMs?: number;
  clock?: Clock;
  logger?: Logger;
}

/**
 * Longest bearer token reviewed. ServiceAccount tokens are about 1 KiB; an OIDC token with many
 * groups a few KiB. Anything longer is refused without costing the API server a review.
 */
export const MAX_TOKEN_LENGTH = 16_384;

/** A scrape waiting for (or holding) one of the review slots. */
interface Slot {
  signal: AbortSignal;
  granted: boolean;
  grant: () => void;
}

interface CacheEntry {
  decision: ScrapeDecision;
  expiresAt: number;
}

/**
 * Decides each scrape of `/metrics` from its `Authorization` header.
 *
 * Contract: `check` never rejects. No bearer token, or one the API server does not authenticate:
 * 401. Authenticated but not allowed: 403. Allowed: 200. The API server unreachable, failing or
 * too slow (past `reviewTimeoutMs`), or too many scrapes waiting: 503; the operator not allowed
 * to review: 500. 200, 401 and 403 are cached for `cacheTtlMs` per token and path; failures are
 * not. Concurrent scrapes with the same token share one review.
 */
export class MetricsAuthenticator {
  readonly #reviews: ReviewPort;
  readonly #ttlMs: number;
  readonly #size: number;
  readonly #maxConcurrent: number;
  readonly #maxWaiting: number;
  readonly #timeoutMs: number;
  readonly #clock: Clock;
  readonly #log: Logger;
  /** Insertion order is recency order: a hit moves its entry to the end. */
  readonly #cache = new Map<string, CacheEntry>();
  readonly #inFlight = new Map<string, Promise<ScrapeDecision>>();
  readonly #waiting: Slot[] = [];
  #active = 0;
  #lastFailure: string | undefined;

  constructor(options: MetricsAuthenticatorOptions) {
    this.#reviews = options.reviews;
    this.#ttlMs = options.cacheTtlMs ?? 10_000;
    this.#size = options.cacheSize ?? 1_024;
    this.#maxConcurrent = options.maxConcurrent ?? 4;
    this.#maxWaiting = options.maxWaiting ?? 64;
    this.#timeoutMs = options.reviewTimeoutMs ?? 5_000;
    this.#clock = options.clock ?? systemClock;
    this.#log = (options.logger ?? pino({ level: "silent" })).child({ component: "metrics-auth" });
  }

  /** Answers cached now (expired ones included until they are looked up or pushed out). */
  get cached(): number {
    return this.#cache.size;
  }

  /** Decides a request for `attributes` carrying `authorization` (the header's value, if any). */
  async check(authorization: string | undefined, attributes: NonResourceAttributes): Promise<ScrapeDecision> {
    const token = bearerToken(authorization);
    if (token === undefined) return UNAUTHORIZED;
    const key = `${attributes.verb} ${attributes.path} ${createHash("sha256").update(token).digest("base64")}`;
    const hit = this.#cache.get(key);
    if (hit) {
      this.#cache.delete(key);
      if (hit.expiresAt > this.#clock.now()) {
        this.#cache.set(key, hit);
        return hit.decision;
      }
    }
    const running = this.#inFlight.get(key);
    if (running) return running;
    const review = this.#review(token, attributes).then((decision) => {
      this.#inFlight.delete(key);
      if (decision.status === 200 || decision.status === 401 || decision.status === 403) {
        this.#cache.set(key, { decision, expiresAt: this.#clock.now() + this.#ttlMs });
        for (const oldest of this.#cache.keys()) {
          if (this.#cache.size <= this.#size) break;
          this.#cache.delete(oldest);
        }
      }
      return decision;
    });
    this.#inFlight.set(key, review);
    return review;
  }

  /** Both reviews under one deadline and one slot; never rejects. */
  async #review(token: string, attributes: NonResourceAttributes): Promise<ScrapeDecision> {
    if (this.#active >= this.#maxConcurrent && this.#waiting.length >= this.#maxWaiting) {
      this.#failed(new Error(`more than ${this.#maxWaiting} scrapes waiting for a review`));
      return BUSY;
    }
    const deadline = new AbortController();
    const cancel = this.#clock.setTimer(this.#timeoutMs, () =>
      deadline.abort(new Error(`the reviews took longer than ${this.#timeoutMs} ms`)),
    );
    const expired = new Promise<never>((_, reject) =>
      deadline.signal.addEventListener("abort", () => reject(deadline.signal.reason), { once: true }),
    );
    expired.catch(() => {});
    const slot: Slot = { signal: deadline.signal, granted: false, grant: () => {} };
    try {
      await Promise.race([this.#acquire(slot), expired]);
      const decide = async (): Promise<ScrapeDecision> => {
        const user = await this.#reviews.authenticate(token, deadline.signal);
        if (!user) return UNAUTHORIZED;
        const verdict = await this.#reviews.authorize(user, attributes, deadline.signal);
        if (!verdict.allowed) {
          return {
            status: 403,
            message: `Forbidden (user=${user.username}, verb=${attributes.verb}, path=${attributes.path})`,
          };
        }
        return ALLOWED;
      };
      // A port that ignores its signal still cannot hold the scrape past the deadline.
      const decision = await Promise.race([decide(), expired]);
      if (this.#lastFailure !== undefined) {
        this.#lastFailure = undefined;
        this.#log.info("metrics scrapes are reviewed again");
      }
      return decision;
    } catch (err) {
      this.#failed(err);
      return err instanceof ReviewRefusedError ? REFUSED : UNAVAILABLE;
    } finally {
      cancel();
      if (slot.granted) this.#release();
      else this.#abandon(slot);
    }
  }

  /** Resolves once `slot` holds a review slot (`slot.granted`); waiters are served in order. */
  #acquire(slot: Slot): Promise<void> {
    if (this.#active < this.#maxConcurrent) {
      this.#active++;
      slot.granted = true;
      return Promise.resolve();
    }
    return new Promise<void>((resolve) => {
      slot.grant = resolve;
      this.#waiting.push(slot);
    });
  }

  /** Frees a slot for the first waiter whose scrape has not given up. */
  #release(): void {
    this.#active--;
    for (let next = this.#waiting.shift(); next; next = this.#waiting.shift()) {
      if (next.signal.aborted) continue;
      this.#active++;
      next.granted = true;
      next.grant();
      return;
    }
  }

  /** Drops the waiter of a scrape that gave up before it got a slot. */
  #abandon(slot: Slot): void {
    const index = this.#waiting.indexOf(slot);
    if (index >= 0) this.#waiting.splice(index, 1);
  }

  /** Logs a review failure once per distinct message: a failing API server must not flood the log. */
  #failed(err: unknown): void {
    const message = err instanceof Error ? err.message : String(err);
    if (this.#lastFailure === message) return;
    this.#lastFailure = message;
    this.#log.warn({ err }, "cannot review a metrics scrape; answering it with an error");
  }
}

const ALLOWED: ScrapeDecision = { status: 200, message: "OK" };
const UNAUTHORIZED: ScrapeDecision = { status: 401, message: "Unauthorized" };
const UNAVAILABLE: ScrapeDecision = {
  status: 503,
  message: "Service Unavailable: the API server could not review the token",
};
const BUSY: ScrapeDecision = { status: 503, message: "Service Unavailable: too many scrapes under review" };
const REFUSED: ScrapeDecision = {
  status: 500,
  message: "Internal Server Error: the operator may not review tokens (see its log)",
};

/** The token of an `Authorization: Bearer <token>` header (scheme in any case), if well-formed. */
export function bearerToken(header: string | undefined): string | undefined {
  const match = /^bearer +(\S+) *$/i.exec(header ?? "");
  const token = match?.[1];
  return token !== undefined && token.length <= MAX_TOKEN_LENGTH ? token : undefined;
}
