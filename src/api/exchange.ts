/**
 * One HTTP exchange with the service, on Node's own `node:http` and `node:https`: the request goes
 * out through the client's agents (its pool, CA, proxy and address policy), is held back unsent at
 * the moment it would go on the wire when asked, and its answer is read whole within its bounds,
 * decompressed as it arrives. Nothing is retried and no redirect is followed: the transport above
 * decides.
 *
 * The answer's body is bounded as it arrives ({@link readBody}): its bytes after decompression,
 * and the weight the process's answers in flight may hold together (budgets.ts). The
 * reading stops at the first chunk past a bound, so that nothing ever holds more than the bound and
 * one chunk: a gzip bomb is cut while it inflates, a huge body while it arrives, and the connection
 * is closed (the rest is never read).
 *
 * `node:https` (and with it TLS) and `node:zlib` are loaded when first needed: a call over plain
 * HTTP whose answer is not compressed loads neither. The codings are content-coding.ts's.
 */
import type { Agent, ClientRequest, IncomingHttpHeaders, IncomingMessage } from "node:http";
import type { Socket } from "node:net";
import type { Readable } from "node:stream";
import type { TLSSocket } from "node:tls";
import { MAX_TIMER_MS } from "../runtime/clock.ts";
import { ipFamily } from "./address-policy.ts";
import { JsonWeigher, type MemoryAccount } from "./budgets.ts";
import { ACCEPT_ENCODING, codingsOf, decoded, MAX_CODINGS } from "./content-coding.ts";
import { OverflowError } from "./errors.ts";

/** One request and the bounds of its answer. */
export interface ExchangeRequest extends BodyBounds {
  method: string;
  /** The whole URL, query included; `http:` or `https:`. */
  url: string;
  /** Sent in this order (names in lower case), before `content-type`, `content-length` and `accept-encoding`. */
  headers: Readonly<Record<string, string>>;
  /** JSON text, sent with `content-type: application/json`; undefined: no body. */
  json?: string | undefined;
  /** The agent of the URL's protocol. */
  agent: Agent;
  /** Whether an `https:` server's certificate must verify. */
  rejectUnauthorized: boolean;
  /** The whole exchange, from now to the answer's last byte. */
  timeoutMs: number;
  /** Opening the connection, from its lookup to its TCP connect; undefined: only `timeoutMs`. */
  connectTimeoutMs?: number | undefined;
  /**
   * Asked at the moment the request would go on the wire (its connection ready): an error returned
   * destroys it unsent, and the exchange rejects with that error.
   */
  beforeSend?: (() => Error | undefined) | undefined;
}

/** A whole answer: its status, headers and decompressed body. */
export interface ExchangeAnswer {
  statusCode: number;
  headers: IncomingHttpHeaders;
  body: Buffer;
}

/**
 * A failed exchange: Node's error code (`ECONNREFUSED`, `ECONNRESET`, a TLS or proxy code, …) and
 * message, or a timeout (`ETIMEDOUT`, named `TimeoutError`, its `event` the phase that ran out).
 */
export class ExchangeError extends Error {
  override readonly name: "TimeoutError" | "RequestError";
  readonly code: string;
  /** The timeout that ran out: `connect`, or `request` (the whole exchange). */
  readonly event: "request" | "connect" | undefined;
  /** Whether the request's last byte had been written to the connection when it failed. */
  readonly written: boolean;

  constructor(error: Error & { code?: unknown; event?: "request" | "connect" }, written: boolean) {
    super(error.message);
    this.name = error instanceof TimedOut ? "TimeoutError" : "RequestError";
    this.code = typeof error.code === "string" ? error.code : "";
    this.event = error instanceof TimedOut ? error.event : undefined;
    this.written = written;
  }
}

/** A timeout that ran out; its message is the one `got` gave, kept for logs that quote it. */
class TimedOut extends Error {
  readonly code = "ETIMEDOUT";
  readonly event: "request" | "connect";
  constructor(ms: number, event: "request" | "connect") {
    super(`Timeout awaiting '${event}' for ${ms}ms`);
    this.event = event;
  }
}

/**
 * Sends `request` and reads its whole answer. Rejects with an {@link ExchangeError}, an
 * {@link OverflowError} once the body is known to exceed a bound, the error `beforeSend` returned,
 * or the signal's reason when the caller's signal aborts.
 */
