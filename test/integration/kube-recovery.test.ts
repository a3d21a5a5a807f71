// The reflector's recovery from what a real API server does to watchers: a restart that cuts
// every watch, and resourceVersions that are no longer served (410 Gone) afterwards. This file
// runs a control plane of its own, because restarting the shared one would disturb other files.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { KubeClient } from "../../src/kube/client.ts";
import { loadKubeConfig } from "../../src/kube/config.ts";
import { KubeSecrets } from "../../src/kube/secrets.ts";
import { ControlPlane } from "../controlplane/harness.ts";
import { waitFor } from "../support/cluster.ts";
import { capturingLogger } from "../support/logs.ts";

describe("reflector recovery", () => {
  let plane: ControlPlane;
  let client: KubeClient;
  const ns = "recovery";
  const kubectl = async (args: string[]) => {
    const result = await plane.kubectl([...args, "-n", ns]);
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

  it("keeps following changes across an API server restart while it watches", async () => {
    const { logger } = capturingLogger();
    const secrets = new KubeSecrets({
      client,
      namespaces: [ns],
      logger,
      backoff: { baseMs: 100, maxMs: 1_000 },
    });
    const seen: string[] = [];
    const stop = new AbortController();
    const running = secrets.run(stop.signal);
    try {
      await secrets.synced;
      secrets.onChange((ref) => void seen.push(ref.name));

      await plane.restartApiServer();
      await kubectl(["create", "secret", "generic", "after-restart", "--from-literal=k=1"]);

      await waitFor(() => seen.includes("after-restart"), {
        description: "the create after the restart",
        timeoutMs: 20_000,
      });
      expect(secrets.has({ namespace: ns, name: "after-restart" })).toBe(true);
    } finally {
      stop.abort();
      await running;
    }
  });
});
