/**
 * What a tenant's own server may put on the wire, written byte by byte from a raw socket on
 * loopback: informational answers forever, a head that never ends or overflows, framing that
 * lies (Content-Length, chunk sizes), codings stacked on codings, JSON nested 100,000 deep, text
 * that is not quite JSON, and keys that name an object's prototype. Each fails that one call with
 * a reason, within the request's timeout and the answer's bounds; nothing reaches the process
 * beyond it.
 */

import type { AddressInfo } from "node:net";
import { createServer, type Server, type Socket } from "node:net";
import { gzipSync } from "node:zlib";
import { afterEach, describe, expect, it } from "vitest";
import { ServiceClient } from "../../src/api/client.ts";
import { MAX_CODINGS } from "../../src/api/content-coding.ts";
import { MAX_ANSWER_DEPTH } from "../../src/api/exchange.ts";
import { deployment, rejection } from "./client-fake-service.ts";

const servers: Server[] = [];
const sockets: Socket[] = [];
afterEach(async () => {
  for (const socket of sockets.splice(0)) socket.destroy();
  await Promise.all(servers.splice(0).map((s) => new Promise((resolve) => s.close(resolve))));
});

/** A server that calls `answer` with the socket at the end of each request's head (n from 1). */
async function raw(
  answer: (socket: Socket, n: number) => void,
): Promise<{ url: string; requests: () => number }> {
  let requests = 0;
  const server = createServer((socket) => {
    sockets.push(socket);
    socket.on("error", () => {});
    let text = "";
    socket.on("data", (data: Buffer) => {
      text += data.toString("latin1");
      for (let end = text.indexOf("\r\n\r\n"); end >= 0; end = text.indexOf("\r\n\r\n")) {
        text = text.slice(end + 4);
        answer(socket, ++requests);
      }
    });
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, requests: () => requests };
}

const clientOf = (url: string) =>
  new ServiceClient({ baseUrl: url, retries: 0, qps: 10_000, burst: 1000, timeoutMs: 300 });

/** Writes `text` (a string, latin1) or `bytes` once. */
const writing =
  (head: string, body: Buffer | string = "") =>
  (socket: Socket) =>
    socket.write(Buffer.concat([Buffer.from(head, "latin1"), Buffer.from(body)]));

const ok = (head: string) => `HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n${head}\r\n`;

/** `text` gzipped `times` over. */
const gzipped = (text: string, times: number) => {
  let body = Buffer.from(text);
  for (let i = 0; i < times; i++) body = gzipSync(body);
  return body;
};

describe("a head that never ends", () => {
  it("103 Early Hints sent forever before any final answer: the request's timeout", async () => {
    const service = await raw((socket) => {
      const flood = setInterval(() => {
        if (socket.destroyed) clearInterval(flood);
        else socket.write("HTTP/1.1 103 Early Hints\r\nlink: </a>; rel=preload\r\n\r\n".repeat(20));
      }, 1);
    });
    expect(await rejection(clientOf(service.url).listProviders())).toMatchObject({ kind: "timeout" });
  });

  it("a head sent a byte at a time: the request's timeout, not a timeout per byte", async () => {
    const service = await raw((socket) => {
      const text = `${ok("content-length: 2\r\n")}[]`;
      let i = 0;
      const drip = setInterval(() => {
        if (socket.destroyed || i >= text.length) clearInterval(drip);
        else socket.write(text.charAt(i++));
      }, 20);
    });
    expect(await rejection(clientOf(service.url).listProviders())).toMatchObject({ kind: "timeout" });
  });
});

describe("a head past Node's header bound (16 KiB)", () => {
  it.each([
    ["one header line of 1 MiB", `x-long: ${"a".repeat(1 << 20)}\r\n`],
    ["10,000 headers", "a: b\r\n".repeat(10_000)],
  ])("%s: that call fails, nothing more is read", async (_what, headers) => {
    const service = await raw(writing(ok(`${headers}content-length: 2\r\n`), "[]"));
    const error = await rejection(clientOf(service.url).listProviders());
    expect(error).toMatchObject({ kind: "network" });
    expect(error.detail).toContain("HPE_HEADER_OVERFLOW");
  });
});

describe("framing that lies", () => {
  it("a chunk-size line of 100,000 digits, a chunk extension of 1 MiB: refused by the parser", async () => {
    const size = await raw(writing(ok("transfer-encoding: chunked\r\n"), `${"f".repeat(100_000)}\r\n`));
    expect((await rejection(clientOf(size.url).listProviders())).detail).toContain("HPE_INVALID_CHUNK_SIZE");
    const extension = await raw(
      writing(ok("transfer-encoding: chunked\r\n"), `2;${"a".repeat(1 << 20)}\r\n[]\r\n0\r\n\r\n`),
    );
    expect((await rejection(clientOf(extension.url).listProviders())).detail).toContain(
      "HPE_CHUNK_EXTENSIONS_OVERFLOW",
    );
  });

  it("a Content-Length longer than the body: lost when the server closes, the timeout while it holds", async () => {
    const closing = await raw((socket) => socket.end(`${ok("content-length: 100\r\n")}[]`));
    expect(await rejection(clientOf(closing.url).listProviders())).toMatchObject({ kind: "network" });
    const holding = await raw(writing(ok("content-length: 100\r\n"), "[]"));
    expect(await rejection(clientOf(holding.url).listProviders())).toMatchObject({ kind: "timeout" });
  });

  it("a body read to the connection's close, held open: the request's timeout, not the part read", async () => {
    // Valid JSON so far: what the timeout cut off must not pass for the whole answer.
    const service = await raw((socket) => socket.write('HTTP/1.0 200 OK\r\n\r\n{"resources":[],"offset":0}'));
    const client = clientOf(service.url);
    expect(await rejection(client.listAllDeployments())).toMatchObject({ kind: "timeout" });
    const write = await rejection(client.createDeployment({ name: "agent", source: "internal_docker" }));
    expect(write).toMatchObject({ kind: "timeout", maybeApplied: true });
  });

  it("a 101 to a request that asked for no upgrade: the request's timeout", async () => {
    const service = await raw((socket) =>
      socket.write("HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\nconnection: upgrade\r\n\r\n"),
    );
    expect(await rejection(clientOf(service.url).listAllDeployments())).toMatchObject({ kind: "timeout" });
  });

  it("a Content-Length shorter than the body: what follows is not taken for the next call's answer", async () => {
    const sized = (text: string) => `${ok(`content-length: ${Buffer.byteLength(text)}\r\n`)}${text}`;
    const page = (d: number) => sized(`{"resources":[${JSON.stringify(deployment(d))}],"offset":1}`);
    const service = await raw((socket, n) =>
      socket.write(n === 1 ? `${page(1)}${page(666)}` : sized(`{"resources":[],"offset":1}`)),
    );
    const client = clientOf(service.url);
    expect((await client.listAllDeployments()).map((d) => d.name)).toEqual(["agent-1"]);
    expect(await client.listAllDeployments()).toEqual([]);
    expect(service.requests()).toBe(3);
  });
});

describe("codings stacked on codings", () => {
  it(`more than ${MAX_CODINGS}: refused before any is undone, naming the bound (2,000 took 47 s)`, async () => {
    const body = gzipped(`{"resources":[],"offset":0}`, MAX_CODINGS + 1);
    for (const times of [MAX_CODINGS + 1, 2000]) {
      const codings = Array.from({ length: times }, () => "gzip").join(", ");
      const service = await raw(writing(ok(`content-encoding: ${codings}\r\n`), body));
      const error = await rejection(clientOf(service.url).listAllDeployments());
      expect(error).toMatchObject({ kind: "too_large", retryable: false });
      expect(error.detail).toContain(`encoded more than ${MAX_CODINGS} times over (Content-Encoding)`);
    }
  });

  it(`up to ${MAX_CODINGS}: each undone, the body read`, async () => {
    const codings = Array.from({ length: MAX_CODINGS }, () => "gzip").join(", ");
    const body = gzipped(`{"resources":[${JSON.stringify(deployment(1))}],"offset":1}`, MAX_CODINGS);
    const empty = gzipped(`{"resources":[],"offset":1}`, MAX_CODINGS);
    const service = await raw((socket, n) => {
      const sent = n === 1 ? body : empty;
      writing(ok(`content-encoding: ${codings}\r\ncontent-length: ${sent.length}\r\n`), sent)(socket);
    });
    expect((await clientOf(service.url).listAllDeployments()).map((d) => d.name)).toEqual(["agent-1"]);
  });
});

describe("text that is not quite JSON", () => {
  it("a byte order mark: not JSON, that call fails bad_response", async () => {
    const body = Buffer.from([0xef, 0xbb, 0xbf, 0x5b, 0x5d]);
    const service = await raw(writing(ok(`content-length: ${body.length}\r\n`), body));
    expect(await rejection(clientOf(service.url).listProviders())).toMatchObject({ kind: "bad_response" });
  });

  it("invalid UTF-8 in a string: read as U+FFFD, the item kept", async () => {
    const [before, after] = JSON.stringify(deployment(1, { name: "agent-\u0000" })).split("\\u0000");
    const item = Buffer.concat([
      Buffer.from(before ?? ""),
      Buffer.from([0xff, 0xc3]),
      Buffer.from(after ?? ""),
    ]);
    const service = await raw((socket, n) => {
      const body =
        n === 1
          ? Buffer.concat([Buffer.from('{"resources":['), item, Buffer.from('],"offset":1}')])
          : Buffer.from('{"resources":[],"offset":1}');
      writing(ok(`content-length: ${body.length}\r\n`), body)(socket);
    });
    expect((await clientOf(service.url).listAllDeployments()).map((d) => d.name)).toEqual([
      "agent-\ufffd\ufffd",
    ]);
  });
});

/** Answers each listing request with the JSON text `page(offset)`, sized, on a raw socket. */
async function listing(page: (n: number) => string) {
  return raw((socket, n) => {
    const text = page(n);
    socket.write(`${ok(`content-length: ${Buffer.byteLength(text)}\r\n`)}${text}`);
  });
}

describe("JSON nested 100,000 deep within the size bound", () => {
  it.each([
    [
      "objects in a listing's item",
      200,
      (deep: string) => `{"resources":[{"a":${deep}}],"offset":1}`,
      '{"a":',
      "}",
    ],
    ["arrays in an error's detail", 422, (deep: string) => `{"detail":${deep}}`, "[", "]"],
  ])(
    "%s: cut off as it arrives, naming the bound, no stack overflow",
    async (_what, status, body, open, close) => {
      const text = body(`${open.repeat(100_000)}1${close.repeat(100_000)}`);
      const service = await raw((socket) =>
        socket.write(`HTTP/1.1 ${status} X\r\ncontent-length: ${text.length}\r\n\r\n${text}`),
      );
      const error = await rejection(clientOf(service.url).listAllDeployments());
      expect(error).toMatchObject({ kind: "too_large" });
      expect(error.detail).toContain(`deeper than ${MAX_ANSWER_DEPTH} levels`);
    },
  );
});

describe("numbers past what a double holds", () => {
  it("an offset of 1e400 (Infinity once parsed) fails the page bad_response", async () => {
    const service = await listing(() => `{"resources":[${JSON.stringify(deployment(1))}],"offset":1e400}`);
    expect(await rejection(clientOf(service.url).listAllDeployments())).toMatchObject({
      kind: "bad_response",
    });
  });

  it("an offset of 123456789012345678901234567890, answered again and again: the listing ends", async () => {
    const service = await listing(
      (n) => `{"resources":[${JSON.stringify(deployment(n))}],"offset":123456789012345678901234567890}`,
    );
    const listed = await clientOf(service.url).listAllDeployments();
    expect(listed.map((d) => d.name)).toEqual(["agent-1", "agent-2"]);
    expect(service.requests()).toBe(2);
  });

  it("ids and counters of 1e400, -0, 123456789012345678901234567890: the item skipped, the page read", async () => {
    const items = [
      `{"id":1e400,"name":"a"}`,
      `{"id":-0,"name":"b"}`,
      `{"id":123456789012345678901234567890,"name":"c"}`,
      JSON.stringify(deployment(7)).replace(/}$/, ',"replicas":1e400,"count":-0}'),
    ];
    const service = await listing((n) =>
      n === 1 ? `{"resources":[${items.join(",")}],"offset":4}` : `{"resources":[],"offset":4}`,
    );
    let unreadable = 0;
    const listed = await clientOf(service.url).listAllDeployments({}, { onUnreadable: () => unreadable++ });
    expect(listed.map((d) => d.name)).toEqual(["agent-7"]);
    expect(unreadable).toBe(3);
  });
});

