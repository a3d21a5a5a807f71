/**
 * The operator under test, in-process: a simulator of the service on loopback with fast timing,
 * and the operator wired by `buildOperator` (the same composition root `dms-operator run` uses),
 * scoped to the test's namespaces, with a logger whose every line is kept for assertions (such
 * as "no secret value is ever logged").
 */
import { DEFAULT_MAX_RESPONSE_BYTES } from "../../src/api/errors.ts";
import type { ServiceConfig } from "../../src/config.ts";
import { parseSelector } from "../../src/crd/label-selector.ts";
import { buildOperator, type Operator, type OperatorConfig } from "../../src/main.ts";
import { type RunningSimulator, type SimulatorOptions, startSimulator } from "../../src/simulator/server.ts";
import { testKubeconfigPath, waitFor } from "./cluster.ts";
import { LogCapture } from "./logs.ts";

/** The API key the test simulator demands; the operator sends it, and it must never be logged. */
export const TEST_API_KEY = "test-key-d41d8cd98f00b204e980";

/** Service transitions fast enough for tests, slow enough to observe the states in between. */
export const FAST_TIMING = { readyAfterMs: 300, revisionActiveAfterMs: 300, deleteAfterMs: 300 } as const;

/** Starts a simulator demanding {@link TEST_API_KEY}, with {@link FAST_TIMING} unless told otherwise. */
export function startTestSimulator(options: SimulatorOptions = {}): Promise<RunningSimulator> {
  return startSimulator({ apiKey: TEST_API_KEY, ...options, timing: { ...FAST_TIMING, ...options.timing } });
}

/** Leader election for a test instance: a short lease in the test's namespace. */
export interface TestLeaderElection {
  namespace: string;
  name?: string;
  leaseDurationMs?: number;
  renewDeadlineMs?: number;
  retryPeriodMs?: number;
}

/** Options of {@link startOperator}. */
export interface TestOperatorOptions {
  simulator: RunningSimulator;
  namespaces: string[];
  /** Default: the run's shared control plane. */
  kubeconfig?: string;
  identity?: string;
  /**
   * What the rollout windows' search is timed on. Default the operator's (the thread's CPU time):
   * a test of windows that is not about the search's time budget passes one that stands still.
   */
  searchCounter?: () => number;
  /** Drift resync period. Default 60 s: no resync during a test unless it asks for one. */
  resyncMs?: number;
  /** `--listing-deadline`. Default: the operator's (a minute, or half the resync period). */
  listingDeadlineMs?: number;
  /** Poll while rolling out, creating or deleting. Default 200 ms. */
  pollMs?: number;
  /** Default 15 s. */
  createGraceMs?: number;
  concurrency?: number;
  /** Off unless given. */
  leaderElection?: TestLeaderElection;
  /** Overrides of the service settings (timeouts, QPS; `retries` only retries listing pages). */
  service?: Partial<ServiceConfig>;
  /** Default 10 s; a tiny value makes `stop()` abandon in-flight work, as a killed process would. */
  shutdownTimeoutMs?: number;
  /** Longest one reconcile may run. Default 120 s (the production default). */
  reconcileTimeoutMs?: number;
  /** `--revision-tracking`. Default on (the production default). */
  revisionTracking?: boolean;
  /** Shared with another instance to compare their lines; default a capture of its own. */
  logs?: LogCapture;
  /** Serve /metrics and the probes on loopback ports of the system's choosing. Default off. */
  listen?: boolean;
  /**
   * `--metrics-secure`: /metrics over HTTPS to reviewed tokens only. Default off: the tests that
   * scrape it read it without a token.
   */
  metricsSecure?: boolean;
  /** Watch ClusterServiceConnections although scoped to `namespaces`. Default off. */
  clusterConnections?: boolean;
  /** `--default-connection-namespace-selector`, in the flag's syntax. Default none. */
  defaultConnectionNamespaceSelector?: string;
  /** `--max-connections-per-namespace`. Default: the operator's (20). */
  maxConnectionsPerNamespace?: number;
  /** `--max-reconciles-per-connection`. Default: the operator's (a quarter of `concurrency`). */
  maxReconcilesPerConnection?: number;
}

/** A running operator and what a test inspects of it. */
export interface TestOperator {
  operator: Operator;
  identity: string;
  logs: LogCapture;
  config: OperatorConfig;
  /** Reconciles finished so far (any result), from the operator's own metrics. */
  reconciles(): Promise<number>;
  /** Reconciles in flight now (all controllers), from the operator's own metrics. */
  inFlight(): Promise<number>;
  /** A metric of the operator's registry, summed over its labels (0 when it has no samples). */
  metric(name: string): Promise<number>;
  /**
   * Resolves once the workers run (caches synced, the install key read). The start-up listing of
   * the service starts then: it may still be under way.
   */
  started(): Promise<void>;
  /** Stops it (graceful, within `shutdownTimeoutMs`) and resolves once it has stopped. */
  stop(): Promise<void>;
}

