// `/metrics` over HTTPS behind the token and access reviews (`--metrics-secure`), with a
// certificate from a directory (re-read when renewed) or a self-signed one; the probes stay plain
// HTTP and never wait for a review.
import { X509Certificate } from "node:crypto";
import { mkdir, mkdtemp, rename, rm, symlink, writeFile } from "node:fs/promises";
import { request } from "node:https";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { RuntimeMetrics } from "../../src/runtime/metrics.ts";
import { HealthServer } from "../../src/serving/health.ts";
import {
  MetricsAuthenticator,
  type NonResourceAttributes,
  type ReviewedUser,
  type ReviewPort,
} from "../../src/serving/metrics-auth.ts";
import { type CertificatePair, selfSigned } from "../../src/serving/self-signed.ts";
import { DirectoryCertificate, SelfSignedCertificate } from "../../src/serving/serving-cert.ts";
import { LogCapture } from "../support/logs.ts";
import { ManualClock } from "../support/manual-clock.ts";

const PROMETHEUS: ReviewedUser = {
  username: "system:serviceaccount:monitoring:prometheus",
  groups: [],
  extra: {},
};

/** Knows the token "good" (allowed) and "denied"; with `hang`, never answers. */
class Reviews implements ReviewPort {
  hang = false;
  async authenticate(token: string): Promise<ReviewedUser | undefined> {
    if (this.hang) await new Promise(() => {});
    if (token === "good") return PROMETHEUS;
    if (token === "denied") return { ...PROMETHEUS, username: "someone" };
    return undefined;
  }
  async authorize(user: ReviewedUser, _attributes: NonResourceAttributes) {
    return { allowed: user === PROMETHEUS };
  }
}

interface Answer {
  status: number;
  body: string;
  fingerprint: string;
  retryAfter?: string | undefined;
}

/** A GET over HTTPS that trusts `ca` alone, with `token` as bearer token. */
function httpsGet(url: string, ca: string, token?: string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request(
      url,
      { ca, agent: false, headers: token === undefined ? {} : { authorization: `Bearer ${token}` } },
      (res) => {
        const fingerprint = (res.socket as import("node:tls").TLSSocket).getPeerCertificate().fingerprint256;
        let body = "";
        res.setEncoding("utf8");
        res.on("data", (chunk: string) => {
          body += chunk;
        });
        res.on("end", () =>
          resolve({ status: res.statusCode ?? 0, body, fingerprint, retryAfter: res.headers["retry-after"] }),
        );
      },
    );
    req.on("error", reject);
    req.end();
  });
}

const fingerprintOf = (pair: CertificatePair) => new X509Certificate(pair.cert).fingerprint256;

/** Writes `pair` into `dir` the way the kubelet updates a Secret volume: a new directory, then one rename of `..data`. */
async function mountSecret(dir: string, pair: CertificatePair, version: number): Promise<void> {
  const target = join(dir, `..v${version}`);
  await mkdir(target);
  await writeFile(join(target, "tls.crt"), pair.cert);
  await writeFile(join(target, "tls.key"), pair.key);
  await symlink(`..v${version}`, join(dir, "..data_tmp"));
  await rename(join(dir, "..data_tmp"), join(dir, "..data"));
  for (const name of ["tls.crt", "tls.key"])
    await symlink(join("..data", name), join(dir, name)).catch((err: NodeJS.ErrnoException) => {
      if (err.code !== "EEXIST") throw err;
    });
}

const servers: HealthServer[] = [];
const dirs: string[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()));
  await Promise.all(dirs.splice(0).map((d) => rm(d, { recursive: true, force: true })));
});

async function secretDir(pair: CertificatePair): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), "dms-metrics-tls-"));
  dirs.push(dir);
  await mountSecret(dir, pair, 1);
  return dir;
}

const HOSTS = ["localhost", "127.0.0.1"];

