/**
 * The operator's HTTP endpoints: `/healthz` and `/readyz` (Kubernetes probe conventions, with
 * `[+]name ok` lines) and `/metrics` (Prometheus text format), on one or two listeners as
 * `--metrics-bind-address` and `--health-probe-bind-address` say. `/metrics` may be served over
 * HTTPS with each scrape authenticated and authorized (`--metrics-secure`); the probes stay plain
 * HTTP, as the kubelet calls them.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { createServer as createHttpsServer } from "node:https";
import type { AddressInfo } from "node:net";
import type { Logger } from "pino";
import { pino } from "pino";
import type { Registry } from "prom-client";
import { type Clock, systemClock } from "../runtime/clock.ts";
import type { Runnable } from "../runtime/manager.ts";
import { type BindAddress, parseBindAddress } from "./bind-address.ts";
import type { MetricsAuthenticator } from "./metrics-auth.ts";
import type { ServingCertificate } from "./serving-cert.ts";

export { parseBindAddress };

/** A named probe: resolves when healthy, rejects (with the reason) when not. Must honour `signal`. */
export interface HealthCheck {
  name: string;
  check(signal: AbortSignal): Promise<void>;
}

/** Options of {@link HealthServer}. */
export interface HealthServerOptions {
  /** `--metrics-bind-address`; default ":8080" (the command's default is ":8443" over HTTPS); "0" disables `/metrics`. */
  metricsBindAddress?: string;
  /** `--health-probe-bind-address`; default ":8081"; "0" disables the probes. */
  probeBindAddress?: string;
  /** The registry `/metrics` renders; without one `/metrics` is 404. */
  registry?: Registry;
  /**
   * Serve `/metrics` over HTTPS with this certificate; then its address must differ from the
   * probes'. Without one, plain HTTP.
   */
  metricsCertificate?: ServingCertificate;
  /** Decides each scrape of `/metrics` (bearer token, reviews); without one, anyone may read it. */
  metricsAuthenticator?: MetricsAuthenticator;
  /** Time each check may take before it counts as failed. Default 5 s. */
  checkTimeoutMs?: number;
  /**
   * Time a client has to send a whole request (headers included; over HTTPS, the handshake
   * too) before its connection is closed: a slow client cannot hold a connection. Default 10 s.
   */
  requestTimeoutMs?: number;
  /** Connections each listener holds open at most; more are closed at once. Default 256. */
  maxConnections?: number;
  clock?: Clock;
  logger?: Logger;
}

type Route = "metrics" | "probes";

/**
 * Serves the endpoints. When both addresses are the same (and not port 0), one listener serves
 * all three paths; otherwise `/metrics` lives on the metrics listener and the probes on the other.
 *
 * - `/healthz`: 200 `ok` while the liveness checks pass (none by default: an answer proves the
 *   event loop turns; a wedged loop times out the kubelet's probe).
 * - `/readyz`: runs every readiness check concurrently, each with the timeout; 200 `ok` when all
 *   pass (with `?verbose` the per-check lines), else 503 with `[+]name ok` / `[-]name failed`
 *   lines. Failure reasons are logged (on change), never served: they may name internal hosts.
 *   `/readyz/<name>` runs one check. Once `start`'s signal aborts, readiness fails (`[-]shutdown`).
 * - `/metrics`: the registry in Prometheus text format; with an authenticator, only to a scrape
 *   it allows (401, 403, or 5xx when it cannot tell).
 */
export class HealthServer implements Runnable {
  readonly name = "health";
  readonly needLeaderElection = false;
  readonly #opts: HealthServerOptions;
  readonly #clock: Clock;
  readonly #log: Logger;
  readonly #readiness: HealthCheck[] = [];
  readonly #liveness: HealthCheck[] = [];
  readonly #lastFailure = new Map<string, string>();
  readonly #servers: Array<{ server: Server; routes: Set<Route> }> = [];
  readonly #listening = Promise.withResolvers<{ metrics?: string; probes?: string }>();
  /** Ends the certificate watches of the listeners open now. */
  #watches = new AbortController();
  #stopping = false;

  constructor(options: HealthServerOptions = {}) {
    this.#opts = options;
    this.#clock = options.clock ?? systemClock;
    this.#log = (options.logger ?? pino({ level: "silent" })).child({ component: "health" });
    // Nobody may be waiting for it; a failed bind is also thrown by start().
    this.#listening.promise.catch(() => {});
  }

  /**
   * Settles with the first {@link start}: its listeners' base URLs once they listen, or the
   * error that kept them from listening. For callers that run the server as a Runnable and need
   * its addresses (ports of the system's choosing, say).
   */
  get listening(): Promise<{ metrics?: string; probes?: string }> {
    return this.#listening.promise;
  }

  /** Adds a readiness check (e.g. "informers", "service"). */
  addReadinessCheck(check: HealthCheck): void {
    this.#readiness.push(check);
  }

