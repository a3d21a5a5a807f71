// Which addresses the service clients connect to: link-local and metadata addresses never,
// loopback and private ones unless --connection-address-policy=public-only. The connect-time
// check is tested with resolver stubs, under a guard that fails every TCP connect to anything but
// loopback before the system call: no test here sends a packet off the machine, even when the
// check under test is broken.
import http from "node:http";
import https from "node:https";
import { type AddressInfo, isIP, type LookupFunction } from "node:net";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import {
  ADDRESS_REFUSED,
  type AddressPolicy,
  classifyAddress,
  hostProblem,
  ipFamily,
} from "../../src/api/address-policy.ts";
import { ignoredNoProxyEntries, serviceAgents } from "../../src/api/agent.ts";
import { ServiceClient } from "../../src/api/client.ts";
import { ServiceError } from "../../src/api/errors.ts";
import { type ConnectProxy, startConnectProxy } from "../support/connect-proxy.ts";

describe("classifyAddress", () => {
  it.each([
    ["169.254.169.254", "metadata"],
    ["169.254.0.1", "metadata"],
    ["fe80::1", "metadata"],
    ["febf:ffff::1", "metadata"],
    ["fe80::1%eth0", "metadata"],
    ["::ffff:169.254.169.254", "metadata"],
    ["::ffff:a9fe:a9fe", "metadata"],
    ["0:0:0:0:0:ffff:a9fe:a9fe", "metadata"],
    ["::169.254.169.254", "metadata"],
    ["64:ff9b::a9fe:a9fe", "metadata"],
    ["100.100.100.200", "metadata"],
    ["fd00:ec2::254", "metadata"],
    ["fd20:ce::254", "metadata"],
    ["::ffff:0:169.254.169.254", "metadata"],
    ["::ffff:0:a9fe:a9fe", "metadata"],
    ["64:ff9b:1::a9fe:a9fe", "metadata"],
    ["64:ff9b:1:a9fe:a9:fe00::", "metadata"],
    ["64:ff9b:1:ffff::1", "metadata"],
    ["2002:a9fe:a9fe::", "metadata"],
    ["2002:a9fe:a9fe:1::1", "metadata"],
    ["168.63.129.16", "metadata"],
    ["::ffff:168.63.129.16", "metadata"],
    ["192.0.0.192", "metadata"],
    ["2002:c000:00c0::1", "metadata"],
    ["::ffff:0:10.0.0.1", "private"],
    ["2002:0a00:0001::1", "private"],
    ["2002:7f00:1::", "loopback"],
    ["2002:0808:0808::1", "public"],
    ["64:ff9b:2::a9fe:a9fe", "public"],
    ["168.63.129.17", "public"],
    ["192.0.0.193", "private"],
    ["127.0.0.1", "loopback"],
    ["127.255.0.9", "loopback"],
    ["::1", "loopback"],
    ["::ffff:127.0.0.1", "loopback"],
    ["0.0.0.0", "loopback"],
    ["::", "loopback"],
    ["10.96.0.1", "private"],
    ["172.16.5.4", "private"],
    ["172.31.255.255", "private"],
    ["192.168.1.1", "private"],
    ["100.64.0.1", "private"],
    ["fd12:3456::1", "private"],
    ["::ffff:10.0.0.1", "private"],
    ["64:ff9b::10.0.0.1", "private"],
    ["172.32.0.1", "public"],
    ["169.255.0.1", "public"],
    ["8.8.8.8", "public"],
    ["2001:db8::a9fe:a9fe", "public"],
    ["fec0::1", "private"],
    ["fe7f::1", "public"],
    ["2606:4700::1111", "public"],
  ])("%s is %s", (address, expected) => {
    expect(classifyAddress(address)?.class).toBe(expected);
  });

  it("is undefined for a name", () => {
    expect(classifyAddress("api.example.com")).toBeUndefined();
  });
});

describe("ipFamily", () => {
  it("answers as net.isIP does, names and malformed text included", () => {
    for (const text of [
      "127.0.0.1",
      "169.254.169.254",
      "::1",
      "fe80::1%eth0",
      "::ffff:169.254.169.254",
      "64:ff9b:1::a9fe:a9fe",
      "dms.example.test",
      "localhost",
      "1.2.3",
      "1.2.3.256",
      "[::1]",
      ":::",
      "",
    ])
      expect(ipFamily(text), text).toBe(isIP(text));
  });
});

