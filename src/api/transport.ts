/**
 * The one place that talks HTTP to the service: one request sent within its budgets — auth
 * headers, the shared rate limit, the write gate, a timeout per request, one retry layer
 * (p-retry) —, the answer checked (validate.ts), the metrics hook and debug logs; each attempt is
 * one exchange on Node's own HTTP client (exchange.ts), and what a failed one means is
 * attempt-failures.ts's. The API key lives in a private field and is scrubbed from every text
 * that leaves this module.
 */
import pRetry, { AbortError } from "p-retry";
import { currentDeadline, tellPaced } from "../runtime/clock.ts";
import { type ServiceAgents, serviceAgents } from "./agent.ts";
import { AttemptFailure, errorAnswer, failure, tooLargeError, transportError } from "./attempt-failures.ts";
import type { MemoryAccount } from "./budgets.ts";
import type { TransportSettings } from "./client-options.ts";
import { OverflowError, ServiceError } from "./errors.ts";
import { type ExchangeAnswer, type ExchangeError, exchange } from "./exchange.ts";
import { TokenWaitTooLongError } from "./reserved-tokens.ts";
import { parseResponse } from "./validate.ts";
import type { WireCheckName } from "./wire-checks.ts";
import type { WireBody } from "./wire-schemas.ts";

/** One call: a route template, its concrete path, and how to judge the answer. */
export interface TransportRequest<S extends WireCheckName | undefined> {
  method: "GET" | "POST" | "PATCH" | "DELETE";
  route: string;
  path: string;
  searchParams?: Record<string, string>;
  body?: unknown;
  /** Schema of a successful response body (its name in wire-schemas.ts); undefined when the body is ignored. */
  schema: S;
  /** Extra statuses that count as success (e.g. 404 for DELETE). */
  alsoOk?: readonly number[];
  /** True for reads and DELETE: safe to repeat after a timeout or a lost connection. */
  idempotent: boolean;
  /** Retries of this request, instead of the client's `retries` (e.g. the pages of a listing). */
  retries?: number;
  signal?: AbortSignal;
}

/** A successful answer: its status and, when a schema was given, the validated body. */
export interface TransportResponse<S extends WireCheckName | undefined> {
  status: number;
  body: S extends WireCheckName ? WireBody<S> : undefined;
}

/** Held back unsent: a pause (Retry-After) began after it took its token; it queues again. */
class HeldForPause extends Error {
  override readonly name = "HeldForPause";
}

/** How many times one attempt may be held back before it fails `rate_limited`. */
const MAX_HOLDS = 8;

/** Sends requests to the service. Contract: see {@link Transport.send}. */
export class Transport {
  readonly #s: TransportSettings;
  /** This client's own connections: its CA and proxy, never another client's. */
  readonly #agents: ServiceAgents;
  /** Why this client may send nothing more (see {@link Transport.close}); undefined while open. */
  #closed: string | undefined;

  constructor(settings: TransportSettings) {
    this.#s = settings;
    // A client's lookups are its owner's, as its answers' memory is.
    this.#agents = serviceAgents({ ...settings, lookupOwner: settings.memoryOwner });
  }

  /**
   * Closes this client for good (its connection changed or was deleted): the exchanges in flight
   * are cut, their sockets destroyed, and every request to come fails `unavailable` with `why`, unsent.
   */
  close(why: string): void {
    this.#closed ??= why;
    this.#agents.destroy();
  }

