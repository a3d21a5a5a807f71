/**
 * A small REST transport to the Kubernetes API server over `node:https`, authenticated by
 * {@link KubeCredentials} (client certificates, bearer tokens, token files; exec plugins and auth
 * providers through client-node, loaded only for them).
 *
 * Why not the generated API classes: this operator needs exact control over `Accept` (metadata-only
 * lists and watches of Secrets), `Content-Type` (the generated CustomObjects patch silently defaults
 * to JSON Patch), MicroTime formatting (the generated serializer writes millisecond timestamps the
 * server rejects for Leases and Events), HTTP status codes (409/410), and an AbortSignal on every
 * call including watch streams. A hundred lines of transport is cheaper than working around each.
 */
import http from "node:http";
import https from "node:https";
import type { Socket } from "node:net";
import { followSignal } from "../runtime/clock.ts";
import { type KubeCredentials, plainHeaders } from "./credentials.ts";
import {
  AnswerTooLargeError,
  apiErrorFrom,
  KubeApiError,
  retryAfterHeader,
  StreamIdleError,
} from "./errors.ts";

/** The content types of the PATCH flavours the API server accepts. */
export const PatchType = {
  Json: "application/json-patch+json",
  Merge: "application/merge-patch+json",
  Apply: "application/apply-patch+yaml",
} as const;
export type PatchType = (typeof PatchType)[keyof typeof PatchType];

/**
 * `date` as a `MicroTime` string, e.g. `2024-05-01T12:00:00.123000Z`. `MicroTime` fields (Lease
 * renewTime/acquireTime, Event eventTime and series.lastObservedTime) must carry exactly six
 * fractional digits: the API server parses them with Go's RFC3339Micro layout and rejects
 * JavaScript's millisecond ISO strings.
 */
export function toMicroTime(date: Date): string {
  return date.toISOString().replace(/\.(\d{3})Z$/, ".$1000Z");
}

/** One call to the API server. `path` is absolute from the server's API root (`/api/v1/...`). */
export interface KubeRequest {
  method: "GET" | "POST" | "PUT" | "PATCH" | "DELETE";
  path: string;
  query?: Record<string, string | number | boolean | undefined>;
  /** Serialized as JSON. */
  body?: unknown;
  /** Defaults to `application/json`; set a {@link PatchType} for PATCH. */
  contentType?: string;
  /** Defaults to `application/json`. */
  accept?: string;
  /** Aborts the call (and, for a stream, closes it). */
  signal?: AbortSignal;
  /** Overrides the client's default timeout for this call. For streams: the whole stream's lifetime. */
  timeoutMs?: number;
  /**
   * For a stream: the longest it may go without a byte, its answer's headers included (an API
   * server writes a watch's at once); then it fails with a {@link StreamIdleError}. A watch that
   * stays open but says nothing (a proxy stuck between) is found by this, long before its whole
   * lifetime.
   */
  idleMs?: number;
  /**
   * The caller reads nothing of a 2xx answer (a label write, an Event): its body is read to the
   * end, so the connection is reused, and dropped unparsed; `request` resolves `undefined`. Any
   * other answer is read and reported as always. Such an answer is the whole object, a few KB of
   * JSON whose string and parsed tree outlive the young generation under load: the sharder writes
   * a label on every resource, the recorder an Event for every create.
   */
  discardAnswer?: boolean;
  /**
   * The most bytes of a 2xx answer's body read: a longer one is cut off (the connection closed)
   * and `request` rejects with an {@link AnswerTooLargeError}. For a list whose objects someone
   * else writes (an object may be ~1.5 MiB). Not for streams.
   */
  maxBytes?: number;
  /**
   * Sent at once, on a connection of its own if every pooled one is busy
   * ({@link KubeClientOptions.maxSockets}): a Lease's read or write, which must not wait behind
   * a burst of status writes and Events for its renewal deadline.
   */
  urgent?: boolean;
}

/** Options of {@link KubeClient}. */
export interface KubeClientOptions {
  /** Default per-call timeout; 30 s. */
  timeoutMs?: number;
  userAgent?: string;
  /**
   * The connections `request` shares at most (kept alive between calls); a call beyond waits for
   * one, within its timeout. A stream (a watch) and an {@link KubeRequest.urgent} call have their
   * own. Default {@link DEFAULT_MAX_SOCKETS}.
   */
  maxSockets?: number;
}