describe("hostProblem", () => {
  it.each([
    "metadata.google.internal",
    "METADATA.Google.Internal.",
    "metadata",
    "metadata.azure.com",
    "instance-data",
    "169.254.169.254",
    "[fe80::1]",
    "[::ffff:a9fe:a9fe]",
    "[::ffff:0:169.254.169.254]",
    "[64:ff9b:1::a9fe:a9fe]",
    "[2002:a9fe:a9fe::1]",
    "168.63.129.16",
    "192.0.0.192",
  ])("refuses %s under either policy", (host) => {
    expect(hostProblem(host, "allow-private")).toMatch(/metadata/);
    expect(hostProblem(host, "public-only")).toMatch(/metadata/);
  });

  it.each(["127.0.0.1", "[::1]", "10.0.0.1", "192.168.0.10"])(
    "allows %s by default, refuses it under public-only",
    (host) => {
      expect(hostProblem(host, "allow-private")).toBeUndefined();
      expect(hostProblem(host, "public-only")).toMatch(/--connection-address-policy=public-only/);
    },
  );

  it("leaves names to the resolver", () => {
    expect(hostProblem("api.example.com", "public-only")).toBeUndefined();
    expect(hostProblem("metadata.example.com", "public-only")).toBeUndefined();
  });
});

// ---- connect time -------------------------------------------------------------------------------

type TcpHandle = { connect: (...args: unknown[]) => number; connect6: (...args: unknown[]) => number };
/** Node's TCP handle class: every outgoing TCP connection calls its connect or connect6. */
const { TCP } = (process as unknown as { binding(name: string): { TCP: { prototype: TcpHandle } } }).binding(
  "tcp_wrap",
);
const attempts: string[] = [];
const original = { connect: TCP.prototype.connect, connect6: TCP.prototype.connect6 };
const LOOPBACK = new Set(["127.0.0.1", "::1"]);
const UV_ECONNREFUSED = -111;

beforeAll(() => {
  // Records every connect and lets only loopback through: a refused address never reaches the
  // system call, so a broken check fails the test without a packet leaving.
  for (const method of ["connect", "connect6"] as const)
    TCP.prototype[method] = function (this: TcpHandle, ...args: unknown[]) {
      const address = String(args[1]);
      attempts.push(address);
      return LOOPBACK.has(address) ? original[method].apply(this, args) : UV_ECONNREFUSED;
    };
});
afterAll(() => Object.assign(TCP.prototype, original));
afterEach(() => {
  attempts.length = 0;
});

let server: http.Server;
let port: number;
beforeAll(async () => {
  server = http.createServer((_req, res) => res.end("ok"));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  port = (server.address() as AddressInfo).port;
});
afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

/** A resolver that answers `addresses` for every name, counting its calls. */
function stubResolver(addresses: string[]): LookupFunction & { calls: string[] } {
  const calls: string[] = [];
  const resolve = ((hostname: string, options: { all?: boolean }, callback: (...a: unknown[]) => void) => {
    calls.push(hostname);
    const answers = addresses.map((address) => ({ address, family: address.includes(":") ? 6 : 4 }));
    if (options.all) process.nextTick(callback, null, answers);
    else process.nextTick(callback, null, answers[0]?.address, answers[0]?.family);
  }) as unknown as LookupFunction & { calls: string[] };
  resolve.calls = calls;
  return resolve;
}

/** GET `url` through agents of `policy` resolving with `resolve`: the answer's body or the error. */
function get(url: string, policy: AddressPolicy, resolve: LookupFunction) {
  const agents = serviceAgents({ caBundle: undefined, proxyEnv: undefined, addressPolicy: policy, resolve });
  return new Promise<{ body?: string; error?: NodeJS.ErrnoException }>((done) => {
    http
      .get(url, { agent: agents.http }, (res) => {
        let body = "";
        res.on("data", (chunk) => {
          body += chunk;
        });
        res.on("end", () => done({ body }));
      })
      .on("error", (error) => done({ error }));
  }).finally(() => agents.http.destroy());
}