describe("keys that name an object's prototype", () => {
  it("__proto__, constructor, prototype in a listing's item, its config and its env: kept as fields, nothing polluted", async () => {
    const item = JSON.stringify(
      deployment(1, {
        source_config: {
          repo_url: "https://github.com/acme/agent",
          integration_id: null,
          resource_spec: {
            containers: [{ env: [{ name: "A", value: "1" }] }],
          },
        } as never,
      }),
    )
      .replace('{"name":"A","value":"1"}', '{"name":"__proto__","value":"1","__proto__":{"polluted":"env"}}')
      .replace(
        '"resource_spec":{',
        '"resource_spec":{"__proto__":{"polluted":"spec"},"constructor":{"prototype":{"polluted":"ctor"}},',
      )
      .replace(
        /}$/,
        ',"__proto__":{"polluted":"item"},"constructor":{"prototype":{"polluted":"top"}},"prototype":1}',
      );
    const bad = Array.from({ length: 99 }, (_, i) =>
      i % 2 ? `{"__proto__":{"polluted":"bad"}}` : `{"constructor":{}}`,
    );
    const service = await listing((n) =>
      n === 1 ? `{"resources":[${[item, ...bad].join(",")}],"offset":100}` : `{"resources":[],"offset":100}`,
    );
    let unreadable = 0;
    const all = await clientOf(service.url).listAllDeployments({}, { onUnreadable: () => unreadable++ });
    expect(all).toHaveLength(1);
    const listed = all[0] as (typeof all)[number];
    expect(unreadable).toBe(99);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    expect(Object.getPrototypeOf(listed)).toBe(Object.prototype);
    expect(Object.hasOwn(listed, "__proto__")).toBe(true);
    expect(Object.hasOwn(listed, "constructor")).toBe(true);
    const spec = (listed.source_config as { resource_spec: Record<string, unknown> }).resource_spec;
    expect(Object.getPrototypeOf(spec)).toBe(Object.prototype);
    expect(Object.hasOwn(spec, "__proto__")).toBe(true);
    const env = (spec.containers as { env: Record<string, unknown>[] }[])[0]?.env[0];
    expect(env?.name).toBe("__proto__");
    expect(Object.getPrototypeOf(env)).toBe(Object.prototype);
  });
});
