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
 *
 * Whoever reaches the port chooses the tokens, so a review is also budgeted process-wide: a token
 * bucket (a few per second, a small burst) stands in front of every cache miss, and a scrape past
 * it is answered 429 with `Retry-After` without a review. A token that was allowed recently is
 * renewed outside that budget (its own small, bounded set), so a flood of strangers' tokens cannot
 * lock the scraper out. A header that cannot carry a token any authenticator accepts is refused
 * without a review (see {@link bearerToken}, bearer-token.ts).
 */
import { createHash } from "node:crypto";
import type { Logger } from "pino";
import { pino } from "pino";
import { type Clock, systemClock } from "../runtime/clock.ts";
import { bearerToken } from "./bearer-token.ts";

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
  status: 200 | 401 | 403 | 429 | 500 | 503;
  message: string;
  /** With 429: when to come back, in whole seconds (the `Retry-After` header). */
  retryAfterSeconds?: number;
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
  /** Reviews of tokens not allowed lately, per second, process-wide. Default 5. */
  reviewsPerSecond?: number;
  /** Such reviews at once after a quiet spell (the bucket's size). Default 10. */
  reviewBurst?: number;
  /**
   * Tokens allowed to read lately, renewed outside the budget when their answer expires.
   * Default 64; each is remembered for `knownTtlMs` (default 15 min) after its last review.
   */
  knownTokens?: number;
  knownTtlMs?: number;
  clock?: Clock;
  logger?: Logger;
}

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
 * not. Concurrent scrapes with the same token share one review. A cache miss for a token not
 * allowed within `knownTtlMs` takes one review from the process-wide budget
 * (`reviewsPerSecond`, `reviewBurst`); past it, 429 with `retryAfterSeconds` and no review. So
 * the API server sees at most `reviewBurst + reviewsPerSecond·t` reviews of new tokens in any `t`
 * seconds, plus renewals of at most `knownTokens` tokens once per `cacheTtlMs`.
 */
export class MetricsAuthenticator {
  readonly #reviews: ReviewPort;
  readonly #ttlMs: number;
  readonly #size: number;
  readonly #maxConcurrent: number;
  readonly #maxWaiting: number;
  readonly #timeoutMs: number;
  readonly #budget: ReviewBudget;
  /** Digests of tokens allowed lately, with when each is forgotten; in recency order. */
  readonly #known = new Map<string, number>();
  readonly #knownSize: number;
  readonly #knownTtlMs: number;
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
    this.#budget = new ReviewBudget(options.reviewsPerSecond ?? 5, options.reviewBurst ?? 10, this.#clock);
    this.#knownSize = options.knownTokens ?? 64;
    this.#knownTtlMs = options.knownTtlMs ?? 15 * 60_000;
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
    const digest = createHash("sha256").update(token).digest("base64");
    const key = `${attributes.verb} ${attributes.path} ${digest}`;
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
    if (!this.#isKnown(digest)) {
      const waitMs = this.#budget.take();
      if (waitMs > 0) {
        this.#failed(new Error("more scrapes with new tokens than the review budget allows"));
        const retryAfterSeconds = Math.max(1, Math.ceil(waitMs / 1000));
        return { ...OVER_BUDGET, retryAfterSeconds };
      }
    }
    const review = this.#review(token, attributes).then((decision) => {
      this.#inFlight.delete(key);
      if (decision.status === 200 || decision.status === 401 || decision.status === 403) {
        this.#cache.set(key, { decision, expiresAt: this.#clock.now() + this.#ttlMs });
        for (const oldest of this.#cache.keys()) {
          if (this.#cache.size <= this.#size) break;
          this.#cache.delete(oldest);
        }
      }
      // A token allowed to read is renewed outside the budget from now on. Not one merely
      // authenticated: any pod's token is, and tenants can mint as many as they like.
      if (decision.status === 200) this.#remember(digest);
      else if (decision.status === 401 || decision.status === 403) this.#known.delete(digest);
      return decision;
    });
    this.#inFlight.set(key, review);
    return review;
  }

  /** Whether the token of `digest` was allowed within `knownTtlMs`. */
  #isKnown(digest: string): boolean {
    const until = this.#known.get(digest);
    if (until === undefined) return false;
    if (until > this.#clock.now()) return true;
    this.#known.delete(digest);
    return false;
  }

  #remember(digest: string): void {
    this.#known.delete(digest);
    this.#known.set(digest, this.#clock.now() + this.#knownTtlMs);
    for (const oldest of this.#known.keys()) {
      if (this.#known.size <= this.#knownSize) break;
      this.#known.delete(oldest);
    }
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
const OVER_BUDGET: ScrapeDecision = {
  status: 429,
  message: "Too Many Requests: more new tokens than the operator reviews per second",
};
const REFUSED: ScrapeDecision = {
  status: 500,
  message: "Internal Server Error: the operator may not review tokens (see its log)",
};

/**
 * Reviews started for tokens not allowed lately: a token bucket refilling `perSecond`
 * up to `burst`, shared by every scrape of the process. It never waits: a scrape past it is
 * answered at once.
 */
class ReviewBudget {
  readonly #perSecond: number;
  readonly #burst: number;
  readonly #clock: Clock;
  #tokens: number;
  #updatedAt: number;

  constructor(perSecond: number, burst: number, clock: Clock) {
    if (!(perSecond > 0)) throw new RangeError(`reviewsPerSecond must be > 0, got ${perSecond}`);
    if (!(burst >= 1)) throw new RangeError(`reviewBurst must be >= 1, got ${burst}`);
    this.#perSecond = perSecond;
    this.#burst = burst;
    this.#clock = clock;
    this.#tokens = burst;
    this.#updatedAt = clock.now();
  }

  /** Takes one review: 0 when granted, else the milliseconds until one would be. */
  take(): number {
    const now = this.#clock.now();
    this.#tokens = Math.min(
      this.#burst,
      this.#tokens + (Math.max(0, now - this.#updatedAt) / 1000) * this.#perSecond,
    );
    this.#updatedAt = now;
    if (this.#tokens >= 1) {
      this.#tokens -= 1;
      return 0;
    }
    return ((1 - this.#tokens) / this.#perSecond) * 1000;
  }
}