/**
 * Connections the requests of one client share at most. Unbounded, a burst of writes (a status
 * and an Event each, for 10,000 adopted resources) opened 40–54 connections to the API server,
 * each with its TLS state, closed again once idle: at 10,000 resources their allocations left
 * ~1.5 MiB more of the allocator's heap held after the burst than with 16 (docs/benchmarks.md,
 * "Memory"). Sixteen is the workers' default count; one call takes a few milliseconds.
 */
const DEFAULT_MAX_SOCKETS = 16;

/** How long a pooled connection may stay idle before it is closed (as Node's global agent). */
const IDLE_SOCKET_MS = 5_000;

/**
 * JSON requests and line-delimited JSON streams against the current context's cluster.
 *
 * Contract: `request` resolves the parsed JSON body of a 2xx answer (`undefined` when empty) and
 * rejects with a {@link KubeApiError} subclass for any other status, or with an Error (cause
 * attached) on a network failure, abort or timeout. `stream` resolves once the server answered 200
 * and yields one parsed JSON value per line until the server ends the stream (normal return) or
 * the connection fails (throws); it rejects like `request` when the answer is not 200.
 */
export class KubeClient {
  readonly #kc: KubeCredentials;
  readonly #server: URL;
  readonly #timeoutMs: number;
  readonly #userAgent: string;
  /** The connections `request` shares ({@link KubeClientOptions.maxSockets}). */
  readonly #pool: http.Agent;
  /** The credentials as applied last, while they hold ({@link KubeCredentials.appliedUntil}). */
  #applied: { options: https.RequestOptions; headers: http.OutgoingHttpHeaders; until: number } | undefined;

  constructor(kc: KubeCredentials, options: KubeClientOptions = {}) {
    const cluster = kc.getCurrentCluster();
    if (!cluster?.server)
      throw new Error("the Kubernetes configuration has no current cluster with a server");
    this.#kc = kc;
    this.#server = new URL(cluster.server);
    this.#timeoutMs = options.timeoutMs ?? 30_000;
    this.#userAgent = options.userAgent ?? "dms-operator";
    const pooling = {
      keepAlive: true,
      maxSockets: options.maxSockets ?? DEFAULT_MAX_SOCKETS,
      timeout: IDLE_SOCKET_MS,
      scheduling: "lifo",
    } as const;
    this.#pool = this.#server.protocol === "http:" ? new http.Agent(pooling) : new https.Agent(pooling);
  }

  /** Sends `req` and resolves its parsed JSON answer. */
  async request(req: KubeRequest): Promise<unknown> {
    const { res, settled, timedOut } = await this.#send(req, req.timeoutMs ?? this.#timeoutMs, !req.urgent);
    const ok = (res.statusCode ?? 0) >= 200 && (res.statusCode ?? 0) < 300;
    if (req.discardAnswer && ok) {
      await readBody(res, describe(req), false).catch(timedOut).finally(settled);
      return undefined;
    }
    const max = ok ? req.maxBytes : undefined;
    const text = await readBody(res, describe(req), true, max).catch(timedOut).finally(settled);
    const body = parseJson(text);
    const status = res.statusCode ?? 0;
    if (status < 200 || status >= 300) throw failed(res, body, req);
    return body;
  }

  /** Opens a streaming GET (a watch) and yields each line's JSON value. */
  async stream(req: KubeRequest): Promise<AsyncIterable<unknown>> {
    const timeoutMs = req.timeoutMs ?? this.#timeoutMs;
    const { res, settled, timedOut } = await this.#send(req, timeoutMs, false, req.idleMs);
    const status = res.statusCode ?? 0;
    if (status !== 200) {
      const text = await readBody(res, describe(req), true).catch(timedOut).finally(settled);
      throw failed(res, parseJson(text), req);
    }
    return jsonLines(res, describe(req), settled);
  }