  /**
   * Sends one logical request, retrying as the failure allows, and returns the validated answer.
   *
   * Contract: each attempt waits for the rate limit and has its own timeout. A 429's `Retry-After`
   * pauses the limit for every request of the client, checked again as a request goes on the wire
   * (one that took its token before is held back unsent); a pause longer than `maxRetryAfterMs`
   * fails at once, `rate_limited`. Retries (up to `retries`): reads on timeouts, lost connections
   * and 429/5xx; writes on 429/503 or when never sent; after the exponential back-off with jitter
   * or `Retry-After`, whichever is longer. Throws a {@link ServiceError}, or the signal's reason.
   */
  async send<S extends WireCheckName | undefined>(
    request: TransportRequest<S>,
  ): Promise<TransportResponse<S>> {
    const { signal } = request;
    try {
      return await pRetry(async (attempt) => this.#attempt(request, attempt), {
        retries: request.retries ?? this.#s.retries,
        // The wait happens in onFailedAttempt on the injected clock, so p-retry adds none.
        minTimeout: 0,
        maxTimeout: 0,
        ...(signal ? { signal } : {}),
        onFailedAttempt: async ({ error, attemptNumber, retriesLeft }) => {
          if (retriesLeft <= 0 || !(error instanceof AttemptFailure)) return;
          const waitMs = this.#retryWait(attemptNumber, error.error);
          this.#s.logger?.warn(
            {
              method: request.method,
              route: request.route,
              kind: error.error.kind,
              status: error.error.status,
            },
            `retrying in ${Math.round(waitMs)} ms (attempt ${attemptNumber} failed)`,
          );
          this.#s.onRetry?.({
            method: request.method,
            route: request.route,
            attempt: attemptNumber,
            retriesLeft: retriesLeft - 1,
            waitMs,
            error: error.error,
          });
          await this.#s.clock.sleep(waitMs, signal);
        },
        shouldRetry: ({ error }) => error instanceof AttemptFailure,
      });
    } catch (error) {
      if (signal?.aborted) throw signal.reason;
      if (error instanceof AttemptFailure) throw error.error;
      throw error;
    }
  }

  async #attempt<S extends WireCheckName | undefined>(
    request: TransportRequest<S>,
    attempt: number,
  ): Promise<TransportResponse<S>> {
    const { method, route, signal } = request;
    for (let holds = 0; ; holds++) {
      const pausedMs = this.#s.bucket.pausedForMs();
      if (pausedMs > this.#s.maxRetryAfterMs || holds >= MAX_HOLDS) {
        // Waiting that long would hold the caller past any sensible deadline: fail now, saying when to come back.
        throw new AbortError(
          new ServiceError({
            kind: "rate_limited",
            method,
            route,
            detail: `the service asked for a pause (Retry-After); ${Math.ceil(pausedMs / 1000)} s left`,
            retryable: true,
            retryAfterSeconds: Math.ceil(pausedMs / 1000),
          }),
        );
      }
      // Waiting for a token is this process's pacing, not the service's time: a read that has a
      // deadline for the service is told (runtime/clock.ts). A pause the service asked for is not.
      const waitFrom = this.#s.clock.now() + this.#s.bucket.pausedForMs();
      const reserved = this.#reservedToken(request);
      if (reserved === undefined) await this.#s.bucket.acquire(signal);
      else if (reserved > 0) await this.#s.clock.sleep(reserved, signal);
      tellPaced(this.#s.clock.now() - waitFrom);
      // Checked after the wait for a token, right before the request goes out (a closed client's too).
      const closed = this.#closed === undefined ? undefined : { refuse: this.#closed };
      const asked = this.#s.clock.now();
      const grant = closed ?? (request.method === "GET" ? undefined : this.#s.writeGate?.());
      if (grant && "refuse" in grant)
        throw new AbortError(
          new ServiceError({ kind: "unavailable", method, route, detail: grant.refuse, retryable: true }),
        );
      const timeoutMs = grant ? Math.min(this.#s.timeoutMs, grant.withinMs) : this.#s.timeoutMs;
      const started = this.#s.clock.now();
      const observe = (status: number | "error") => {
        const seconds = (this.#s.clock.now() - started) / 1000;
        this.#s.onResponse?.({ method, route, status, seconds });
        this.#s.logger?.debug(
          { method, route, status, attempt, ms: Math.round(seconds * 1000) },
          "service call",
        );
      };
      const account = this.#s.memory.open(this.#s.memoryOwner);
      const sending = { held: false };
      let unansweredMs = timeoutMs;
      try {
        let response: ExchangeAnswer;
        try {
          const wireBy = grant ? asked + grant.withinMs : undefined;
          response = await this.#exchange(request, account, sending, timeoutMs, wireBy);
          unansweredMs = 0;
        } catch (error) {
          if (sending.held || error instanceof OverflowError) unansweredMs = 0;
          // Never sent: a pause began between its token and the wire (wait for its end), or the
          // write's grant ran out (the gate is asked again).
          if (sending.held && !signal?.aborted) continue;
          observe("error");
          if (signal?.aborted)
            throw new AbortError(signal.reason instanceof Error ? signal.reason : "aborted");
          // Repeating the request would bring the same answer: final, whatever its status. Unless
          // only the answers beside it left no room (one tenant's slow answers holding the shared
          // budget): then a read is tried again, once they are read or timed out.
          if (error instanceof OverflowError) {
            const tooLarge = tooLargeError(request, error);
            const { overflow } = error;
            const crowded = overflow.bound === "memory" && overflow.shared && request.idempotent;
            throw crowded ? new AttemptFailure(tooLarge) : new AbortError(tooLarge);
          }
          throw failure(transportError(request, error as ExchangeError, this.#s), request, this.#s);
        }
        return await this.#answer(request, response, observe);
      } finally {
        // The parsed body is the caller's now; the text and the chunks are garbage.
        account.close();
        grant?.ended?.(unansweredMs);
      }
    }
  }

  /**
   * A call inside a reconcile whose token comes too late to end before the reconcile's deadline is
   * not made: the token is reserved for the reconcile's key and {@link TokenWaitTooLongError} says
   * the wait, so the reconcile gives its worker back and comes again when the token is due. Its
   * call then takes that token: the ms until it is due are returned (0: at once). Undefined outside
   * a reconcile, or for a token in time and not reserved (it waits in the bucket). Synchronous, so
   * that calls made together see each other's tokens taken.
   */
  #reservedToken(request: TransportRequest<WireCheckName | undefined>): number | undefined {
    const deadline = currentDeadline();
    if (deadline === undefined) return undefined;
    const { bucket } = this.#s;
    const reserved = bucket.reservedFor(deadline.holder);
    const waitMs = reserved ?? bucket.waitMs();
    if (waitMs <= 0 || waitMs + this.#s.timeoutMs <= deadline.timeLeft()) {
      if (reserved !== undefined) bucket.take(deadline.holder);
      return reserved;
    }
    const dueMs = bucket.reserve(deadline.holder);
    const qps = Number(bucket.qps.toPrecision(3));
    throw new AbortError(
      new TokenWaitTooLongError(
        `${request.method} ${request.route}: the connection's rate limit (${qps} requests/s) admits this call later than its reconcile could end`,
        dueMs,
      ),
    );
  }

  /**
   * Sends the request and reads the whole answer within its bounds. The request is held at the
   * moment it goes on the wire while the rate limit is paused: one that took its token before a
   * 429 arrived must not reach the service inside the pause; it is destroyed unsent
   * (`sending.held`). Rejects as {@link exchange} does.
   */
  #exchange(
    request: TransportRequest<WireCheckName | undefined>,
    account: MemoryAccount,
    sending: { held: boolean },
    timeoutMs: number,
    wireBy: number | undefined,
  ): Promise<ExchangeAnswer> {
    const url = new URL(this.#s.baseUrl + request.path);
    if (request.searchParams) url.search = new URLSearchParams(request.searchParams).toString();
    return exchange({
      method: request.method,
      url: url.href,
      headers: this.#headers(),
      json: request.body === undefined ? undefined : JSON.stringify(request.body),
      agent: url.protocol === "https:" ? this.#agents.https : this.#agents.http,
      rejectUnauthorized: !this.#s.insecureSkipTlsVerify,
      timeoutMs,
      connectTimeoutMs: this.#s.connectTimeoutMs,
      maxBytes: this.#s.maxResponseBytes,
      account,
      signal: request.signal,
      // A write's grant is checked again at the wire: a process stalled after it (stopped, a long
      // pause) sends nothing once its Lease's time is up; the gate is asked again (`held`).
      beforeSend: () => {
        const late = wireBy !== undefined && this.#s.clock.now() >= wireBy;
        if (!late && this.#s.bucket.pausedForMs() <= 0) return undefined;
        sending.held = true;
        return new HeldForPause(
          late ? "the write's grant ran out before it was sent" : "a pause began before the request was sent",
        );
      },
    });
  }

  async #answer<S extends WireCheckName | undefined>(
    request: TransportRequest<S>,
    response: ExchangeAnswer,
    observe: (status: number | "error") => void,
  ): Promise<TransportResponse<S>> {
    observe(response.statusCode);
    const status = response.statusCode;
    if ((status >= 200 && status < 300) || request.alsoOk?.includes(status)) {
      return { status, body: await this.#parse(request, status, response.body.toString("utf8")) };
    }
    throw errorAnswer(request, response, this.#s);
  }

  async #parse<S extends WireCheckName | undefined>(
    request: TransportRequest<S>,
    status: number,
    text: string,
  ): Promise<TransportResponse<S>["body"]> {
    const { schema } = request;
    if (schema === undefined) return undefined as TransportResponse<S>["body"];
    try {
      return (await parseResponse(schema, text, { ...request, status })) as TransportResponse<S>["body"];
    } catch (error) {
      throw new AbortError(error as Error);
    }
  }

  #retryWait(attemptNumber: number, error: ServiceError): number {
    const exponential = Math.min(
      this.#s.retryMaxDelayMs,
      this.#s.retryBaseDelayMs * 2 ** (attemptNumber - 1),
    );
    // Full jitter on the upper half keeps a herd of clients from retrying in lockstep.
    const backoff = exponential / 2 + (this.#s.random() * exponential) / 2;
    const asked = (error.retryAfterSeconds ?? 0) * 1000;
    return Math.max(backoff, asked);
  }

  #headers(): Record<string, string> {
    const headers: Record<string, string> = { "user-agent": this.#s.userAgent, accept: "application/json" };
    if (this.#s.apiKey !== undefined) headers[this.#s.apiKeyHeader] = this.#s.apiKey;
    if (this.#s.tenantId !== undefined) headers[this.#s.tenantHeader] = this.#s.tenantId;
    return headers;
  }
}