describe("serviceAgents under an address policy", () => {
  it("refuses a name that resolves to a link-local address, opening no socket", async () => {
    const resolve = stubResolver(["169.254.169.254"]);
    const { error } = await get(`http://dms.example.test:${port}/`, "allow-private", resolve);
    expect(error?.code).toBe(ADDRESS_REFUSED);
    expect(error?.message).toMatch(
      /dms\.example\.test resolves to 169\.254\.169\.254, which is a link-local address .*never connects/,
    );
    expect(resolve.calls).toEqual(["dms.example.test"]);
    expect(attempts).toEqual([]);
  });

  it.each([
    "::ffff:0:169.254.169.254",
    "64:ff9b:1::a9fe:a9fe",
    "2002:a9fe:a9fe::1",
    "168.63.129.16",
    "192.0.0.192",
  ])("refuses a name that resolves to %s, opening no socket", async (address) => {
    const resolve = stubResolver([address]);
    const { error } = await get(`http://dms.example.test:${port}/`, "allow-private", resolve);
    expect(error?.code).toBe(ADDRESS_REFUSED);
    expect(error?.message).toMatch(/never connects to link-local or metadata addresses/);
    expect(attempts).toEqual([]);
  });

  it("refuses the whole answer when one of its addresses is refused", async () => {
    const resolve = stubResolver(["127.0.0.1", "fe80::a9fe"]);
    const { error } = await get(`http://dms.example.test:${port}/`, "allow-private", resolve);
    expect(error?.code).toBe(ADDRESS_REFUSED);
    expect(attempts).toEqual([]);
  });

  it.each([
    "http://169.254.169.254/latest/meta-data/",
    "http://0xa9fea9fe/",
    "http://2852039166/",
    "http://[::ffff:169.254.169.254]/",
    "http://[fe80::1]/",
    "http://metadata.google.internal/computeMetadata/v1/",
    "http://１６９。２５４。１６９。２５４/",
    "http://[2002:a9fe:a9fe::]/",
    "http://168.63.129.16/machine/",
  ])("refuses %s without resolving it or opening a socket", async (url) => {
    const resolve = stubResolver(["127.0.0.1"]);
    const { error } = await get(url, "allow-private", resolve);
    expect(error?.code).toBe(ADDRESS_REFUSED);
    expect(resolve.calls).toEqual([]);
    expect(attempts).toEqual([]);
  });

  it("connects to a name that resolves to loopback by default", async () => {
    const resolve = stubResolver(["127.0.0.1"]);
    const result = await get(`http://dms.example.test:${port}/`, "allow-private", resolve);
    expect(result).toEqual({ body: "ok" });
    expect(attempts).toEqual(["127.0.0.1"]);
  });

  it("refuses loopback and private answers under public-only", async () => {
    for (const address of ["127.0.0.1", "10.1.2.3"]) {
      const { error } = await get(`http://dms.example.test:${port}/`, "public-only", stubResolver([address]));
      expect(error?.code).toBe(ADDRESS_REFUSED);
      expect(error?.message).toMatch(/--connection-address-policy=public-only/);
    }
    const literal = await get(`http://127.0.0.1:${port}/`, "public-only", stubResolver([]));
    expect(literal.error?.code).toBe(ADDRESS_REFUSED);
    expect(attempts).toEqual([]);
  });

  it("fails a service client's call with a network error naming the refusal", async () => {
    const client = new ServiceClient({
      baseUrl: "http://169.254.169.254",
      apiKey: "a-key-of-the-tenant",
      retries: 0,
      addressPolicy: "allow-private",
    });
    const error = await client.listProviders().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ServiceError);
    expect((error as ServiceError).kind).toBe("network");
    expect((error as ServiceError).detail).toMatch(/ERR_ADDRESS_REFUSED: 169\.254\.169\.254 is a link-local/);
    expect(((error as ServiceError).cause as { code?: string }).code).toBe(ADDRESS_REFUSED);
    expect(attempts).toEqual([]);
  });
});

describe("ignoredNoProxyEntries", () => {
  it("names the CIDRs and bracketed addresses Node ignores, with what to write instead", () => {
    expect(
      ignoredNoProxyEntries(
        "localhost, .svc,10.0.0.0/8,*.example.com,172.20.1.0/22,fd00::/8,[::1],10.0.0.0-10.0.0.9",
      ),
    ).toEqual([
      { entry: "10.0.0.0/8", fix: expect.stringContaining("10.0.0.0-10.255.255.255") },
      { entry: "172.20.1.0/22", fix: expect.stringContaining("172.20.0.0-172.20.3.255") },
      { entry: "fd00::/8", fix: expect.stringContaining("no CIDR") },
      { entry: "[::1]", fix: expect.stringContaining("(::1)") },
    ]);
  });
});