/** The operator's configuration for a test (all fields valid; see `runConfigFrom`). */
export function testOperatorConfig(options: TestOperatorOptions): OperatorConfig {
  const le = options.leaderElection;
  return {
    service: {
      baseUrl: options.simulator.url,
      apiKey: TEST_API_KEY,
      tenantId: undefined,
      apiKeyHeader: "X-Api-Key",
      tenantHeader: "X-Tenant-Id",
      insecureSkipTlsVerify: false,
      timeoutMs: 5_000,
      maxResponseBytes: DEFAULT_MAX_RESPONSE_BYTES,
      retries: 0,
      qps: 200,
      burst: 400,
      ...options.service,
    },
    kubeconfig: options.kubeconfig ?? testKubeconfigPath(),
    namespaces: options.namespaces,
    ...(options.clusterConnections ? { clusterConnections: true } : {}),
    ...(options.defaultConnectionNamespaceSelector !== undefined
      ? { defaultConnectionNamespaceSelector: defaultSelector(options.defaultConnectionNamespaceSelector) }
      : {}),
    concurrency: options.concurrency ?? 4,
    resyncMs: options.resyncMs ?? 60_000,
    ...(options.listingDeadlineMs === undefined ? {} : { listingDeadlineMs: options.listingDeadlineMs }),
    ...(options.maxConnectionsPerNamespace === undefined
      ? {}
      : { maxConnectionsPerNamespace: options.maxConnectionsPerNamespace }),
    ...(options.maxReconcilesPerConnection === undefined
      ? {}
      : { maxReconcilesPerConnection: options.maxReconcilesPerConnection }),
    leaderElection: {
      enabled: le !== undefined,
      namespace: le?.namespace ?? options.namespaces[0] ?? "default",
      name: le?.name ?? "dms-operator-leader",
      leaseDurationMs: le?.leaseDurationMs ?? 3_000,
      renewDeadlineMs: le?.renewDeadlineMs ?? 2_000,
      retryPeriodMs: le?.retryPeriodMs ?? 500,
    },
    metricsBindAddress: options.listen ? "127.0.0.1:0" : "0",
    metricsSecure: options.metricsSecure ?? false,
    healthProbeBindAddress: options.listen ? "127.0.0.1:0" : "0",
    shutdownTimeoutMs: options.shutdownTimeoutMs ?? 10_000,
    pollMs: options.pollMs ?? 200,
    createGraceMs: options.createGraceMs ?? 15_000,
    reconcileTimeoutMs: options.reconcileTimeoutMs ?? 120_000,
    revisionTracking: options.revisionTracking ?? true,
  };
}

/** `--default-connection-namespace-selector` as `run` parses it; a test's typo throws. */
function defaultSelector(text: string) {
  const parsed = parseSelector(text);
  if (!parsed.ok) throw new Error(`defaultConnectionNamespaceSelector: ${parsed.problem}`);
  return { text, selector: parsed.selector };
}

/**
 * Builds and starts the operator, returning at once: the informers sync and the workers start
 * in the background, as in production (see {@link TestOperator.started}).
 */
export function startOperator(options: TestOperatorOptions): TestOperator {
  const logs = options.logs ?? new LogCapture();
  const config = testOperatorConfig(options);
  const operator = buildOperator(config, {
    logger: logs.logger,
    ...(options.identity ? { identity: options.identity } : {}),
    ...(options.searchCounter ? { searchCounter: options.searchCounter } : {}),
  });
  const abort = new AbortController();
  // A shutdown that overran its deadline (a simulated kill) is what the test asked for.
  const running = operator.manager.start(abort.signal).catch((error: unknown) => {
    if (!abort.signal.aborted) throw error;
  });
  running.catch(() => {});
  const sum = async (name: string) => {
    const metric = await operator.metrics.registry.getSingleMetric(name)?.get();
    return (metric?.values ?? []).reduce((total, v) => total + v.value, 0);
  };
  return {
    operator,
    identity: operator.identity,
    logs,
    config,
    reconciles: () => sum("controller_runtime_reconcile_total"),
    inFlight: () => sum("controller_runtime_active_workers"),
    metric: sum,
    started: async () => {
      await waitFor(() => operator.controller.running, { description: "the operator's workers" });
    },
    stop: async () => {
      abort.abort(new Error("test stopped the operator"));
      await running;
    },
  };
}
