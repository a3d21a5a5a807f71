/**
 * The scale benchmark's many-tenants case (`npm run bench -- scale --tenants 50 --n 10000`): N
 * resources spread over T ServiceConnections, each in a namespace of its own with its own Secret
 * (an API key only its simulator accepts) and its own simulator; the compiled operator runs as
 * its own process over every namespace, as the cluster-wide install does. Measured:
 *
 * 1. Cold creates: the N resources applied while the operator runs, every simulator empty and
 *    answering Ready at once; RSS idle before (T connections Ready, no resource).
 * 2. Steady: one drift resync pass isolated, as in the single-namespace case: the simulators'
 *    calls against Σ over connections of ⌈n/100⌉+1 (the default connection, which no resource
 *    uses, is counted apart: it lists its empty tenant once a pass), each connection against its
 *    own goal, the API server's requests per resource, the operator's CPU; RSS just before.
 * 3. Contention, twice in one invocation so that the comparison is within the machine's noise:
 *    once as is, once with the first tenant's simulator made a black hole (the `latency` fault,
 *    a day long, on every route: requests are accepted and never answered). Each time, from the
 *    start of a resync pass: edits of the other tenants' resources, paced over a window that
 *    covers at least one whole resync cycle (edit → the simulator receiving its PATCH), and 5 s
 *    in, a drift made on one deployment of every other tenant (drift → the operator's corrective
 *    PATCH, which comes with the next pass that lists it); also how far apart passes start.
 *
 * The T simulators run in this process (their request hook timestamps what the operator sends);
 * what they cost this process is reported apart, and the operator's figures are read from its own
 * /proc entries. Peak RSS (VmHWM) covers the operator's whole life; the peak before the black hole
 * is kept too.
 */

