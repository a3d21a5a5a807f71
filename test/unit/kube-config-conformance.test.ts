/**
 * The hand-written kubeconfig loader against client-node's, shape by shape: for each kubeconfig
 * a user may hand the operator, what each would send to the API server (server, TLS material,
 * verification, SNI name, authentication headers, proxy). They must agree, except where the table
 * says why ours follows kubectl (client-go) instead.
 */
import { mkdtempSync, writeFileSync } from "node:fs";
import type { RequestOptions } from "node:https";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { KubeConfig } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import { stringify } from "yaml";
import { loadKubeConfig } from "../../src/kube/config.ts";

const dir = mkdtempSync(join(tmpdir(), "kube-config-conformance-"));
const b64 = (text: string) => Buffer.from(text).toString("base64");

/** Files next to the kubeconfig, named relatively in it (both loaders resolve them against it). */
writeFileSync(join(dir, "ca.pem"), "CA FROM FILE");
writeFileSync(join(dir, "client.pem"), "CERT FROM FILE");
writeFileSync(join(dir, "client-key.pem"), "KEY FROM FILE");
writeFileSync(join(dir, "token"), "token-from-file\n");
const plugin = join(dir, "plugin.mjs");
writeFileSync(
  plugin,
  `process.stdout.write(JSON.stringify({ apiVersion: "client.authentication.k8s.io/v1", kind: "ExecCredential", status: { token: "from-exec" } }));`,
);
/** An OIDC id-token that is not expired (client-node reads `exp` to decide whether to refresh). */
const idToken = [
  b64(JSON.stringify({ alg: "none" })),
  b64(JSON.stringify({ exp: 4_102_444_800, iss: "https://issuer.example" })),
  "",
].join(".");

/** What a request would carry: the parts of `https.RequestOptions` the API server sees. */
interface Sent {
  server: string | undefined;
  ca?: string;
  cert?: string;
  key?: string;
  rejectUnauthorized?: boolean;
  servername?: string;
  authorization?: string;
  basicAuth?: string;
  impersonate?: string;
  proxy?: string;
}

function sent(server: string | undefined, options: RequestOptions): Sent {
  const headers = (options.headers ?? {}) as Record<string, unknown>;
  const text = (v: unknown) => (v === undefined || v === null ? undefined : String(v));
  const agent = options.agent as { proxy?: URL } | undefined;
  const out: Sent = {
    server: server?.replace(/\/+$/, ""),
    ca: text(options.ca),
    cert: text(options.cert),
    key: text(options.key),
    rejectUnauthorized: options.rejectUnauthorized,
    servername: options.servername,
    authorization: text(headers.Authorization),
    basicAuth: options.auth ?? undefined,
    impersonate: text(headers["Impersonate-User"]),
    proxy: agent?.proxy?.href,
  };
  for (const key of Object.keys(out) as (keyof Sent)[]) if (out[key] === undefined) delete out[key];
  return out;
}

async function ours(path: string): Promise<Sent> {
  const loaded = loadKubeConfig({ kubeconfig: path }, { env: {} });
  const options: RequestOptions = {};
  await loaded.config.applyToHTTPSOptions(options);
  return sent(loaded.server, options);
}

async function clientNode(path: string): Promise<Sent> {
  const kc = new KubeConfig();
  kc.loadFromFile(path);
  const options: RequestOptions = {};
  await kc.applyToHTTPSOptions(options);
  return sent(kc.getCurrentCluster()?.server, options);
}

let n = 0;
function kubeconfig(cluster: Record<string, unknown>, user: Record<string, unknown>): string {
  const path = join(dir, `config-${n++}`);
  writeFileSync(
    path,
    stringify({
      apiVersion: "v1",
      kind: "Config",
      clusters: [{ name: "c", cluster: { server: "https://api.example:6443", ...cluster } }],
      users: [{ name: "u", user }],
      contexts: [{ name: "ctx", context: { cluster: "c", user: "u" } }],
      "current-context": "ctx",
    }),
  );
  return path;
}

const caData = { "certificate-authority-data": b64("CA PEM") };

