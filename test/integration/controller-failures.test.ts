// Failures of the service as the user sees them: a rejected request (422) is reported with the
// service's detail and not retried until the spec changes; 429 waits out Retry-After; 401, 5xx and
// timeouts of the listing are said once and retried with the listing, and heal by themselves once
// the service recovers (a whole reconcile's timeout is retried with a backoff); a 409 that persists
// is reported, not retried silently; an operator stopped mid-reconcile blames nothing on the
// resource.
import { describe, expect, it } from "vitest";
import type { DeploymentSpec } from "../../src/crd/schema.ts";
import type { Faults } from "../../src/simulator/faults.ts";
import { waitFor } from "../support/cluster.ts";
import { conditionOf, hasCondition } from "../support/resources.ts";
import {
  type Scenario,
  startsListing,
  useScenarios,
  waitForPasses,
  waitForRequests,
  waitIdle,
  witness,
} from "../support/scenario.ts";

const PATCH = "PATCH /v2/deployments/{deployment_id}";

const spec: DeploymentSpec = {
  source: "internal_docker",
  sourceConfig: { resourceSpec: { minScale: 1, maxScale: 2 } },
  sourceRevisionConfig: { imageUri: "registry.example.com/agent:1" },
};
const scaleTo = (maxScale: number) => ({ spec: { sourceConfig: { resourceSpec: { maxScale } } } });

/**
 * The controller's failed reconciles of resource `name` from its log, oldest first: when each
 * ended, its failures in a row so far, and the delay it scheduled the next one after.
 */
function failedReconciles(s: Scenario, name: string) {
  return s.op.logs
    .find("reconcile failed")
    .filter((l) => l.record.namespace === s.namespace && l.record.name === name)
    .map((l) => ({
      at: l.record.time,
      failures: Number(l.record.failures),
      retryInMs: Number(l.record.retryInMs),
    }));
}

/**
 * Checks that a resource whose connection's listing fails says so once and then waits for the
 * listings (the resync retries a failed listing on a backoff of its own, and each pass enqueues
 * the resource again): between the second and third listings the simulator recorded, the
 * controller fails it without a log line of its own and its Events stay as they were; a retry
 * of each resource on its own backoff besides would log and record one each time.
 */
async function expectSaidOnce(s: Scenario, name: string): Promise<void> {
  const [, second] = await waitForRequests(s.sim, 2, { match: startsListing }, { timeoutMs: 30_000 });
  const events = await s.user.events(s.namespace, name);
  const [, , third] = await waitForRequests(s.sim, 3, { match: startsListing }, { timeoutMs: 30_000 });
  const within = failedReconciles(s, name).filter(
    (f) => f.at >= (second?.at ?? 0) && f.at < (third?.at ?? 0),
  );
  expect(within).toEqual([]);
  expect(await s.user.events(s.namespace, name)).toEqual(events);
}

/**
 * Resource `name`, created Ready, then scaled while every PATCH meets `fault` (the simulator's
 * scripted answer): the spec change the failure is about.
 */
async function patchedIntoFault(
  s: Scenario,
  name: string,
  fault: Omit<NonNullable<Faults["script"]>[number], "route">,
): Promise<void> {
  await s.user.create(s.namespace, name, spec);
  await s.user.waitReady(s.namespace, name);
  s.sim.faults.set({ script: [{ route: PATCH, ...fault }] });
  await s.user.patch(s.namespace, name, scaleTo(5));
}

/** Resource `name` once its Synced condition is False for `reason` (within `timeoutMs`, default 20 s). */
function syncedFalse(s: Scenario, name: string, reason: string, timeoutMs?: number) {
  return s.user.waitFor(
    s.namespace,
    name,
    (o) => hasCondition(o, "Synced", "False", reason),
    reason,
    timeoutMs,
  );
}

/**
 * Resource `name`, created while every listing is answered `status` with a request id of its own
 * (`gatewayAnswers`), once it is Synced=False for `reason` and two more passes whose listing failed
 * so reconciled it; checks that they wrote nothing: the same resourceVersion.
 */
async function failingAtEveryListing(s: Scenario, name: string, status: number, reason: string) {
  s.sim.faults.set({ gatewayAnswers: true, errors: [{ status, rate: 1, route: "GET /v2/deployments" }] });
  await s.user.create(s.namespace, name, spec);
  const failing = await syncedFalse(s, name, reason);
  // Each pass begins once the last one's reconciles ended: two passes whose listing failed, and
  // the resource enqueued by each, reconciled.
  await waitForPasses(s.sim, 2, Date.now(), { timeoutMs: 30_000 });
  await waitIdle(s.op);
  const now = await s.user.get(s.namespace, name);
  expect(now?.metadata.resourceVersion).toBe(failing.metadata.resourceVersion);
  return now;
}

/** Resource `name` once the spec change made after its creation (generation 2) is applied. */
function appliedChange(s: Scenario, name: string, description: string, timeoutMs?: number) {
  return s.user.waitFor(
    s.namespace,
    name,
    (o) => o?.status?.observedGeneration === 2 && hasCondition(o, "Synced", "True"),
    description,
    timeoutMs,
  );
}

