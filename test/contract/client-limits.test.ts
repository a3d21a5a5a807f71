/**
 * The client's guard rails over real HTTP: the shared rate limit, request timeouts, the caller's
 * cancellation, TLS verification and its opt-out, and that the API key never leaks.
 */
import { Writable } from "node:stream";
import { inspect } from "node:util";
import { pino } from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { MAX_ERROR_DETAIL } from "../../src/api/attempt-failures.ts";
import { ServiceClient } from "../../src/api/client.ts";
import type { ServiceError } from "../../src/api/errors.ts";
import { ManualClock } from "../support/manual-clock.ts";
import { type FakeService, send, startFakeService, until } from "./client-fake-service.ts";
import { SELF_SIGNED } from "./client-tls-fixture.ts";

const ID = "0b6f3c2e-7d2a-4c59-9b8e-3f1a2b4c5d6e";

let service: FakeService | undefined;
afterEach(async () => {
  await service?.close();
  service = undefined;
});

describe("rate limit", () => {
  it("lets a burst through at once, then one request per 1/qps, shared by all callers", async () => {
    service = await startFakeService((_req, res) => send(res, 200, []));
    const clock = new ManualClock();
    const client = new ServiceClient({ baseUrl: service.url, qps: 10, burst: 2, clock });
    const calls = Array.from({ length: 6 }, () => client.listProviders());

    // Two go out at once; the other four are parked on the clock, not on the wire.
    await until(() => service?.requests.length === 2 && clock.pending === 4);
    expect(clock.sleeps).toEqual([100, 200, 300, 400]);

    clock.advance(100);
    await until(() => service?.requests.length === 3);
    clock.advance(200);
    await until(() => service?.requests.length === 5);
    expect(clock.pending).toBe(1);
    clock.advance(100);
    await Promise.all(calls);
    expect(service.requests).toHaveLength(6);
  });

  it("gives the slot back when a waiting caller gives up", async () => {
    service = await startFakeService((_req, res) => send(res, 200, []));
    const clock = new ManualClock();
    const client = new ServiceClient({ baseUrl: service.url, qps: 1, burst: 1, clock });
    await client.listProviders();
    const stop = new AbortController();
    const abandoned = client.listProviders({ signal: stop.signal });
    await until(() => clock.pending === 1);
    stop.abort(new Error("caller gave up"));
    await expect(abandoned).rejects.toThrow("caller gave up");
    clock.advance(1000);
    // One second later a token is there for the next caller: it goes out without waiting.
    await client.listProviders();
    expect(clock.sleeps).toEqual([1000]);
    expect(service.requests).toHaveLength(2);
  });
});

/**
 * The timeout of a call that must reach the service before it fires (its timer runs from before
 * the connection is made): a second, long past any stall of a loaded machine.
 */
const REACHED_TIMEOUT_MS = 1_000;

describe("timeouts and cancellation", () => {
  it("times out a read that gets no answer, retrying it, then reports timeout", async () => {
    service = await startFakeService(() => {});
    const client = new ServiceClient({
      baseUrl: service.url,
      timeoutMs: REACHED_TIMEOUT_MS,
      retries: 1,
      clock: new ManualClock({ sleepsInstantly: true }),
    });
    const error = (await client.listProviders().catch((e) => e)) as ServiceError;
    expect(error).toMatchObject({ kind: "timeout", retryable: true, maybeApplied: false });
    expect(error.message).toContain(`no complete response within ${REACHED_TIMEOUT_MS} ms`);
    expect(service.requests).toHaveLength(2);
  });

  it("does not repeat a PATCH that timed out, and says it may have been applied", async () => {
    service = await startFakeService(() => {});
    const client = new ServiceClient({ baseUrl: service.url, timeoutMs: REACHED_TIMEOUT_MS });
    const error = (await client.patchDeployment(ID, {}).catch((e) => e)) as ServiceError;
    expect(error).toMatchObject({ kind: "timeout", retryable: true, maybeApplied: true });
    expect(service.requests).toHaveLength(1);
  });

  it("times out a body that trickles in too slowly", async () => {
    service = await startFakeService((_req, res) => {
      res.writeHead(200, { "content-type": "application/json" });
      res.write("[");
    });
    const client = new ServiceClient({ baseUrl: service.url, timeoutMs: 150, retries: 0 });
    await expect(client.listProviders().catch((e: ServiceError) => e.kind)).resolves.toBe("timeout");
  });

  it("rejects with the caller's reason as soon as the caller aborts", async () => {
    service = await startFakeService(() => {});
    const client = new ServiceClient({ baseUrl: service.url, timeoutMs: 60_000 });
    const stop = new AbortController();
    const call = client.listProviders({ signal: stop.signal });
    await until(() => service?.requests.length === 1);
    const reason = new Error("shutting down");
    stop.abort(reason);
    await expect(call).rejects.toBe(reason);
  });
});

