// The TokenReview and SubjectAccessReview of a /metrics scrape, as sent to (and read from) an API
// server on loopback: exactly the objects the API expects, tolerant of what answers leave out.
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { KubeClient } from "../../src/kube/client.ts";
import { KubeApiError } from "../../src/kube/errors.ts";
import { KubeReviews } from "../../src/kube/reviews.ts";
import { ReviewRefusedError } from "../../src/serving/metrics-auth.ts";

let server: Server | undefined;
afterEach(async () => {
  server?.closeAllConnections();
  await new Promise((resolve) => server?.close(resolve));
  server = undefined;
});

interface Seen {
  method: string;
  path: string;
  body: unknown;
}

/** Reviews against a server answering every request with `status` and `answer`; `seen` records them. */
async function reviewsAnswering(status: number, answer: unknown) {
  const seen: Seen[] = [];
  server = createServer((req, res) => {
    let text = "";
    req.setEncoding("utf8");
    req.on("data", (chunk: string) => {
      text += chunk;
    });
    req.on("end", () => {
      seen.push({ method: req.method ?? "", path: req.url ?? "", body: JSON.parse(text) });
      res.writeHead(status, { "content-type": "application/json" });
      res.end(JSON.stringify(answer));
    });
  });
  await new Promise<void>((resolve) => server?.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  const client = new KubeClient({
    getCurrentCluster: () => ({ server: `http://127.0.0.1:${port}` }),
    applyToHTTPSOptions: async () => {},
  });
  return { reviews: new KubeReviews(client), seen };
}

const signal = () => AbortSignal.timeout(5_000);
const USER = {
  username: "system:serviceaccount:monitoring:prometheus",
  uid: "5b0c7f0e-0000-4000-8000-000000000001",
  groups: ["system:serviceaccounts", "system:authenticated"],
  extra: { "authentication.kubernetes.io/pod-name": ["prometheus-0"] },
};

describe("KubeReviews", () => {
  it("creates a TokenReview of the token and reads the user it names", async () => {
    const { reviews, seen } = await reviewsAnswering(201, { status: { authenticated: true, user: USER } });
    expect(await reviews.authenticate("the-token", signal())).toEqual(USER);
    expect(seen).toEqual([
      {
        method: "POST",
        path: "/apis/authentication.k8s.io/v1/tokenreviews",
        body: { apiVersion: "authentication.k8s.io/v1", kind: "TokenReview", spec: { token: "the-token" } },
      },
    ]);
  });

  it.each([
    { reason: "not authenticated", status: { authenticated: false, error: "token expired" } },
    { reason: "no status", status: undefined },
    { reason: "authenticated without a user", status: { authenticated: true } },
    { reason: "a user without a name", status: { authenticated: true, user: { groups: ["x"] } } },
    { reason: "authenticated as a string", status: { authenticated: "true", user: USER } },
  ])("reads $reason as not authenticated", async ({ status }) => {
    const { reviews } = await reviewsAnswering(201, { status });
    expect(await reviews.authenticate("t", signal())).toBeUndefined();
  });

  it("keeps only the strings of groups and extra, and no empty uid", async () => {
    const { reviews } = await reviewsAnswering(201, {
      status: {
        authenticated: true,
        user: { username: "u", uid: "", groups: ["a", 1], extra: { k: ["v", null] } },
      },
    });
    expect(await reviews.authenticate("t", signal())).toEqual({
      username: "u",
      groups: ["a"],
      extra: { k: ["v"] },
    });
  });

  it("creates a SubjectAccessReview for the reviewed user's name, uid, groups and extra, on the non-resource path", async () => {
    const { reviews, seen } = await reviewsAnswering(201, {
      status: { allowed: true, reason: "RBAC: allowed" },
    });
    expect(await reviews.authorize(USER, { path: "/metrics", verb: "get" }, signal())).toEqual({
      allowed: true,
      reason: "RBAC: allowed",
    });
    expect(seen).toEqual([
      {
        method: "POST",
        path: "/apis/authorization.k8s.io/v1/subjectaccessreviews",
        body: {
          apiVersion: "authorization.k8s.io/v1",
          kind: "SubjectAccessReview",
          spec: {
            user: USER.username,
            uid: USER.uid,
            groups: USER.groups,
            extra: USER.extra,
            nonResourceAttributes: { path: "/metrics", verb: "get" },
          },
        },
      },
    ]);
  });

  it.each([
    { reason: "not allowed", status: { allowed: false } },
    { reason: "denied", status: { allowed: false, denied: true } },
    { reason: "no status", status: undefined },
    { reason: "allowed as a string", status: { allowed: "true" } },
  ])("reads $reason as not allowed", async ({ status }) => {
    const { reviews } = await reviewsAnswering(201, { status });
    expect((await reviews.authorize(USER, { path: "/metrics", verb: "get" }, signal())).allowed).toBe(false);
  });

  it("turns a refusal of the review itself into ReviewRefusedError naming the permission, never the token", async () => {
    const { reviews } = await reviewsAnswering(403, {
      kind: "Status",
      reason: "Forbidden",
      message:
        'tokenreviews.authentication.k8s.io is forbidden: User "x" cannot create resource "tokenreviews"',
    });
    const review = reviews.authenticate("secret-token-value", signal());
    await expect(review).rejects.toBeInstanceOf(ReviewRefusedError);
    await expect(review).rejects.toThrow(/needs create on tokenreviews\.authentication\.k8s\.io/);
    await expect(review).rejects.not.toThrow(/secret-token-value/);
  });

  it("leaves any other failure as the API server's error", async () => {
    const { reviews } = await reviewsAnswering(503, { kind: "Status", message: "etcd is down" });
    const review = reviews.authorize(USER, { path: "/metrics", verb: "get" }, signal());
    await expect(review).rejects.toBeInstanceOf(KubeApiError);
    await expect(review).rejects.not.toBeInstanceOf(ReviewRefusedError);
  });
});