  /**
   * Sends `req` under a timeout covering the answer's body too; `settled` ends that timeout once
   * the body was read (or the stream ended). A timer of our own rather than AbortSignal.timeout:
   * such a signal, once the request listened to it, stays alive with its timer until the timeout
   * would have fired, and at 150 requests a second during mass creates that kept ~5,000 signals
   * and timers in the heap. `idleMs` (a stream's) bounds each silence, the wait for the answer's
   * headers included, by the connection's own inactivity timer: one mechanism from the request
   * sent to the stream's end, and no timer more per request.
   */
  async #send(
    req: KubeRequest,
    timeoutMs: number,
    pooled = false,
    idleMs?: number,
  ): Promise<{ res: http.IncomingMessage; settled: () => void; timedOut: (error: unknown) => never }> {
    const url = this.#url(req);
    const { options, headers: authHeaders } = await this.#credentials();
    const payload = req.body === undefined ? undefined : JSON.stringify(req.body);
    const headers: http.OutgoingHttpHeaders = {
      ...authHeaders,
      Accept: req.accept ?? "application/json",
      "User-Agent": this.#userAgent,
    };
    if (payload !== undefined) {
      headers["Content-Type"] = req.contentType ?? "application/json";
      headers["Content-Length"] = Buffer.byteLength(payload);
    }
    // The caller's signal, followed by one listener until the body was read: no AbortSignal.any,
    // whose bookkeeping outlives each request into the old generation (runtime/clock.ts).
    const followed = followSignal(req.signal);
    let expired = false;
    const timer = setTimeout(() => {
      expired = true;
      followed.abort(new DOMException("The operation was aborted due to timeout", "TimeoutError"));
    }, timeoutMs);
    timer.unref();
    const settled = () => {
      clearTimeout(timer);
      followed.release();
    };
    // A failure once the timeout ran out says so (Node's own is "The operation was aborted").
    const timedOut = (error: unknown): never => {
      if (!expired) throw error;
      throw new Error(`${describe(req)}: timeout: no complete answer within ${timeoutMs} ms`, {
        cause: error,
      });
    };
    const { signal } = followed;
    const transport = url.protocol === "http:" ? http : https;
    try {
      const res = await new Promise<http.IncomingMessage>((resolve, reject) => {
        // A proxy's agent (set by the credentials) is kept; otherwise the pool, or Node's own.
        const agent = options.agent ?? (pooled ? this.#pool : undefined);
        const idle = idleMs === undefined ? {} : { timeout: idleMs };
        let answer: http.IncomingMessage | undefined;
        const outgoing = transport.request(
          url,
          { ...options, ...(agent ? { agent } : {}), ...idle, method: req.method, headers, signal },
          (res) => {
            answer = res;
            resolve(res);
          },
        );
        // A silence (below) fails as itself; any other failure names the request.
        const named = (err: Error) => new Error(`${describe(req)}: ${err.message}`, { cause: err });
        outgoing.on("error", (err) => reject(err instanceof StreamIdleError ? err : named(err)));
        // The connection's inactivity timer (`timeout`, set before it connects) ends a silence:
        // before the answer's headers the request fails, after them the answer's reader does.
        if (idleMs !== undefined) {
          outgoing.on("timeout", () => {
            const error = new StreamIdleError(`${describe(req)}: no data within ${idleMs} ms`);
            (answer ?? outgoing).destroy(error);
          });
        }
        outgoing.once("socket", hearSocketErrors);
        outgoing.end(payload);
      });
      return { res, settled, timedOut };
    } catch (err) {
      settled();
      return timedOut(err);
    }
  }

  /**
   * The credentials' TLS options and headers for a call: applied again once what was applied last
   * may have changed (a rotated service-account token, an exec plugin's, a re-read file).
   */
  async #credentials(): Promise<{ options: https.RequestOptions; headers: http.OutgoingHttpHeaders }> {
    const held = this.#applied;
    if (held !== undefined && Date.now() <= held.until) return held;
    const options: https.RequestOptions = { headers: {} };
    const applying = this.#kc.applyToHTTPSOptions(options);
    const until = this.#kc.appliedUntil?.() ?? Number.NEGATIVE_INFINITY;
    await applying;
    const applied = { options, headers: plainHeaders(options) as http.OutgoingHttpHeaders, until };
    this.#applied = applied;
    return applied;
  }

  #url(req: KubeRequest): URL {
    const base = this.#server.pathname.replace(/\/+$/, "");
    const url = new URL(this.#server.origin + base + req.path);
    for (const [key, value] of Object.entries(req.query ?? {})) {
      if (value !== undefined) url.searchParams.set(key, String(value));
    }
    return url;
  }
}