/** Shapes on which both loaders must send exactly the same. */
const same: [string, Record<string, unknown>, Record<string, unknown>, Partial<Sent>][] = [
  ["bearer token", caData, { token: "t0k" }, { authorization: "Bearer t0k" }],
  ["CA as data", caData, {}, { ca: "CA PEM" }],
  ["CA as a relative file", { "certificate-authority": "ca.pem" }, {}, { ca: "CA FROM FILE" }],
  [
    "client certificate and key as data",
    caData,
    { "client-certificate-data": b64("CERT PEM"), "client-key-data": b64("KEY PEM") },
    { cert: "CERT PEM", key: "KEY PEM" },
  ],
  [
    "client certificate and key as relative files",
    caData,
    { "client-certificate": "client.pem", "client-key": "client-key.pem" },
    { cert: "CERT FROM FILE", key: "KEY FROM FILE" },
  ],
  [
    "insecure-skip-tls-verify",
    { "insecure-skip-tls-verify": true },
    { token: "t" },
    { rejectUnauthorized: false },
  ],
  ["tls-server-name", { ...caData, "tls-server-name": "api.internal" }, {}, { servername: "api.internal" }],
  [
    "exec plugin",
    caData,
    {
      exec: {
        apiVersion: "client.authentication.k8s.io/v1",
        command: process.execPath,
        args: [plugin],
        interactiveMode: "Never",
      },
    },
    { authorization: "Bearer from-exec" },
  ],
  [
    "auth provider (oidc, token still valid)",
    caData,
    {
      "auth-provider": {
        name: "oidc",
        config: { "id-token": idToken, "idp-issuer-url": "https://issuer.example", "client-id": "k" },
      },
    },
    { authorization: `Bearer ${idToken}` },
  ],
  ["basic auth", caData, { username: "admin", password: "secret" }, { basicAuth: "admin:secret" }],
  ["impersonation", caData, { token: "t", as: "jane" }, { impersonate: "jane" }],
  [
    "proxy-url",
    { ...caData, "proxy-url": "http://proxy.internal:3128" },
    { token: "t" },
    { proxy: "http://proxy.internal:3128/" },
  ],
];

/** Shapes on which ours follows kubectl (client-go) and client-node does not. */
const differ: [
  string,
  Record<string, unknown>,
  Record<string, unknown>,
  Partial<Sent>,
  Partial<Sent>,
  string,
][] = [
  [
    "tokenFile (kubectl's field name)",
    caData,
    { tokenFile: "token" },
    { authorization: "Bearer token-from-file" },
    { authorization: undefined },
    "client-node reads only `token-file`, which kubectl does not know; ours reads both, and re-reads the file as it rotates",
  ],
  [
    "CA given both as data and as a file",
    { ...caData, "certificate-authority": "ca.pem" },
    {},
    { ca: "CA PEM" },
    { ca: "CA FROM FILE" },
    "client-go: inline *-data overrides the file; client-node reads the file first",
  ],
];

describe("kubeconfig shapes: ours sends what client-node sends", () => {
  it.each(same)(
    "%s",
    async (_shape, cluster, user, expected) => {
      const path = kubeconfig(cluster, user);
      const [a, b] = await Promise.all([ours(path), clientNode(path)]);
      expect(a).toEqual(b);
      expect(a).toMatchObject({ server: "https://api.example:6443", ...expected });
    },
    60_000,
  );
});

describe("kubeconfig shapes where ours follows kubectl, not client-node", () => {
  it.each(differ)(
    "%s",
    async (_shape, cluster, user, oursSends, clientNodeSends, _why) => {
      const path = kubeconfig(cluster, user);
      const [a, b] = await Promise.all([ours(path), clientNode(path)]);
      for (const [field, value] of Object.entries(oursSends)) expect(a[field as keyof Sent]).toBe(value);
      for (const [field, value] of Object.entries(clientNodeSends))
        expect(b[field as keyof Sent]).toBe(value);
      // Everything else is the same.
      const rest = (s: Sent) => Object.fromEntries(Object.entries(s).filter(([k]) => !(k in oursSends)));
      expect(rest(a)).toEqual(rest(b));
    },
    60_000,
  );
});

describe("a proxy-url cluster with a tokenFile user", () => {
  it("tunnels through the proxy and still re-reads the token file, as kubectl does", async () => {
    const path = kubeconfig({ ...caData, "proxy-url": "http://proxy.internal:3128" }, { tokenFile: "token" });
    expect(await ours(path)).toMatchObject({
      proxy: "http://proxy.internal:3128/",
      authorization: "Bearer token-from-file",
      ca: "CA PEM",
    });
  }, 60_000);
});