describe("controller: service failures", () => {
  const scenarios = useScenarios();

  it("422: the service's detail in Synced and a Warning event; no retry until the spec changes", async () => {
    const s = await scenarios.start("ctl-422");
    await patchedIntoFault(s, "rejected", { count: 1_000, status: 422 });

    const failed = await syncedFalse(s, "rejected", "InvalidSpec");
    const message = conditionOf(failed, "Synced")?.message ?? "";
    expect(message).toContain("the service rejected the request");
    expect(message).toContain(`${PATCH} answered 422: Unprocessable Entity`);
    expect(hasCondition(failed, "Stalled", "True", "InvalidSpec")).toBe(true);
    const warning = await s.user.waitForEvent(s.namespace, "rejected", "InvalidSpec");
    expect(warning.type).toBe("Warning");
    expect(warning.note).toContain("Unprocessable Entity");
    // No hot loop: a resource created after the failure goes through the same watch and queue
    // and comes up, and once no reconcile is in flight the one PATCH is still the only one.
    await witness(s, "witness", spec);
    await waitIdle(s.op);
    expect(s.sim.counters()[PATCH]).toEqual({ "422": 1 });
    // And none is scheduled: the failure was terminal, which leaves the key off the queue.
    expect(await s.op.metric("controller_runtime_terminal_reconcile_errors_total")).toBe(1);

    s.sim.faults.clear();
    await s.user.patch(s.namespace, "rejected", scaleTo(6));
    await s.user.waitReady(s.namespace, "rejected");
    expect(s.sim.store.getByName("rejected")?.source_config.resource_spec?.max_scale).toBe(6);
  });

  it("429: RateLimited while the service says so, never asking again before Retry-After", async () => {
    // The operator's client never retries: the reconcile sees each 429 and the controller
    // schedules the next, no sooner than Retry-After.
    const s = await scenarios.start("ctl-429");
    await patchedIntoFault(s, "throttled", { count: 2, status: 429, retryAfterSeconds: 1 });

    const limited = await syncedFalse(s, "throttled", "RateLimited");
    expect(hasCondition(limited, "Reconciling", "True", "RateLimited")).toBe(true);
    await appliedChange(s, "throttled", "applied after the rate limit");
    // The simulator's record of the PATCHes it received: each at least Retry-After after the last.
    const patches = s.sim.requests({ route: PATCH });
    expect(patches.map((r) => r.status)).toEqual(["429", "429", "200"]);
    for (let i = 1; i < patches.length; i++) {
      expect((patches[i]?.at ?? 0) - (patches[i - 1]?.at ?? 0)).toBeGreaterThanOrEqual(1_000);
    }
  });

  it("401: a condition pointing at the credentials, said once and retried with the listing, the key never shown", async () => {
    const wrongKey = "wrong-key-5f2b9c1e7a3d";
    const s = await scenarios.start("ctl-401", { op: { service: { apiKey: wrongKey } } });
    await s.user.create(s.namespace, "unauthorized", spec);

    const refused = await syncedFalse(s, "unauthorized", "Unauthorized");
    expect(conditionOf(refused, "Synced")?.message).toContain("check the API key and tenant");
    expect(hasCondition(refused, "Reconciling", "True", "Unauthorized")).toBe(true);
    // Retried by the listing (the fix may come from outside, e.g. a rotated key), said once.
    await expectSaidOnce(s, "unauthorized");
    const events = await s.user.events(s.namespace, "unauthorized");
    expect(events.map((e) => `${e.type}/${e.reason}`)).toEqual(["Warning/Unauthorized"]);
    expect(s.sim.counters()["POST /v2/deployments"]).toBeUndefined();
    const visible = [JSON.stringify(refused), JSON.stringify(events), s.op.logs.text()].join("\n");
    expect(visible).not.toContain(wrongKey);
  });

  it("5xx: ServiceUnavailable, said once and retried with the listing, healed after", async () => {
    const s = await scenarios.start("ctl-5xx");
    s.sim.faults.set({ errors: [{ status: 503, rate: 1, route: "GET /v2/deployments" }] });
    await s.user.create(s.namespace, "unavailable", spec);

    const failing = await syncedFalse(s, "unavailable", "ServiceUnavailable");
    expect(hasCondition(failing, "Reconciling", "True", "ServiceUnavailable")).toBe(true);
    expect((await s.user.waitForEvent(s.namespace, "unavailable", "ServiceUnavailable")).type).toBe(
      "Warning",
    );
    await expectSaidOnce(s, "unavailable");

    s.sim.faults.clear();
    await s.user.waitReady(s.namespace, "unavailable", 30_000);
    expect(s.sim.counters()["POST /v2/deployments"]).toEqual({ "201": 1 });
  });

  it("5xx whose answer differs at every listing (a gateway's request id): the status written once, not at every listing", async () => {
    const s = await scenarios.start("ctl-5xx-ids");
    const now = await failingAtEveryListing(s, "gateway", 503, "ServiceUnavailable");
    expect(conditionOf(now, "Synced")?.message).toMatch(/^GET \/v2\/deployments answered 503: /);
  });

  it("403 whose answer differs at every listing (a gateway's or WAF's request id): the status written once, the Warning quotes the answer", async () => {
    const s = await scenarios.start("ctl-403-ids");
    const now = await failingAtEveryListing(s, "waf", 403, "Unauthorized");
    const said = conditionOf(now, "Synced")?.message ?? "";
    expect(said).toContain("check the API key and tenant");
    expect(said).toContain("GET /v2/deployments answered 403");
    expect(said).not.toContain("request id");
    const warning = await s.user.waitForEvent(s.namespace, "waf", "Unauthorized");
    expect(warning.note).toMatch(/answered 403: Forbidden \(request id \d+\)/);
  });

  it("timeouts: reported with the limit, said once and retried with the listing, healed after", async () => {
    const s = await scenarios.start("ctl-timeout", { op: { service: { timeoutMs: 300 } } });
    s.sim.faults.set({ latency: [{ ms: 1_000, route: "GET /v2/deployments" }] });
    await s.user.create(s.namespace, "slow", spec);

    const failing = await syncedFalse(s, "slow", "ServiceUnavailable");
    expect(conditionOf(failing, "Synced")?.message).toContain("no complete response within 300 ms");
    // Requests are recorded on arrival: one still held by the latency fault counts too.
    await expectSaidOnce(s, "slow");

    s.sim.faults.clear();
    await s.user.waitReady(s.namespace, "slow", 30_000);
    expect(s.sim.store.list().filter((d) => d.name === "slow")).toHaveLength(1);
  });

  it("reconcile timeout: a call hung past it is reported as timed out, healed after", async () => {
    // The request timeout (10 s) outlasts the reconcile's (2 s): the reconcile's own deadline is
    // what cuts the hung lookup, and its failure must still reach the resource.
    const s = await scenarios.start("ctl-rtimeout", {
      op: { reconcileTimeoutMs: 2_000, service: { timeoutMs: 10_000 } },
    });
    await s.op.started();
    s.sim.faults.set({ latency: [{ ms: 6_000, route: "GET /v2/deployments" }] });
    await s.user.create(s.namespace, "hung", spec);

    const failing = await syncedFalse(s, "hung", "ReconcileError", 20_000);
    const limit = `reconcile of ${s.namespace}/hung exceeded 2000 ms`;
    expect(conditionOf(failing, "Synced")?.message).toBe(limit);
    expect(hasCondition(failing, "Reconciling", "True", "ReconcileError")).toBe(true);
    const warning = await s.user.waitForEvent(s.namespace, "hung", "ReconcileError");
    expect(warning.type).toBe("Warning");
    expect(warning.note).toBe(limit);

    s.sim.faults.clear();
    await s.user.waitReady(s.namespace, "hung", 30_000);
    expect(s.sim.store.list().filter((d) => d.name === "hung")).toHaveLength(1);
  });

  it("409 on every PATCH: reported with the call and its status, the Warning quoting the service's answer, and retried until it clears", async () => {
    const s = await scenarios.start("ctl-409");
    await patchedIntoFault(s, "contended", { count: 1_000, status: 409 });

    const failing = await syncedFalse(s, "contended", "ReconcileError");
    expect(conditionOf(failing, "Synced")?.message).toContain(`${PATCH} answered 409`);
    expect(hasCondition(failing, "Reconciling", "True", "ReconcileError")).toBe(true);
    const warning = await s.user.waitForEvent(s.namespace, "contended", "ReconcileError");
    expect(warning.type).toBe("Warning");
    expect(warning.note).toContain(`${PATCH} answered 409: Conflict`);

    s.sim.faults.clear();
    await appliedChange(s, "contended", "applied once the conflict cleared", 30_000);
  });

  it("stopped mid-reconcile: no failure is reported on the resource", async () => {
    // Every lookup takes 3 s; the stop abandons the one in flight at once.
    const s = await scenarios.start("ctl-halt", { op: { shutdownTimeoutMs: 1 } });
    await s.op.started();
    s.sim.faults.set({ latency: [{ ms: 3_000, route: "GET /v2/deployments" }] });
    await s.user.create(s.namespace, "interrupted", spec);
    // The watch brought it in and a reconcile of it is held by a lookup: one has been in flight
    // for half a second (without a held call a reconcile takes milliseconds).
    await waitFor(async () => (await s.op.metric("workqueue_longest_running_processor_seconds")) >= 0.5, {
      description: "a reconcile held in flight",
    });
    await s.op.stop();
    // The abandoned reconcile settles after the stop returned (its deadline passed).
    await waitFor(() => s.op.logs.find("reconcile abandoned").length === 1 || undefined, {
      description: "the reconcile abandoned",
    });
    // Whatever it would write, it wrote before its worker let go of it.
    await waitIdle(s.op);

    const events = await s.user.events(s.namespace, "interrupted");
    expect(events.filter((e) => e.type === "Warning")).toEqual([]);
    const obj = await s.user.get(s.namespace, "interrupted");
    expect(hasCondition(obj, "Synced", "False")).toBe(false);
  });
});
