// The Kubernetes client's timeout covers the whole answer, body included, and ends with it.
import { getEventListeners } from "node:events";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it, vi } from "vitest";
import { KubeClient } from "../../src/kube/client.ts";
import { StaticCredentials, TOKEN_FILE_REFRESH_MS } from "../../src/kube/credentials.ts";
import { AnswerTooLargeError, StreamIdleError } from "../../src/kube/errors.ts";
import { followersOf } from "../../src/runtime/clock.ts";

let server: Server | undefined;

afterEach(async () => {
  server?.closeAllConnections();
  await new Promise((resolve) => server?.close(resolve));
  server = undefined;
});

/** A client of a local server whose handler is `handle`. */
async function clientOf(handle: Parameters<typeof createServer>[1], timeoutMs: number, maxSockets?: number) {
  server = createServer(handle);
  await new Promise<void>((resolve) => server?.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  const credentials = {
    getCurrentCluster: () => ({ server: `http://127.0.0.1:${port}` }),
    applyToHTTPSOptions: async () => {},
  };
  return new KubeClient(credentials, { timeoutMs, ...(maxSockets ? { maxSockets } : {}) });
}

describe("KubeClient", () => {
  it("sends a rotated token file's new token once the refresh period passed, and applies credentials that cannot say how long they hold to every request", async () => {
    const seen: Array<string | undefined> = [];
    const listening = createServer((req, res) => {
      seen.push(req.headers.authorization);
      res.end("{}");
    });
    server = listening;
    await new Promise<void>((resolve) => listening.listen(0, "127.0.0.1", resolve));
    const { port } = listening.address() as AddressInfo;
    const dir = mkdtempSync(join(tmpdir(), "dms-token-"));
    const tokenFile = join(dir, "token");
    writeFileSync(tokenFile, "first\n");
    const tls = {
      server: `http://127.0.0.1:${port}`,
      ca: undefined,
      insecure: false,
      tlsServerName: undefined,
    };
    const rotating = new KubeClient(
      new StaticCredentials(tls, { cert: undefined, key: undefined, token: { tokenFile } }),
    );
    vi.useFakeTimers({ toFake: ["Date"] });
    try {
      await rotating.request({ method: "GET", path: "/a" });
      writeFileSync(tokenFile, "second\n");
      await rotating.request({ method: "GET", path: "/b" });
      vi.advanceTimersByTime(TOKEN_FILE_REFRESH_MS + 1);
      await rotating.request({ method: "GET", path: "/c" });
    } finally {
      vi.useRealTimers();
      rmSync(dir, { recursive: true, force: true });
    }
    expect(seen).toEqual(["Bearer first", "Bearer first", "Bearer second"]);
    let applied = 0;
    const counting = new KubeClient({
      getCurrentCluster: () => ({ server: tls.server }),
      applyToHTTPSOptions: async () => {
        applied += 1;
      },
    });
    await counting.request({ method: "GET", path: "/d" });
    await counting.request({ method: "GET", path: "/e" });
    expect(applied).toBe(2);
  });

  it("shares at most maxSockets connections between its requests, and sends an urgent one at once", async () => {
    const held: Array<() => void> = [];
    const open = new Set<unknown>();
    let most = 0;
    const client = await clientOf(
      (req, res) => {
        open.add(req.socket);
        most = Math.max(most, open.size);
        req.socket.once("close", () => open.delete(req.socket));
        const answer = () => res.end(JSON.stringify({ path: req.url }));
        // The Lease's call is answered at once; the others when released.
        if (req.url === "/lease") answer();
        else held.push(answer);
      },
      5_000,
      2,
    );
    const calls = [1, 2, 3, 4, 5].map((i) => client.request({ method: "PATCH", path: `/w${i}`, body: {} }));
    await expect.poll(() => held.length).toBe(2);
    // Two connections are busy and three calls wait for them; a Lease's renewal does not.
    await expect(client.request({ method: "PUT", path: "/lease", body: {}, urgent: true })).resolves.toEqual({
      path: "/lease",
    });
    let done = false;
    const all = Promise.all(calls).finally(() => {
      done = true;
    });
    // Released one at a time: each frees a connection for a waiting call.
    while (!done) {
      held.shift()?.();
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    expect(await all).toEqual([1, 2, 3, 4, 5].map((i) => ({ path: `/w${i}` })));
    // The five pooled calls never held more than two connections (the urgent one made a third).
    expect(most).toBe(3);
  });

  it("answers within its timeout", async () => {
    const client = await clientOf((_req, res) => res.end('{"kind":"Status"}'), 1_000);
    await expect(client.request({ method: "GET", path: "/api" })).resolves.toEqual({ kind: "Status" });
  });

  it("gives up on an answer whose body does not end within the timeout, saying so", async () => {
    const client = await clientOf((_req, res) => {
      res.writeHead(200, { "Content-Type": "application/json" });
      res.write('{"kind":');
    }, 200);
    await expect(client.request({ method: "GET", path: "/api" })).rejects.toThrow(
      "GET /api: timeout: no complete answer within 200 ms",
    );
  });

  it("cuts off an answer over the request's maxBytes, announced or streamed, and reads one within it", async () => {
    let announce = true;
    const body = JSON.stringify({ items: ["x".repeat(10_000)] });
    const client = await clientOf((_req, res) => {
      res.writeHead(200, announce ? { "Content-Length": Buffer.byteLength(body) } : {});
      // Unannounced (chunked), in pieces: cut off as they arrive.
      for (let i = 0; i < body.length; i += 1_000) res.write(body.slice(i, i + 1_000));
      res.end();
    }, 5_000);
    const list = (maxBytes: number) => client.request({ method: "GET", path: "/apis/x", maxBytes });
    await expect(list(4_096)).rejects.toBeInstanceOf(AnswerTooLargeError);
    announce = false;
    await expect(list(4_096)).rejects.toThrow("GET /apis/x: the answer is larger than 4096 bytes");
    await expect(list(Buffer.byteLength(body))).resolves.toEqual(JSON.parse(body));
  });

  it("gives up on a server that does not answer at all, with the request's own timeout, saying so", async () => {
    // Not Node's "The operation was aborted", which tells a user neither what nor how long.
    const client = await clientOf(() => {}, 60_000);
    await expect(client.request({ method: "GET", path: "/api", timeoutMs: 200 })).rejects.toThrow(
      "GET /api: timeout: no complete answer within 200 ms",
    );
  });

  it("fails a stream whose answer's headers never come within its idleMs, as one silent after them, and closes its connection", async () => {
    // An API server writes a watch's headers at once: one that holds them back is as stuck as
    // one that goes silent after them, and must not hold the watch for its whole lifetime.
    let headers = false;
    const closed: unknown[] = [];
    const client = await clientOf((req, res) => {
      req.socket.once("close", () => closed.push(req.url));
      if (!headers) return;
      res.writeHead(200, { "Content-Type": "application/json" });
      res.write('{"type":"BOOKMARK"}\n');
    }, 60_000);
    const watch = { method: "GET", path: "/apis/x", idleMs: 200, timeoutMs: 60_000 } as const;
    await expect(client.stream(watch)).rejects.toBeInstanceOf(StreamIdleError);
    await expect(client.stream(watch)).rejects.toThrow("GET /apis/x: no data within 200 ms");
    await vi.waitFor(() => expect(closed).toHaveLength(2));
    headers = true;
    const lines: unknown[] = [];
    const reading = (async () => {
      for await (const line of await client.stream(watch)) lines.push(line);
    })();
    await expect(reading).rejects.toBeInstanceOf(StreamIdleError);
    expect(lines).toEqual([{ type: "BOOKMARK" }]);
  });

  it("drops a 2xx answer unread when asked to, on a connection it then reuses", async () => {
    const sockets = new Set<unknown>();
    const client = await clientOf((req, res) => {
      sockets.add(req.socket);
      res.writeHead(200, { "Content-Type": "application/json" });
      res.end(JSON.stringify({ kind: "Deployment", big: "x".repeat(100_000) }));
    }, 1_000);
    const discarded = { method: "PATCH", path: "/apis/x", body: {}, discardAnswer: true } as const;
    await expect(client.request(discarded)).resolves.toBeUndefined();
    await expect(client.request(discarded)).resolves.toBeUndefined();
    // Read to its end: the second call went over the first one's connection.
    expect(sockets.size).toBe(1);
  });

  it("still reports an answer that is not 2xx when asked to drop the answer", async () => {
    const client = await clientOf((_req, res) => {
      res.writeHead(409, { "Content-Type": "application/json" });
      res.end(
        JSON.stringify({ kind: "Status", reason: "Conflict", message: "the object has been modified" }),
      );
    }, 1_000);
    await expect(
      client.request({ method: "PATCH", path: "/apis/x", body: {}, discardAnswer: true }),
    ).rejects.toThrow(/the object has been modified/);
  });

  it("gives up on a dropped answer whose body does not end within the timeout", async () => {
    const client = await clientOf((_req, res) => {
      res.writeHead(200, { "Content-Type": "application/json" });
      res.write('{"kind":');
    }, 200);
    await expect(
      client.request({ method: "PATCH", path: "/apis/x", body: {}, discardAnswer: true }),
    ).rejects.toThrow("PATCH /apis/x: timeout: no complete answer within 200 ms");
  });

  it("fails an answer whose connection is cut before its end, kept or dropped", async () => {
    const client = await clientOf((req, res) => {
      res.writeHead(200, { "Content-Type": "application/json" });
      res.write('{"kind":');
      setTimeout(() => req.socket.destroy(), 20);
    }, 5_000);
    await expect(client.request({ method: "GET", path: "/api" })).rejects.toThrow(
      /GET \/api: reading the answer failed/,
    );
    await expect(
      client.request({ method: "PATCH", path: "/apis/x", body: {}, discardAnswer: true }),
    ).rejects.toThrow(/PATCH \/apis\/x: reading the answer failed/);
  });

  it("lets a caller abort as a stream's answer ends, with nothing thrown out of the process", async () => {
    const client = await clientOf((_req, res) => res.end('{"type":"BOOKMARK"}\n{"type":"ADDED"}\n'), 1_000);
    // Each abort destroys the caller's connection (pooled again by then, or not): the server
    // sees it close, after the client emitted that connection's error, heard or not.
    let opened = 0;
    let closed = 0;
    server?.on("connection", (socket) => {
      opened++;
      socket.once("close", () => closed++);
    });
    const unheard: unknown[] = [];
    const hear = (err: unknown) => void unheard.push(err);
    process.on("uncaughtException", hear);
    try {
      for (let i = 0; i < 5; i += 1) {
        const stop = new AbortController();
        const lines = await client.stream({ method: "GET", path: "/apis/x", signal: stop.signal });
        // The caller moves on at the first line (a watch list's end) and aborts while the rest is read.
        let first = true;
        for await (const _line of lines) {
          if (first) queueMicrotask(() => stop.abort());
          first = false;
        }
      }
      await vi.waitFor(() => expect(closed).toBe(5), { timeout: 5_000 });
      expect(opened).toBe(5);
    } finally {
      process.off("uncaughtException", hear);
    }
    expect(unheard).toEqual([]);
  });

  it("puts one listener on a caller's signal however many of its requests are in flight", async () => {
    const warnings: string[] = [];
    const onWarning = (w: Error) => warnings.push(w.name);
    process.on("warning", onWarning);
    const waiting: Array<() => void> = [];
    const client = await clientOf(
      (_req, res) => {
        waiting.push(() => res.end("{}"));
      },
      5_000,
      20,
    );
    const stop = new AbortController();
    const calls = Array.from({ length: 20 }, () =>
      client.request({ method: "GET", path: "/api", signal: stop.signal }),
    );
    while (waiting.length < 20) await new Promise((resolve) => setTimeout(resolve, 10));
    expect(getEventListeners(stop.signal, "abort")).toHaveLength(1);
    expect(followersOf(stop.signal)).toBe(20);
    for (const answer of waiting) answer();
    await Promise.all(calls);
    // Each finished request let go of the caller's signal, and so did its listener.
    expect(followersOf(stop.signal)).toBe(0);
    expect(getEventListeners(stop.signal, "abort")).toHaveLength(0);
    stop.abort();
    await new Promise((resolve) => setImmediate(resolve));
    process.off("warning", onWarning);
    expect(warnings).toEqual([]);
  });
});