describe("serviceAgents through a proxy under an address policy", () => {
  /** GET `url` over HTTPS through `proxy` (its CONNECT refused): the error. */
  const viaProxy = (
    url: string,
    proxyUrl: string,
    resolve: LookupFunction,
    policy: AddressPolicy = "public-only",
  ) => {
    const agents = serviceAgents({
      caBundle: undefined,
      proxyEnv: { HTTPS_PROXY: proxyUrl },
      addressPolicy: policy,
      resolve,
    });
    return new Promise<NodeJS.ErrnoException | undefined>((done) => {
      https
        .get(url, { agent: agents.https }, (res) => {
          res.resume();
          done(undefined);
        })
        .on("error", done);
    }).finally(() => agents.https.destroy());
  };

  /** Runs `body` with a loopback CONNECT proxy started with `options`, closed after. */
  const withProxy = async (options: { refuse?: boolean }, body: (proxy: ConnectProxy) => Promise<void>) => {
    const proxy = await startConnectProxy(options);
    try {
      await body(proxy);
    } finally {
      await proxy.close();
    }
  };

  /** GET `http://tenant.example.test/` through the HTTP proxy `proxyUrl`: its status or the error. */
  const plainViaProxy = (proxyUrl: string, resolve: LookupFunction) => {
    const agents = serviceAgents({
      caBundle: undefined,
      proxyEnv: { HTTP_PROXY: proxyUrl },
      addressPolicy: "allow-private",
      resolve,
    });
    return new Promise<{ status?: number; error?: NodeJS.ErrnoException }>((done) => {
      http
        .get("http://tenant.example.test/", { agent: agents.http }, (res) => {
          res.resume();
          done(res.statusCode === undefined ? {} : { status: res.statusCode });
        })
        .on("error", (error) => done({ error }));
    }).finally(() => agents.http.destroy());
  };

  it("resolves a name first and sends the proxy only a name whose answers pass, and refuses a literal before any CONNECT", async () =>
    withProxy({ refuse: true }, async (proxy) => {
      // A public answer: the proxy is sent the name, not the address.
      const resolve = stubResolver(["203.0.113.10"]);
      const named = await viaProxy("https://dms.example.test/v2", proxy.url, resolve);
      expect(named?.code).not.toBe(ADDRESS_REFUSED);
      expect(proxy.tunnels).toEqual(["dms.example.test:443"]);
      expect(resolve.calls).toEqual(["dms.example.test"]);

      const literal = await viaProxy("https://169.254.169.254/latest", proxy.url, resolve);
      expect(literal?.code).toBe(ADDRESS_REFUSED);
      const metadata = await viaProxy("https://metadata.google.internal/", proxy.url, resolve);
      expect(metadata?.code).toBe(ADDRESS_REFUSED);
      expect(proxy.tunnels).toEqual(["dms.example.test:443"]);
      expect(attempts.every((address) => LOOPBACK.has(address))).toBe(true);
    }));

  it.each([
    ["a link-local address", "169.254.169.254", "allow-private"],
    ["a link-local IPv6 address", "fe80::1", "allow-private"],
    ["a private address, with public-only", "10.0.0.5", "public-only"],
  ] as const)("refuses a name that resolves to %s before any CONNECT", async (_what, address, policy) =>
    withProxy({}, async (proxy) => {
      const resolve = stubResolver(["203.0.113.10", address]);
      const error = await viaProxy("https://tenant.example.test/v2", proxy.url, resolve, policy);
      expect(error?.code).toBe(ADDRESS_REFUSED);
      expect(error?.message).toContain(address);
      expect(resolve.calls).toEqual(["tenant.example.test"]);
      expect(proxy.tunnels).toEqual([]);
      expect(attempts).toEqual([]);
    }),
  );

  it("sends no name it cannot resolve, and checks the name of a plain HTTP call through the proxy too", async () =>
    withProxy({}, async (proxy) => {
      const unresolvable = ((_h: string, _o: unknown, callback: (e: Error) => void) =>
        process.nextTick(
          callback,
          Object.assign(new Error("getaddrinfo ENOTFOUND"), { code: "ENOTFOUND" }),
        )) as unknown as LookupFunction;
      const error = await viaProxy("https://nowhere.example.test/", proxy.url, unresolvable);
      expect(error?.code).toBe("ENOTFOUND");
      expect(proxy.tunnels).toEqual([]);

      const plain = await plainViaProxy(proxy.url, stubResolver(["169.254.169.254"]));
      expect(plain.error?.code).toBe(ADDRESS_REFUSED);
      expect(attempts).toEqual([]);
    }));

  it("hands a plain HTTP call's socket to the proxy once the name passed", async () =>
    withProxy({}, async (proxy) => {
      // The loopback proxy answers 405 to anything but CONNECT: the request reached it.
      const { status } = await plainViaProxy(proxy.url, stubResolver(["203.0.113.10"]));
      expect(status).toBe(405);
      expect(attempts.every((address) => LOOPBACK.has(address))).toBe(true);
    }));
});