  /** Adds a liveness check; keep these cheap and local: failing them restarts the pod. */
  addLivenessCheck(check: HealthCheck): void {
    this.#liveness.push(check);
  }

  /** Marks the process as stopping: `/readyz` fails from now on. */
  markStopping(): void {
    this.#stopping = true;
  }

  /**
   * Opens the listeners; resolves with their base URLs (`http://host:port`, `https://` for metrics
   * over HTTPS) once listening.
   * Rejects (closing any listener already open) when an address cannot be bound.
   */
  async listen(): Promise<{ metrics?: string; probes?: string }> {
    const metrics = parseBindAddress(this.#opts.metricsBindAddress ?? ":8080");
    const probes = parseBindAddress(this.#opts.probeBindAddress ?? ":8081");
    const shared = metrics && probes && metrics.port !== 0 && sameAddress(metrics, probes);
    if (shared && this.#opts.metricsCertificate)
      throw new RangeError(
        `the metrics and probe bind addresses are both ${formatAddress(metrics)}: with /metrics over HTTPS they must differ (the kubelet probes in plain HTTP)`,
      );
    const plan: Array<[BindAddress, Set<Route>]> = [];
    if (shared) plan.push([metrics, new Set<Route>(["metrics", "probes"])]);
    else {
      if (metrics) plan.push([metrics, new Set<Route>(["metrics"])]);
      if (probes) plan.push([probes, new Set<Route>(["probes"])]);
    }
    const urls: { metrics?: string; probes?: string } = {};
    try {
      for (const [address, routes] of plan) {
        const url = await this.#open(address, routes);
        if (routes.has("metrics")) urls.metrics = url;
        if (routes.has("probes")) urls.probes = url;
      }
    } catch (err) {
      await this.close();
      throw err;
    }
    return urls;
  }

  /** Closes every listener (idle keep-alive connections included). */
  async close(): Promise<void> {
    this.#watches.abort();
    this.#watches = new AbortController();
    const servers = this.#servers.splice(0);
    await Promise.all(
      servers.map(
        ({ server }) =>
          new Promise<void>((resolve) => {
            server.close(() => resolve());
            server.closeAllConnections();
          }),
      ),
    );
  }

  /** Runnable: listens until `signal` aborts, then fails readiness and closes. */
  async start(signal: AbortSignal): Promise<void> {
    const urls = await this.listen().catch((error: unknown) => {
      this.#listening.reject(error);
      throw error;
    });
    this.#listening.resolve(urls);
    this.#log.info(urls, "serving health probes and metrics");
    await new Promise<void>((resolve) => {
      if (signal.aborted) resolve();
      else signal.addEventListener("abort", () => resolve(), { once: true });
    });
    this.markStopping();
    await this.close();
  }

  async #open(address: BindAddress, routes: Set<Route>): Promise<string> {
    const handler = (req: IncomingMessage, res: ServerResponse) => {
      this.#handle(req, res, routes).catch((err: unknown) => {
        this.#log.error({ err }, "health endpoint failed");
        if (!res.headersSent) res.writeHead(500);
        res.end();
      });
    };
    const certificate = routes.has("metrics") ? this.#opts.metricsCertificate : undefined;
    // Whoever reaches the port (a tenant's pod) chooses how slowly it sends and how many
    // connections it opens: Node's defaults hold a request's headers 60 s, its body 300 s, and
    // any number of connections.
    const timeoutMs = this.#opts.requestTimeoutMs ?? 10_000;
    const limits = {
      headersTimeout: timeoutMs,
      requestTimeout: timeoutMs,
      connectionsCheckingInterval: Math.min(1_000, timeoutMs),
    };
    let server: Server;
    if (certificate) {
      const https = createHttpsServer(
        { ...limits, ...(await certificate.current()), minVersion: "TLSv1.2", handshakeTimeout: timeoutMs },
        handler,
      );
      // A renewed certificate serves new connections; open ones keep the one they shook hands with.
      certificate.watch(
        (pair) => https.setSecureContext({ ...pair, minVersion: "TLSv1.2" }),
        this.#watches.signal,
      );
      server = https;
    } else server = createServer(limits, handler);
    server.maxConnections = this.#opts.maxConnections ?? 256;
    await new Promise<void>((resolve, reject) => {
      server.once("error", (err) =>
        reject(new Error(`cannot listen on ${formatAddress(address)}`, { cause: err })),
      );
      server.listen(address.port, address.host, () => resolve());
    });
    this.#servers.push({ server, routes });
    const bound = server.address() as AddressInfo;
    const host = bound.family === "IPv6" ? `[${bound.address}]` : bound.address;
    return `${certificate ? "https" : "http"}://${host}:${bound.port}`;
  }

