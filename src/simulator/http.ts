/**
 * Small node:http helpers of the simulator: reading a JSON body the way FastAPI reports its
 * problems, and writing a response at once or slowly in chunks.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import { ServiceError } from "./errors.ts";
import type { SlowBody } from "./faults.ts";

/** A response to write: status, an already serialized JSON body (none for 204), extra headers. */
export interface SimResponse {
  status: number;
  body?: string;
  headers?: Record<string, string>;
}

/** Bodies beyond this size are refused with 413, as a proxy in front of the service would. */
const MAX_BODY_BYTES = 1024 * 1024;

/** `{detail}` response for a {@link ServiceError}. */
export function errorResponse(error: ServiceError): SimResponse {
  return { status: error.status, body: JSON.stringify({ detail: error.detail }) };
}

/** A JSON response. */
export const json = (status: number, value: unknown): SimResponse => ({
  status,
  body: JSON.stringify(value),
});

/**
 * Reads and parses the JSON body. An empty body is `undefined` (the caller decides whether it is
 * missing); malformed JSON is a 422 `json_invalid` issue, as FastAPI answers.
 */
export async function readJsonBody(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    const buffer = chunk as Buffer;
    size += buffer.length;
    if (size > MAX_BODY_BYTES) throw new ServiceError(413, "Request body too large");
    chunks.push(buffer);
  }
  const text = Buffer.concat(chunks).toString("utf8");
  if (text.trim() === "") return undefined;
  try {
    return JSON.parse(text);
  } catch (cause) {
    const message = cause instanceof Error ? cause.message : String(cause);
    const position = /position (\d+)/.exec(message)?.[1];
    throw new ServiceError(422, [
      {
        loc: ["body", position === undefined ? 0 : Number(position)],
        msg: "JSON decode error",
        type: "json_invalid",
        ctx: { error: message },
      },
    ]);
  }
}

/** The 422 FastAPI answers when a required body is absent. */
export const missingBody = (): ServiceError =>
  new ServiceError(422, [{ loc: ["body"], msg: "Field required", type: "missing" }]);

/**
 * Writes `response`. With `slow`, the body goes out in chunks of `slow.chunkBytes` with
 * `slow.delayMs` between them (Content-Length announced up front, so a client waits for it all);
 * `timers` tracks the pending waits so that closing the server can cancel them.
 */
export function writeResponse(
  res: ServerResponse,
  response: SimResponse,
  slow: SlowBody | undefined,
  timers: Set<NodeJS.Timeout>,
): void {
  const body = response.body === undefined ? undefined : Buffer.from(response.body, "utf8");
  const headers: Record<string, string | number> = { ...response.headers };
  if (body !== undefined) {
    headers["content-type"] = "application/json";
    headers["content-length"] = body.length;
  }
  res.writeHead(response.status, headers);
  if (body === undefined || slow === undefined || body.length <= slow.chunkBytes) {
    res.end(body);
    return;
  }
  let offset = 0;
  const next = () => {
    if (res.destroyed) return;
    const end = Math.min(offset + slow.chunkBytes, body.length);
    const chunk = body.subarray(offset, end);
    offset = end;
    if (offset >= body.length) {
      res.end(chunk);
      return;
    }
    res.write(chunk);
    const timer = setTimeout(() => {
      timers.delete(timer);
      next();
    }, slow.delayMs);
    timers.add(timer);
  };
  next();
}
