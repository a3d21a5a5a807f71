import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import type { RequestOptions } from "node:https";
import { tmpdir } from "node:os";
import { delimiter, join } from "node:path";
import { describe, expect, it, vi } from "vitest";
import { stringify } from "yaml";
import { type LoadedKubeConfig, loadKubeConfig } from "../../src/kube/config.ts";
import { TOKEN_FILE_REFRESH_MS } from "../../src/kube/credentials.ts";

/** The TLS options and headers the transport would send with, as plain values. */
async function httpsOptions(loaded: LoadedKubeConfig) {
  const options: RequestOptions = {};
  await loaded.config.applyToHTTPSOptions(options);
  return options as RequestOptions & { ca?: Buffer; cert?: Buffer; key?: Buffer };
}

const dir = mkdtempSync(join(tmpdir(), "kube-config-test-"));

function kubeconfig(
  file: string,
  clusters: { name: string; server: string; namespace?: string }[],
  current: string,
) {
  const path = join(dir, file);
  writeFileSync(
    path,
    stringify({
      apiVersion: "v1",
      kind: "Config",
      clusters: clusters.map((c) => ({ name: c.name, cluster: { server: c.server } })),
      users: clusters.map((c) => ({ name: c.name, user: { token: `token-${c.name}` } })),
      contexts: clusters.map((c) => ({
        name: c.name,
        context: { cluster: c.name, user: c.name, ...(c.namespace ? { namespace: c.namespace } : {}) },
      })),
      "current-context": current,
    }),
  );
  return path;
}

function serviceAccount(files: { token?: boolean; ca?: boolean; namespace?: string }) {
  const sa = mkdtempSync(join(dir, "sa-"));
  if (files.token) writeFileSync(join(sa, "token"), "sa-token");
  if (files.ca) writeFileSync(join(sa, "ca.crt"), "not really a certificate");
  if (files.namespace) writeFileSync(join(sa, "namespace"), files.namespace);
  return sa;
}

const devAndProd = kubeconfig(
  "two.yaml",
  [
    { name: "dev", server: "https://dev.example:6443", namespace: "team-a" },
    { name: "prod", server: "https://prod.example:6443" },
  ],
  "dev",
);
const inClusterEnv = { KUBERNETES_SERVICE_HOST: "10.0.0.1", KUBERNETES_SERVICE_PORT: "443" };
const noServiceAccount = join(dir, "no-such-dir");

