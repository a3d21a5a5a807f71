/**
 * A self-hosted service behind a private CA and an egress proxy, over loopback HTTPS: the client
 * refuses a certificate it cannot trust and says why (unknown authority, expired, not yet valid,
 * another host's), trusts a CA given to it (`caBundle`, `--ca-file`), and sends its calls through
 * `HTTPS_PROXY` unless `NO_PROXY` names the host; a CA given to the whole process with
 * `NODE_EXTRA_CA_CERTS` stays trusted beside a connection's own. Certificates are made by the test.
 */
import { execFile } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import tls from "node:tls";
import { promisify } from "node:util";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { ServiceClient } from "../../src/api/client.ts";
import type { ServiceError } from "../../src/api/errors.ts";
import { registerProvidersCommand } from "../../src/commands/providers.ts";
import { startSimulator } from "../../src/simulator/server.ts";
import {
  createSelfSigned,
  createTestCa,
  EXPIRED,
  NOT_YET_VALID,
  type PemPair,
  type TestCa,
} from "../support/certificates.ts";
import { runCli } from "../support/cli.ts";
import { type ConnectProxy, startConnectProxy } from "../support/connect-proxy.ts";
import { nodeCacheEnv } from "../support/node-env.ts";
import { type FakeService, send, startFakeService } from "./client-fake-service.ts";
import {
  clusterServiceConnectionPath,
  secretObject,
  secretPath,
  serviceConnectionPath,
  startFakeKube,
} from "./fake-kube.ts";
import { cli } from "./gitops-fixture.ts";

/** What the simulator is seeded with; the fake service answers an empty listing. */
const PROVIDERS = [{ provider_id: "github", name: "GitHub" }];

let ca: TestCa;
let otherCa: TestCa;
let leaf: PemPair;
let dir: string;
let service: FakeService | undefined;
let proxy: ConnectProxy | undefined;

beforeAll(async () => {
  ca = await createTestCa("Corp Root CA");
  otherCa = await createTestCa("Someone Else's CA");
  leaf = await ca.leaf();
  dir = await mkdtemp(join(tmpdir(), "dms-ca-"));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});
afterEach(async () => {
  await service?.close();
  await proxy?.close();
  service = undefined;
  proxy = undefined;
});

const serve = (pair: PemPair) => startFakeService((_req, res) => send(res, 200, []), pair);
const failure = (call: Promise<unknown>) =>
  call.then(
    () => {
      throw new Error("the call succeeded");
    },
    (error: unknown) => error as ServiceError,
  );

