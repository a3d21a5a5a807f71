/**
 * A client closed (its connection's settings changed, or the connection was deleted) sends
 * nothing more: a call in flight is cut at once, its socket destroyed, and a later call fails
 * `unavailable` with the reason given, unsent. Over loopback, against a server that never answers.
 */
import http from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { ServiceClient } from "../../src/api/client.ts";
import { ServiceError } from "../../src/api/errors.ts";

const servers: http.Server[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) {
    s.closeAllConnections();
    await new Promise((resolve) => s.close(resolve));
  }
});

/** A server that reads each request and never answers; counts them and its open sockets. */
async function silentServer() {
  const seen = { requests: 0, open: new Set<Socket>() };
  const server = http.createServer(() => {
    seen.requests += 1;
  });
  server.on("connection", (socket) => {
    seen.open.add(socket);
    socket.once("close", () => seen.open.delete(socket));
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}`, seen };
}

const until = async (done: () => boolean) => {
  for (let i = 0; i < 200 && !done(); i++) await new Promise((r) => setTimeout(r, 10));
  return done();
};

describe("ServiceClient.close", () => {
  it("cuts the call in flight, frees its socket, and sends no later call", async () => {
    const { url, seen } = await silentServer();
    const client = new ServiceClient({ baseUrl: url, apiKey: "old-key", retries: 0, timeoutMs: 60_000 });
    const inFlight = client.listProviders().catch((e: unknown) => e);
    expect(await until(() => seen.requests === 1)).toBe(true);

    client.close("the connection's settings changed");
    // Cut by the close: its connection destroyed, not its 60 s timeout run out (the test's own
    // timeout, far shorter, bounds a hang).
    const cut = await inFlight;
    expect(cut).toBeInstanceOf(ServiceError);
    expect(cut).toMatchObject({ kind: "network" });
    expect(await until(() => seen.open.size === 0)).toBe(true);

    const later = await client.getDeployment("d0000000-0000-4000-8000-000000000001").catch((e: unknown) => e);
    expect(later).toBeInstanceOf(ServiceError);
    expect(later).toMatchObject({ kind: "unavailable", retryable: true });
    expect((later as Error).message).toContain("the connection's settings changed");
    expect(seen.requests).toBe(1);
  });
});
