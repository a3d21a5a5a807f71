// API servers of a test's own on loopback (a handler answering the Kubernetes client), and what a
// watch list sends before it goes on as a watch, for such stubs to answer it so.
import { createServer, type RequestListener, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach } from "vitest";
import { KubeClient } from "../../src/kube/client.ts";
import { isKubeObject, type KubeObject } from "../../src/kube/object.ts";
import { Reflector, type ReflectorOptions } from "../../src/kube/reflector.ts";
import { capturingLogger } from "./logs.ts";

const open = new Set<Server>();

/**
 * Serves `handle` on 127.0.0.1 and answers a Kubernetes client of it; the server closes (its
 * connections cut) after the test.
 */
export async function kubeStub(handle: RequestListener): Promise<{ client: KubeClient; server: Server }> {
  const server = createServer(handle);
  open.add(server);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  const client = new KubeClient({
    getCurrentCluster: () => ({ server: `http://127.0.0.1:${port}` }),
    applyToHTTPSOptions: async () => {},
  });
  return { client, server };
}

afterEach(async () => {
  const closing = [...open];
  open.clear();
  for (const server of closing) {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
});

/** The lines of a watch list's initial events: each item ADDED, then the bookmark that ends them at `resourceVersion`. */
export function initialEvents(items: readonly unknown[], resourceVersion: string): string {
  const end = {
    type: "BOOKMARK",
    object: { metadata: { resourceVersion, annotations: { "k8s.io/initial-events-end": "true" } } },
  };
  return [...items.map((object) => ({ type: "ADDED", object })), end]
    .map((e) => `${JSON.stringify(e)}\n`)
    .join("");
}

/**
 * A reflector of `things` (any object, core group) through `client`: watches of 1–2 s on the
 * server (so ≥ 31 s on the client), a backoff of 10–20 ms, its log captured; `options` add to
 * these or replace them.
 */
export function thingsReflector(
  client: KubeClient,
  options: Partial<ReflectorOptions<KubeObject>> = {},
): { cache: Reflector<KubeObject>; messages: () => string[] } {
  const { logger, messages } = capturingLogger();
  const cache = new Reflector<KubeObject>({
    client,
    resource: { group: "", version: "v1", plural: "things" },
    decode: (raw) => (isKubeObject(raw) ? raw : undefined),
    minWatchTimeoutSeconds: 1,
    backoff: { baseMs: 10, maxMs: 20 },
    logger,
    ...options,
  });
  return { cache, messages };
}