export async function exchange(request: ExchangeRequest): Promise<ExchangeAnswer> {
  // Everything of this exchange listens on a signal of its own, aborted with the first failure
  // (or the caller's abort): the caller's signal is long-lived (a reconcile's derives from the
  // process's), and only one listener, removed at the end whichever way it ends, is put on it.
  const ended = new AbortController();
  const timers: (NodeJS.Timeout | undefined)[] = [];
  const streams: Readable[] = [];
  const { signal } = request;
  let req: ClientRequest | undefined;
  let written = false;
  let read = false;
  let held: Error | undefined;
  const fail = (error: unknown) => {
    if (!ended.signal.aborted) ended.abort(error);
    req?.destroy(error instanceof Error ? error : undefined);
    // A body already arrived may still be decoding: that ends here too.
    for (const stream of streams) stream.destroy();
  };
  const forward = () => fail(signal?.reason);
  signal?.addEventListener("abort", forward, { once: true });
  const arm = (ms: number, event: "request" | "connect") => {
    const timer =
      // A timeout longer than a timer can wait is no timeout.
      ms <= MAX_TIMER_MS ? setTimeout(() => fail(new TimedOut(ms, event)), ms).unref() : undefined;
    timers.push(timer);
    return timer;
  };
  const { beforeSend } = request;
  const hold =
    beforeSend &&
    (() => {
      held = beforeSend();
      return held;
    });
  try {
    if (signal?.aborted) throw signal.reason;
    arm(request.timeoutMs, "request");
    req = send(request, hold, fail, arm);
    req.on("error", fail);
    req.once("finish", () => {
      written = true;
    });
    const response = await answerOf(req, ended.signal);
    response.on("error", fail);
    const coding = response.headers["content-encoding"];
    const codings = coding === undefined ? [] : codingsOf(coding);
    if (codings.length > MAX_CODINGS) {
      const error = new OverflowError({ bound: "codings", limit: MAX_CODINGS });
      error.status = response.statusCode;
      throw error;
    }
    // A body decompressed has no length of its own; a length declared of one sent as is, is its.
    const declared = codings.length === 0 ? contentLength(response.headers["content-length"]) : undefined;
    const chunks = codings.length === 0 ? response : decoded(response, codings, streams, fail);
    const body = await readBody(chunks, declared, {
      maxBytes: request.maxBytes,
      account: request.account,
      signal: ended.signal,
    }).catch((error: unknown) => {
      if (error instanceof OverflowError) error.status = response.statusCode;
      throw error;
    });
    // A body read to the connection's close ends when `fail` closed it: cut off, not whole.
    if (ended.signal.aborted) throw ended.signal.reason;
    read = true;
    return { statusCode: response.statusCode ?? 0, headers: response.headers, body };
  } catch (error) {
    if (signal?.aborted) throw signal.reason;
    const first: unknown = ended.signal.aborted ? ended.signal.reason : error;
    if (first === held || first instanceof OverflowError || !(first instanceof Error)) throw first;
    throw new ExchangeError(first, written);
  } finally {
    signal?.removeEventListener("abort", forward);
    for (const timer of timers) clearTimeout(timer);
    // A body read to its end leaves the connection to the agent's pool; any other is closed.
    if (!read) req?.destroy();
    for (const stream of streams) stream.destroy();
  }
}

/** Starts the request: its headers, the hold at the wire, the connect timeout, the body. */
function send(
  request: ExchangeRequest,
  hold: (() => Error | undefined) | undefined,
  fail: (error: Error) => void,
  arm: (ms: number, event: "connect") => NodeJS.Timeout | undefined,
): ClientRequest {
  const url = new URL(request.url);
  const secure = url.protocol === "https:";
  // Names in lower case, as HTTP/2 writes them and as this client always sent them.
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(request.headers)) headers[name.toLowerCase()] = value;
  if (request.json !== undefined) {
    headers["content-type"] = "application/json";
    headers["content-length"] = String(Buffer.byteLength(request.json));
  }
  headers["accept-encoding"] = ACCEPT_ENCODING;
  const http = process.getBuiltinModule(secure ? "node:https" : "node:http") as typeof import("node:https");
  const req = http.request(url, {
    method: request.method,
    headers,
    agent: request.agent,
    ...(secure ? { rejectUnauthorized: request.rejectUnauthorized } : {}),
  });
  req.once("socket", (socket: Socket) => {
    const { connectTimeoutMs } = request;
    if (connectTimeoutMs !== undefined && socket.connecting) {
      // From the end of its lookup (at once for an IP address) to its TCP connect.
      const start = () => {
        const timer = arm(connectTimeoutMs, "connect");
        socket.once("connect", () => clearTimeout(timer));
      };
      const host = url.hostname.replace(/^\[|\]$/g, "");
      if (ipFamily(host) !== 0 || (socket.address() as { address?: string }).address !== undefined) start();
      else socket.once("lookup", (error: Error | null) => error === null && start());
    }
    if (hold) holdAtTheWire(req, socket, hold, fail);
  });
  req.end(request.json);
  return req;
}

