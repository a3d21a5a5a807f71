/**
 * The slow tenant of the fairness benchmarks (`fairness.bench.ts`, `scale --slow-beside`): a
 * service whose builds never finish (every rollout stays in progress, so each resource is polled),
 * then made slow: batched lookups by id (`deployment_ids` with several ids) failing at once, a
 * single lookup or a revision read answered after 9.9 s (the simulator's `latency`/`errors`
 * faults narrowed by `ids`).
 */
import { randomBytes, randomUUID } from "node:crypto";
import type { IncomingMessage } from "node:http";
import { setTimeout as sleep } from "node:timers/promises";
import type { KubeClient } from "../../src/kube/client.ts";
import { DEPLOYMENTS } from "../../src/kube/custom-resources.ts";
import { collectionPath, type DeploymentObject } from "../../src/kube/object.ts";
import type { Faults } from "../../src/simulator/faults.ts";
import type { SeedDeployment } from "../../src/simulator/seed.ts";
import { startSimulator } from "../../src/simulator/server.ts";
import { APPLY_CONCURRENCY, pool, type RunningOperator } from "./operator-run.ts";
import { httpText, parseSamples } from "./probes.ts";
import { connectionNames, resourceBody, type Tenant } from "./tenancy.ts";

/** A build that never finishes: a revision goes live after a day. */
export const DAY_MS = 86_400_000;
/** How long the slow service takes to answer a single read: just within the default 10 s timeout. */
const SLOW_READ_MS = 9_900;
/** The slow service's faults (see the module comment). */
const SLOW_FAULTS: Faults = {
  latency: [
    { ms: SLOW_READ_MS, route: "GET /v2/deployments", ids: "one" },
    { ms: SLOW_READ_MS, route: "GET /v2/deployments/{deployment_id}/revisions/{revision_id}" },
  ],
  errors: [{ status: 500, rate: 1, route: "GET /v2/deployments", ids: "many" }],
};
/** After the slow tenant starts (faults set, qps lowered): its reconciles fill what they may. */
export const SETTLE_MS = 20_000;

/**
 * A tenant of `namespace` with a simulator of its own (its builds live after
 * `revisionActiveAfterMs`), seeded with `seed`, its requests seen by `onRequest`.
 */
export async function benchTenant(
  index: number,
  namespace: string,
  revisionActiveAfterMs: number,
  onRequest?: (req: IncomingMessage) => void,
  seed: SeedDeployment[] = [],
): Promise<Tenant> {
  const apiKey = randomBytes(16).toString("hex");
  const tenantId = randomUUID();
  const sim = await startSimulator({
    apiKey,
    tenantId,
    timing: { readyAfterMs: 0, revisionActiveAfterMs },
    ...(onRequest ? { onRequest } : {}),
    ...(seed.length > 0 ? { seed: { deployments: seed } } : {}),
  });
  return { index, namespace, resources: seed.length, sim, apiKey, tenantId };
}

/**
 * Makes `tenant` the slow tenant: `count` resources created in its namespace while its service is
 * fast (their builds never finish), spread in turn over its `connections` ServiceConnections
 * (`connectionNames`), then, once each has its deployment, its service slowed.
 */
export async function slowDown(
  client: KubeClient,
  tenant: Tenant,
  count: number,
  operator: RunningOperator,
  connections = 1,
): Promise<void> {
  const names = connectionNames(connections);
  await pool(count, APPLY_CONCURRENCY, (i) =>
    client.request({
      method: "POST",
      path: collectionPath(DEPLOYMENTS, tenant.namespace),
      body: resourceBody(`slow-${String(i).padStart(4, "0")}`, names[i % names.length]),
    }),
  );
  await untilCreated(client, tenant.namespace, count, operator);
  tenant.sim.faults.set(SLOW_FAULTS);
}

/** Waits until `count` resources of `namespace` have their deployment id. */
async function untilCreated(
  client: KubeClient,
  namespace: string,
  count: number,
  operator: RunningOperator,
): Promise<void> {
  const deadline = Date.now() + 300_000;
  for (;;) {
    operator.process.assertRunning();
    const list = (await client.request({ method: "GET", path: collectionPath(DEPLOYMENTS, namespace) })) as {
      items: DeploymentObject[];
    };
    const created = list.items.filter(
      (o) => (o.status as { deploymentId?: string } | undefined)?.deploymentId,
    );
    if (created.length >= count) return;
    if (Date.now() > deadline)
      throw new Error(`${created.length} of ${count} resources of ${namespace} created in 300 s`);
    await sleep(1_000);
  }
}

/** `dms_connection_waiting_reconciles` per connection label (empty when the operator has none). */
export async function waitingGauge(operator: RunningOperator): Promise<Record<string, number>> {
  const family = "dms_connection_waiting_reconciles";
  const text = await httpText(`${operator.metricsUrl}?name=${family}`).catch(() => "");
  const out: Record<string, number> = {};
  for (const sample of parseSamples(text, family)) out[sample.labels.connection ?? ""] = sample.value;
  return out;
}
