// The install key on the real API server: two operators starting at once in one namespace
// create the Secret dms-operator-install-key once (one create wins, the other gets 409 and reads
// the winner's), both key their digests with the same bytes, and a later start reads it again
// unchanged. An unusable Secret stops the operator naming the fix.

import { pino } from "pino";
import { describe, expect, it } from "vitest";
import type { SecretValue } from "../../src/crd/mapping.ts";
import type { KubeClient, KubeRequest } from "../../src/kube/client.ts";
import { ConflictError } from "../../src/kube/errors.ts";
import { ensureInstallKey, INSTALL_KEY_SECRET } from "../../src/kube/install-key.ts";
import { systemClock } from "../../src/runtime/clock.ts";
import { InstallKey } from "../../src/wiring/install-key.ts";
import { freshNamespace, kubectlOk } from "../support/cluster.ts";
import { ClusterUser } from "../support/resources.ts";

const logger = pino({ level: "silent" });
const SECRETS: SecretValue[] = [{ name: "TOKEN", value: "hunter2" }];

/**
 * `client` for `parties` operators whose first reads of the key all answer before any of them goes
 * on: each finds no key and creates one, the race the API server decides. Records how each
 * create ended.
 */
function racing(client: KubeClient, parties: number) {
  let arrived = 0;
  let release = () => {};
  const barrier = new Promise<void>((resolve) => {
    release = resolve;
  });
  const creates: string[] = [];
  const raced = {
    request: async (req: KubeRequest) => {
      if (req.method === "GET") {
        try {
          return await client.request(req);
        } finally {
          if (++arrived === parties) release();
          await barrier;
        }
      }
      try {
        const created = await client.request(req);
        creates.push("created");
        return created;
      } catch (error) {
        creates.push(error instanceof ConflictError ? "409" : String(error));
        throw error;
      }
    },
  } as unknown as KubeClient;
  return { client: raced, creates };
}

/** An operator's start as far as the key goes: its runnable, until the key is read. */
async function start(client: KubeClient, namespace: string, signal: AbortSignal) {
  const key = new InstallKey(namespace, (ns, s) => ensureInstallKey(client, ns, s), systemClock, logger);
  const running = key.start(signal);
  const bytes = await key.ready(signal);
  return { key, bytes, running };
}

describe("the install key", () => {
  it("is created once by two operators starting at once, both reading the same bytes, and kept by later starts", async () => {
    const namespace = await freshNamespace("install-key");
    const user = new ClusterUser();
    const race = racing(user.client, 2);
    const stop = new AbortController();
    const [a, b] = await Promise.all([
      start(race.client, namespace, stop.signal),
      start(race.client, namespace, stop.signal),
    ]);
    expect(Buffer.from(a.bytes).equals(Buffer.from(b.bytes))).toBe(true);
    expect(a.bytes.length).toBe(32);
    expect(a.key.digest.digest(SECRETS)).toBe(b.key.digest.digest(SECRETS));
    expect(a.key.digest.digest(SECRETS)).toMatch(/^hmac-sha256:/);
    // Both asked to create it (each found none); the API server let one through.
    expect(race.creates.sort()).toEqual(["409", "created"]);
    const secrets = JSON.parse(
      await kubectlOk([
        "-n",
        namespace,
        "get",
        "secrets",
        "-l",
        "app.kubernetes.io/component=install-key",
        "-o",
        "json",
      ]),
    ) as { items: { metadata: { name: string; creationTimestamp: string } }[] };
    expect(secrets.items.map((s) => s.metadata.name)).toEqual([INSTALL_KEY_SECRET]);

    // A restart reads the same key: digests recorded before it still match.
    const again = await start(user.client, namespace, stop.signal);
    expect(again.key.digest.matches(a.key.digest.digest(SECRETS), SECRETS)).toBe(true);
    stop.abort();
    await Promise.all([a.running, b.running, again.running]);
  });

  it("stops the operator, naming the fix, when the Secret holds no usable key", async () => {
    const namespace = await freshNamespace("install-key-bad");
    await kubectlOk([
      "-n",
      namespace,
      "create",
      "secret",
      "generic",
      INSTALL_KEY_SECRET,
      "--from-literal=key=short",
    ]);
    const user = new ClusterUser();
    const key = new InstallKey(
      namespace,
      (ns, s) => ensureInstallKey(user.client, ns, s),
      systemClock,
      logger,
    );
    const stop = new AbortController();
    await expect(key.start(stop.signal)).rejects.toThrow(
      new RegExp(`${namespace}/${INSTALL_KEY_SECRET} must hold at least 16 random bytes.*delete it`),
    );
    await expect(key.ready(stop.signal)).rejects.toThrow(/at least 16 random bytes/);
  });
});