describe("TLS", () => {
  it("refuses a self-signed certificate by default, with a hint", async () => {
    service = await startFakeService((_req, res) => send(res, 200, []), SELF_SIGNED);
    const error = (await new ServiceClient({ baseUrl: service.url, retries: 3 })
      .listProviders()
      .catch((e) => e)) as ServiceError;
    expect(error).toMatchObject({ kind: "tls", tlsCode: "DEPTH_ZERO_SELF_SIGNED_CERT", retryable: false });
    expect(error.detail).toMatch(/TLS verification failed: .*self-signed.*--insecure-skip-tls-verify/);
    expect(service.requests).toHaveLength(0);
  });

  it("accepts it when verification is explicitly skipped", async () => {
    service = await startFakeService((_req, res) => send(res, 200, []), SELF_SIGNED);
    const client = new ServiceClient({ baseUrl: service.url, insecureSkipTlsVerify: true });
    await expect(client.listProviders()).resolves.toEqual([]);
  });
});

describe("API key redaction", () => {
  const KEY = "sk-live-7f3a9c0e1b2d4f6a8c";

  function capturedLogger() {
    const lines: string[] = [];
    const logger = pino(
      { level: "trace" },
      new Writable({
        write(chunk: Buffer, _encoding, done) {
          lines.push(chunk.toString());
          done();
        },
      }),
    );
    return { lines, logger };
  }

  it("keeps the start of a huge error answer, redacted, a key straddling either cut covered whole", async () => {
    // The key across the message's cut (500) and the detail's (4,096), and 7 MiB after them (the answer under the 8 MiB bound).
    const body = `${"x".repeat(495)}${KEY} ${"y".repeat(4_090 - 496 - KEY.length)}${KEY}${"z".repeat(7 << 20)}`;
    service = await startFakeService((_req, res) => {
      res.writeHead(400, { "content-type": "text/plain" });
      res.end(body);
    });
    const client = new ServiceClient({ baseUrl: service.url, apiKey: KEY, retries: 0 });
    const error = (await client.patchDeployment(ID, {}).catch((e) => e)) as ServiceError;
    expect(error.status).toBe(400);
    expect(error.detail.length).toBeLessThanOrEqual(MAX_ERROR_DETAIL);
    expect(error.detail.startsWith(`${"x".repeat(495)}[REDACTED] y`)).toBe(true);
    for (const text of [error.detail, error.message])
      for (let n = 4; n <= KEY.length; n++) expect(text).not.toContain(KEY.slice(0, n));
  });

  it("never shows the key in errors, causes, inspect output or logs", async () => {
    // A careless service echoes the key back in its error detail.
    service = await startFakeService((req, res, n) => {
      if (n === 1) send(res, 503, { detail: `backend busy for key ${req.headers["x-api-key"]}` });
      else if (n === 2) res.socket?.destroy();
      else send(res, 401, { detail: `invalid key ${req.headers["x-api-key"]}` });
    });
    const { lines, logger } = capturedLogger();
    const client = new ServiceClient({
      baseUrl: service.url,
      apiKey: KEY,
      logger,
      retries: 1,
      clock: new ManualClock({ sleepsInstantly: true }),
    });
    const readError = (await client.listProviders().catch((e) => e)) as ServiceError; // 503, then a reset
    const writeError = (await client.patchDeployment(ID, {}).catch((e) => e)) as ServiceError; // 401 echoing the key
    expect(service.requests.map((r) => r.headers["x-api-key"])).toEqual([KEY, KEY, KEY]);

    expect(readError.kind).toBe("network");
    expect(writeError.detail).toBe("invalid key [REDACTED]");
    const everything = [
      inspect(client, { showHidden: true, depth: Number.POSITIVE_INFINITY }),
      inspect(readError, { showHidden: true, depth: Number.POSITIVE_INFINITY }),
      inspect(writeError, { showHidden: true, depth: Number.POSITIVE_INFINITY }),
      JSON.stringify(readError),
      JSON.stringify(writeError),
      String(readError.stack),
      ...lines,
    ].join("\n");
    expect(lines.length).toBeGreaterThan(2);
    expect(everything).not.toContain(KEY);
    expect(everything).not.toContain(KEY.slice(4, 20));
  });
});
