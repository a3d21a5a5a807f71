/**
 * Prometheus metrics with controller-runtime's names, on a Registry of our own (never prom-client's
 * global one) so several managers, or tests, in one process never share or clash over series.
 */
import { STATUS_CODES } from "node:http";
import { createRequire } from "node:module";
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from "prom-client";
import type { ControllerMetricsHooks } from "./controller.ts";
import { UnknownValues } from "./unknown-values.ts";

/** One finished call to the service, as the API client's `onResponse` hook reports it. */
export interface ServiceCall {
  method: string;
  /** The route template (e.g. `/v2/deployments/{id}`), never the concrete path: bounded cardinality. */
  route: string;
  /**
   * HTTP status, or a word such as "error"/"timeout" when no response arrived. Labelled as HTTP
   * names it, or by its class (`5xx`) when it names none, or `other` (bounded cardinality).
   */
  status: number | string;
  seconds: number;
}

/** Options of {@link RuntimeMetrics}. */
export interface RuntimeMetricsOptions {
  /**
   * Register Node's process metrics (CPU, memory, heap, event loop lag, handles): prom-client's
   * defaults but its collection histogram ({@link processMetrics}). Default true.
   */
  processMetrics?: boolean;
}

/**
 * prom-client's default metrics, but `nodejs_gc_duration_seconds` (`gc`). That histogram observes
 * every collection through a PerformanceObserver, and for each one Node builds an entry with a
 * map and four deprecated accessors that outlive the young generation: a fifth of what a steady
 * resync pass at 10,000 resources left for the old generation to collect, measured with
 * `scale --profile` (docs/benchmarks.md). The heap's own series (`nodejs_heap_*`) stay.
 * prom-client names its defaults in `collectDefaultMetrics.metricsList`, each a module of its
 * `lib/metrics`, so one it adds is registered too.
 */
function registerProcessMetrics(registry: Registry): void {
  const require = createRequire(import.meta.url);
  for (const name of collectDefaultMetrics.metricsList) {
    if (name === "gc") continue;
    const register = require(`prom-client/lib/metrics/${name}`) as (
      registry: Registry,
      config: { eventLoopMonitoringPrecision: number },
    ) => void;
    register(registry, { eventLoopMonitoringPrecision: 10 });
  }
}

// controller-runtime's buckets for reconcile time, and client-go's workqueue buckets.
const RECONCILE_BUCKETS = [
  0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9, 1, 1.25, 1.5,
  1.75, 2, 2.5, 3, 3.5, 4, 4.5, 5, 6, 7, 8, 9, 10, 15, 20, 25, 30, 40, 50, 60,
];
const QUEUE_BUCKETS = [1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 0.01, 0.1, 1, 10, 100, 1000];
const SERVICE_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

/**
 * The operator's metrics. `registry.metrics()` renders the text format for `/metrics`.
 *
 * Contract: `controllerHooks(name)` returns hooks that feed the `controller_runtime_*` series
 * labelled `controller=name` and the `workqueue_*` series labelled `name=name`;
 * `recordServiceCall` feeds `dms_service_*`; `setLeader` sets `leader_election_master_status`.
 */
export class RuntimeMetrics {
  readonly registry = new Registry();
  readonly #reconcileTotal: Counter<"controller" | "result">;
  readonly #reconcileErrors: Counter<"controller">;
  readonly #terminalErrors: Counter<"controller">;
  readonly #reconcileTime: Histogram<"controller">;
  readonly #activeWorkers: Gauge<"controller">;
  readonly #maxConcurrent: Gauge<"controller">;
  readonly #depth: Gauge<"name">;
  readonly #adds: Counter<"name">;
  readonly #retries: Counter<"name">;
  readonly #queueDuration: Histogram<"name">;
  readonly #workDuration: Histogram<"name">;
  readonly #inFlightProbes = new Map<string, () => { unfinishedSeconds: number; longestSeconds: number }>();
  /** Per controller, its keys waiting for their flow's share, per flow (connection). */
  readonly #waitingProbes = new Map<string, () => Map<string, number>>();
  readonly #serviceRequests: Counter<"method" | "route" | "status">;
  readonly #serviceDuration: Histogram<"method" | "route">;
  readonly #leader: Gauge<"name">;
  /** `dms_service_unknown_values_total`, by connection within each tenant's share. */
  readonly unknownValues: UnknownValues;
  readonly #unreadable: Counter;