describe("loadKubeConfig", () => {
  it("loads the --kubeconfig file and its current context, and says so", () => {
    const loaded = loadKubeConfig(
      { kubeconfig: devAndProd },
      { env: {}, serviceAccountDir: noServiceAccount },
    );
    expect(loaded).toMatchObject({
      source: "kubeconfig",
      server: "https://dev.example:6443",
      namespace: "team-a",
      description: `kubeconfig ${devAndProd}, context dev`,
    });
  });

  it("switches to the --context asked for", () => {
    const loaded = loadKubeConfig({ kubeconfig: devAndProd, context: "prod" }, { env: {} });
    expect(loaded.server).toBe("https://prod.example:6443");
    expect(loaded.namespace).toBeUndefined();
  });

  it("names the contexts that exist when the asked-for one does not", () => {
    expect(() => loadKubeConfig({ kubeconfig: devAndProd, context: "staging" }, { env: {} })).toThrow(
      /context staging is not in .*two\.yaml \(contexts: dev, prod\)/,
    );
  });

  it("uses KUBECONFIG when no flag is given, merging every file listed, and prefers the flag", () => {
    const other = kubeconfig("other.yaml", [{ name: "other", server: "https://other.example" }], "other");
    const env = { KUBECONFIG: [other, devAndProd].join(delimiter), ...inClusterEnv };
    const fromEnv = loadKubeConfig({ context: "prod" }, { env });
    expect(fromEnv.server).toBe("https://prod.example:6443");
    expect(loadKubeConfig({}, { env }).server).toBe("https://other.example");
    expect(loadKubeConfig({ kubeconfig: devAndProd }, { env }).server).toBe("https://dev.example:6443");
  });

  it("says which kubeconfig is missing rather than falling back to anything", () => {
    const env = { KUBECONFIG: join(dir, "missing.yaml"), ...inClusterEnv };
    const sa = serviceAccount({ token: true, ca: true });
    expect(() => loadKubeConfig({}, { env, serviceAccountDir: sa })).toThrow(
      `kubeconfig ${join(dir, "missing.yaml")} (from KUBECONFIG) does not exist`,
    );
  });

  it("skips a file of KUBECONFIG that does not exist, as kubectl does, but not --kubeconfig's", () => {
    const missing = join(dir, "missing.yaml");
    const env = { KUBECONFIG: [missing, devAndProd].join(delimiter) };
    const loaded = loadKubeConfig({ context: "prod" }, { env });
    expect(loaded.server).toBe("https://prod.example:6443");
    expect(loaded.description).toBe(`kubeconfig ${devAndProd}, context prod`);
    expect(() => loadKubeConfig({ kubeconfig: missing }, { env })).toThrow(
      `kubeconfig ${missing} (from --kubeconfig) does not exist`,
    );
  });

  it("refuses a kubeconfig without a current context", () => {
    const none = kubeconfig("none.yaml", [{ name: "x", server: "https://x.example" }], "");
    expect(() => loadKubeConfig({ kubeconfig: none }, { env: {} })).toThrow(
      /sets no current-context: pass --context <name> \(contexts: x\)/,
    );
  });

  it("uses the pod's service account when there is no kubeconfig", async () => {
    const sa = serviceAccount({ token: true, ca: true, namespace: "dms-system\n" });
    const loaded = loadKubeConfig({}, { env: inClusterEnv, serviceAccountDir: sa });
    expect(loaded).toMatchObject({
      source: "in-cluster",
      server: "https://10.0.0.1:443",
      namespace: "dms-system",
      description: "in-cluster service account",
    });
    const options = await httpsOptions(loaded);
    expect(options.ca?.toString()).toBe("not really a certificate");
    expect(options.headers).toEqual({ Authorization: "Bearer sa-token" });
  });

  it("re-reads a rotated service account token once the refresh period passed", async () => {
    const sa = serviceAccount({ token: true, ca: true });
    const loaded = loadKubeConfig({}, { env: inClusterEnv, serviceAccountDir: sa });
    vi.useFakeTimers({ toFake: ["Date"] });
    try {
      expect((await httpsOptions(loaded)).headers).toEqual({ Authorization: "Bearer sa-token" });
      writeFileSync(join(sa, "token"), "rotated-token\n");
      expect((await httpsOptions(loaded)).headers).toEqual({ Authorization: "Bearer sa-token" });
      vi.advanceTimersByTime(TOKEN_FILE_REFRESH_MS + 1);
      expect((await httpsOptions(loaded)).headers).toEqual({ Authorization: "Bearer rotated-token" });
    } finally {
      vi.useRealTimers();
    }
  });

  it("brackets an IPv6 service host", () => {
    const sa = serviceAccount({ token: true, ca: true });
    const env = { KUBERNETES_SERVICE_HOST: "fd00::1", KUBERNETES_SERVICE_PORT: "443" };
    expect(loadKubeConfig({}, { env, serviceAccountDir: sa }).server).toBe("https://[fd00::1]:443");
  });

  it("refuses --context without a kubeconfig", () => {
    const sa = serviceAccount({ token: true, ca: true });
    expect(() => loadKubeConfig({ context: "dev" }, { env: inClusterEnv, serviceAccountDir: sa })).toThrow(
      /--context dev needs a kubeconfig/,
    );
  });

  it.each([
    ["no environment at all", {}, { token: true, ca: true }],
    ["service env but no token", inClusterEnv, { ca: true }],
    ["service env but no CA", inClusterEnv, { token: true }],
  ])("fails with one clear line, never localhost: %s", (_reason, env, files) => {
    const sa = serviceAccount(files);
    expect(() => loadKubeConfig({}, { env, serviceAccountDir: sa })).toThrow(
      "no Kubernetes configuration: pass --kubeconfig or run in a cluster",
    );
  });
});