function secureServer(options: {
  certificate: DirectoryCertificate | SelfSignedCertificate;
  reviews?: Reviews;
  authenticator?: MetricsAuthenticator;
}) {
  const metrics = new RuntimeMetrics({ processMetrics: false });
  const server = new HealthServer({
    metricsBindAddress: "127.0.0.1:0",
    probeBindAddress: "127.0.0.1:0",
    registry: metrics.registry,
    metricsCertificate: options.certificate,
    metricsAuthenticator:
      options.authenticator ?? new MetricsAuthenticator({ reviews: options.reviews ?? new Reviews() }),
  });
  servers.push(server);
  return server;
}

describe("/metrics over HTTPS with authentication", () => {
  // The first certificate loads the X.509 library and readies WebCrypto: 0.2 s of CPU, once for
  // the file, seconds on a loaded machine. Made here, in its own time, not in the first test's.
  beforeAll(async () => {
    await selfSigned(HOSTS, new Date());
  }, 60_000);

  it("answers 401 without or with a bad token, 403 when not allowed, the metrics when allowed", async () => {
    const pair = await selfSigned(HOSTS, new Date());
    const server = secureServer({ certificate: new DirectoryCertificate({ dir: await secretDir(pair) }) });
    const { metrics, probes } = await server.listen();
    expect(metrics).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
    expect(probes).toMatch(/^http:\/\//);
    expect((await httpsGet(`${metrics}/metrics`, pair.cert)).status).toBe(401);
    expect((await httpsGet(`${metrics}/metrics`, pair.cert, "forged")).status).toBe(401);
    expect(await httpsGet(`${metrics}/metrics`, pair.cert, "denied")).toMatchObject({
      status: 403,
      body: "Forbidden (user=someone, verb=get, path=/metrics)\n",
    });
    const allowed = await httpsGet(`${metrics}/metrics`, pair.cert, "good");
    expect(allowed.status).toBe(200);
    expect(allowed.body).toContain("# TYPE workqueue_depth gauge");
    expect(allowed.fingerprint).toBe(fingerprintOf(pair));
    // Plain HTTP to the HTTPS listener is not an answer with the metrics.
    await expect(
      fetch(`${(metrics ?? "").replace("https", "http")}/metrics`).then((r) => r.status),
    ).rejects.toThrow();
  });

  it("keeps the probes answering while every review hangs", async () => {
    const reviews = new Reviews();
    reviews.hang = true;
    const server = secureServer({ certificate: new SelfSignedCertificate({ hosts: HOSTS }), reviews });
    server.addReadinessCheck({ name: "informers", check: async () => {} });
    const { metrics, probes } = await server.listen();
    const pair = await new SelfSignedCertificate({ hosts: HOSTS }).current();
    void httpsGet(`${metrics}/metrics`, pair.cert, "good").catch(() => {});
    expect((await fetch(`${probes}/readyz`)).status).toBe(200);
    expect((await fetch(`${probes}/healthz`)).status).toBe(200);
  });

  it("answers 429 with Retry-After past the review budget, and the scraper's own token still", async () => {
    const authenticator = new MetricsAuthenticator({
      reviews: new Reviews(),
      reviewsPerSecond: 0.25,
      reviewBurst: 2,
      cacheTtlMs: 0,
    });
    const certificate = new SelfSignedCertificate({ hosts: HOSTS });
    const server = secureServer({ certificate, authenticator });
    const { metrics, probes } = await server.listen();
    const pair = await certificate.current();
    expect((await httpsGet(`${metrics}/metrics`, pair.cert, "good")).status).toBe(200);
    expect((await httpsGet(`${metrics}/metrics`, pair.cert, "stranger-1")).status).toBe(401);
    const over = await httpsGet(`${metrics}/metrics`, pair.cert, "stranger-2");
    expect(over).toMatchObject({ status: 429, retryAfter: "4" });
    expect(over.body).toContain("Too Many Requests");
    // The scraper's token authenticated a moment ago: renewed outside the budget.
    expect((await httpsGet(`${metrics}/metrics`, pair.cert, "good")).status).toBe(200);
    expect((await fetch(`${probes}/healthz`)).status).toBe(200);
  });

  it("serves a self-signed certificate for the hosts it names, made once", async () => {
    const certificate = new SelfSignedCertificate({ hosts: HOSTS });
    const server = secureServer({ certificate });
    const { metrics } = await server.listen();
    const pair = await certificate.current();
    expect(await certificate.current()).toBe(pair);
    const x509 = new X509Certificate(pair.cert);
    expect(x509.subjectAltName).toBe("DNS:localhost, IP Address:127.0.0.1");
    expect(x509.checkPrivateKey(await import("node:crypto").then((c) => c.createPrivateKey(pair.key)))).toBe(
      true,
    );
    // Trusting the certificate itself is enough: the client checks the name and the validity.
    expect((await httpsGet(`${metrics}/metrics`, pair.cert, "good")).status).toBe(200);
  });

  it("serves a renewed certificate from the directory once it changes, keeping the last good one otherwise", async () => {
    const clock = new ManualClock({ start: Date.now() });
    const first = await selfSigned(HOSTS, new Date());
    const dir = await secretDir(first);
    const logs = new LogCapture();
    const certificate = new DirectoryCertificate({ dir, pollMs: 10_000, clock, logger: logs.logger });
    const server = secureServer({ certificate });
    const { metrics } = await server.listen();
    expect((await httpsGet(`${metrics}/metrics`, first.cert, "good")).fingerprint).toBe(fingerprintOf(first));

    // A key that does not match its certificate (a half-done renewal) is not taken.
    const second = await selfSigned(HOSTS, new Date());
    await mountSecret(dir, { cert: second.cert, key: first.key }, 2);
    clock.advance(10_000);
    while (logs.find("cannot load the changed metrics certificate").length === 0)
      await new Promise((resolve) => setTimeout(resolve, 5));
    expect((await httpsGet(`${metrics}/metrics`, first.cert, "good")).fingerprint).toBe(fingerprintOf(first));

    await mountSecret(dir, second, 3);
    for (let look = 0; look < 100; look++) {
      clock.advance(10_000);
      // Trusting the new certificate alone: the old one fails the handshake until it is replaced.
      const answer = await httpsGet(`${metrics}/metrics`, second.cert, "good").catch(() => undefined);
      if (answer?.fingerprint === fingerprintOf(second)) return;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    throw new Error("the renewed certificate was never served");
  });

  it("does not start without a usable certificate, naming the directory and the fix", async () => {
    const empty = await mkdtemp(join(tmpdir(), "dms-metrics-tls-"));
    dirs.push(empty);
    const server = secureServer({ certificate: new DirectoryCertificate({ dir: empty }) });
    await expect(server.listen()).rejects.toThrow(
      `--metrics-cert-dir: cannot read ${join(empty, "tls.crt")}; mount a kubernetes.io/tls Secret there`,
    );
    const a = await selfSigned(HOSTS, new Date());
    const b = await selfSigned(HOSTS, new Date());
    const mismatched = await secretDir({ cert: a.cert, key: b.key });
    const other = secureServer({ certificate: new DirectoryCertificate({ dir: mismatched }) });
    await expect(other.listen()).rejects.toThrow(/--metrics-cert-dir: .*not a usable key and certificate/);
  });

  it("refuses one address for HTTPS metrics and the plain-HTTP probes", async () => {
    const server = new HealthServer({
      metricsBindAddress: "127.0.0.1:18443",
      probeBindAddress: "127.0.0.1:18443",
      metricsCertificate: new SelfSignedCertificate({ hosts: HOSTS }),
    });
    servers.push(server);
    await expect(server.listen()).rejects.toThrow(/must differ \(the kubelet probes in plain HTTP\)/);
  });
});