/**
 * Asks `beforeSend` at the moment `req` goes on the wire. Node's request writes its headers and
 * body to the socket right after the `socket` event, on a connected socket; on one still
 * connecting (a new connection, a TLS handshake) the writes are corked until it is ready. Then, if
 * `beforeSend` returns an error, the request is destroyed unsent, else its bytes go out.
 */
function holdAtTheWire(
  req: ClientRequest,
  socket: Socket,
  beforeSend: () => Error | undefined,
  fail: (error: Error) => void,
): void {
  let held = false;
  const check = () => {
    const error = beforeSend();
    if (error) {
      held = true;
      fail(error);
    }
  };
  const tls = (socket as Partial<TLSSocket>).encrypted === true;
  // A TLS socket is ready once its handshake sent its Finished message; a plain one once connected.
  const ready = !socket.connecting && (!tls || (socket as TLSSocket).getFinished() !== undefined);
  if (ready) {
    check();
    return;
  }
  socket.cork();
  socket.once(tls ? "secureConnect" : "connect", () => {
    if (req.destroyed) return;
    check();
    if (!held) socket.uncork();
  });
}

/** The answer's head, or the reason the exchange ended before it. */
function answerOf(req: ClientRequest, ended: AbortSignal): Promise<IncomingMessage> {
  return new Promise((resolve, reject) => {
    if (ended.aborted) return reject(ended.reason);
    const onEnd = () => reject(ended.reason);
    ended.addEventListener("abort", onEnd, { once: true });
    req.once("response", (response: IncomingMessage) => {
      ended.removeEventListener("abort", onEnd);
      resolve(response);
    });
  });
}

/** The bounds of one body. */
export interface BodyBounds {
  /** Bytes the body may have after decompression. */
  maxBytes: number;
  /** The answer's account of the shared budget; the caller closes it once done with the body. */
  account: MemoryAccount;
  signal?: AbortSignal;
}

/**
 * The deepest an answer's JSON may nest its objects and arrays. An honest answer nests a dozen
 * levels (a listing's page, a deployment, a Kubernetes-shaped object it echoes); V8 walks parsed
 * JSON by recursion (`JSON.stringify`, `structuredClone`), whose stack a few thousand levels
 * exhaust, and a 64 KiB error body holds 65,536 of them.
 */
export const MAX_ANSWER_DEPTH = 128;

/**
 * The whole body of `chunks` (already decompressed), or an {@link OverflowError} as soon as it
 * is known to exceed a bound: at once when `declaredLength` (an uncompressed body's
 * Content-Length) says so, else at the chunk that crosses it, or that nests past
 * {@link MAX_ANSWER_DEPTH}. The caller destroys the stream.
 */
export async function readBody(
  chunks: AsyncIterable<Buffer>,
  declaredLength: number | undefined,
  bounds: BodyBounds,
): Promise<Buffer> {
  if (declaredLength !== undefined && declaredLength > bounds.maxBytes)
    throw new OverflowError({ bound: "bytes", limit: bounds.maxBytes });
  const weigher = new JsonWeigher();
  const parts: Buffer[] = [];
  let size = 0;
  for await (const chunk of chunks) {
    size += chunk.length;
    if (size > bounds.maxBytes) throw new OverflowError({ bound: "bytes", limit: bounds.maxBytes });
    const weight = weigher.weigh(chunk);
    if (weigher.deepest > MAX_ANSWER_DEPTH)
      throw new OverflowError({ bound: "depth", limit: MAX_ANSWER_DEPTH });
    await bounds.account.take(weight, bounds.signal);
    parts.push(chunk);
  }
  return Buffer.concat(parts, size);
}

/** A Content-Length header's value, when it is one non-negative integer. */
function contentLength(value: string | string[] | undefined): number | undefined {
  const text = Array.isArray(value) ? value[0] : value;
  return text !== undefined && /^\d+$/.test(text.trim()) ? Number(text.trim()) : undefined;
}
