/**
 * A cluster test's world in one call: a namespace of its own, a simulator of the service on
 * loopback, the operator in-process scoped to the namespace, and a user of the cluster; stopped
 * after the test by {@link useScenarios}. Also the waits such a test needs to say what it waits
 * for: requests the simulator recorded, and the operator having no reconcile in flight.
 */
import { afterEach } from "vitest";
import type { DeploymentSpec } from "../../src/crd/schema.ts";
import type {
  RequestFilter,
  RunningSimulator,
  SimRequest,
  SimulatorOptions,
} from "../../src/simulator/server.ts";
import { freshNamespace, type WaitForOptions, waitFor } from "./cluster.ts";
import {
  startOperator,
  startTestSimulator,
  type TestOperator,
  type TestOperatorOptions,
} from "./operator.ts";
import { ClusterUser } from "./resources.ts";

/** A test's world: its own namespace, simulator and operator, and a user of the cluster. */
export interface Scenario {
  namespace: string;
  sim: RunningSimulator;
  op: TestOperator;
  user: ClusterUser;
  /** Stops the operator and the simulator (the namespace stays: it cannot be finalized here). */
  stop(): Promise<void>;
}

/** Options of {@link startScenario}: the simulator's, and the operator's beyond its namespace. */
export interface ScenarioOptions {
  sim?: SimulatorOptions;
  op?: Partial<TestOperatorOptions>;
}

/** Starts a {@link Scenario} in a fresh namespace named after `prefix`; the caller stops it. */
export async function startScenario(prefix: string, options: ScenarioOptions = {}): Promise<Scenario> {
  const namespace = await freshNamespace(prefix);
  const sim = await startTestSimulator(options.sim);
  const op = startOperator({ simulator: sim, namespaces: [namespace], ...options.op });
  const user = new ClusterUser(options.op?.kubeconfig);
  return {
    namespace,
    sim,
    op,
    user,
    stop: async () => {
      await op.stop();
      await sim.close();
    },
  };
}

/** What the tests of a file start through {@link useScenarios}. */
export interface Scenarios {
  /** Starts a {@link Scenario}, stopped after the test. */
  start(prefix: string, options?: ScenarioOptions): Promise<Scenario>;
  /** Runs `stop` after the test as well (a second operator, a simulator of its own). */
  defer(stop: () => Promise<void>): void;
}

/**
 * The set-up and teardown of a file whose tests each start their own world: call it once in a
 * `describe`; after each test, what that test started is stopped, the latest first, and
 * `afterStop` (say, a check of the operator's log) runs on each scenario once it stopped.
 */
export function useScenarios(options: { afterStop?: (s: Scenario) => void } = {}): Scenarios {
  const stops: Array<() => Promise<void>> = [];
  afterEach(async () => {
    for (const stop of stops.splice(0).reverse()) await stop();
  });
  return {
    start: async (prefix, scenarioOptions) => {
      const s = await startScenario(prefix, scenarioOptions);
      stops.push(async () => {
        await s.stop();
        options.afterStop?.(s);
      });
      return s;
    },
    defer: (stop) => {
      stops.push(stop);
    },
  };
}

/**
 * Waits until the simulator has recorded at least `count` requests matching `filter` (and
 * `match`, when given) and returns them: the proof that the operator got that far.
 */
export function waitForRequests(
  sim: RunningSimulator,
  count: number,
  filter: RequestFilter & { match?: (r: SimRequest) => boolean },
  opts: WaitForOptions = {},
): Promise<SimRequest[]> {
  const { match, ...recorded } = filter;
  return waitFor(
    () => {
      const seen = sim.requests(recorded).filter((r) => match?.(r) ?? true);
      return seen.length >= count && seen;
    },
    { ...opts, description: `${count} recorded request(s): ${opts.description ?? JSON.stringify(recorded)}` },
  );
}

/** Waits until no reconcile of the operator is in flight (its workers idle, this instant). */
export function waitIdle(op: TestOperator, opts: WaitForOptions = {}): Promise<true> {
  return waitFor(async () => (await op.inFlight()) === 0, {
    description: "no reconcile in flight",
    ...opts,
  });
}

/**
 * The first page of a listing of the tenant's deployments (not a lookup by name): how every
 * resync pass begins, and every retry of a listing that failed.
 */
export const startsListing = (r: SimRequest): boolean =>
  r.method === "GET" && /^\/v2\/deployments\?limit=\d+&offset=0$/.test(r.url);

/**
 * Waits until `passes` whole resync passes ran since `since` (simulator clock): the simulator has
 * recorded `passes + 1` listings begun, and a pass begins only after the last one's reconciles
 * ended. What a "nothing was sent" assertion waits for instead of a pause.
 */
export function waitForPasses(
  sim: RunningSimulator,
  passes: number,
  since: number,
  opts: WaitForOptions = {},
): Promise<SimRequest[]> {
  return waitForRequests(
    sim,
    passes + 1,
    { since, match: startsListing },
    { description: `${passes} resync passes`, ...opts },
  );
}

/**
 * Creates `name` in the scenario's namespace and waits until it is Ready and the simulator has
 * recorded `polls` reads naming its deployment: the watch, the queue and the poller demonstrably
 * ran after the call. What an assertion that nothing more was sent for another resource waits
 * for instead of a pause.
 */
export async function witness(s: Scenario, name: string, spec: DeploymentSpec, polls = 1): Promise<void> {
  const since = Date.now();
  await s.user.create(s.namespace, name, spec);
  const ready = await s.user.waitReady(s.namespace, name);
  const id = ready.status?.deploymentId ?? "";
  await waitForRequests(
    s.sim,
    polls,
    { since, method: "GET", match: (r) => id !== "" && r.url.includes(id) },
    { description: `${polls} read(s) of ${name}'s deployment` },
  );
}
