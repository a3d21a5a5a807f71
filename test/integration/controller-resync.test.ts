// The periodic drift resync: one paginated listing per period for every resource, no write of
// any kind while nothing changed, and a change made on the service by someone else corrected on
// the next period (or at once when the user asks with the reconcile-requested-at annotation, or
// at the resource's own reconcile-interval), its event naming the fields that differed, and a
// revision someone else made named as such (ExternalRevision, status.externalRevision) and counted.
import { describe, expect, it } from "vitest";
import type { DeploymentSpec } from "../../src/crd/schema.ts";
import type { SimulatorSeed } from "../../src/simulator/server.ts";
import { waitFor } from "../support/cluster.ts";
import { startOperator } from "../support/operator.ts";
import { hasCondition } from "../support/resources.ts";
import { useScenarios } from "../support/scenario.ts";

const spec: DeploymentSpec = {
  source: "internal_docker",
  sourceConfig: { resourceSpec: { minScale: 1, maxScale: 2 } },
  sourceRevisionConfig: { imageUri: "registry.example.com/agent:1" },
};

/** `count` deployments nobody manages, so that one listing of the tenant takes several pages. */
function unmanaged(count: number): SimulatorSeed {
  return {
    deployments: Array.from({ length: count }, (_, i) => ({
      name: `unmanaged-${i}`,
      source: "internal_docker" as const,
      source_config: {},
      source_revision_config: { image_uri: `registry.example.com/other:${i}` },
    })),
  };
}

