// The reflector's recovery from what a real API server does to watchers: a restart that cuts
// every watch, and resourceVersions that are no longer served (410 Gone) afterwards; and how it
// lists: a watch list, or pages where the server offers none (a restart with the feature off).
// This file runs a control plane of its own, because restarting the shared one would disturb
// other files.

import type { AddressInfo } from "node:net";
import { connect, createServer, type Server, type Socket } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { KubeClient, type KubeRequest } from "../../src/kube/client.ts";
import { loadKubeConfig } from "../../src/kube/config.ts";
import { KubeSecrets } from "../../src/kube/secrets.ts";
import { ControlPlane } from "../controlplane/harness.ts";
import { waitFor } from "../support/cluster.ts";
import { capturingLogger } from "../support/logs.ts";

/** A client that records each call it is asked for: a request or a stream, and its query. */
class RecordingClient extends KubeClient {
  readonly calls: { kind: "request" | "stream"; query: KubeRequest["query"] }[] = [];

  override request(req: KubeRequest): Promise<unknown> {
    this.calls.push({ kind: "request", query: req.query });
    return super.request(req);
  }

  override stream(req: KubeRequest): Promise<AsyncIterable<unknown>> {
    this.calls.push({ kind: "stream", query: req.query });
    return super.stream(req);
  }
}

/**
 * A TCP relay to the API server that can get stuck as a proxy does: `freeze` stops every
 * connection open through it from passing anything, both ways, and keeps it open; connections
 * made after pass.
 */
