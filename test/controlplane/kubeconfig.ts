// Kubeconfig files and TLS material for a local control plane.
import { X509Certificate } from "node:crypto";
import { writeFile } from "node:fs/promises";
import { stringify } from "yaml";

/**
 * The CA certificate (PEM) out of kube-apiserver's self-signed `--cert-dir` bundle, which holds
 * the serving certificate followed by the CA that signed it. Returns the whole bundle when no
 * certificate in it is a CA, which still verifies the server.
 */
export function caFromServingBundle(bundlePem: string): string {
  const blocks = bundlePem.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? [];
  const ca = blocks.find((pem) => new X509Certificate(pem).ca);
  return `${ca ?? bundlePem.trim()}\n`;
}

/** Writes a kubeconfig (mode 0600: it holds a credential) for `server` authenticating with `token`. */
export async function writeTokenKubeconfig(
  path: string,
  params: { server: string; caPem: string; token: string; user: string },
): Promise<void> {
  const config = {
    apiVersion: "v1",
    kind: "Config",
    clusters: [
      {
        name: "dms-test",
        cluster: {
          server: params.server,
          "certificate-authority-data": Buffer.from(params.caPem).toString("base64"),
        },
      },
    ],
    users: [{ name: params.user, user: { token: params.token } }],
    contexts: [
      { name: "dms-test", context: { cluster: "dms-test", user: params.user, namespace: "default" } },
    ],
    "current-context": "dms-test",
  };
  await writeFile(path, stringify(config), { mode: 0o600 });
}
