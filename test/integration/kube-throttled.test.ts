// The operator's reads and writes against an API server that throttles it: API Priority and
// Fairness (APF) puts the operator's ServiceAccount in a priority level of one seat that rejects
// what does not fit (429 with Retry-After), and a validating webhook that holds a request of the
// ServiceAccount keeps that seat taken until the test lets it go. This file runs a control plane
// of its own: the flow control configuration is the whole server's.
import { createServer, get, type RequestOptions, type Server } from "node:https";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { KubeClient } from "../../src/kube/client.ts";
import { loadKubeConfig } from "../../src/kube/config.ts";
import type { KubeCredentials } from "../../src/kube/credentials.ts";
import { KubeApiError } from "../../src/kube/errors.ts";
import { KubeSecrets } from "../../src/kube/secrets.ts";
import { type Clock, systemClock } from "../../src/runtime/clock.ts";
import { ControlPlane } from "../controlplane/harness.ts";
import { createTestCa } from "../support/certificates.ts";
import { waitFor } from "../support/cluster.ts";
import { capturingLogger } from "../support/logs.ts";

const ns = "throttled";

/** The one seat of the ServiceAccount's priority level, taken by a create the webhook holds. */
class Seat {
  readonly #held: (() => void)[] = [];
  #calls = 0;
  #taken = 0;

  /** The webhook: holds each review until {@link release}. */
  readonly review = (body: string, answer: (review: unknown) => void): void => {
    this.#calls += 1;
    const { request } = JSON.parse(body) as { request: { uid: string } };
    this.#held.push(() =>
      answer({
        apiVersion: "admission.k8s.io/v1",
        kind: "AdmissionReview",
        response: { uid: request.uid, allowed: true },
      }),
    );
  };

  /** Takes the seat: a create by `client` the webhook holds (tried again until the webhook is in place). */
  async take(client: KubeClient): Promise<void> {
    await waitFor(
      async () => {
        const calls = this.#calls;
        const name = `seat-${++this.#taken}`;
        const create = client.request({
          method: "POST",
          path: `/api/v1/namespaces/${ns}/configmaps`,
          body: { metadata: { name, namespace: ns, labels: { seat: "held" } } },
          timeoutMs: 40_000,
        });
        create.catch(() => {});
        // Held by the webhook, or through without it (not in place yet): try again.
        return waitFor(() => this.#calls > calls, { timeoutMs: 2_000 }).then(
          () => true,
          () => false,
        );
      },
      { description: "the webhook holding a create", timeoutMs: 30_000 },
    );
  }

  release(): void {
    for (const answer of this.#held.splice(0)) answer();
  }
}

