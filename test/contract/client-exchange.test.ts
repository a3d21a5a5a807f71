/**
 * One exchange on Node's own HTTP client (src/api/exchange.ts), over loopback: the bytes it puts on
 * the wire, the codings it decodes, the bounds and timeouts of an answer, whether a failed request
 * was written whole, the hold at the moment of sending, and that a connection goes back to the pool
 * only after an answer read whole.
 */
import { getEventListeners } from "node:events";
import http from "node:http";
import { type AddressInfo, createServer, Socket } from "node:net";
import { brotliCompressSync, deflateRawSync, deflateSync, gzipSync, zstdCompressSync } from "node:zlib";
import { afterEach, describe, expect, it } from "vitest";
import { ResponseMemory } from "../../src/api/budgets.ts";
import { ServiceClient } from "../../src/api/client.ts";
import { codingsOf } from "../../src/api/content-coding.ts";
import type { ServiceError } from "../../src/api/errors.ts";
import { OverflowError } from "../../src/api/errors.ts";
import {
  type ExchangeAnswer,
  ExchangeError,
  type ExchangeRequest,
  exchange,
} from "../../src/api/exchange.ts";
import { type FakeService, send, startFakeService, until } from "./client-fake-service.ts";

const ID = "0b6f3c2e-7d2a-4c59-9b8e-3f1a2b4c5d6e";

let service: FakeService | undefined;
const agents: http.Agent[] = [];
afterEach(async () => {
  await service?.close();
  service = undefined;
  for (const agent of agents.splice(0)) agent.destroy();
});

function agent(): http.Agent {
  const made = new http.Agent({ keepAlive: true });
  agents.push(made);
  return made;
}

/** A socket that stays connecting: an agent hands it out, and it never connects. */
function stuckSocket(): Socket {
  return Object.assign(new Socket(), { connecting: true });
}

/** An exchange with `url`, its defaults a GET of an answer of at most 1 MiB within 5 s. */
function call(url: string, extra: Partial<ExchangeRequest> = {}): Promise<ExchangeAnswer> {
  return exchange({
    method: "GET",
    url,
    headers: { accept: "application/json" },
    agent: extra.agent ?? agent(),
    rejectUnauthorized: true,
    timeoutMs: 5_000,
    maxBytes: 1024 * 1024,
    account: new ResponseMemory(64 * 1024 * 1024).open(),
    ...extra,
  });
}

const failure = (promise: Promise<unknown>) =>
  promise.then(
    () => {
      throw new Error("expected a failure");
    },
    (e: unknown) => e,
  );