describe("a service whose certificate a private CA signed", () => {
  it("is refused without the CA, naming the unknown authority and the fix, with no request sent", async () => {
    service = await serve(leaf);
    const error = await failure(new ServiceClient({ baseUrl: service.url, retries: 2 }).listProviders());
    expect(error).toMatchObject({
      kind: "tls",
      tlsCode: "UNABLE_TO_VERIFY_LEAF_SIGNATURE",
      retryable: false,
    });
    expect(error.detail).toContain("signed by an authority that is not trusted (unknown authority)");
    expect(error.detail).toContain("pass --ca-file (env DMS_CA_FILE) with the CA that signed it");
    expect(service.requests).toHaveLength(0);
  });

  it("is reached with the CA as caBundle, through one kept-alive connection", async () => {
    service = await serve(leaf);
    const client = new ServiceClient({ baseUrl: service.url, caBundle: ca.cert });
    await expect(client.listProviders()).resolves.toEqual([]);
    await expect(client.listProviders()).resolves.toEqual([]);
    expect(service.requests).toHaveLength(2);
  });

  it("parses its CAs once, not again for each new connection (a service closing every one)", async () => {
    service = await startFakeService((_req, res) => send(res, 200, [], { connection: "close" }), leaf);
    const contexts: number[] = [];
    const original = tls.createSecureContext;
    tls.createSecureContext = ((options?: tls.SecureContextOptions) => {
      if (options?.ca !== undefined) contexts.push(Array.isArray(options.ca) ? options.ca.length : 1);
      return original(options);
    }) as typeof tls.createSecureContext;
    try {
      const client = new ServiceClient({ baseUrl: service.url, caBundle: ca.cert });
      for (let i = 0; i < 5; i++) await expect(client.listProviders()).resolves.toEqual([]);
    } finally {
      tls.createSecureContext = original;
    }
    // Five connections, one context made: every default root and the bundle, parsed once.
    expect(service.requests).toHaveLength(5);
    expect(contexts).toHaveLength(1);
    expect(contexts[0]).toBeGreaterThan(1);
  });

  it("does not lend its CA to another client of the same process", async () => {
    service = await serve(leaf);
    await new ServiceClient({ baseUrl: service.url, caBundle: ca.cert }).listProviders();
    const error = await failure(new ServiceClient({ baseUrl: service.url }).listProviders());
    expect(error.kind).toBe("tls");
  });

  it("says another CA does not sign it when the bundle holds the wrong one", async () => {
    service = await serve(leaf);
    const client = new ServiceClient({ baseUrl: service.url, caBundle: otherCa.cert });
    const error = await failure(client.listProviders());
    expect(error.kind).toBe("tls");
    expect(error.detail).toContain("the CA of --ca-file (env DMS_CA_FILE) does not sign it");
  });

  it("names an expired certificate", async () => {
    service = await serve(await ca.leaf(EXPIRED));
    const error = await failure(
      new ServiceClient({ baseUrl: service.url, caBundle: ca.cert }).listProviders(),
    );
    expect(error).toMatchObject({ kind: "tls", tlsCode: "CERT_HAS_EXPIRED" });
    expect(error.detail).toContain("has expired");
    expect(error.detail).toContain("renew the service's certificate");
  });

  it("names a certificate that is not valid yet", async () => {
    service = await serve(await ca.leaf(NOT_YET_VALID));
    const error = await failure(
      new ServiceClient({ baseUrl: service.url, caBundle: ca.cert }).listProviders(),
    );
    expect(error).toMatchObject({ kind: "tls", tlsCode: "CERT_NOT_YET_VALID" });
    expect(error.detail).toContain("not valid yet");
  });

  it("names a certificate issued for another host", async () => {
    service = await serve(await ca.leaf({ hosts: ["dms.corp.example"] }));
    const error = await failure(
      new ServiceClient({ baseUrl: service.url, caBundle: ca.cert }).listProviders(),
    );
    expect(error).toMatchObject({ kind: "tls", tlsCode: "ERR_TLS_CERT_ALTNAME_INVALID" });
    expect(error.detail).toContain("the service's certificate is not for 127.0.0.1");
  });

  it("trusts a self-signed certificate given as its own CA, and names it when not given", async () => {
    const self = await createSelfSigned();
    service = await serve(self);
    const error = await failure(new ServiceClient({ baseUrl: service.url }).listProviders());
    expect(error).toMatchObject({ kind: "tls", tlsCode: "DEPTH_ZERO_SELF_SIGNED_CERT" });
    expect(error.detail).toContain("self-signed");
    await expect(
      new ServiceClient({ baseUrl: service.url, caBundle: self.cert }).listProviders(),
    ).resolves.toEqual([]);
  });
});

describe("the CLI's --ca-file", () => {
  const providers = (env: Record<string, string>) =>
    runCli(["providers", "list", "-o", "json"], { commands: [registerProvidersCommand], env });

  it("lets a command reach the service; without it, the command prints the cause and the fix", async () => {
    const sim = await startSimulator({ tls: leaf, seed: { providers: PROVIDERS } });
    try {
      const file = join(dir, "ca.crt");
      await writeFile(file, ca.cert);
      const without = await providers({ DMS_BASE_URL: sim.url });
      expect(without.code).not.toBe(0);
      expect(without.stderr).toContain("unknown authority");
      expect(without.stderr).toContain("--ca-file");
      const withCa = await providers({ DMS_BASE_URL: `${sim.url}/`, DMS_CA_FILE: file });
      expect(withCa.stderr).toBe("");
      expect(JSON.parse(withCa.stdout)).toMatchObject([{ provider_id: "github" }]);
    } finally {
      await sim.close();
    }
  });

  it("refuses a file that is not PEM certificates, naming the bad one, before any call", async () => {
    const file = join(dir, "bad.crt");
    await writeFile(
      file,
      `${ca.cert}-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydGlmaWNhdGU=\n-----END CERTIFICATE-----\n`,
    );
    const run = await providers({ DMS_BASE_URL: "https://127.0.0.1:9", DMS_CA_FILE: file });
    expect(run.code).toBe(1);
    expect(run.stderr).toContain(
      `--ca-file / DMS_CA_FILE ${file}: certificate 2 is not a valid X.509 certificate`,
    );
  });
});

