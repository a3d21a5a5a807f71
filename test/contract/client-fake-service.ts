/**
 * A scriptable HTTP service on 127.0.0.1 for the client's edge cases, and a manual clock. Each
 * test states the service's behaviour as a handler; the recorder keeps what reached the wire.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { createServer as createTlsServer } from "node:https";
import type { AddressInfo } from "node:net";
import { ServiceError } from "../../src/api/errors.ts";
import type { Deployment } from "../../src/api/wire.ts";

/** A request as the service saw it. */
export interface SeenRequest {
  method: string;
  path: string;
  query: URLSearchParams;
  headers: IncomingMessage["headers"];
  body: string;
}

/** Answers one request; `n` counts requests from 1. Returning nothing leaves it hanging. */
export type Handler = (req: SeenRequest, res: ServerResponse, n: number) => void | Promise<void>;

/** A running fake service. */
export interface FakeService {
  url: string;
  requests: SeenRequest[];
  close(): Promise<void>;
}

/** Starts a fake service (plain HTTP, or HTTPS with `tls`) on an ephemeral loopback port. */
export async function startFakeService(
  handler: Handler,
  tls?: { cert: string; key: string },
): Promise<FakeService> {
  const requests: SeenRequest[] = [];
  const listener = (req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const url = new URL(req.url ?? "/", "http://x");
      const seen: SeenRequest = {
        method: req.method ?? "",
        path: url.pathname,
        query: url.searchParams,
        headers: req.headers,
        body: Buffer.concat(chunks).toString("utf8"),
      };
      requests.push(seen);
      void handler(seen, res, requests.length);
    });
  };
  const server: Server = tls ? createTlsServer(tls, listener) : createServer(listener);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `${tls ? "https" : "http"}://127.0.0.1:${port}`,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** Writes a JSON response. */
export function send(
  res: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): void {
  res.writeHead(status, { "content-type": "application/json", ...headers });
  res.end(body === undefined ? undefined : JSON.stringify(body));
}

/** A valid deployment as the service would return it; `i` makes the id and name unique. */
export function deployment(i: number, overrides: Partial<Deployment> = {}): Deployment {
  const hex = i.toString(16).padStart(12, "0");
  return {
    name: `agent-${i}`,
    source: "github",
    source_config: { repo_url: "https://github.com/acme/agent", integration_id: null },
    source_revision_config: { repo_ref: "main" },
    secrets: [],
    id: `00000000-0000-4000-8000-${hex}`,
    tenant_id: "11111111-1111-4111-8111-111111111111",
    created_at: "2025-01-01T00:00:00Z",
    updated_at: "2025-01-01T00:00:00Z",
    status: "READY",
    latest_revision_id: null,
    active_revision_id: null,
    ...overrides,
  };
}

/**
 * A listing that answers as the spec describes, over `items`: `limit`/`offset` honoured, pages
 * capped at `cap` items, the response `offset` being where the next page starts.
 */
export function pagedListing(items: readonly Deployment[], cap = Number.POSITIVE_INFINITY): Handler {
  return (req, res) => {
    const limit = Number(req.query.get("limit") ?? "20");
    const offset = Number(req.query.get("offset") ?? "0");
    const page = items.slice(offset, offset + Math.min(limit, cap));
    send(res, 200, { resources: page, offset: offset + page.length });
  };
}

/** Polls `condition` on the event loop (no fixed sleeps) until it holds, failing after `ms`. */
export async function until(condition: () => boolean, ms = 5000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error("condition not reached in time");
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

/** The error `call` rejects with (a test failure when it resolves, or rejects with another error). */
export async function rejection(call: Promise<unknown>): Promise<ServiceError> {
  const outcome = await call.then(
    () => new Error("resolved"),
    (error: unknown) => error,
  );
  if (!(outcome instanceof ServiceError)) throw outcome;
  return outcome;
}
