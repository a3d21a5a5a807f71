/**
 * What a tenant's own server may put on the wire, written byte by byte from a raw socket on
 * loopback. Each fails that one call with a reason, within the request's timeout and the answer's
 * bounds; nothing reaches the process beyond it.
 */

import type { AddressInfo } from "node:net";
import { createServer, type Server, type Socket } from "node:net";
import { gzipSync } from "node:zlib";
import { afterEach, describe, expect, it } from "vitest";
import { ServiceClient } from "../../src/api/client.ts";
import { MAX_CODINGS } from "../../src/api/exchange.ts";
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

describe("framing that lies", () => {
  it("a body read to the connection's close, held open: the request's timeout, not the part read", async () => {
    // Valid JSON so far: what the timeout cut off must not pass for the whole answer.
    const service = await raw((socket) => socket.write('HTTP/1.0 200 OK\r\n\r\n{"resources":[],"offset":0}'));
    const client = clientOf(service.url);
    expect(await rejection(client.listAllDeployments())).toMatchObject({ kind: "timeout" });
    const write = await rejection(client.createDeployment({ name: "agent", source: "internal_docker" }));
    expect(write).toMatchObject({ kind: "timeout", maybeApplied: true });
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
