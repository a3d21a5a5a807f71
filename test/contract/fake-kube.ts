/**
 * A Kubernetes API server that answers GETs of the objects put into it, over HTTP on loopback,
 * and a kubeconfig pointing at it: enough for the commands that only read a cluster (`plan`,
 * `import --connection`) to be tested in-process without a control plane. It answers like the
 * real one where the commands look: a `Status` with reason NotFound for a missing object, the
 * group version's discovery document, a list of every Deployment resource, 403 on request.
 * Anything but a GET is refused and recorded, so a test can check nothing was written.
 */

import { mkdtemp, writeFile } from "node:fs/promises";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";

const API = "/apis/dms.dev/v1alpha1";

/** The running fake. */
export interface FakeKube {
  /** A kubeconfig for it, whose context's namespace is the one given at start. */
  kubeconfig: string;
  /** Every request, as `METHOD path`. */
  requests: string[];
  /** Paths answered with 403 Forbidden. */
  forbidden: Set<string>;
  /** Stores an object at `path` (or replaces it). */
  put(path: string, object: object): void;
  remove(path: string): void;
  close(): Promise<void>;
}

/** Options of {@link startFakeKube}. */
export interface FakeKubeOptions {
  /** The kubeconfig context's namespace; none when absent. */
  namespace?: string;
  /** Plurals of `dms.dev/v1alpha1` the discovery document lists (default: the three kinds). */
  served?: readonly string[];
}

/** Path of a ServiceConnection. */
export const serviceConnectionPath = (namespace: string, name: string) =>
  `${API}/namespaces/${namespace}/serviceconnections/${name}`;
/** Path of a ClusterServiceConnection. */
export const clusterServiceConnectionPath = (name: string) => `${API}/clusterserviceconnections/${name}`;
/** Path of a Secret. */
export const secretPath = (namespace: string, name: string) =>
  `/api/v1/namespaces/${namespace}/secrets/${name}`;
/** Path of a Deployment resource. */
export const deploymentPath = (namespace: string, name: string) =>
  `${API}/namespaces/${namespace}/deployments/${name}`;

/** A Secret object holding `data` (values base64-encoded, as the API server returns them). */
export function secretObject(namespace: string, name: string, data: Record<string, string>): object {
  const encoded = Object.fromEntries(
    Object.entries(data).map(([k, v]) => [k, Buffer.from(v).toString("base64")]),
  );
  return {
    apiVersion: "v1",
    kind: "Secret",
    metadata: { namespace, name, resourceVersion: "1" },
    data: encoded,
  };
}

/** Starts the fake on a free loopback port and writes its kubeconfig. */
export async function startFakeKube(options: FakeKubeOptions = {}): Promise<FakeKube> {
  const objects = new Map<string, object>();
  const requests: string[] = [];
  const forbidden = new Set<string>();
  const served = options.served ?? ["deployments", "serviceconnections", "clusterserviceconnections"];
  const answer = (res: ServerResponse, status: number, body: object) => {
    res.writeHead(status, { "content-type": "application/json" });
    res.end(JSON.stringify(body));
  };
  const status = (code: number, reason: string, message: string) => ({
    kind: "Status",
    apiVersion: "v1",
    status: "Failure",
    code,
    reason,
    message,
  });
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const url = new URL(req.url ?? "/", "http://x");
    const path = url.pathname;
    requests.push(`${req.method} ${path}`);
    if (req.method !== "GET") return answer(res, 405, status(405, "MethodNotAllowed", "read-only fake"));
    if (forbidden.has(path)) return answer(res, 403, status(403, "Forbidden", `${path} is forbidden`));
    if (path === API)
      return answer(res, 200, {
        kind: "APIResourceList",
        groupVersion: "dms.dev/v1alpha1",
        resources: served.map((name) => ({ name })),
      });
    if (path === `${API}/deployments`) {
      const all = [...objects].filter(([p]) => /\/deployments\/[^/]+$/.test(p)).map(([, o]) => o);
      // Pages of `limit`, as the API server gives them, the continue token the next item's index.
      const from = Number(url.searchParams.get("continue") ?? 0);
      const limit = Number(url.searchParams.get("limit") ?? all.length) || all.length;
      const items = all.slice(from, from + limit);
      const next = from + limit < all.length ? { continue: String(from + limit) } : {};
      return answer(res, 200, { kind: "DeploymentList", metadata: { resourceVersion: "1", ...next }, items });
    }
    const found = objects.get(path);
    if (found) return answer(res, 200, found);
    const name = path.split("/").pop() ?? "";
    return answer(res, 404, status(404, "NotFound", `"${name}" not found`));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  const dir = await mkdtemp(join(tmpdir(), "dms-fake-kube-"));
  const kubeconfig = join(dir, "kubeconfig");
  const context = {
    cluster: "fake",
    user: "fake",
    ...(options.namespace ? { namespace: options.namespace } : {}),
  };
  await writeFile(
    kubeconfig,
    JSON.stringify({
      apiVersion: "v1",
      kind: "Config",
      clusters: [{ name: "fake", cluster: { server: `http://127.0.0.1:${port}` } }],
      users: [{ name: "fake", user: { token: "fake-token" } }],
      contexts: [{ name: "fake", context }],
      "current-context": "fake",
    }),
    { mode: 0o600 },
  );
  return {
    kubeconfig,
    requests,
    forbidden,
    put: (path, object) => objects.set(path, object),
    remove: (path) => objects.delete(path),
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** The ServiceConnection {@link startConnectedKube} holds, as a resource's `spec.connectionRef`. */
export const PROD_CONNECTION = { kind: "ServiceConnection", name: "prod" } as const;

/**
 * Starts the fake (its context's namespace `namespace`) holding there the ServiceConnection
 * `prod` to `baseUrl`, `spec` added to its spec, and the Secret `dms-key` its key is read from
 * (`apiKey`, holding `apiKey` as written): where a Deployment resource's own connection is read.
 */
export async function startConnectedKube(
  namespace: string,
  baseUrl: string,
  apiKey: string,
  spec: Record<string, unknown> = {},
): Promise<FakeKube> {
  const kube = await startFakeKube({ namespace });
  kube.put(serviceConnectionPath(namespace, PROD_CONNECTION.name), {
    metadata: { name: PROD_CONNECTION.name, namespace, resourceVersion: "1" },
    spec: { baseUrl, apiKeySecretRef: { name: "dms-key", key: "apiKey" }, ...spec },
  });
  kube.put(secretPath(namespace, "dms-key"), secretObject(namespace, "dms-key", { apiKey }));
  return kube;
}

/**
 * A Deployment resource `namespace/name` as the API server returns it (uid `u1`), sent through
 * {@link PROD_CONNECTION}: `spec` besides its `connectionRef`, and `status` when given.
 */
export function connectedResource(
  namespace: string,
  name: string,
  spec: Record<string, unknown>,
  status?: Record<string, unknown>,
  meta: { resourceVersion?: string; generation?: number } = {},
): object {
  return {
    apiVersion: "dms.dev/v1alpha1",
    kind: "Deployment",
    metadata: {
      name,
      namespace,
      resourceVersion: meta.resourceVersion ?? "1",
      uid: "u1",
      generation: meta.generation ?? 1,
    },
    spec: { ...spec, connectionRef: PROD_CONNECTION },
    ...(status === undefined ? {} : { status }),
  };
}
