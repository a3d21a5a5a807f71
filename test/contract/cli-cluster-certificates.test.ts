// What a command says of an API server whose certificate Node refuses for a reason its CA does
// not mend: issued for other names than the kubeconfig's server, or out of its dates. Against a
// loopback HTTPS server with a certificate of a private CA the kubeconfig trusts.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:https";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { stringify } from "yaml";
import { ClusterClient } from "../../src/commands/cluster-errors.ts";
import { loadKubeConfig } from "../../src/kube/config.ts";
import { createTestCa, EXPIRED, type PemPair, type TestCa } from "../support/certificates.ts";

let dir: string;
let ca: TestCa;
const servers: Server[] = [];

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "dms-cli-certificates-"));
  ca = await createTestCa();
});

afterAll(async () => {
  for (const server of servers) await new Promise((resolve) => server.close(resolve));
  rmSync(dir, { recursive: true, force: true });
});

/** A loopback API server serving `leaf`, and a kubeconfig trusting the CA that signed it. */
async function serving(name: string, leaf: PemPair): Promise<{ server: string; path: string }> {
  const https = createServer({ cert: leaf.cert, key: leaf.key }, (_req, res) => res.end("{}"));
  servers.push(https);
  await new Promise<void>((resolve) => https.listen(0, "127.0.0.1", resolve));
  const server = `https://127.0.0.1:${(https.address() as AddressInfo).port}`;
  const path = join(dir, name);
  const config = {
    apiVersion: "v1",
    kind: "Config",
    clusters: [
      {
        name: "c",
        cluster: { server, "certificate-authority-data": Buffer.from(ca.cert).toString("base64") },
      },
    ],
    users: [{ name: "u", user: { token: "t" } }],
    contexts: [{ name: "ctx", context: { cluster: "c", user: "u" } }],
    "current-context": "ctx",
  };
  writeFileSync(path, stringify(config), { mode: 0o600 });
  return { server, path };
}

async function failure(path: string): Promise<string> {
  const loaded = loadKubeConfig({ kubeconfig: path });
  const client = new ClusterClient(loaded.config, loaded);
  return client.request({ method: "GET", path: "/api" }).then(
    () => "answered",
    (error: unknown) => (error instanceof Error ? error.message : String(error)),
  );
}

describe("an API server whose certificate its CA does not make acceptable", () => {
  it("issued for other names than the server's: names the server address, not the CA, as the fix", async () => {
    const { server, path } = await serving("other-names", await ca.leaf({ hosts: ["api.cluster.example"] }));
    const message = await failure(path);
    expect(message).toMatch(
      new RegExp(
        `^the API server ${server} \\(kubeconfig ${path}, context ctx\\) has a certificate issued for other names than its host \\(.*127\\.0\\.0\\.1.*\\): set the cluster's server in the kubeconfig to a name the certificate is issued for \\(or its tls-server-name to one\\), or pick another with --context or --kubeconfig$`,
      ),
    );
    expect(message).not.toContain("certificate-authority");
  });

  it("expired: says so and that the certificate is to be renewed, not the CA set", async () => {
    const { server, path } = await serving("expired", await ca.leaf(EXPIRED));
    const message = await failure(path);
    expect(message).toBe(
      `the API server ${server} (kubeconfig ${path}, context ctx) has a certificate outside its dates (certificate has expired): renew the API server's certificate (or check this machine's clock), or pick another with --context or --kubeconfig`,
    );
  });
});