describe("controller: drift resync", () => {
  const scenarios = useScenarios();

  it("costs one paginated listing per period and no write while nothing changes", async () => {
    // 150 + 3 deployments: a listing of the tenant is ceil(153 / 100) = 2 pages of data, and an
    // empty third page that proves the end (the spec does not say how a listing ends, and a
    // short page may be the service capping `limit`).
    const s = await scenarios.start("ctl-steady", {
      sim: { seed: unmanaged(150) },
      op: { resyncMs: 1_500 },
    });
    const names = ["steady-a", "steady-b", "steady-c"];
    for (const name of names) await s.user.create(s.namespace, name, spec);
    const ready = await Promise.all(names.map((n) => s.user.waitReady(s.namespace, n)));
    const versions = ready.map((o) => o.metadata.resourceVersion);

    const mark = Date.now();
    const before = await s.op.reconciles();
    // Enough reconciles for two whole resync periods after the mark (a period in progress at the
    // mark may contribute up to two more).
    await waitFor(async () => (await s.op.reconciles()) >= before + 3 * names.length, {
      description: "two resync periods",
      timeoutMs: 15_000,
    });

    const pages = s.sim.requests({ since: mark }).map((r) => `${r.method} ${r.url}`);
    const listing = (offset: number) => `GET /v2/deployments?limit=100&offset=${offset}`;
    // Nothing but whole listings: no lookup per resource, no PATCH, no POST.
    expect(new Set(pages)).toEqual(new Set([listing(0), listing(100), listing(153)]));
    const periods = pages.filter((p) => p === listing(0)).length;
    expect(periods).toBeGreaterThanOrEqual(2);
    expect(pages.filter((p) => p === listing(100)).length).toBe(periods);
    expect(pages.filter((p) => p === listing(153)).length).toBe(periods);
    const after = await Promise.all(names.map((n) => s.user.get(s.namespace, n)));
    expect(after.map((o) => o?.metadata.resourceVersion)).toEqual(versions);
  });

  it("after a restart, one listing answers for every settled resource", async () => {
    const s = await scenarios.start("ctl-restart");
    const names = ["kept-a", "kept-b", "kept-c"];
    for (const name of names) await s.user.create(s.namespace, name, spec);
    await Promise.all(names.map((n) => s.user.waitReady(s.namespace, n)));
    await s.op.stop();
    s.sim.resetCounters();

    const next = startOperator({ simulator: s.sim, namespaces: [s.namespace] });
    scenarios.defer(() => next.stop());
    await waitFor(async () => (await next.reconciles()) >= names.length, {
      description: "every resource reconciled",
    });
    // ceil(3 / 100) page of data and the empty page after it; no lookup per resource.
    expect(s.sim.counters()).toEqual({ "GET /v2/deployments": { "200": 2 } });
  });

  it("follows a create until Ready by looking the service up, not by waiting for the next listing", async () => {
    // A period no create → Ready can outlast, however loaded the machine: a status that waited
    // for the next listing would not come within waitReady's time.
    const s = await scenarios.start("ctl-poll", { op: { resyncMs: 600_000 } });
    const listings = () => s.sim.requests().filter((r) => r.url === "/v2/deployments?limit=100&offset=0");
    // Right after a listing (the first, at start) it is fresh, and answers for settled resources.
    // The start-up pass's listing, answered (one page: the tenant has no deployment), is the only
    // listing of the start. Every listing up to Ready is that one: told apart by the record, not
    // by a time mark, which may fall in the very millisecond the listing arrived (`since` then
    // counts it as one made after the mark).
    const startUp = await waitFor(() => listings().find((r) => r.status === "200"), {
      description: "the start-up listing answered",
      timeoutMs: 10_000,
    });
    await s.user.create(s.namespace, "polled", spec);

    await s.user.waitReady(s.namespace, "polled");
    const readyAt = Date.now();
    expect(listings().filter((r) => r.at <= readyAt)).toEqual([startUp]);
  });

  it("corrects a change made on the service on the next period, with a DriftCorrected event", async () => {
    const s = await scenarios.start("ctl-drift", { op: { resyncMs: 1_500 } });
    await s.user.create(s.namespace, "drifting", spec);
    const obj = await s.user.waitReady(s.namespace, "drifting");
    const id = obj.status?.deploymentId ?? "";

    s.sim.store.drift(id, { source_config: { resource_spec: { min_scale: 1, max_scale: 9, cpu: 4 } } });

    const event = await s.user.waitForEvent(s.namespace, "drifting", "DriftCorrected");
    expect(event.type).toBe("Normal");
    // The fields that differed, never their values (someone else's).
    expect(event.note).toBe(
      "put back a change made outside this resource: sourceConfig.resourceSpec.maxScale differed from the spec; the spec's values sent",
    );
    // resource_spec is replaced whole by the service: what the spec leaves out is kept as found.
    expect(s.sim.store.get(id)?.source_config.resource_spec).toEqual({ min_scale: 1, max_scale: 2, cpu: 4 });
    expect(s.sim.store.revisions(id)).toHaveLength(1);
    expect(hasCondition(await s.user.get(s.namespace, "drifting"), "Synced", "True")).toBe(true);
  });

  it("looks again at once when the user sets dms.dev/reconcile-requested-at, and says it did", async () => {
    const s = await scenarios.start("ctl-now");
    await s.user.create(s.namespace, "on-demand", spec);
    const obj = await s.user.waitReady(s.namespace, "on-demand");
    const id = obj.status?.deploymentId ?? "";
    s.sim.store.drift(id, { source_revision_config: { image_uri: "registry.example.com/agent:hotfix" } });

    await s.user.annotate(s.namespace, "on-demand", {
      "dms.dev/reconcile-requested-at": "2025-06-01T10:00:00Z",
    });

    const handled = await s.user.waitFor(
      s.namespace,
      "on-demand",
      (o) => o?.status?.lastHandledReconcileAt === "2025-06-01T10:00:00Z",
      "the request acknowledged",
    );
    expect(s.sim.store.get(id)?.source_revision_config.image_uri).toBe("registry.example.com/agent:1");
    // The service's revision, the drifted one, and the one putting the image back.
    expect(s.sim.store.revisions(id)).toHaveLength(3);
    expect(handled.status?.conditions?.find((c) => c.type === "Synced")?.status).toBe("True");
    const event = await s.user.waitForEvent(s.namespace, "on-demand", "DriftCorrected");
    expect(event.note).toContain("sourceRevisionConfig.imageUri differed from the spec (new revision)");
    expect(event.note).not.toContain("hotfix");
    // The drift's revision is someone else's: named once, recorded with what it deployed.
    const external = await s.user.waitForEvent(s.namespace, "on-demand", "ExternalRevision");
    expect(external.type).toBe("Warning");
    expect(external.note).toContain("registry.example.com/agent:hotfix");
    const recorded = await s.user.waitFor(
      s.namespace,
      "on-demand",
      (o) => o?.status?.externalRevision !== undefined,
      "the external revision recorded",
    );
    expect(recorded.status?.externalRevision).toMatchObject({
      imageUri: "registry.example.com/agent:hotfix",
    });
    // Counted once its status was written: the revision and the fields put back.
    await waitFor(async () => (await s.op.metric("dms_external_changes_total")) === 2, {
      description: "dms_external_changes_total counting the revision and the fields",
    });
  });

  it("checks a resource annotated dms.dev/reconcile-interval on its own, between two passes", async () => {
    // The periodic pass every 60 s (the test default); this resource every 10 s, the shortest allowed.
    const s = await scenarios.start("ctl-interval");
    await s.user.create(s.namespace, "watched", spec, {
      annotations: { "dms.dev/reconcile-interval": "10s" },
    });
    const obj = await s.user.waitReady(s.namespace, "watched");
    const id = obj.status?.deploymentId ?? "";
    const driftedAt = Date.now();
    s.sim.store.drift(id, { source_config: { resource_spec: { min_scale: 1, max_scale: 9 } } });

    const event = await s.user.waitForEvent(s.namespace, "watched", "DriftCorrected", 30_000);
    expect(event.note).toContain("sourceConfig.resourceSpec.maxScale differed from the spec");
    // Seen by a lookup of that one deployment, not by a listing of them all.
    const seen = s.sim.requests({ since: driftedAt, method: "GET" });
    expect(seen.filter((r) => r.url === "/v2/deployments?limit=100&offset=0")).toEqual([]);
    expect(seen.filter((r) => r.url.includes(id)).length).toBeGreaterThanOrEqual(1);
  });
});
