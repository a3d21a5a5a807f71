import { collectDefaultMetrics, Gauge, Registry } from "prom-client";
import { afterEach, describe, expect, it } from "vitest";
import { RuntimeMetrics } from "../../src/runtime/metrics.ts";
import { HealthServer, parseBindAddress } from "../../src/serving/health.ts";
import { ManualClock } from "../support/manual-clock.ts";

const servers: HealthServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

async function serve(server: HealthServer) {
  servers.push(server);
  return server.listen();
}

async function get(url: string): Promise<{ status: number; body: string }> {
  const res = await fetch(url);
  return { status: res.status, body: await res.text() };
}

const local = { metricsBindAddress: "127.0.0.1:0", probeBindAddress: "127.0.0.1:0" };

describe("HealthServer", () => {
  it("answers /healthz and, with every check passing, /readyz with ok", async () => {
    const server = new HealthServer(local);
    server.addReadinessCheck({ name: "informers", check: async () => {} });
    const { probes } = await serve(server);
    expect(await get(`${probes}/healthz`)).toEqual({ status: 200, body: "ok" });
    expect(await get(`${probes}/readyz`)).toEqual({ status: 200, body: "ok" });
    expect(await get(`${probes}/readyz?verbose`)).toEqual({
      status: 200,
      body: "[+]informers ok\nreadyz check passed\n",
    });
  });

  it("reports 503 with a line per check when one fails, without leaking the reason", async () => {
    const server = new HealthServer(local);
    server.addReadinessCheck({ name: "informers", check: async () => {} });
    server.addReadinessCheck({
      name: "service",
      check: async () => {
        throw new Error("401 from https://dms.internal with key sk-secret");
      },
    });
    const { probes } = await serve(server);
    const res = await get(`${probes}/readyz`);
    expect(res.status).toBe(503);
    expect(res.body).toBe("[+]informers ok\n[-]service failed: reason withheld\nreadyz check failed\n");
    expect(await get(`${probes}/readyz/informers`)).toEqual({ status: 200, body: "ok" });
    expect((await get(`${probes}/readyz/service`)).status).toBe(503);
    expect((await get(`${probes}/readyz?exclude=service`)).status).toBe(200);
    expect((await get(`${probes}/readyz/nope`)).status).toBe(404);
  });

  it("fails a check that does not answer within its timeout, even if it ignores its signal", async () => {
    const clock = new ManualClock();
    const server = new HealthServer({ ...local, checkTimeoutMs: 5_000, clock });
    server.addReadinessCheck({ name: "service", check: () => new Promise(() => {}) });
    const { probes } = await serve(server);
    const pending = get(`${probes}/readyz`);
    while (clock.pending === 0) await new Promise((r) => setTimeout(r, 1));
    clock.advance(5_000);
    const res = await pending;
    expect(res.status).toBe(503);
    expect(res.body).toContain("[-]service failed");
  });

  it("fails readiness once stopping", async () => {
    const server = new HealthServer(local);
    const { probes } = await serve(server);
    server.markStopping();
    const res = await get(`${probes}/readyz`);
    expect(res.status).toBe(503);
    expect(res.body).toContain("[-]shutdown failed");
    expect((await get(`${probes}/healthz`)).status).toBe(200);
  });

  it("serves /metrics with controller-runtime names on the metrics listener, probes on the other", async () => {
    const metrics = new RuntimeMetrics({ processMetrics: false });
    const server = new HealthServer({ ...local, registry: metrics.registry });
    const urls = await serve(server);
    expect(urls.metrics).not.toBe(urls.probes);
    const res = await fetch(`${urls.metrics}/metrics`);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^text\/plain/);
    expect(await res.text()).toContain("# TYPE workqueue_depth gauge");
    expect((await get(`${urls.metrics}/readyz`)).status).toBe(404);
    expect((await get(`${urls.probes}/metrics`)).status).toBe(404);
  });

  it("serves only the families ?name= lists, without running the others' collectors", async () => {
    const metrics = new RuntimeMetrics({ processMetrics: false });
    let collected = 0;
    new Gauge({
      name: "dms_expensive",
      help: "computed at scrape time",
      registers: [metrics.registry],
      collect() {
        collected++;
        this.set(1);
      },
    });
    const server = new HealthServer({ ...local, registry: metrics.registry });
    const { metrics: url } = await serve(server);
    metrics.controllerHooks("deployment").reconciled?.("success", 0.01);

    const one = await get(`${url}/metrics?name=controller_runtime_reconcile_total&name=no_such_metric`);
    expect(one.status).toBe(200);
    expect(one.body).toContain(
      'controller_runtime_reconcile_total{controller="deployment",result="success"} 1',
    );
    expect(one.body).not.toContain("workqueue_depth");
    expect(one.body).not.toContain("dms_expensive");
    expect(collected).toBe(0);
    // The same lines as in the whole scrape, in the same format.
    const all = await get(`${url}/metrics`);
    expect(collected).toBe(1);
    expect(all.body).toContain(one.body);
    expect((await get(`${url}/metrics?name=no_such_metric`)).body).toBe("");
  });

  it("serves everything on one listener when both addresses are the same, and none when disabled", async () => {
    const port = await freePort();
    const metrics = new RuntimeMetrics({ processMetrics: false });
    const shared = new HealthServer({
      metricsBindAddress: `127.0.0.1:${port}`,
      probeBindAddress: `127.0.0.1:${port}`,
      registry: metrics.registry,
    });
    const urls = await serve(shared);
    expect(urls.metrics).toBe(`http://127.0.0.1:${port}`);
    expect(urls.probes).toBe(urls.metrics);
    expect((await get(`${urls.probes}/metrics`)).status).toBe(200);
    expect((await get(`${urls.probes}/healthz`)).status).toBe(200);

    const disabled = new HealthServer({ metricsBindAddress: "0", probeBindAddress: "0" });
    expect(await serve(disabled)).toEqual({});
  });

  it("rejects with the address when it cannot listen", async () => {
    const port = await freePort();
    const first = new HealthServer({ metricsBindAddress: `127.0.0.1:${port}`, probeBindAddress: "0" });
    await serve(first);
    const second = new HealthServer({ metricsBindAddress: `127.0.0.1:${port}`, probeBindAddress: "0" });
    await expect(serve(second)).rejects.toThrow(`cannot listen on 127.0.0.1:${port}`);
  });

  it("run as a Runnable, tells where it listens, and stops serving when its signal aborts", async () => {
    const server = new HealthServer(local);
    servers.push(server);
    const stop = new AbortController();
    const running = server.start(stop.signal);
    const { probes } = await server.listening;
    expect((await get(`${probes}/healthz`)).status).toBe(200);
    stop.abort();
    await running;
    await expect(fetch(`${probes}/healthz`)).rejects.toThrow();
  });

  it("run as a Runnable, rejects both start and listening when it cannot listen", async () => {
    const port = await freePort();
    const first = new HealthServer({ metricsBindAddress: `127.0.0.1:${port}`, probeBindAddress: "0" });
    await serve(first);
    const second = new HealthServer({ metricsBindAddress: `127.0.0.1:${port}`, probeBindAddress: "0" });
    servers.push(second);
    await expect(second.start(new AbortController().signal)).rejects.toThrow(
      `cannot listen on 127.0.0.1:${port}`,
    );
    await expect(second.listening).rejects.toThrow(`cannot listen on 127.0.0.1:${port}`);
  });
});