describe("an API server that throttles the operator (429, Retry-After)", () => {
  let plane: ControlPlane;
  let webhook: Server;
  let client: KubeClient;
  let credentials: KubeCredentials;
  const seat = new Seat();
  const ok = async (args: string[], input?: unknown) => {
    const result = await plane.kubectl(args, input ? { input: JSON.stringify(input) } : undefined);
    if (result.code !== 0) throw new Error(`kubectl ${args.join(" ")}: ${result.stderr}`);
  };

  beforeAll(async () => {
    plane = await ControlPlane.start();
    const ca = await createTestCa("Webhook CA");
    const leaf = await ca.leaf();
    webhook = createServer({ cert: leaf.cert, key: leaf.key }, (req, res) => {
      let body = "";
      req.on("data", (chunk) => {
        body += chunk;
      });
      req.on("end", () =>
        seat.review(body, (review) => {
          res.writeHead(200, { "content-type": "application/json" });
          res.end(JSON.stringify(review));
        }),
      );
    });
    await new Promise<void>((resolve) => webhook.listen(0, "127.0.0.1", resolve));
    const { port } = webhook.address() as AddressInfo;
    await ok(["create", "namespace", ns]);
    await ok(["create", "serviceaccount", "operator", "-n", ns]);
    // A role of its own: no controller manager fills the aggregated `edit`.
    await ok(["create", "role", "operator", "--verb=*", "--resource=secrets,configmaps", "-n", ns]);
    const binding = [
      "create",
      "rolebinding",
      "operator",
      "--role=operator",
      `--serviceaccount=${ns}:operator`,
    ];
    await ok([...binding, "-n", ns]);
    const flowcontrol = "flowcontrol.apiserver.k8s.io/v1";
    await ok(["apply", "-f", "-"], {
      apiVersion: "v1",
      kind: "List",
      items: [
        {
          apiVersion: flowcontrol,
          kind: "PriorityLevelConfiguration",
          metadata: { name: "one-seat" },
          spec: {
            type: "Limited",
            limited: {
              nominalConcurrencyShares: 0,
              lendablePercent: 0,
              borrowingLimitPercent: 0,
              limitResponse: { type: "Reject" },
            },
          },
        },
        {
          apiVersion: flowcontrol,
          kind: "FlowSchema",
          metadata: { name: "one-seat" },
          spec: {
            priorityLevelConfiguration: { name: "one-seat" },
            matchingPrecedence: 100,
            rules: [
              {
                subjects: [{ kind: "ServiceAccount", serviceAccount: { namespace: ns, name: "operator" } }],
                resourceRules: [
                  { verbs: ["*"], apiGroups: ["*"], resources: ["*"], namespaces: ["*"], clusterScope: true },
                ],
              },
            ],
          },
        },
        {
          apiVersion: "admissionregistration.k8s.io/v1",
          kind: "ValidatingWebhookConfiguration",
          metadata: { name: "seat" },
          webhooks: [
            {
              name: "seat.dms.dev",
              clientConfig: {
                url: `https://127.0.0.1:${port}/review`,
                caBundle: Buffer.from(ca.cert).toString("base64"),
              },
              rules: [
                { operations: ["CREATE"], apiGroups: [""], apiVersions: ["v1"], resources: ["configmaps"] },
              ],
              objectSelector: { matchLabels: { seat: "held" } },
              sideEffects: "None",
              admissionReviewVersions: ["v1"],
              timeoutSeconds: 30,
              failurePolicy: "Ignore",
            },
          ],
        },
      ],
    });
    const token = await plane.serviceAccountToken(ns, "operator");
    credentials = loadKubeConfig({ kubeconfig: await plane.kubeconfigForToken(token) }).config;
    client = new KubeClient(credentials);
  });

  afterAll(async () => {
    seat.release();
    webhook?.closeAllConnections();
    webhook?.close();
    await plane?.stop();
  });

  /** The 429 the API server answers `call` of the ServiceAccount with while its seat is taken. */
  const rejected = async (call: Promise<unknown>): Promise<KubeApiError> => {
    const error: unknown = await call.catch((e: unknown) => e);
    if (!(error instanceof KubeApiError)) throw new Error(`expected a KubeApiError, got ${String(error)}`);
    expect(error.status).toBe(429);
    return error;
  };
  const read = () => client.request({ method: "GET", path: `/api/v1/namespaces/${ns}/secrets` });

  /** The `Retry-After` (ms) the API server answers a read of the ServiceAccount with, read off the wire. */
  const retryAfterOnTheWire = async (): Promise<number> => {
    const options: RequestOptions = { headers: {} };
    await credentials.applyToHTTPSOptions(options);
    const url = new URL(`${plane.server}/api/v1/namespaces/${ns}/secrets`);
    const header = await new Promise<string | undefined>((resolve, reject) => {
      get(url, options, (res) => {
        res.resume();
        resolve(res.statusCode === 429 ? res.headers["retry-after"] : undefined);
      }).on("error", reject);
    });
    expect(header).toMatch(/^[1-9][0-9]*$/);
    return Number(header) * 1000;
  };

  it("tells the pause a 429 asks for, on a read and on a write", async () => {
    await seat.take(client);
    try {
      const asked = await retryAfterOnTheWire();
      expect((await rejected(read())).retryAfterMs).toBe(asked);
      const write = client.request({
        method: "POST",
        path: `/api/v1/namespaces/${ns}/secrets`,
        body: { metadata: { name: "written", namespace: ns } },
      });
      expect((await rejected(write)).retryAfterMs).toBe(asked);
    } finally {
      seat.release();
    }
  });

  it("a cache waits out each 429's Retry-After before it lists again, then fills", async () => {
    await seat.take(client);
    // APF answers Retry-After in whole seconds, at least 1, and raises it while a level keeps
    // dropping requests (its dropped-requests tracker), so the value read here need not be the one
    // each of the cache's 429s carries: each pause is held against the least any may ask, which
    // the cache's own backoff for a first or second attempt (at most 400 and 800 ms) never reaches.
    const asked = Math.min(await retryAfterOnTheWire(), 1000);
    const pauses: number[] = [];
    const clock: Clock = {
      ...systemClock,
      sleep: (ms, signal) => {
        pauses.push(ms);
        return systemClock.sleep(ms, signal);
      },
    };
    const { logger } = capturingLogger();
    const secrets = new KubeSecrets({ client, namespaces: [ns], logger, clock });
    const stop = new AbortController();
    const running = secrets.run(stop.signal);
    try {
      await waitFor(() => pauses.length >= 3, { description: "three refused lists", timeoutMs: 20_000 });
      seat.release();
      await secrets.synced;
      expect(pauses.slice(0, 3).every((ms) => ms >= asked)).toBe(true);
    } finally {
      seat.release();
      stop.abort();
      await running;
    }
  });
});