  constructor(options: RuntimeMetricsOptions = {}) {
    const registers = [this.registry];
    if (options.processMetrics ?? true) registerProcessMetrics(this.registry);
    this.#reconcileTotal = new Counter({
      name: "controller_runtime_reconcile_total",
      help: "Total number of reconciliations per controller",
      labelNames: ["controller", "result"],
      registers,
    });
    this.#reconcileErrors = new Counter({
      name: "controller_runtime_reconcile_errors_total",
      help: "Total number of reconciliation errors per controller",
      labelNames: ["controller"],
      registers,
    });
    this.#terminalErrors = new Counter({
      name: "controller_runtime_terminal_reconcile_errors_total",
      help: "Total number of terminal reconciliation errors per controller",
      labelNames: ["controller"],
      registers,
    });
    this.#reconcileTime = new Histogram({
      name: "controller_runtime_reconcile_time_seconds",
      help: "Length of time per reconciliation per controller",
      labelNames: ["controller"],
      buckets: RECONCILE_BUCKETS,
      registers,
    });
    this.#activeWorkers = new Gauge({
      name: "controller_runtime_active_workers",
      help: "Number of currently used workers per controller",
      labelNames: ["controller"],
      registers,
    });
    this.#maxConcurrent = new Gauge({
      name: "controller_runtime_max_concurrent_reconciles",
      help: "Maximum number of concurrent reconciles per controller",
      labelNames: ["controller"],
      registers,
    });
    this.#depth = new Gauge({
      name: "workqueue_depth",
      help: "Current depth of workqueue",
      labelNames: ["name"],
      registers,
    });
    this.#adds = new Counter({
      name: "workqueue_adds_total",
      help: "Total number of adds handled by workqueue",
      labelNames: ["name"],
      registers,
    });
    this.#retries = new Counter({
      name: "workqueue_retries_total",
      help: "Total number of retries handled by workqueue",
      labelNames: ["name"],
      registers,
    });
    this.#queueDuration = new Histogram({
      name: "workqueue_queue_duration_seconds",
      help: "How long in seconds an item stays in workqueue before being requested",
      labelNames: ["name"],
      buckets: QUEUE_BUCKETS,
      registers,
    });
    this.#workDuration = new Histogram({
      name: "workqueue_work_duration_seconds",
      help: "How long in seconds processing an item from workqueue takes",
      labelNames: ["name"],
      buckets: QUEUE_BUCKETS,
      registers,
    });
    const probes = this.#inFlightProbes;
    new Gauge({
      name: "workqueue_unfinished_work_seconds",
      help: "How many seconds of work has been done that is in progress and hasn't been observed by work_duration",
      labelNames: ["name"],
      registers,
      collect() {
        for (const [name, probe] of probes) this.set({ name }, probe().unfinishedSeconds);
      },
    });
    new Gauge({
      name: "workqueue_longest_running_processor_seconds",
      help: "How many seconds has the longest running processor for workqueue been running",
      labelNames: ["name"],
      registers,
      collect() {
        for (const [name, probe] of probes) this.set({ name }, probe().longestSeconds);
      },
    });
    const waiting = this.#waitingProbes;
    new Gauge({
      name: "dms_connection_waiting_reconciles",
      help: "Resources waiting for their connection's share of the workers: held at the connection's (or its namespace's) cap (--max-reconciles-per-connection), or deferred until its rate limit admits a call; those of a namespace's ServiceConnections none of whose reconciles run are counted under namespace/<ns>",
      labelNames: ["connection"],
      registers,
      collect() {
        this.reset();
        for (const probe of waiting.values())
          for (const [connection, count] of probe()) this.set({ connection }, count);
      },
    });
    this.#serviceRequests = new Counter({
      name: "dms_service_requests_total",
      help: "Requests to the Deployment Management Service by method, route and status",
      labelNames: ["method", "route", "status"],
      registers,
    });
    this.#serviceDuration = new Histogram({
      name: "dms_service_request_duration_seconds",
      help: "Duration of requests to the Deployment Management Service",
      labelNames: ["method", "route"],
      buckets: SERVICE_BUCKETS,
      registers,
    });
    this.unknownValues = new UnknownValues(registers);
    this.#unreadable = new Counter({
      name: "dms_service_unreadable_items_total",
      help: "Deployments of a listing skipped because they could not be read (e.g. no id)",
      registers,
    });
    this.#leader = new Gauge({
      name: "leader_election_master_status",
      help: "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates master",
      labelNames: ["name"],
      registers,
    });
  }

  /** Hooks for a {@link Controller} (and its queue) named `name`. */
  controllerHooks(name: string): ControllerMetricsHooks {
    const controller = { controller: name };
    const queue = { name };
    // Zero the counters up front so dashboards show 0 rather than "no data" before the first error.
    for (const result of ["success", "error", "requeue", "requeue_after"])
      this.#reconcileTotal.inc({ ...controller, result }, 0);
    this.#reconcileErrors.inc(controller, 0);
    this.#terminalErrors.inc(controller, 0);
    this.#retries.inc(queue, 0);
    return {
      reconciled: (result, seconds) => {
        this.#reconcileTotal.inc({ ...controller, result });
        this.#reconcileTime.observe(controller, seconds);
      },
      errored: (terminal) => {
        this.#reconcileErrors.inc(controller);
        if (terminal) this.#terminalErrors.inc(controller);
      },
      activeWorkers: (count) => this.#activeWorkers.set(controller, count),
      maxConcurrent: (count) => this.#maxConcurrent.set(controller, count),
      observeInFlight: (probe) => this.#inFlightProbes.set(name, probe),
      observeWaiting: (probe) => this.#waitingProbes.set(name, probe),
      queue: {
        depth: (depth) => this.#depth.set(queue, depth),
        added: () => this.#adds.inc(queue),
        retried: () => this.#retries.inc(queue),
        queueLatency: (seconds) => this.#queueDuration.observe(queue, seconds),
        workDuration: (seconds) => this.#workDuration.observe(queue, seconds),
      },
    };
  }

  /** Records one service call; pass it as the API client's `onResponse` hook. */
  readonly recordServiceCall = (call: ServiceCall): void => {
    const method = call.method.toUpperCase();
    this.#serviceRequests.inc({ method, route: call.route, status: statusLabel(call.status) });
    this.#serviceDuration.observe({ method, route: call.route }, call.seconds);
  };

  /** Counts one deployment skipped as unreadable; pass it as the API client's `onUnreadable`. */
  readonly recordUnreadable = (): void => {
    this.#unreadable.inc();
  };

  /** Sets `leader_election_master_status{name}` to 1 while leading, 0 otherwise. */
  setLeader(name: string, leading: boolean): void {
    this.#leader.set({ name }, leading ? 1 : 0);
  }
}

/**
 * The `status` label of a service call: a status HTTP names (Node's `STATUS_CODES`: 200, 429,
 * 503, …) as it is, any other from 100 to 599 by its class (`5xx`), the rest `other`, and a word
 * ("error") as it is. Node's client takes any three digits as a status, so a service answering a
 * new one to each call would otherwise add a series per route for each of a thousand values.
 */
function statusLabel(status: number | string): string {
  if (typeof status === "string") return status;
  if (STATUS_CODES[status] !== undefined) return String(status);
  return status >= 100 && status < 600 ? `${Math.floor(status / 100)}xx` : "other";
}