describe("HealthServer against slow or many clients", () => {
  /** A raw connection to `url`'s port that sends `text` and resolves when the server closes it. */
  async function openRaw(url: string, text: string) {
    const { connect } = await import("node:net");
    const { hostname, port } = new URL(url);
    const socket = connect(Number(port), hostname);
    const closed = new Promise<number>((resolve) => {
      const opened = Date.now();
      socket.on("close", () => resolve(Date.now() - opened));
      socket.on("error", () => {});
    });
    socket.write(text);
    return { socket, closed };
  }

  it("closes a connection whose request does not arrive in time (slowloris)", async () => {
    const server = new HealthServer({ ...local, requestTimeoutMs: 300 });
    server.addReadinessCheck({ name: "informers", check: async () => {} });
    const { metrics, probes } = await serve(server);
    for (const url of [metrics, probes]) {
      const { socket, closed } = await openRaw(`${url}`, "GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: a");
      const timer = setInterval(() => socket.write("a"), 50);
      // Waited for, with no cut-off of its own: a server that never closes it fails the test's timeout.
      const ms = await closed;
      clearInterval(timer);
      socket.destroy();
      expect(ms).toBeGreaterThan(0);
    }
    // A prompt request is served as before.
    expect((await get(`${probes}/healthz`)).status).toBe(200);
  });

  it("holds at most maxConnections open connections per listener", async () => {
    const server = new HealthServer({ ...local, maxConnections: 4 });
    const { metrics } = await serve(server);
    const raws = await Promise.all(Array.from({ length: 8 }, () => openRaw(`${metrics}`, "GET /met")));
    // The connections past the limit are closed: waited for, however long a loaded machine takes
    // (a server that keeps them open fails the test's timeout).
    let closed = 0;
    await new Promise<void>((resolve) => {
      for (const raw of raws) void raw.closed.then(() => ++closed === 4 && resolve());
    });
    for (const { socket } of raws) socket.destroy();
    expect(closed).toBeGreaterThanOrEqual(4);
  });
});

