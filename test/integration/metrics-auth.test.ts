// /metrics behind the real API server's reviews (`--metrics-secure`, the default): the operator,
// wired as `run` wires it, reviews each scrape's bearer token (a TokenReview of a ServiceAccount
// token from the TokenRequest API) and its access to /metrics (a SubjectAccessReview against the
// RBAC of manifests/rbac/metrics_reader_role.yaml), and answers 401, 403 or the metrics.
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { KubeClient } from "../../src/kube/client.ts";
import { loadKubeConfig } from "../../src/kube/config.ts";
import { KubeReviews } from "../../src/kube/reviews.ts";
import { ReviewRefusedError } from "../../src/serving/metrics-auth.ts";
import { httpsAnswer } from "../bench/probes.ts";
import { serviceAccountKubeconfig } from "../e2e/install-support.ts";
import { freshNamespace, kubectlOk } from "../support/cluster.ts";
import { type Scenario, startScenario } from "../support/scenario.ts";

const READER_ROLE = join(import.meta.dirname, "..", "..", "manifests", "rbac", "metrics_reader_role.yaml");

/** A GET of `url` as Prometheus with `insecureSkipVerify` does it: any certificate, `token` as bearer. */
function scrape(url: string, token?: string): Promise<{ status: number; body: string }> {
  const headers = token === undefined ? {} : { authorization: `Bearer ${token}` };
  return httpsAnswer(url, { rejectUnauthorized: false, headers }, 20_000);
}

const token = async (namespace: string, name: string, audience?: string) =>
  (
    await kubectlOk([
      "create",
      "token",
      name,
      "-n",
      namespace,
      "--duration=600s",
      ...(audience ? [`--audience=${audience}`] : []),
    ])
  ).trim();

describe("/metrics over HTTPS, reviewed by the API server", () => {
  let s: Scenario;
  let other: string;
  let metricsUrl: string;
  const bindings: string[] = [];
  let dir: string;

  beforeAll(async () => {
    s = await startScenario("metrics-auth", { op: { listen: true, metricsSecure: true } });
    other = await freshNamespace("metrics-auth-group");
    dir = await mkdtemp(join(tmpdir(), "dms-metrics-auth-"));
    await kubectlOk(["apply", "-f", READER_ROLE]);
    await kubectlOk(["create", "serviceaccount", "scraper", "-n", s.namespace]);
    await kubectlOk(["create", "serviceaccount", "stranger", "-n", s.namespace]);
    await kubectlOk(["create", "serviceaccount", "member", "-n", other]);
    // The scraper is granted the role by name; every ServiceAccount of `other` through its group.
    bindings.push(`${s.namespace}-scraper`, `${other}-all`);
    await kubectlOk([
      "create",
      "clusterrolebinding",
      `${s.namespace}-scraper`,
      "--clusterrole=dms-operator-metrics-reader",
      `--serviceaccount=${s.namespace}:scraper`,
    ]);
    await kubectlOk([
      "create",
      "clusterrolebinding",
      `${other}-all`,
      "--clusterrole=dms-operator-metrics-reader",
      `--group=system:serviceaccounts:${other}`,
    ]);
    const { metrics } = await s.op.operator.addresses();
    if (!metrics) throw new Error("the operator serves no metrics");
    metricsUrl = `${metrics}/metrics`;
  });

  afterAll(async () => {
    await s?.stop();
    for (const name of bindings)
      await kubectlOk(["delete", "clusterrolebinding", name, "--ignore-not-found"]);
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it("listens over HTTPS", () => {
    expect(metricsUrl).toMatch(/^https:\/\/127\.0\.0\.1:\d+\/metrics$/);
  });

  it("answers 401 without a token, with a token the API server does not know, or one meant for another audience", async () => {
    expect((await scrape(metricsUrl)).status).toBe(401);
    expect((await scrape(metricsUrl, "not-a-token")).status).toBe(401);
    const forged = `${(await token(s.namespace, "scraper")).slice(0, -4)}AAAA`;
    expect((await scrape(metricsUrl, forged)).status).toBe(401);
    expect((await scrape(metricsUrl, await token(s.namespace, "scraper", "vault"))).status).toBe(401);
  });

  it("answers 403 to a real ServiceAccount that is not bound to dms-operator-metrics-reader", async () => {
    const answer = await scrape(metricsUrl, await token(s.namespace, "stranger"));
    expect(answer).toEqual({
      status: 403,
      body: `Forbidden (user=system:serviceaccount:${s.namespace}:stranger, verb=get, path=/metrics)\n`,
    });
  });

  it("serves the metrics to a ServiceAccount bound to the role, by name or through its groups", async () => {
    for (const [namespace, name] of [
      [s.namespace, "scraper"],
      [other, "member"],
    ] as const) {
      const answer = await scrape(metricsUrl, await token(namespace, name));
      expect(answer.status, `${namespace}/${name}`).toBe(200);
      expect(answer.body).toContain("# TYPE controller_runtime_reconcile_total counter");
    }
  });

  it("reports a refused review (answered 500) naming the missing permission, when the operator may not review tokens", async () => {
    // A ServiceAccount without create on tokenreviews, as an install missing the role's new rules.
    await kubectlOk(["create", "serviceaccount", "no-reviews", "-n", s.namespace]);
    const kube = loadKubeConfig({
      kubeconfig: await serviceAccountKubeconfig(s.namespace, "no-reviews", dir),
    });
    const reviews = new KubeReviews(new KubeClient(kube.config));
    const review = reviews.authenticate(await token(s.namespace, "scraper"), AbortSignal.timeout(20_000));
    await expect(review).rejects.toBeInstanceOf(ReviewRefusedError);
    await expect(review).rejects.toThrow(/HTTP 403.*tokenreviews.*needs create on tokenreviews/);
  });
});