const HEARD = Symbol("dms.heard");

/**
 * Gives a connection one listener of its own for its errors. A request's errors reach its caller
 * through the request; but an abort that comes as the answer ends (a watch list's caller moves on
 * at its last bookmark) destroys a connection already back in the keep-alive pool, where no
 * listener hears it and the error would throw out of the process.
 */
function hearSocketErrors(socket: Socket & { [HEARD]?: true }): void {
  if (socket[HEARD]) return;
  socket[HEARD] = true;
  socket.on("error", () => {});
}

const describe = (req: KubeRequest): string => `${req.method} ${req.path}`;

/** The error of an answer that is not a success: its status, its `Status` body, its `Retry-After`. */
const failed = (res: http.IncomingMessage, body: unknown, req: KubeRequest): KubeApiError =>
  apiErrorFrom(res.statusCode ?? 0, body, describe(req), retryAfterHeader(res.headers["retry-after"]));

function parseJson(text: string): unknown {
  if (text.trim() === "") return undefined;
  try {
    return JSON.parse(text);
  } catch {
    // Proxies and a server under stress can answer plain text; the status code still tells the story.
    return { message: text.slice(0, 200) };
  }
}

/**
 * Reads an answer to its end by its events, its text kept or not. Not `for await`: the async
 * iterator of a stream brings an end-of-stream watcher, its listeners and an async resource per
 * answer, which outlived the young generation under load (18 of the leader's 225 MiB promoted
 * in its first 2 minutes at 3 x 10,000, sampled).
 */
function readBody(
  res: http.IncomingMessage,
  what: string,
  keep: boolean,
  maxBytes = Number.POSITIVE_INFINITY,
): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let settled = false;
    const end = () => {
      if (settled) return;
      settled = true;
      resolve(
        chunks.length === 1 ? (chunks[0] as Buffer).toString("utf8") : Buffer.concat(chunks).toString("utf8"),
      );
    };
    const fail = (cause?: unknown) => {
      if (settled) return;
      settled = true;
      const message = `${what}: reading the answer failed`;
      reject(
        cause === undefined ? new Error(`${message}: the connection closed`) : new Error(message, { cause }),
      );
    };
    // Ended or destroyed before these listeners (not so today: only microtasks come between the
    // answer and this read), it would never say so again.
    if (res.readableEnded) return end();
    if (res.destroyed) return fail(res.errored ?? undefined);
    const tooLarge = () => {
      settled = true;
      chunks.length = 0;
      res.destroy();
      reject(new AnswerTooLargeError(what, maxBytes));
    };
    if (Number(res.headers["content-length"] ?? 0) > maxBytes) return tooLarge();
    res.on("data", (chunk: Buffer) => {
      if (settled) return;
      size += chunk.length;
      if (size > maxBytes) return tooLarge();
      if (keep) chunks.push(chunk);
    });
    res.once("end", end);
    res.once("error", fail);
    // Closed before its end (a timeout, an abort, a cut connection): what came is not the answer.
    res.once("close", () => fail());
  });
}

/** Each line of a stream (a watch) as its JSON value, as it comes; its connection released at the end. */
async function* jsonLines(
  res: http.IncomingMessage,
  what: string,
  settled: () => void,
): AsyncGenerator<unknown> {
  let pending = "";
  try {
    res.setEncoding("utf8");
    for await (const chunk of res) {
      pending += chunk as string;
      let newline = pending.indexOf("\n");
      while (newline >= 0) {
        const line = pending.slice(0, newline).trim();
        pending = pending.slice(newline + 1);
        if (line !== "") yield JSON.parse(line);
        newline = pending.indexOf("\n");
      }
    }
  } catch (err) {
    if (err instanceof KubeApiError || err instanceof StreamIdleError) throw err;
    throw new Error(`${what}: stream failed`, { cause: err });
  } finally {
    // Ending the iteration early (a consumer's break or abort) must release the connection.
    res.destroy();
    settled();
  }
  if (pending.trim() !== "") yield JSON.parse(pending);
}