import { randomBytes, randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { parseDuration } from "../../src/duration.ts";
import { type KubeClient, PatchType } from "../../src/kube/client.ts";
import { DEPLOYMENTS } from "../../src/kube/custom-resources.ts";
import { collectionPath, type DeploymentObject } from "../../src/kube/object.ts";
import { type RunningSimulator, startSimulator } from "../../src/simulator/server.ts";
import { ControlPlane } from "../controlplane/harness.ts";
import { benchDeploymentBody, benchDeploymentSpec, callCount, quantile } from "./harness.ts";
import {
  APPLY_CONCURRENCY,
  passStarts,
  planeClient,
  pool,
  progress,
  ReadyWatch,
  type RunningOperator,
  resyncPass,
  round,
  type Setup,
  startOperator,
  Tap,
} from "./operator-run.ts";
import { cpuSeconds, memoryMiB } from "./probes.ts";
import type { ContentionFigures, TenancyFigures } from "./tenancy-report.ts";

type Counters = Record<string, Record<string, number>>;

/** Most tenants one run may have: each is a namespace, a Secret, a connection and a simulator. */
const MAX_TENANTS = 500;
/** Name of every tenant's ServiceConnection and of its Secret (each in the tenant's namespace). */
export const CONNECTION = "sim";
const SECRET = "dms-key";
const SECRET_KEY = "api-key";
/** Edits per contention phase; they are paced over {@link editWindowMs}. */
const EDITS = 100;
/** After a pass's first listing call: when the drifts are made (after that pass has listed). */
const DRIFT_DELAY_MS = 5_000;
/** A black hole: the request is held a day, far past any timeout of the operator's. */
const BLACK_HOLE_MS = 86_400_000;

/**
 * `--tenants`: a whole number from 2 (one black hole, and others to measure) to MAX_TENANTS, no
 * larger than any N (each tenant has a resource).
 */
export function parseTenants(text: string, sizes: readonly number[]): number {
  const tenants = Number(text.trim());
  if (!Number.isInteger(tenants) || tenants < 2 || tenants > MAX_TENANTS)
    throw new Error(`--tenants: '${text}' is not a whole number from 2 to ${MAX_TENANTS}`);
  const small = sizes.filter((n) => n < tenants);
  if (small.length > 0)
    throw new Error(
      `--tenants ${tenants}: --n ${small.join(",")} would leave tenants without a resource; give --n at least ${tenants}`,
    );
  return tenants;
}

const namespaceOf = (t: number) => `tenant-${String(t).padStart(3, "0")}`;
const nameOf = (t: number, j: number) => `t${String(t).padStart(3, "0")}-${String(j).padStart(5, "0")}`;

/** How many of the N resources tenant `t` holds: N spread evenly, the first ones one more. */
function perTenant(n: number, tenants: number, t: number): number {
  return Math.floor(n / tenants) + (t < n % tenants ? 1 : 0);
}

/** One tenant: its namespace and its simulator (with the key its Secret holds). */
export interface Tenant {
  index: number;
  namespace: string;
  resources: number;
  sim: RunningSimulator;
  apiKey: string;
  tenantId: string;
}

/** Measures the many-tenants case at `tenants` × N/`tenants` (see the module comment). */
export async function measureTenants(
  tenants: number,
  n: number,
  setup: Setup,
  listingDeadline: string | undefined,
): Promise<TenancyFigures> {
  const loadAtStart = loadavg()[0] ?? 0;
  const deadlineFlag = listingDeadline === undefined ? undefined : `--listing-deadline=${listingDeadline}`;
  const periodMs = parseDuration(setup.resync);
  if (periodMs === undefined) throw new Error(`--resync-period: '${setup.resync}' is not a duration`);
  const benchBefore = memoryMiB(process.pid);
  const tap = new Tap();
  const fleet: Tenant[] = [];
  const plane = await ControlPlane.start();
  const work = mkdtempSync(join(tmpdir(), "dms-tenancy-"));
  // The default connection (the operator's flags) points at a simulator of its own, which no
  // resource uses: its calls are told apart from the tenants'.
  const defaultSim = await startSimulator({ onRequest: tap.hook });
  let running: RunningOperator | undefined;
  try {
    for (let t = 0; t < tenants; t++) {
      const apiKey = randomBytes(16).toString("hex");
      const tenantId = randomUUID();
      const sim = await startSimulator({
        apiKey,
        tenantId,
        timing: { readyAfterMs: 0, revisionActiveAfterMs: 0 },
        onRequest: tap.hook,
      });
      fleet.push({
        index: t,
        namespace: namespaceOf(t),
        resources: perTenant(n, tenants, t),
        sim,
        apiKey,
        tenantId,
      });
    }
    const benchWithSimulators = memoryMiB(process.pid);
    await plane.installCrds();
    const { client, apiMetrics } = await planeClient(plane, "dms-tenancy-bench");
    await pool(tenants, APPLY_CONCURRENCY, (t) => createTenant(client, fleet[t] as Tenant));
    progress(`${tenants} tenants: namespaces, Secrets, ServiceConnections and simulators made`);

    running = await startOperator(
      setup,
      plane.kubeconfigPath,
      undefined,
      defaultSim.url,
      work,
      deadlineFlag === undefined ? [] : [deadlineFlag],
    );
    const pid = running.process.pid;
    const startupSeconds = await running.ready();
    const connectedSeconds = await untilConnectionsReady(client, tenants, running);
    await sleep(5_000);
    const idle = memoryMiB(pid);
    progress(
      `${tenants} connections Ready ${round(connectedSeconds, 1)} s after start; idle RSS ${idle.rss.toFixed(1)} MiB`,
    );

    // 1. Cold creates.
    const watch = new ReadyWatch(client, undefined);
    await watch.start();
    for (const s of [defaultSim, ...fleet.map((f) => f.sim)]) s.resetCounters();
    tap.reset();
    const benchCpuAtCreates = cpuSeconds(process.pid);
    const createsStarted = performance.now();
    await pool(n, APPLY_CONCURRENCY, (i) => {
      // Round robin over the tenants, so that every connection works all through the creates.
      const tenant = fleet[i % tenants] as Tenant;
      return client.request({
        method: "POST",
        path: collectionPath(DEPLOYMENTS, tenant.namespace),
        body: resourceBody(nameOf(tenant.index, Math.floor(i / tenants))),
      });
    });
    const applySeconds = (performance.now() - createsStarted) / 1000;
    await watch.untilReady(n, running.process, Math.max(600_000, n * 200));
    const createSeconds = (performance.now() - createsStarted) / 1000;
    const creates = tap.posts.length;
    const cold: TenancyFigures["cold"] = {
      applySeconds: round(applySeconds, 1),
      secondsToAllReady: round(createSeconds, 1),
      creates,
      createsPerSecond: round(creates / createSeconds, 1),
      serviceCallsPerCreate: round(callCount(tenantCounters(fleet)) / Math.max(1, creates), 2),
      serviceCallsByKind: { ...tap.kinds },
      benchmarkCpuSeconds: round(cpuSeconds(process.pid) - benchCpuAtCreates, 2),
    };
    await watch.stop(); // this process sends nothing to the API server from here on
    progress(
      `N=${n}: ${creates} creates, all Ready in ${cold.secondsToAllReady} s; waiting for a resync pass`,
    );

    // 2. Steady: the pass after the creates' first, as in the single-namespace case.
    const counted = {
      counters: () => tenantCounters(fleet),
      resetCounters: () => {
        for (const s of [defaultSim, ...fleet.map((f) => f.sim)]) s.resetCounters();
      },
    };
    const goal = fleet.reduce((sum, f) => sum + Math.ceil(f.resources / 100) + 1, 0);
    const first = await resyncPass(n, running, counted, tap, apiMetrics, setup.resync, goal);
    progress(`N=${n}: first resync ${first.seconds} s, ${first.cpuSeconds} CPU-s; waiting for the next`);
    const benchCpuAtPass = cpuSeconds(process.pid);
    const resync = await resyncPass(n, running, counted, tap, apiMetrics, setup.resync, goal);
    const benchPassCpu = cpuSeconds(process.pid) - benchCpuAtPass;
    const offGoal = fleet.filter(
      (f) => callCount(f.sim.counters()) !== Math.ceil(f.resources / 100) + 1,
    ).length;
    const defaultCalls = callCount(defaultSim.counters());
    resync.figures.firstPass = {
      seconds: first.figures.seconds,
      serviceCalls: first.figures.serviceCalls,
      kubeRequests: first.figures.kubeRequests,
      etcdWrites: first.figures.etcdWrites,
      cpuSeconds: first.figures.cpuSeconds,
    };
    const peakBeforeBlackHole = memoryMiB(pid).peak;
    progress(
      `N=${n}: resync ${resync.seconds} s, ${resync.figures.serviceCalls} calls (goal ${goal}), ${resync.cpuSeconds} CPU-s; contention without a black hole`,
    );

    // 3. Contention, without then with a black hole on the first tenant.
    const others = fleet.slice(1);
    const windowMs = editWindowMs(periodMs);
    const open = await contention(client, others, tap, running, periodMs, windowMs, 2, 1);
    progress(
      `N=${n}: without: edit p50/p99 ${open.edit.p50Ms}/${open.edit.p99Ms} ms, drift p50 ${open.drift.p50Ms} ms; now with tenant 0 a black hole`,
    );
    const hole = fleet[0] as Tenant;
    hole.sim.faults.set({ latency: [{ ms: BLACK_HOLE_MS }] });
    const blocked = await contention(client, others, tap, running, periodMs, windowMs, 3, 2);
    blocked.blackHole = await tenantState(client, hole.namespace);
    progress(
      `N=${n}: with: edit p50/p99 ${blocked.edit.p50Ms}/${blocked.edit.p99Ms} ms, drift p50 ${blocked.drift.p50Ms} ms`,
    );

    const end = memoryMiB(pid);
    const benchEnd = memoryMiB(process.pid);
    return {
      tenants,
      n,
      perTenant: { min: perTenant(n, tenants, tenants - 1), max: perTenant(n, tenants, 0) },
      date: new Date().toISOString(),
      commit: setup.commit,
      node: process.version,
      loadAverage: { start: round(loadAtStart, 1), end: round(loadavg()[0] ?? 0, 1) },
      runtimeEnv: setup.runtimeEnv,
      operatorFlags: running.flags,
      listingDeadline: listingDeadline ?? "operator default",
      startupSeconds: round(startupSeconds, 1),
      connectionsReadySeconds: round(connectedSeconds, 1),
      rssMiB: {
        idle: round(idle.rss, 1),
        steady: resync.steadyRssMiB,
        steadySplit: resync.steadySplit,
        peakBeforeBlackHole: round(peakBeforeBlackHole, 1),
        peak: round(end.peak, 1),
        end: round(end.rss, 1),
      },
      resync: {
        ...resync.figures,
        defaultConnectionCalls: defaultCalls,
        connectionsOffGoal: offGoal,
        benchmarkCpuSeconds: round(benchPassCpu, 2),
      },
      cold,
      contention: { windowSeconds: windowMs / 1000, without: open, withBlackHole: blocked },
      benchmarkProcess: {
        rssBeforeSimulatorsMiB: round(benchBefore.rss, 1),
        rssWithSimulatorsMiB: round(benchWithSimulators.rss, 1),
        rssEndMiB: round(benchEnd.rss, 1),
        peakMiB: round(benchEnd.peak, 1),
        cpuSeconds: round(cpuSeconds(process.pid), 1),
      },
    };
  } finally {
    await running?.process.stop(30_000);
    for (const s of [defaultSim, ...fleet.map((f) => f.sim)]) await s.close();
    await plane.stop();
    rmSync(work, { recursive: true, force: true });
  }
}

/** Edits are paced over this long: at least one resync cycle even when a black hole holds the listing. */
function editWindowMs(periodMs: number): number {
  return Math.max(120_000, 4 * periodMs);
}

/** The resource `name` of a tenant, on that tenant's ServiceConnection. */
export function resourceBody(name: string, connection = CONNECTION): Record<string, unknown> {
  const body = benchDeploymentBody(name);
  return {
    ...body,
    spec: { ...(body.spec as object), connectionRef: { kind: "ServiceConnection", name: connection } },
  };
}

/** The names of a tenant's `count` ServiceConnections: {@link CONNECTION}, then `sim-1`, `sim-2`, … */
export function connectionNames(count: number): string[] {
  return Array.from({ length: count }, (_, i) => (i === 0 ? CONNECTION : `${CONNECTION}-${i}`));
}

/**
 * The tenant's namespace, the Secret with its simulator's key, and its ServiceConnections
 * (`connections` of them, {@link connectionNames}, each to its simulator).
 */
export async function createTenant(client: KubeClient, tenant: Tenant, connections = 1): Promise<void> {
  await client.request({
    method: "POST",
    path: "/api/v1/namespaces",
    body: { metadata: { name: tenant.namespace } },
  });
  await client.request({
    method: "POST",
    path: `/api/v1/namespaces/${tenant.namespace}/secrets`,
    body: { metadata: { name: SECRET }, stringData: { [SECRET_KEY]: tenant.apiKey } },
  });
  for (const name of connectionNames(connections))
    await client.request({
      method: "POST",
      path: `/apis/dms.dev/v1alpha1/namespaces/${tenant.namespace}/serviceconnections`,
      body: {
        apiVersion: "dms.dev/v1alpha1",
        kind: "ServiceConnection",
        metadata: { name },
        spec: {
          baseUrl: tenant.sim.url,
          apiKeySecretRef: { name: SECRET, key: SECRET_KEY },
          tenantId: tenant.tenantId,
        },
      },
    });
}

interface Condition {
  type: string;
  status: string;
  reason?: string;
}
interface WithConditions {
  metadata: { name: string; namespace?: string };
  status?: { conditions?: Condition[] };
}

const condition = (o: WithConditions, type: string) => o.status?.conditions?.find((c) => c.type === type);

/** Waits until every ServiceConnection is Ready; resolves with the seconds it took. */
export async function untilConnectionsReady(
  client: KubeClient,
  count: number,
  operator: RunningOperator,
): Promise<number> {
  const started = performance.now();
  const deadline = Date.now() + 120_000;
  for (;;) {
    operator.process.assertRunning();
    const list = (await client.request({
      method: "GET",
      path: "/apis/dms.dev/v1alpha1/serviceconnections",
    })) as { items: WithConditions[] };
    const ready = list.items.filter((c) => condition(c, "Ready")?.status === "True").length;
    if (ready >= count) return (performance.now() - started) / 1000;
    if (Date.now() > deadline) {
      const not = list.items
        .filter((c) => condition(c, "Ready")?.status !== "True")
        .map(
          (c) => `${c.metadata.namespace}/${c.metadata.name}: ${condition(c, "Ready")?.reason ?? "no Ready"}`,
        );
      throw new Error(`${ready} of ${count} connections Ready after 120 s: ${not.slice(0, 5).join("; ")}`);
    }
    await sleep(500);
  }
}

/** The tenants' simulators' counters, summed per route and status (the default connection's apart). */
function tenantCounters(fleet: readonly Tenant[]): Counters {
  const sum: Counters = {};
  for (const f of fleet) {
    for (const [route, byStatus] of Object.entries(f.sim.counters())) {
      const into = sum[route] ?? {};
      sum[route] = into;
      for (const [status, count] of Object.entries(byStatus)) into[status] = (into[status] ?? 0) + count;
    }
  }
  return sum;
}

/**
 * One contention phase over the tenants `others` (see the module comment): from the next pass's
 * first listing call, EDITS edits to image `image` paced over `windowMs`, and DRIFT_DELAY_MS in,
 * one drift per tenant on its resource `driftSlot` places from the end (never an edited one).
 */
async function contention(
  client: KubeClient,
  others: readonly Tenant[],
  tap: Tap,
  operator: RunningOperator,
  periodMs: number,
  windowMs: number,
  image: number,
  driftSlot: number,
): Promise<ContentionFigures> {
  tap.reset();
  const passStarted = new Promise<void>((resolve) => {
    tap.onFullListing = resolve;
  });
  const waitMs = periodMs * 1.2 + 180_000;
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([
    passStarted,
    new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error(`no resync pass within ${waitMs / 1000} s`)), waitMs);
    }),
  ]).finally(() => clearTimeout(timer));
  const startedAt = performance.now();

  // The edited resources: spread over the tenants and their resources, the last two of each
  // tenant left for the drifts.
  const targets: Array<{ tenant: Tenant; name: string }> = [];
  const editable = others.reduce((sum, f) => sum + Math.max(0, f.resources - 2), 0);
  const count = Math.min(EDITS, editable);
  for (let k = 0; targets.length < count; k++) {
    const tenant = others[k % others.length] as Tenant;
    const j = Math.floor(k / others.length);
    if (j < tenant.resources - 2) targets.push({ tenant, name: nameOf(tenant.index, j) });
  }
  const sent = new Map<string, number>();
  const writes: Promise<unknown>[] = [];
  const drifted = new Map<string, number>();
  const drifts = sleep(DRIFT_DELAY_MS).then(() => {
    for (const tenant of others) {
      const name = nameOf(tenant.index, tenant.resources - driftSlot);
      const id = tenant.sim.store.getByName(name)?.id;
      if (id === undefined) continue;
      tenant.sim.store.drift(id, {
        source_revision_config: { image_uri: `registry.example.com/${name}:drifted-${image}` },
      });
      drifted.set(id.toLowerCase(), performance.now());
    }
  });
  for (let k = 0; k < targets.length; k++) {
    const wait = startedAt + (k * windowMs) / targets.length - performance.now();
    if (wait > 0) await sleep(wait);
    const { tenant, name } = targets[k] as { tenant: Tenant; name: string };
    sent.set(name, performance.now());
    writes.push(
      client.request({
        method: "PATCH",
        path: `${collectionPath(DEPLOYMENTS, tenant.namespace)}/${name}`,
        contentType: PatchType.Merge,
        body: {
          spec: {
            sourceRevisionConfig: {
              imageUri: benchDeploymentSpec(name, image).sourceRevisionConfig?.imageUri,
            },
          },
        },
      }),
    );
  }
  await Promise.all([drifts, ...writes]);

  const editLatencies = () => {
    const out: number[] = [];
    for (const { tenant, name } of targets) {
      const id = tenant.sim.store.getByName(name)?.id.toLowerCase();
      const at = id === undefined ? undefined : tap.patches.get(id);
      const from = sent.get(name);
      if (at !== undefined && from !== undefined) out.push(at - from);
    }
    return out;
  };
  const driftLatencies = () =>
    [...drifted].flatMap(([id, at]) => {
      const patched = tap.patches.get(id);
      return patched === undefined ? [] : [patched - at];
    });
  // A drift is corrected by the next pass that lists it; a black hole may hold each pass's
  // listing until the operator gives it up.
  const deadline = Date.now() + 3 * periodMs + 300_000;
  while (
    (editLatencies().length < targets.length || driftLatencies().length < drifted.size) &&
    Date.now() < deadline
  ) {
    operator.process.assertRunning();
    await sleep(500);
  }
  const edits = Float64Array.from(editLatencies()).sort();
  const corrections = Float64Array.from(driftLatencies()).sort();
  // Pass starts: the first listing call of each group of calls close together.
  const starts = passStarts(tap.fullListings.filter((t) => t >= startedAt));
  const gaps = Float64Array.from(starts.slice(1).map((t, i) => t - (starts[i] as number))).sort();
  return {
    edit: {
      edits: targets.length,
      patched: edits.length,
      p50Ms: round(quantile(edits, 0.5), 1),
      p99Ms: round(quantile(edits, 0.99), 1),
      maxMs: round(edits[edits.length - 1] ?? 0, 1),
    },
    drift: {
      drifts: drifted.size,
      corrected: corrections.length,
      p50Ms: round(quantile(corrections, 0.5), 1),
      p99Ms: round(quantile(corrections, 0.99), 1),
      maxMs: round(corrections[corrections.length - 1] ?? 0, 1),
    },
    passStarts: starts.length,
    passIntervalMedianSeconds: round(quantile(gaps, 0.5) / 1000, 1),
    seconds: round((performance.now() - startedAt) / 1000, 1),
  };
}

/** What the black-holed tenant shows at the end: its connection's Ready, its resources' Synced. */
async function tenantState(client: KubeClient, namespace: string): Promise<ContentionFigures["blackHole"]> {
  const connection = (await client.request({
    method: "GET",
    path: `/apis/dms.dev/v1alpha1/namespaces/${namespace}/serviceconnections/${CONNECTION}`,
  })) as WithConditions;
  const list = (await client.request({
    method: "GET",
    path: collectionPath(DEPLOYMENTS, namespace),
  })) as { items: DeploymentObject[] };
  const synced: Record<string, number> = {};
  for (const o of list.items) {
    const c = condition(o as WithConditions, "Synced");
    const key = c === undefined ? "none" : `${c.status === "True" ? "True" : "False"}/${c.reason ?? ""}`;
    synced[key] = (synced[key] ?? 0) + 1;
  }
  const ready = condition(connection, "Ready");
  return {
    connectionReady: ready === undefined ? "none" : `${ready.status}/${ready.reason ?? ""}`,
    synced,
  };
}