describe("what goes on the wire", () => {
  /** A raw TCP server that records each request's bytes and answers 200 `{}`. */
  async function recorder() {
    const seen: string[] = [];
    const sockets = new Set<Socket>();
    const server = createServer((socket) => {
      sockets.add(socket);
      let data = "";
      socket.on("data", (chunk) => {
        data += chunk.toString("latin1");
        const end = data.indexOf("\r\n\r\n");
        if (end < 0) return;
        const length = Number(/content-length: (\d+)/i.exec(data.slice(0, end))?.[1] ?? 0);
        if (data.length < end + 4 + length) return;
        seen.push(data.slice(0, end + 4 + length));
        data = data.slice(end + 4 + length);
        const body = data.startsWith("DELETE") ? "" : "{}";
        socket.write(
          `HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n${body}`,
        );
      });
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const { port } = server.address() as AddressInfo;
    const close = () => {
      for (const socket of sockets) socket.destroy();
      return new Promise((resolve) => server.close(resolve));
    };
    return { seen, port, close };
  }

  it("sends each call's method, path, query, headers (lower case, in order) and JSON body, byte for byte", async () => {
    const wire = await recorder();
    try {
      const client = new ServiceClient({
        baseUrl: `http://127.0.0.1:${wire.port}/base/`,
        apiKey: "k-1",
        tenantId: "t-1",
        retries: 0,
        userAgent: "dms-operator/test",
      });
      await client.listProviders().catch(() => undefined);
      await client.deleteDeployment(ID);
      await client
        .listAllDeployments({ name_contains: "a b,c&é", tag_value_ids: ["t1", "t2"] }, { pageSize: 5 })
        .catch(() => undefined);
      await client
        .patchDeployment(ID, { source_revision_config: { repo_ref: "v2 é" } })
        .catch(() => undefined);
      const host = `Host: 127.0.0.1:${wire.port}\r\nConnection: keep-alive\r\n\r\n`;
      const head =
        "user-agent: dms-operator/test\r\naccept: application/json\r\nx-api-key: k-1\r\nx-tenant-id: t-1\r\n";
      const accept = `accept-encoding: gzip, deflate, br${process.versions.zstd ? ", zstd" : ""}\r\n`;
      const patch = Buffer.from('{"source_revision_config":{"repo_ref":"v2 é"}}').toString("latin1");
      expect(wire.seen).toEqual([
        `GET /base/v2/auth/providers HTTP/1.1\r\n${head}${accept}${host}`,
        `DELETE /base/v2/deployments/${ID} HTTP/1.1\r\n${head}${accept}${host}`,
        `GET /base/v2/deployments?name_contains=a+b%2Cc%26%C3%A9&tag_value_ids=t1%2Ct2&limit=5&offset=0 HTTP/1.1\r\n${head}${accept}${host}`,
        `PATCH /base/v2/deployments/${ID} HTTP/1.1\r\n${head}content-type: application/json\r\ncontent-length: ${Buffer.byteLength(patch, "latin1")}\r\n${accept}${host}${patch}`,
      ]);
    } finally {
      await wire.close();
    }
  });
});

describe("codings", () => {
  const text = JSON.stringify({ items: Array.from({ length: 200 }, (_, i) => `item-${i}`) });
  const raw = Buffer.from(text);
  const encoded: [string, Buffer][] = [
    ["gzip", gzipSync(raw)],
    ["x-gzip", gzipSync(raw)],
    ["deflate", deflateSync(raw)],
    // Raw deflate, told apart from zlib's by its first byte (a stored block's), as browsers do.
    ["deflate", deflateRawSync(raw, { level: 0 })],
    ["br", brotliCompressSync(raw)],
    ["zstd", zstdCompressSync(raw)],
    ["identity", raw],
    ["gzip, br", brotliCompressSync(gzipSync(raw))],
    ["GZIP, identity", gzipSync(raw)],
  ];

  it.each(encoded)("decodes Content-Encoding %s", async (coding, body) => {
    service = await startFakeService((_req, res) => {
      res.writeHead(200, { "content-encoding": coding, "content-length": body.length });
      res.end(body);
    });
    const answer = await call(service.url);
    expect(answer.body.toString("utf8")).toBe(text);
  });

  it("reads a body in a coding it does not know as sent, and an empty compressed body as empty", async () => {
    service = await startFakeService((req, res) => {
      res.writeHead(200, { "content-encoding": req.path === "/empty" ? "gzip" : "compress" });
      res.end(req.path === "/empty" ? undefined : "as sent");
    });
    expect((await call(service.url)).body.toString()).toBe("as sent");
    expect((await call(`${service.url}/empty`)).body.length).toBe(0);
    expect(codingsOf("gzip, compress")).toEqual([]);
    expect(codingsOf(" , identity")).toEqual([]);
  });

  it("fails a corrupt compressed body with zlib's code", async () => {
    service = await startFakeService((_req, res) => {
      res.writeHead(200, { "content-encoding": "gzip" });
      res.end(Buffer.from("not gzip at all"));
    });
    const error = await failure(call(service.url));
    expect(error).toBeInstanceOf(ExchangeError);
    expect((error as ExchangeError).code).toMatch(/^Z_/);
  });
});

describe("bounds and timeouts", () => {
  it("refuses a declared length past the bound before reading, closing the connection", async () => {
    let closedEarly = false;
    service = await startFakeService((_req, res) => {
      res.writeHead(200, { "content-length": 2048 });
      res.once("close", () => {
        closedEarly = !res.writableFinished;
      });
      res.flushHeaders();
    });
    const error = await failure(call(service.url, { maxBytes: 1024 }));
    expect(error).toEqual(Object.assign(new OverflowError({ bound: "bytes", limit: 1024 }), { status: 200 }));
    await until(() => closedEarly);
  });

  it("times out the whole exchange: a body that never ends fails ETIMEDOUT (request), written whole", async () => {
    service = await startFakeService((_req, res) => {
      res.writeHead(200);
      res.write("[");
    });
    // A second: the request is written long before, however loaded the machine (its timer runs
    // from before the connection is made).
    const error = (await failure(call(service.url, { timeoutMs: 1_000 }))) as ExchangeError;
    expect(error).toMatchObject({ name: "TimeoutError", code: "ETIMEDOUT", event: "request", written: true });
    expect(error.message).toBe("Timeout awaiting 'request' for 1000ms");
  });

  it("times out a connection not made within connectTimeoutMs (event connect), the request unwritten", async () => {
    const stuck = new (class extends http.Agent {
      override createConnection(): Socket {
        return stuckSocket();
      }
    })();
    agents.push(stuck);
    const error = (await failure(
      call("http://127.0.0.1:9/", { agent: stuck, timeoutMs: 10_000, connectTimeoutMs: 50 }),
    )) as ExchangeError;
    expect(error).toMatchObject({
      name: "TimeoutError",
      code: "ETIMEDOUT",
      event: "connect",
      written: false,
    });
  });

  it("through the client: a timeout saying no connection came within the connect timeout", async () => {
    // The client's agents are its own: for this call, every plain agent's connection stays connecting.
    const { createConnection } = http.Agent.prototype;
    http.Agent.prototype.createConnection = () => stuckSocket();
    try {
      const client = new ServiceClient({ baseUrl: "http://127.0.0.1:9", retries: 0, connectTimeoutMs: 50 });
      const error = (await client.listProviders().catch((e) => e)) as ServiceError;
      expect(error).toMatchObject({ kind: "timeout", retryable: true, maybeApplied: false });
      expect(error.detail).toBe("no connection within 50 ms");
    } finally {
      http.Agent.prototype.createConnection = createConnection;
    }
  });
});

describe("whether the request was written", () => {
  it("a connection reset after the whole request was read: written", async () => {
    service = await startFakeService((_req, res) => {
      res.socket?.destroy();
    });
    const error = (await failure(call(service.url, { method: "POST", json: "{}" }))) as ExchangeError;
    expect(error).toMatchObject({ code: "ECONNRESET", written: true, name: "RequestError" });
  });

  it("a connection refused: not written", async () => {
    service = await startFakeService(() => {});
    const { url } = service;
    await service.close();
    service = undefined;
    const error = (await failure(call(url, { method: "POST", json: "{}" }))) as ExchangeError;
    expect(error).toMatchObject({ code: "ECONNREFUSED", written: false });
  });
});

describe("the hold at the moment of sending", () => {
  it("destroys the request unsent when beforeSend returns an error, rejecting with that error", async () => {
    service = await startFakeService((_req, res) => send(res, 200, {}));
    const pause = new Error("paused");
    const pooled = agent();
    // A first call leaves a connected socket in the pool; the second is held on it, the third on a new one.
    await call(service.url, { agent: pooled });
    await expect(call(service.url, { agent: pooled, beforeSend: () => pause })).rejects.toBe(pause);
    await expect(call(service.url, { agent: agent(), beforeSend: () => pause })).rejects.toBe(pause);
    expect(service.requests).toHaveLength(1);
    await call(service.url, { agent: pooled, beforeSend: () => undefined });
    expect(service.requests).toHaveLength(2);
  });
});

describe("the caller's signal and the connection", () => {
  it("rejects with the caller's reason, leaving no listener on its signal", async () => {
    service = await startFakeService(() => {});
    const stop = new AbortController();
    const pending = call(service.url, { signal: stop.signal });
    await until(() => service?.requests.length === 1);
    const reason = new Error("stopping");
    stop.abort(reason);
    await expect(pending).rejects.toBe(reason);
    expect(getEventListeners(stop.signal, "abort")).toHaveLength(0);
  });

  it("reuses a connection after an answer read whole, and closes one cut off", async () => {
    const sockets = new Set<unknown>();
    service = await startFakeService((req, res) => {
      sockets.add(res.socket);
      if (req.path === "/big") {
        res.writeHead(200);
        res.end("x".repeat(4096));
      } else send(res, 200, {});
    });
    const pooled = agent();
    await call(service.url, { agent: pooled });
    await call(service.url, { agent: pooled });
    expect(sockets.size).toBe(1);
    await expect(call(`${service.url}/big`, { agent: pooled, maxBytes: 100 })).rejects.toBeInstanceOf(
      OverflowError,
    );
    await call(service.url, { agent: pooled });
    expect(sockets.size).toBe(2);
  });
});
