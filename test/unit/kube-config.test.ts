import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { delimiter, join } from "node:path";
import { describe, expect, it } from "vitest";
import { stringify } from "yaml";
import { loadKubeConfig } from "../../src/kube/config.ts";

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

  it("refuses a kubeconfig without a current context", () => {
    const none = kubeconfig("none.yaml", [{ name: "x", server: "https://x.example" }], "");
    expect(() => loadKubeConfig({ kubeconfig: none }, { env: {} })).toThrow(/has no current context/);
  });

  it("uses the pod's service account when there is no kubeconfig", () => {
    const sa = serviceAccount({ token: true, ca: true, namespace: "dms-system\n" });
    const loaded = loadKubeConfig({}, { env: inClusterEnv, serviceAccountDir: sa });
    expect(loaded).toMatchObject({
      source: "in-cluster",
      server: "https://10.0.0.1:443",
      namespace: "dms-system",
      description: "in-cluster service account",
    });
    expect(loaded.config.getCurrentCluster()?.caFile).toBe(join(sa, "ca.crt"));
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