describe("NODE_EXTRA_CA_CERTS beside a connection's own CA", () => {
  const CLI = join(import.meta.dirname, "..", "..", "src", "cli.ts");
  /** `providers list` in a new process (Node reads NODE_EXTRA_CA_CERTS at its start). */
  async function providersProcess(env: Record<string, string>) {
    try {
      const { stdout, stderr } = await promisify(execFile)(
        process.execPath,
        [CLI, "providers", "list", "-o", "json"],
        { env: { PATH: process.env.PATH ?? "", ...nodeCacheEnv(), ...env } },
      );
      return { code: 0, stdout, stderr };
    } catch (error) {
      const e = error as { code: number; stdout: string; stderr: string };
      return { code: e.code, stdout: e.stdout, stderr: e.stderr };
    }
  }

  it("a process trusting CA1 by NODE_EXTRA_CA_CERTS reaches services of CA1 and of CA2, the --ca-file", async () => {
    const extraFile = join(dir, "extra-ca1.crt");
    const bundleFile = join(dir, "bundle-ca2.crt");
    await writeFile(extraFile, ca.cert);
    await writeFile(bundleFile, otherCa.cert);
    const ofCa1 = await startSimulator({ tls: leaf, seed: { providers: PROVIDERS } });
    const ofCa2 = await startSimulator({ tls: await otherCa.leaf(), seed: { providers: PROVIDERS } });
    try {
      for (const sim of [ofCa1, ofCa2]) {
        const run = await providersProcess({
          NODE_EXTRA_CA_CERTS: extraFile,
          DMS_BASE_URL: sim.url,
          DMS_CA_FILE: bundleFile,
        });
        expect(run.stderr, sim.url).toBe("");
        expect(JSON.parse(run.stdout)).toMatchObject([{ provider_id: "github" }]);
      }
      // Without NODE_EXTRA_CA_CERTS, the bundle alone does not reach the service of CA1.
      const alone = await providersProcess({ DMS_BASE_URL: ofCa1.url, DMS_CA_FILE: bundleFile });
      expect(alone.code).not.toBe(0);
      expect(alone.stderr).toContain("unknown authority");
    } finally {
      await ofCa1.close();
      await ofCa2.close();
    }
  });
});