/** Writes `content` (YAML or a value to stringify) as a kubeconfig in a fresh directory. */
function rawKubeconfig(content: unknown): string {
  const where = mkdtempSync(join(dir, "raw-"));
  const path = join(where, "config");
  writeFileSync(path, typeof content === "string" ? content : stringify(content));
  return path;
}

/** A one-context kubeconfig with the given cluster and user fields. */
function single(cluster: Record<string, unknown>, user: Record<string, unknown>, at?: string) {
  const config = {
    clusters: [{ name: "c", cluster: { server: "https://c.example:6443/", ...cluster } }],
    users: [{ name: "u", user }],
    contexts: [{ name: "ctx", context: { cluster: "c", user: "u" } }],
    "current-context": "ctx",
  };
  if (!at) return rawKubeconfig(config);
  writeFileSync(at, stringify(config));
  return at;
}

const b64 = (text: string) => Buffer.from(text).toString("base64");

describe("loadKubeConfig reads kubeconfig credentials without client-node", () => {
  it("applies inline CA, client certificate and key, and a bearer token", async () => {
    const path = single(
      { "certificate-authority-data": b64("CA PEM") },
      { "client-certificate-data": b64("CERT PEM"), "client-key-data": b64("KEY PEM"), token: "t0k" },
    );
    const loaded = loadKubeConfig({ kubeconfig: path }, { env: {} });
    expect(loaded.server).toBe("https://c.example:6443");
    const options = await httpsOptions(loaded);
    expect(options.ca?.toString()).toBe("CA PEM");
    expect(options.cert?.toString()).toBe("CERT PEM");
    expect(options.key?.toString()).toBe("KEY PEM");
    expect(options.headers).toEqual({ Authorization: "Bearer t0k" });
    expect(options.rejectUnauthorized).toBeUndefined();
  });

  it("resolves relative file paths against the kubeconfig's directory, not the working directory", async () => {
    const where = mkdtempSync(join(dir, "rel-"));
    mkdirSync(join(where, "pki"));
    writeFileSync(join(where, "pki", "ca.crt"), "CA FROM FILE");
    writeFileSync(join(where, "pki", "client.crt"), "CERT FROM FILE");
    writeFileSync(join(where, "pki", "client.key"), "KEY FROM FILE");
    writeFileSync(join(where, "token"), "file-token\n");
    const path = single(
      { "certificate-authority": "pki/ca.crt" },
      { "client-certificate": "pki/client.crt", "client-key": "./pki/client.key", tokenFile: "token" },
      join(where, "config"),
    );
    const options = await httpsOptions(loadKubeConfig({ kubeconfig: path }, { env: {} }));
    expect(options.ca?.toString()).toBe("CA FROM FILE");
    expect(options.cert?.toString()).toBe("CERT FROM FILE");
    expect(options.key?.toString()).toBe("KEY FROM FILE");
    expect(options.headers).toEqual({ Authorization: "Bearer file-token" });
  });

  it("lets inline data override the file, and token override tokenFile, as kubectl does", async () => {
    const path = single(
      { "certificate-authority": "/no/such/ca.crt", "certificate-authority-data": b64("INLINE CA") },
      {
        "client-certificate": "/no/such/client.crt",
        "client-certificate-data": b64("INLINE CERT"),
        "client-key": "/no/such/client.key",
        "client-key-data": b64("INLINE KEY"),
        token: "inline-token",
        tokenFile: "/no/such/token",
      },
    );
    const options = await httpsOptions(loadKubeConfig({ kubeconfig: path }, { env: {} }));
    expect([options.ca?.toString(), options.cert?.toString(), options.key?.toString()]).toEqual([
      "INLINE CA",
      "INLINE CERT",
      "INLINE KEY",
    ]);
    expect(options.headers).toEqual({ Authorization: "Bearer inline-token" });
  });

  it("fails the request, not the load, when a credential file named in the kubeconfig is missing", async () => {
    const path = single({ "certificate-authority": "missing-ca.crt" }, { token: "t" });
    const loaded = loadKubeConfig({ kubeconfig: path }, { env: {} });
    await expect(httpsOptions(loaded)).rejects.toThrow(/missing-ca\.crt/);
  });

  it("reads CA, certificate and key files once a refresh period, not on every request", async () => {
    const where = mkdtempSync(join(dir, "reread-"));
    writeFileSync(join(where, "ca.crt"), "CA 1");
    writeFileSync(join(where, "client.crt"), "CERT 1");
    writeFileSync(join(where, "client.key"), "KEY 1");
    const path = single(
      { "certificate-authority": "ca.crt" },
      { "client-certificate": "client.crt", "client-key": "client.key" },
      join(where, "config"),
    );
    const loaded = loadKubeConfig({ kubeconfig: path }, { env: {} });
    vi.useFakeTimers({ toFake: ["Date"] });
    try {
      const first = await httpsOptions(loaded);
      writeFileSync(join(where, "ca.crt"), "CA 2");
      writeFileSync(join(where, "client.crt"), "CERT 2");
      writeFileSync(join(where, "client.key"), "KEY 2");
      const again = await httpsOptions(loaded);
      // The same bytes, not read again (and not a copy: nothing per request).
      expect(again.ca).toBe(first.ca);
      expect([again.ca?.toString(), again.cert?.toString(), again.key?.toString()]).toEqual([
        "CA 1",
        "CERT 1",
        "KEY 1",
      ]);
      vi.advanceTimersByTime(TOKEN_FILE_REFRESH_MS + 1);
      const rotated = await httpsOptions(loaded);
      expect([rotated.ca?.toString(), rotated.cert?.toString(), rotated.key?.toString()]).toEqual([
        "CA 2",
        "CERT 2",
        "KEY 2",
      ]);
    } finally {
      vi.useRealTimers();
    }
  });

  it("reads a credential file that was missing again on the next request", async () => {
    const where = mkdtempSync(join(dir, "late-"));
    const path = single({ "certificate-authority": "ca.crt" }, { token: "t" }, join(where, "config"));
    const loaded = loadKubeConfig({ kubeconfig: path }, { env: {} });
    await expect(httpsOptions(loaded)).rejects.toThrow(/ca\.crt/);
    writeFileSync(join(where, "ca.crt"), "CA NOW");
    expect((await httpsOptions(loaded)).ca?.toString()).toBe("CA NOW");
  });

  it("honours insecure-skip-tls-verify and tls-server-name", async () => {
    const path = single({ "insecure-skip-tls-verify": true, "tls-server-name": "api.internal" }, {});
    const options = await httpsOptions(loadKubeConfig({ kubeconfig: path }, { env: {} }));
    expect(options.rejectUnauthorized).toBe(false);
    expect(options.servername).toBe("api.internal");
    expect(options.headers).toBeUndefined();
  });

  it("reads a JSON kubeconfig, and YAML flow style that only looks like JSON", () => {
    const json = rawKubeconfig(JSON.stringify(oneContext(), null, 2));
    expect(loadKubeConfig({ kubeconfig: json }, { env: {} }).server).toBe("https://c.example");
    const flow = rawKubeconfig(
      "{clusters: [{name: c, cluster: {server: 'https://flow.example'}}], contexts: [{name: x, context: {cluster: c}}], current-context: x}",
    );
    expect(loadKubeConfig({ kubeconfig: flow }, { env: {} }).server).toBe("https://flow.example");
  });

  it("keeps the first definition of a name across KUBECONFIG files, as kubectl merges", () => {
    const first = rawKubeconfig({
      clusters: [{ name: "shared", cluster: { server: "https://first.example" } }],
      contexts: [{ name: "shared", context: { cluster: "shared" } }],
    });
    const second = rawKubeconfig({
      clusters: [{ name: "shared", cluster: { server: "https://second.example" } }],
      contexts: [{ name: "shared", context: { cluster: "shared", namespace: "ns2" } }],
      "current-context": "shared",
    });
    const loaded = loadKubeConfig({}, { env: { KUBECONFIG: [first, second].join(delimiter) } });
    expect(loaded.server).toBe("https://first.example");
    expect(loaded.namespace).toBeUndefined();
  });

  it.each([
    ["malformed YAML", "clusters: [unclosed\n", /cannot be read: /],
    ["not a mapping", "- just\n- a list\n", /is not a kubeconfig: not a mapping/],
    ["clusters not a list", { clusters: { name: "c" } }, /clusters must be a list/],
    [
      "an entry without a name",
      { contexts: [{ context: { cluster: "c" } }] },
      /contexts\[0\]\.name is missing/,
    ],
    [
      "a server that is not a string",
      { ...oneContext(), clusters: [{ name: "c", cluster: { server: 6443 } }] },
      /server must be a string/,
    ],
  ])("names the file and the field for %s", (_what, content, message) => {
    const path = rawKubeconfig(content);
    expect(() => loadKubeConfig({ kubeconfig: path }, { env: {} })).toThrow(message);
    expect(() => loadKubeConfig({ kubeconfig: path }, { env: {} })).toThrow(path);
  });

  it.each([
    [
      "a current context that is not defined",
      { ...oneContext(), "current-context": "gone" },
      "has no context gone, its current-context (contexts: ctx): pass --context <name>, or pick one with kubectl config use-context",
    ],
    [
      "a context whose cluster is not defined",
      { ...oneContext(), clusters: [] },
      "has no cluster c, which context ctx names: add it (kubectl config set-cluster), or pass another --context",
    ],
    [
      "a context that names no cluster",
      { ...oneContext(), contexts: [{ name: "ctx", context: {} }] },
      "has a context ctx that names no cluster: give it one, or pass another --context",
    ],
    [
      "a cluster without a server",
      { ...oneContext(), clusters: [{ name: "c", cluster: {} }] },
      "has a cluster c (of context ctx) without a server: set its server (kubectl config set-cluster c --server=https://…), or pass another --context",
    ],
    [
      "no current context",
      { ...oneContext(), "current-context": undefined },
      "sets no current-context: pass --context <name> (contexts: ctx), or pick one with kubectl config use-context",
    ],
    [
      "an empty file",
      "",
      "sets no current-context: pass --context <name> (contexts: none), or pick one with kubectl config use-context",
    ],
  ])("refuses %s naming what is missing and the fix, never localhost", (_what, content, said) => {
    const path = rawKubeconfig(content);
    expect(() => loadKubeConfig({ kubeconfig: path }, { env: {} })).toThrow(`kubeconfig ${path} ${said}`);
  });

  it("says what the context asked for lacks rather than to pass --context", () => {
    const path = rawKubeconfig({
      ...oneContext(),
      contexts: [...oneContext().contexts, { name: "prod", context: { cluster: "gone" } }],
    });
    expect(() => loadKubeConfig({ kubeconfig: path, context: "prod" }, { env: {} })).toThrow(
      `kubeconfig ${path} has no cluster gone, which context prod names: add it (kubectl config set-cluster), or pass another --context`,
    );
  });

  it("hands an exec plugin to client-node, loaded on the first request", async () => {
    const where = mkdtempSync(join(dir, "exec-"));
    const plugin = join(where, "plugin.mjs");
    writeFileSync(
      plugin,
      `process.stdout.write(JSON.stringify({ apiVersion: "client.authentication.k8s.io/v1", kind: "ExecCredential", status: { token: "from-" + process.argv[2] } }));`,
    );
    const path = single(
      { "certificate-authority-data": b64("CA PEM") },
      {
        exec: {
          apiVersion: "client.authentication.k8s.io/v1",
          command: process.execPath,
          args: [plugin, "exec-plugin"],
          interactiveMode: "Never",
        },
      },
    );
    const options = await httpsOptions(loadKubeConfig({ kubeconfig: path }, { env: {} }));
    expect(options.headers).toMatchObject({ Authorization: "Bearer from-exec-plugin" });
    expect(options.ca?.toString()).toBe("CA PEM");
    // Importing client-node and running a plugin process take seconds on a loaded machine.
  }, 60_000);
});

function oneContext() {
  return {
    clusters: [{ name: "c", cluster: { server: "https://c.example" } }],
    contexts: [{ name: "ctx", context: { cluster: "c" } }],
    "current-context": "ctx",
  };
}