describe("parseBindAddress", () => {
  it.each([
    [":8080", { host: undefined, port: 8080 }],
    ["127.0.0.1:0", { host: "127.0.0.1", port: 0 }],
    ["[::1]:8081", { host: "::1", port: 8081 }],
    ["localhost:9090", { host: "localhost", port: 9090 }],
    ["0", undefined],
  ])("parses %s", (value, expected) => {
    expect(parseBindAddress(value)).toEqual(expected);
  });

  it.each(["8080", ":99999", "host:", "::1:80", ""])("rejects %s naming it", (value) => {
    expect(() => parseBindAddress(value)).toThrow(`invalid bind address "${value}"`);
  });
});

describe("RuntimeMetrics", () => {
  it("registers prom-client's process metrics but the collection histogram, which observes every collection", async () => {
    const families = async (registry: Registry) =>
      (await registry.getMetricsAsJSON()).map((m) => m.name).filter((n) => /^(process|nodejs)_/.test(n));
    const defaults = new Registry();
    collectDefaultMetrics({ register: defaults });
    const expected = (await families(defaults)).filter((n) => n !== "nodejs_gc_duration_seconds");
    expect(expected).toContain("nodejs_heap_size_used_bytes");
    expect(expected).toContain("process_resident_memory_bytes");
    expect(await families(new RuntimeMetrics().registry)).toEqual(expected);
    expect(await families(new RuntimeMetrics({ processMetrics: false }).registry)).toEqual([]);
  });

  it("exposes controller-runtime, workqueue, service and leader series", async () => {
    const metrics = new RuntimeMetrics();
    const hooks = metrics.controllerHooks("deployment");
    hooks.reconciled?.("success", 0.2);
    hooks.errored?.(false);
    hooks.maxConcurrent?.(4);
    hooks.activeWorkers?.(1);
    hooks.observeInFlight?.(() => ({ unfinishedSeconds: 3, longestSeconds: 2 }));
    let waiting = new Map([["ServiceConnection/team-a/prod", 195]]);
    hooks.observeWaiting?.(() => waiting);
    hooks.queue?.depth?.(2);
    hooks.queue?.added?.();
    hooks.queue?.retried?.();
    hooks.queue?.queueLatency?.(0.5);
    hooks.queue?.workDuration?.(0.2);
    metrics.recordServiceCall({
      method: "patch",
      route: "/v2/deployments/{deployment_id}",
      status: 200,
      seconds: 0.1,
    });
    metrics.setLeader("dms-operator", true);
    const text = await metrics.registry.metrics();
    for (const line of [
      'controller_runtime_reconcile_total{controller="deployment",result="success"} 1',
      'controller_runtime_reconcile_total{controller="deployment",result="error"} 0',
      'controller_runtime_reconcile_errors_total{controller="deployment"} 1',
      'controller_runtime_reconcile_time_seconds_count{controller="deployment"} 1',
      'controller_runtime_active_workers{controller="deployment"} 1',
      'controller_runtime_max_concurrent_reconciles{controller="deployment"} 4',
      'workqueue_depth{name="deployment"} 2',
      'workqueue_adds_total{name="deployment"} 1',
      'workqueue_retries_total{name="deployment"} 1',
      'workqueue_queue_duration_seconds_count{name="deployment"} 1',
      'workqueue_work_duration_seconds_count{name="deployment"} 1',
      'workqueue_unfinished_work_seconds{name="deployment"} 3',
      'workqueue_longest_running_processor_seconds{name="deployment"} 2',
      'dms_service_requests_total{method="PATCH",route="/v2/deployments/{deployment_id}",status="200"} 1',
      'dms_service_request_duration_seconds_count{method="PATCH",route="/v2/deployments/{deployment_id}"} 1',
      'leader_election_master_status{name="dms-operator"} 1',
      'dms_connection_waiting_reconciles{connection="ServiceConnection/team-a/prod"} 195',
    ]) {
      expect(text).toContain(line);
    }
    expect(text).toContain("process_cpu_seconds_total");
    // A connection no longer waiting leaves the gauge, rather than showing its last count.
    waiting = new Map();
    expect(await metrics.registry.metrics()).not.toContain("dms_connection_waiting_reconciles{");
  });

  it("labels a status the service makes up by its class, so a service cannot grow the series without bound", async () => {
    const metrics = new RuntimeMetrics({ processMetrics: false });
    const route = "/v2/deployments";
    // Node's HTTP client takes any three digits as a status: a hostile service answers a new one each call.
    for (let status = 0; status < 1000; status++)
      metrics.recordServiceCall({ method: "GET", route, status, seconds: 0 });
    metrics.recordServiceCall({ method: "GET", route, status: "error", seconds: 0 });
    const text = await metrics.registry.metrics();
    const series = text.split("\n").filter((l) => l.startsWith("dms_service_requests_total{"));
    const statuses = series.map((l) => /status="([^"]*)"/.exec(l)?.[1]);
    // The statuses HTTP names (429, 503, …) stay as they are; the rest go by class, or "other".
    for (const known of ["200", "404", "429", "503"]) expect(statuses).toContain(known);
    expect(text).toContain(`dms_service_requests_total{method="GET",route="${route}",status="5xx"} `);
    expect(text).toContain(`dms_service_requests_total{method="GET",route="${route}",status="other"} 500`);
    expect(statuses).toContain("error");
    expect(statuses).not.toContain("599");
    expect(statuses).not.toContain("777");
    expect(series.length).toBeLessThan(80);
  });

  it("keeps instances apart: two registries never share a series", async () => {
    const a = new RuntimeMetrics({ processMetrics: false });
    const b = new RuntimeMetrics({ processMetrics: false });
    a.controllerHooks("x").reconciled?.("success", 1);
    b.controllerHooks("x");
    expect(await b.registry.metrics()).toContain(
      'controller_runtime_reconcile_total{controller="x",result="success"} 0',
    );
  });
});

async function freePort(): Promise<number> {
  const { createServer } = await import("node:net");
  return new Promise((resolve) => {
    const s = createServer();
    s.listen(0, "127.0.0.1", () => {
      const address = s.address();
      const port = typeof address === "object" && address ? address.port : 0;
      s.close(() => resolve(port));
    });
  });
}