describe("HTTPS_PROXY and NO_PROXY", () => {
  it("send the calls through the proxy's tunnel, the CA still verifying the service", async () => {
    service = await serve(leaf);
    proxy = await startConnectProxy();
    const host = new URL(service.url).host;
    const client = new ServiceClient({
      baseUrl: service.url,
      caBundle: ca.cert,
      proxyEnv: { HTTPS_PROXY: proxy.url },
    });
    await expect(client.listProviders()).resolves.toEqual([]);
    await expect(client.listProviders()).resolves.toEqual([]);
    // Kept alive: the second call reuses the tunnel.
    expect(proxy.tunnels).toEqual([host]);
    expect(service.requests).toHaveLength(2);
  });

  it("resolve a name first under the operator's address policy, then tunnel to the name", async () => {
    service = await serve(leaf);
    proxy = await startConnectProxy();
    const host = `localhost:${new URL(service.url).port}`;
    const client = new ServiceClient({
      baseUrl: `https://${host}`,
      caBundle: ca.cert,
      proxyEnv: { HTTPS_PROXY: proxy.url },
      addressPolicy: "allow-private",
    });
    // The socket is handed over once the tunnel is up: both calls answered, the tunnel reused.
    await expect(client.listProviders()).resolves.toEqual([]);
    await expect(client.listProviders()).resolves.toEqual([]);
    expect(proxy.tunnels).toEqual([host]);
    expect(service.requests).toHaveLength(2);
  });

  it("go around the proxy for a host NO_PROXY names", async () => {
    service = await serve(leaf);
    proxy = await startConnectProxy();
    const client = new ServiceClient({
      baseUrl: service.url,
      caBundle: ca.cert,
      proxyEnv: { HTTPS_PROXY: proxy.url, NO_PROXY: "localhost,127.0.0.1" },
    });
    await expect(client.listProviders()).resolves.toEqual([]);
    expect(proxy.tunnels).toEqual([]);
    expect(service.requests).toHaveLength(1);
  });

  it("fail clearly when the proxy refuses the tunnel", async () => {
    service = await serve(leaf);
    proxy = await startConnectProxy({ refuse: true });
    const client = new ServiceClient({
      baseUrl: service.url,
      caBundle: ca.cert,
      retries: 0,
      proxyEnv: { HTTPS_PROXY: proxy.url },
    });
    const error = await failure(client.listProviders());
    expect(error.kind).toBe("network");
    expect(error.detail).toMatch(/^the proxy failed \(ERR_PROXY_TUNNEL\)/);
    expect(error.detail).toContain("check HTTPS_PROXY / HTTP_PROXY");
    expect(service.requests).toHaveLength(0);
  });

  it("reach the CLI's calls from the environment", async () => {
    service = await serve(leaf);
    proxy = await startConnectProxy();
    const file = join(dir, "proxy-ca.crt");
    await writeFile(file, ca.cert);
    const run = await runCli(["providers", "list", "-o", "json"], {
      commands: [registerProvidersCommand],
      env: { DMS_BASE_URL: service.url, DMS_CA_FILE: file, https_proxy: proxy.url },
    });
    expect(run.stderr).toBe("");
    expect(proxy.tunnels).toEqual([new URL(service.url).host]);
  });
});

describe("import --connection through a connection behind a private CA", () => {
  it("reads the CA Secret spec.caSecretRef names and trusts it; a missing one is named with the fix", async () => {
    const sim = await startSimulator({
      tls: leaf,
      apiKey: "tenant-key",
      seed: {
        deployments: [
          {
            name: "summarizer",
            source: "internal_docker",
            source_config: {},
            source_revision_config: { image_uri: "s:1" },
          },
        ],
      },
    });
    const kube = await startFakeKube({ namespace: "team-a" });
    try {
      kube.put(serviceConnectionPath("team-a", "self-hosted"), {
        metadata: { name: "self-hosted", namespace: "team-a", resourceVersion: "1" },
        spec: {
          baseUrl: sim.url,
          apiKeySecretRef: { name: "dms-key", key: "apiKey" },
          caSecretRef: { name: "corp-ca", key: "ca.crt" },
        },
      });
      kube.put(secretPath("team-a", "dms-key"), secretObject("team-a", "dms-key", { apiKey: "tenant-key" }));
      kube.put(secretPath("team-a", "corp-ca"), secretObject("team-a", "corp-ca", { "ca.crt": ca.cert }));
      kube.put(clusterServiceConnectionPath("no-ca"), {
        metadata: { name: "no-ca", resourceVersion: "1" },
        spec: {
          baseUrl: sim.url,
          apiKeySecretRef: { name: "dms-key", key: "apiKey", namespace: "team-a" },
          caSecretRef: { name: "gone", key: "ca.crt", namespace: "pki" },
        },
      });
      const imported = await cli("http://unused.invalid", [
        "import",
        "--kubeconfig",
        kube.kubeconfig,
        "--connection",
        "ServiceConnection/self-hosted",
      ]);
      expect(imported.stderr).toBe(
        "imported 1 deployment(s) through ServiceConnection team-a/self-hosted, skipped 0\n",
      );
      expect(imported.code).toBe(0);
      const missing = await cli("http://unused.invalid", [
        "import",
        "--kubeconfig",
        kube.kubeconfig,
        "--connection",
        "ClusterServiceConnection/no-ca",
      ]);
      expect(missing.code).not.toBe(0);
      expect(missing.stderr).toContain(
        "Secret pki/gone, named by ClusterServiceConnection no-ca (spec.caSecretRef), not found: create it with the CA's PEM certificates under key ca.crt",
      );
    } finally {
      await kube.close();
      await sim.close();
    }
  });
});