  async #handle(req: IncomingMessage, res: ServerResponse, routes: Set<Route>): Promise<void> {
    const url = new URL(req.url ?? "/", "http://localhost");
    if (req.method !== "GET" && req.method !== "HEAD") return send(res, 405, "method not allowed\n");
    const path = url.pathname.replace(/\/+$/, "");
    if (routes.has("metrics") && path === "/metrics" && this.#opts.registry) {
      const access = this.#opts.metricsAuthenticator;
      if (access) {
        const decision = await access.check(req.headers.authorization, { path: "/metrics", verb: "get" });
        if (decision.status !== 200)
          return send(res, decision.status, `${decision.message}\n`, decision.retryAfterSeconds);
      }
      const body = await metricsText(this.#opts.registry, url.searchParams.getAll("name"));
      res.writeHead(200, { "content-type": this.#opts.registry.contentType });
      res.end(req.method === "HEAD" ? undefined : body);
      return;
    }
    if (routes.has("probes")) {
      const verbose = url.searchParams.has("verbose");
      const excluded = new Set(url.searchParams.getAll("exclude"));
      if (path === "/healthz" || path === "/livez") {
        return this.#probe(res, "healthz", this.#liveness, verbose, excluded, false);
      }
      if (path === "/readyz")
        return this.#probe(res, "readyz", this.#readiness, verbose, excluded, this.#stopping);
      const single = /^\/readyz\/([^/]+)$/.exec(path)?.[1];
      const check = this.#readiness.find((c) => c.name === single);
      if (check) return this.#probe(res, "readyz", [check], verbose, excluded, false);
    }
    send(res, 404, "not found\n");
  }

  async #probe(
    res: ServerResponse,
    kind: "healthz" | "readyz",
    checks: HealthCheck[],
    verbose: boolean,
    excluded: Set<string>,
    stopping: boolean,
  ): Promise<void> {
    const selected = checks.filter((c) => !excluded.has(c.name));
    const results = await Promise.all(selected.map(async (c) => ({ name: c.name, ok: await this.#run(c) })));
    if (stopping) results.push({ name: "shutdown", ok: false });
    const ok = results.every((r) => r.ok);
    if (ok && !verbose) return send(res, 200, "ok");
    const lines = results.map((r) => (r.ok ? `[+]${r.name} ok` : `[-]${r.name} failed: reason withheld`));
    for (const name of excluded) lines.push(`[+]${name} excluded: ok`);
    lines.push(`${kind} check ${ok ? "passed" : "failed"}`);
    send(res, ok ? 200 : 503, `${lines.join("\n")}\n`);
  }

  async #run(check: HealthCheck): Promise<boolean> {
    const timeoutMs = this.#opts.checkTimeoutMs ?? 5_000;
    const timeout = new AbortController();
    const cancel = this.#clock.setTimer(timeoutMs, () =>
      timeout.abort(new Error(`check ${check.name} timed out after ${timeoutMs} ms`)),
    );
    const timedOut = new Promise<never>((_, reject) =>
      timeout.signal.addEventListener("abort", () => reject(timeout.signal.reason), { once: true }),
    );
    try {
      await Promise.race([Promise.resolve().then(() => check.check(timeout.signal)), timedOut]);
      if (this.#lastFailure.delete(check.name)) this.#log.info({ check: check.name }, "check passing again");
      return true;
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err);
      if (this.#lastFailure.get(check.name) !== message) {
        this.#log.warn({ check: check.name, err }, "check failing");
        this.#lastFailure.set(check.name, message);
      }
      return false;
    } finally {
      cancel();
    }
  }
}

function send(res: ServerResponse, status: number, body: string, retryAfterSeconds?: number): void {
  res.writeHead(status, {
    "content-type": "text/plain; charset=utf-8",
    "x-content-type-options": "nosniff",
    ...(retryAfterSeconds === undefined ? {} : { "retry-after": String(retryAfterSeconds) }),
  });
  res.end(body);
}

function sameAddress(a: BindAddress, b: BindAddress): boolean {
  return a.port === b.port && (a.host ?? "") === (b.host ?? "");
}

function formatAddress(address: BindAddress): string {
  return `${address.host ?? ""}:${address.port}`;
}

/** How many `name` parameters one scrape may give; the rest are ignored. */
const MAX_METRIC_NAMES = 64;

/**
 * The text format of every metric, or of only the families `names` lists (`/metrics?name=a&name=b`;
 * unknown names are left out). A scrape of one family runs no other collector: the gauges computed
 * from the watch cache go over every cached resource, which a frequent reader of one counter (a
 * benchmark waiting for reconciles) should not pay for.
 */
export async function metricsText(registry: Registry, names: readonly string[]): Promise<string> {
  if (names.length === 0) return registry.metrics();
  const known = [...new Set(names.slice(0, MAX_METRIC_NAMES))].filter((n) => registry.getSingleMetric(n));
  const parts = await Promise.all(known.map((n) => registry.getSingleMetricAsString(n)));
  return parts.map((text) => `${text}\n`).join("");
}