async function startRelay(target: URL): Promise<{ url: string; freeze(): void; close(): Promise<void> }> {
  const open = new Set<{ client: Socket; upstream: Socket }>();
  const server: Server = createServer((client) => {
    const upstream = connect(Number(target.port), target.hostname);
    const pair = { client, upstream };
    open.add(pair);
    client.pipe(upstream);
    upstream.pipe(client);
    const end = () => {
      open.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    client.on("error", end).on("close", end);
    upstream.on("error", end).on("close", end);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  const frozen: Socket[] = [];
  return {
    url: `https://127.0.0.1:${port}`,
    freeze() {
      for (const { client, upstream } of open) {
        client.unpipe(upstream);
        upstream.unpipe(client);
        client.pause();
        upstream.pause();
        frozen.push(client, upstream);
      }
      open.clear();
    },
    async close() {
      const pairs = [...open].flatMap(({ client, upstream }) => [client, upstream]);
      for (const socket of [...frozen, ...pairs]) socket.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

describe("reflector recovery", () => {
  let plane: ControlPlane;
  let client: KubeClient;
  const ns = "recovery";
  const kubectl = async (args: string[], namespace = ns) => {
    const result = await plane.kubectl([...args, "-n", namespace]);
    if (result.code !== 0) throw new Error(`kubectl ${args.join(" ")}: ${result.stderr}`);
  };

  beforeAll(async () => {
    plane = await ControlPlane.start();
    client = new KubeClient(loadKubeConfig({ kubeconfig: plane.kubeconfigPath }).config);
    await plane.kubectl(["create", "namespace", ns]);
  });

  afterAll(async () => {
    await plane?.stop();
  });

  it("relists after the API server restarts past its resourceVersion, emitting exactly the differences", async () => {
    await kubectl(["create", "secret", "generic", "kept", "--from-literal=k=1"]);
    await kubectl(["create", "secret", "generic", "removed", "--from-literal=k=1"]);
    await kubectl(["create", "secret", "generic", "changed", "--from-literal=k=1"]);
    const { logger, messages } = capturingLogger();
    const secrets = new KubeSecrets({
      client,
      namespaces: [ns],
      logger,
      backoff: { baseMs: 100, maxMs: 1_000 },
    });
    const seen: string[] = [];
    const names = (list: { metadata: { name: string } }[]) => list.map((s) => s.metadata.name).sort();
    const stop = new AbortController();
    let running = secrets.run(stop.signal);
    await secrets.synced;
    stop.abort();
    await running;

    // While nobody watches: changes, then a restart, whose fresh watch cache starts after them.
    await kubectl(["delete", "secret", "removed"]);
    await kubectl(["create", "secret", "generic", "added", "--from-literal=k=1"]);
    await kubectl(["label", "secret", "changed", "step=one"]);
    await plane.restartApiServer();
    secrets.onChange((ref) => void seen.push(ref.name));
    const resumed = new AbortController();
    running = secrets.run(resumed.signal);
    try {
      await waitFor(() => seen.length >= 3, { description: "the differences", timeoutMs: 20_000 });
      expect(messages()).toContain("resourceVersion expired; relisting");
      expect(seen.sort()).toEqual(["added", "changed", "removed"]);
      expect(names(secrets.list())).toEqual(["added", "changed", "kept"]);
    } finally {
      resumed.abort();
      await running;
    }
  });

  /** A running Secrets cache of `ns` through `via`, synced; `seen` names the changes it hears after. */
  async function following(via: KubeClient, options: { watchIdleMs?: number } = {}) {
    const { logger } = capturingLogger();
    const backoff = { baseMs: 100, maxMs: 1_000 };
    const secrets = new KubeSecrets({ client: via, namespaces: [ns], logger, backoff, ...options });
    const seen: string[] = [];
    const stop = new AbortController();
    const running = secrets.run(stop.signal);
    await secrets.synced;
    secrets.onChange((ref) => void seen.push(ref.name));
    const stopped = () => {
      stop.abort();
      return running;
    };
    return { secrets, seen, stop: stopped };
  }

  it("keeps following changes across an API server restart while it watches", async () => {
    const { secrets, seen, stop } = await following(client);
    try {
      await plane.restartApiServer();
      await kubectl(["create", "secret", "generic", "after-restart", "--from-literal=k=1"]);

      await waitFor(() => seen.includes("after-restart"), {
        description: "the create after the restart",
        timeoutMs: 20_000,
      });
      expect(secrets.has({ namespace: ns, name: "after-restart" })).toBe(true);
    } finally {
      await stop();
    }
  });

  it("resumes a watch that stays open but says nothing (a stuck proxy) on a new connection, without a relist", async () => {
    const relay = await startRelay(new URL(plane.server));
    const direct = loadKubeConfig({ kubeconfig: plane.kubeconfigPath }).config;
    const through = new RecordingClient({
      getCurrentCluster: () => ({ server: relay.url }),
      applyToHTTPSOptions: (options) => direct.applyToHTTPSOptions(options),
    });
    const { seen, stop } = await following(through, { watchIdleMs: 2_000 });
    try {
      relay.freeze();
      await kubectl(["create", "secret", "generic", "while-stuck", "--from-literal=k=1"]);
      await waitFor(() => seen.includes("while-stuck"), {
        description: "the create while the first watch is stuck",
        timeoutMs: 20_000,
      });
      // Resumed from where it was: one watch list, then watches from a resourceVersion.
      const lists = through.calls.filter((call) => call.query?.sendInitialEvents === true);
      expect(lists).toHaveLength(1);
      expect(through.calls.at(-1)?.query?.resourceVersion).toEqual(expect.any(String));
    } finally {
      await stop();
      await relay.close();
    }
  });

  describe("listing", () => {
    const many = "listing";
    const recording = () => new RecordingClient(loadKubeConfig({ kubeconfig: plane.kubeconfigPath }).config);

    beforeAll(async () => {
      await plane.kubectl(["create", "namespace", many]);
      // More than a page (50) of Secrets, created by one apply.
      const secrets = Array.from({ length: 60 }, (_, i) => ({
        apiVersion: "v1",
        kind: "Secret",
        metadata: { name: `s-${i}`, namespace: many },
        stringData: { k: String(i) },
      }));
      const applied = await plane.kubectl(["apply", "-f", "-"], {
        input: JSON.stringify({ apiVersion: "v1", kind: "List", items: secrets }),
      });
      if (applied.code !== 0) throw new Error(applied.stderr);
    });

    /** A Secrets cache on a recording client: it lists the 60, then hears a Secret `created` made after; then stops. */
    async function listsThenFollows(created: string) {
      const client = recording();
      const { logger, messages } = capturingLogger();
      const secrets = new KubeSecrets({ client, namespaces: [many], logger });
      const seen: string[] = [];
      const stop = new AbortController();
      const running = secrets.run(stop.signal);
      try {
        await secrets.synced;
        expect(secrets.list()).toHaveLength(60);
        secrets.onChange((ref) => void seen.push(ref.name));
        await kubectl(["create", "secret", "generic", created, "--from-literal=k=1"], many);
        await waitFor(() => seen.includes(created), {
          description: "the create after the list",
          timeoutMs: 20_000,
        });
      } finally {
        stop.abort();
        await running;
        await kubectl(["delete", "secret", created], many);
      }
      return { calls: client.calls, messages: messages() };
    }

    it("lists by one watch list and goes on watching on the same stream, with no paged request", async () => {
      const { calls } = await listsThenFollows("later");
      expect(calls).toEqual([
        { kind: "stream", query: expect.objectContaining({ watch: true, sendInitialEvents: true }) },
      ]);
      // From the newest state, not from a version of ours.
      expect(calls[0]?.query?.resourceVersion).toBeUndefined();
    });

    // Last in this file: the API server stays without the feature.
    it("lists by pages where the API server refuses a watch list (the feature gate off), and says so once", async () => {
      await plane.restartApiServer(["--feature-gates=WatchList=false"]);
      const { calls, messages } = await listsThenFollows("paged");
      const fallback = messages.filter((m) => m === "the API server offers no watch list; listing by pages");
      expect(fallback).toHaveLength(1);
      expect(calls.filter((call) => call.query?.sendInitialEvents === true)).toHaveLength(1);
      const pages = calls.filter((call) => call.kind === "request");
      expect(pages.map((call) => call.query?.limit)).toEqual([50, 50]);
      expect(calls.at(-1)).toEqual({
        kind: "stream",
        query: expect.objectContaining({ watch: true, resourceVersion: expect.any(String) }),
      });
    });
  });
});
