/**
 * The host-name lookups of the service clients, over loopback: `dns.lookup` runs on libuv's few
 * threads, which a lookup holds until the resolver gives up, whatever the request's timeout. A
 * namespace whose names never answer holds only its share of them, and another namespace's service
 * is still reached. The pool is modelled in place of `dns.lookup` (no lookup leaves the machine).
 */
import dns from "node:dns";
import { afterEach, describe, expect, it } from "vitest";
import { ServiceClient } from "../../src/api/client.ts";
import { lookupLimits } from "../../src/api/lookups.ts";
import { type FakeService, send, startFakeService } from "./client-fake-service.ts";

type Answer = (error: NodeJS.ErrnoException | null, address: unknown, family?: number) => void;

const realLookup = dns.lookup;
let healthy: FakeService | undefined;
let release: () => void = () => {};
afterEach(async () => {
  release();
  dns.lookup = realLookup;
  await healthy?.close();
  healthy = undefined;
});

/** getaddrinfo on a pool of `size` threads, first come first served; `answers` gives a host's address, or none (never). */
function modelledPool(size: number, answers: (host: string) => string | undefined) {
  const pool = { busy: 0, queued: [] as Array<() => void>, hung: [] as Answer[] };
  const lookup = (host: string, options: { all?: boolean }, callback: Answer) => {
    const run = () => {
      pool.busy += 1;
      const address = answers(host);
      if (address === undefined) return void pool.hung.push(callback);
      setImmediate(() => {
        pool.busy -= 1;
        pool.queued.shift()?.();
        if (options.all) callback(null, [{ address, family: 4 }]);
        else callback(null, address, 4);
      });
    };
    if (pool.busy < size) run();
    else pool.queued.push(run);
  };
  release = () => {
    for (const callback of pool.hung.splice(0))
      callback(Object.assign(new Error("EAI_AGAIN"), { code: "EAI_AGAIN" }), "");
  };
  return { pool, lookup: lookup as unknown as typeof dns.lookup };
}

describe("a namespace whose service names never resolve", () => {
  it("holds only its share of the lookups: another namespace's service is reached", async () => {
    healthy = await startFakeService((_req, res) => send(res, 200, []));
    const port = new URL(healthy.url).port;
    const { pool, lookup } = modelledPool(4, (host) =>
      host === "healthy.example" ? "127.0.0.1" : undefined,
    );
    dns.lookup = lookup;
    const client = (host: string, owner: string, timeoutMs: number) =>
      new ServiceClient({
        baseUrl: `http://${host}`,
        addressPolicy: "allow-private",
        responseMemoryOwner: owner,
        retries: 0,
        timeoutMs,
      });
    // Namespace a: four connections, each to a name of its own whose server never answers.
    const calls = [0, 1, 2, 3].map((i) =>
      client(`never-${i}.example:1`, "namespace/a", 200)
        .listProviders()
        .then(
          () => "answered",
          (error: unknown) => String(error),
        ),
    );
    expect((await Promise.all(calls)).every((failure) => failure.includes("timeout"))).toBe(true);
    expect(pool.busy).toBe(lookupLimits().perOwner);
    // Namespace b's service, by name, on a connection of its own.
    await expect(client(`healthy.example:${port}`, "namespace/b", 5_000).listProviders()).resolves.toEqual(
      [],
    );
  });
});
