/**
 * The service as it really answers, through the client, against the simulator over loopback:
 * statuses the spec does not list, nulls in nested fields, unknown fields, an item without an
 * id, the create body the service requires, and the revisions route (present, failing, absent).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ServiceClient, type ServiceClientOptions } from "../../src/api/client.ts";
import { RevisionsRouteMissingError, type ServiceError } from "../../src/api/errors.ts";
import type { ResourceSpec, UnknownValue, UnreadableDeployment } from "../../src/api/wire.ts";
import { desiredFromSpec } from "../../src/crd/mapping.ts";
import { plan } from "../../src/reconcile/plan.ts";
import { RuntimeMetrics } from "../../src/runtime/metrics.ts";
import { type RunningSimulator, startSimulator } from "../../src/simulator/server.ts";
import { LogCapture } from "../support/logs.ts";
import { ManualClock } from "../support/manual-clock.ts";

const ID = {
  finalDelete: "b0000000-0000-4000-8000-000000000001",
  nulls: "b0000000-0000-4000-8000-000000000002",
  plain: "b0000000-0000-4000-8000-000000000003",
  nameless: "b0000000-0000-4000-8000-000000000004",
};

let sim: RunningSimulator;
const clientFor = (sim: RunningSimulator, options: Partial<ServiceClientOptions> = {}) =>
  new ServiceClient({
    baseUrl: sim.url,
    qps: 10_000,
    burst: 1000,
    clock: new ManualClock({ sleepsInstantly: true }),
    ...options,
  });

beforeAll(async () => {
  sim = await startSimulator({
    timing: { readyAfterMs: 0, revisionActiveAfterMs: 0, deleteAfterMs: 0 },
    seed: {
      deployments: [
        {
          id: ID.finalDelete,
          name: "finishing-delete",
          source: "external_docker",
          status: "AWAITING_FINAL_DELETE",
        },
        {
          id: ID.nulls,
          name: "with-nulls",
          source: "external_docker",
          source_config: {
            resource_spec: {
              cpu: 1,
              future_knob: "keep-me",
              sidecars: [{ name: "proxy", image: "envoy:1", env: null, resources: null }],
            } as ResourceSpec,
          },
          quirks: { extra: { region: "eu-west", source_config: { brand_new: { nested: true } } } },
        },
        { id: ID.plain, name: "plain", source: "external_docker" },
        { id: ID.nameless, name: "no-id", source: "external_docker", quirks: { omit: ["id"] } },
      ],
    },
  });
});
afterAll(async () => {
  await sim.close();
});

describe("reading tolerantly", () => {
  it("keeps a status the spec does not list, reports it, and counts it in the metrics", async () => {
    const metrics = new RuntimeMetrics({ processMetrics: false });
    const counted = metrics.unknownValues.counter("default");
    const unknown: UnknownValue[] = [];
    const logs = new LogCapture();
    const client = clientFor(sim, {
      logger: logs.logger,
      onUnknownValue: (v) => {
        unknown.push(v);
        counted.record(v);
      },
    });
    const all = await client.listAllDeployments({}, { onUnreadable: () => {} });
    expect(all.find((d) => d.id === ID.finalDelete)?.status).toBe("AWAITING_FINAL_DELETE");
    expect(unknown).toEqual([{ field: "deployment.status", value: "AWAITING_FINAL_DELETE" }]);
    await client.listAllDeployments({}, { onUnreadable: () => {} });
    expect(await metrics.registry.getSingleMetricAsString("dms_service_unknown_values_total")).toContain(
      'dms_service_unknown_values_total{connection="default",field="deployment.status",value="AWAITING_FINAL_DELETE"} 2',
    );
    // Logged once per client, counted every time.
    expect(logs.find("AWAITING_FINAL_DELETE")).toHaveLength(1);
    // The status filter passes any value through, as the spec's `string` query parameter allows.
    const filtered = await client.listAllDeployments({ status: "AWAITING_FINAL_DELETE" });
    expect(filtered.map((d) => d.id)).toEqual([ID.finalDelete]);
  });

  it("reads nulls in nested fields and keeps unknown fields, at the top and inside", async () => {
    const d = await clientFor(sim).getDeployment(ID.nulls);
    expect(d?.source_config.resource_spec?.sidecars?.[0]).toEqual({
      name: "proxy",
      image: "envoy:1",
      env: null,
      resources: null,
    });
    expect(d).toMatchObject({ region: "eu-west", source_config: { brand_new: { nested: true } } });
    expect(d?.source_config.resource_spec).toMatchObject({ future_knob: "keep-me" });
  });

  it("skips an item without an id, names the field and the deployment once, counts it, and uses the rest", async () => {
    const metrics = new RuntimeMetrics({ processMetrics: false });
    const logs = new LogCapture();
    const client = clientFor(sim, { logger: logs.logger, onUnreadable: metrics.recordUnreadable });
    const skipped: UnreadableDeployment[] = [];
    // Pages of one: the unreadable item is a page of its own, which must not end the listing.
    const all = await client.listAllDeployments({}, { pageSize: 1, onUnreadable: (i) => skipped.push(i) });
    expect(all.map((d) => d.name).sort()).toEqual(["finishing-delete", "plain", "with-nulls"]);
    expect(skipped).toEqual([
      {
        name: "no-id",
        field: "id",
        message: `the service's deployment "no-id" cannot be read: id: required field is missing`,
      },
    ]);
    const warnings = logs.find("skipped a deployment of the listing");
    expect(warnings).toHaveLength(1);
    expect(warnings[0]?.record).toMatchObject({ field: "id", deployment: "no-id" });
    expect(await metrics.registry.getSingleMetricAsString("dms_service_unreadable_items_total")).toContain(
      "dms_service_unreadable_items_total 1",
    );
  });

  it("never reports as absent a deployment it could not read (a caller would create a duplicate)", async () => {
    const client = clientFor(sim);
    sim.store.drift(ID.plain, { quirks: { omit: ["id"] } });
    try {
      const error = (await client.getDeployment(ID.plain).catch((e) => e)) as ServiceError;
      expect(error.kind).toBe("bad_response");
      expect(error.detail).toMatch(/"plain" cannot be read: id: required field is missing/);
    } finally {
      sim.store.drift(ID.plain, { quirks: null });
    }
  });
});

describe("writing exactly", () => {
  it("sends source_config, source_revision_config and secrets on create even when empty", async () => {
    const seen: string[] = [];
    const local = await startSimulator({
      onRequest: (req) => {
        req.on("data", (chunk: Buffer) => seen.push(chunk.toString("utf8")));
      },
    });
    try {
      const created = await clientFor(local).createDeployment({ name: "bare", source: "external_docker" });
      expect(created.name).toBe("bare");
      expect(JSON.parse(seen.join(""))).toEqual({
        name: "bare",
        source: "external_docker",
        source_config: {},
        source_revision_config: {},
        secrets: [],
      });
    } finally {
      await local.close();
    }
  });

  it("a null the service answers never causes a PATCH; a PATCH sends unknown fields and nulls back whole", async () => {
    const client = clientFor(sim);
    const remote = await client.getDeployment(ID.nulls);
    if (!remote) throw new Error("seeded deployment missing");
    const spec = (cpu: number, sidecars = true) =>
      desiredFromSpec(
        {
          name: "with-nulls",
          source: "external_docker",
          sourceConfig: {
            resourceSpec: { cpu, ...(sidecars ? { sidecars: [{ name: "proxy", image: "envoy:1" }] } : {}) },
          },
        },
        "with-nulls",
        { secretData: {} },
      );
    // `env: null` and `resources: null` on the service are the spec's absent fields.
    expect(plan(spec(1), remote, {}).action).toBe("noop");

    const change = plan(spec(2, false), remote, {});
    if (change.action !== "patch") throw new Error(`expected a patch, got ${change.action}`);
    expect(change.summary).toEqual(["sourceConfig.resourceSpec.cpu: 1 → 2"]);
    const patched = await client.patchDeployment(remote.id, change.body);
    // resource_spec is replaced whole: what the spec leaves out went back as the service had it.
    expect(patched.source_config.resource_spec).toMatchObject({ cpu: 2, future_knob: "keep-me" });
    expect(patched.source_config.resource_spec?.sidecars?.[0]).toEqual({
      name: "proxy",
      image: "envoy:1",
      env: null,
      resources: null,
    });
  });
});

describe("revisions", () => {
  const start = async (options: Parameters<typeof startSimulator>[0] = {}) => {
    const clock = new ManualClock({ start: Date.parse("2030-01-01T00:00:00.000Z") });
    const s = await startSimulator({
      now: clock.now,
      timing: { readyAfterMs: 0, revisionActiveAfterMs: 6000, deleteAfterMs: 0 },
      ...options,
    });
    return { s, clock, client: clientFor(s) };
  };

  it("walks a revision through its statuses to DEPLOYED, at the simulator's delay", async () => {
    const { s, clock, client } = await start();
    try {
      const d = await client.createDeployment({ name: "rolling", source: "external_docker" });
      const revision = d.latest_revision_id ?? "";
      const seen: string[] = [];
      for (let t = 0; t <= 6000; t += 1000) {
        const r = await client.getRevision(d.id, revision);
        seen.push(r?.status ?? "(none)");
        clock.advance(1000);
      }
      expect(seen).toEqual([
        "CREATING",
        "QUEUED",
        "AWAITING_BUILD",
        "BUILDING",
        "AWAITING_DEPLOY",
        "DEPLOYING",
        "DEPLOYED",
      ]);
      expect((await client.getDeployment(d.id))?.active_revision_id).toBe(revision);
    } finally {
      await s.close();
    }
  });

  it.each([
    ["create", "CREATE_FAILED"],
    ["build", "BUILD_FAILED"],
    ["deploy", "DEPLOY_FAILED"],
  ] as const)("a revision made to fail at %s ends %s and never becomes active", async (phase, status) => {
    const { s, clock, client } = await start();
    try {
      const d = await client.createDeployment({ name: "failing", source: "external_docker" });
      clock.advance(6000);
      // The admin call over HTTP, as another process would make it.
      const res = await fetch(`${s.url}/_sim/deployments/${d.id}`, {
        method: "PATCH",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ fail_revisions: phase }),
      });
      expect(res.status).toBe(200);
      const patched = await client.patchDeployment(d.id, {
        source_revision_config: { image_uri: "repo/a:2" },
      });
      const latest = patched.latest_revision_id ?? "";
      expect(latest).not.toBe(d.latest_revision_id);
      clock.advance(60_000);
      expect((await client.getRevision(d.id, latest))?.status).toBe(status);
      const now = await client.getDeployment(d.id);
      expect(now?.active_revision_id).toBe(d.latest_revision_id);
      expect(now?.latest_revision_id).toBe(latest);
    } finally {
      await s.close();
    }
  });

  it("a seed field makes every revision after the start fail", async () => {
    const id = "c0000000-0000-4000-8000-000000000001";
    const { s, clock, client } = await start({
      seed: { deployments: [{ id, name: "seeded", source: "external_docker", fail_revisions: "build" }] },
    });
    try {
      const before = await client.getDeployment(id);
      expect(before?.active_revision_id).toBe(before?.latest_revision_id);
      const patched = await client.patchDeployment(id, { source_revision_config: { image_uri: "x:2" } });
      clock.advance(60_000);
      expect((await client.getRevision(id, patched.latest_revision_id ?? ""))?.status).toBe("BUILD_FAILED");
    } finally {
      await s.close();
    }
  });

  it("an unknown revision is undefined; a service without the route throws RevisionsRouteMissingError", async () => {
    const { s, client } = await start();
    try {
      const d = await client.createDeployment({ name: "routes", source: "external_docker" });
      await expect(client.getRevision(d.id, "d0000000-0000-4000-8000-000000000009")).resolves.toBeUndefined();
      s.revisionsRoute.mode = "missing";
      const missing = await client.getRevision(d.id, d.latest_revision_id ?? "").catch((e) => e);
      expect(missing).toBeInstanceOf(RevisionsRouteMissingError);
      expect(missing.status).toBe(404);
      const res = await fetch(`${s.url}/_sim/revisions-route`, {
        method: "PUT",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ mode: "method-not-allowed" }),
      });
      expect(res.status).toBe(200);
      const notAllowed = await client.getRevision(d.id, d.latest_revision_id ?? "").catch((e) => e);
      expect(notAllowed).toBeInstanceOf(RevisionsRouteMissingError);
      expect(notAllowed.status).toBe(405);
    } finally {
      await s.close();
    }
  });
});
