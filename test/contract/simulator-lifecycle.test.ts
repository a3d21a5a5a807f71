import { afterEach, describe, expect, it } from "vitest";
import { type RunningSimulator, type SimulatorOptions, startSimulator } from "../../src/simulator/server.ts";
import { ManualClock } from "../support/manual-clock.ts";
import { call, SIMULATED_EPOCH } from "./simulator-http.ts";

const timing = { readyAfterMs: 3000, revisionActiveAfterMs: 2000, deleteAfterMs: 1500 };
let sim: RunningSimulator | undefined;
afterEach(async () => {
  await sim?.close();
  sim = undefined;
});

async function start(options: SimulatorOptions = {}) {
  const clock = new ManualClock({ start: SIMULATED_EPOCH });
  sim = await startSimulator({ timing, now: clock.now, secretsInResponses: "values", ...options });
  return { sim, clock };
}

async function create(s: RunningSimulator, name = "agent") {
  const res = await call(s, "POST", "/v2/deployments", {
    name,
    source: "github",
    source_config: { repo_url: "https://github.com/acme/agent", resource_spec: { cpu: 1, memory_mb: 512 } },
    source_revision_config: { repo_ref: "main", graph_config_path: "langgraph.json" },
    secrets: [
      { name: "A", value: "1" },
      { name: "B", value: "2" },
    ],
  });
  expect(res.status).toBe(201);
  return res.body;
}

const patch = async (s: RunningSimulator, id: string, body: unknown) => {
  const res = await call(s, "PATCH", `/v2/deployments/${id}`, body);
  expect(res.status).toBe(200);
  return res.body;
};

describe("status and revisions over time (injected clock)", () => {
  it("a new deployment is AWAITING_DATABASE, its first revision activates, then it is READY", async () => {
    const { sim, clock } = await start();
    const created = await create(sim);
    expect(created).toMatchObject({ status: "AWAITING_DATABASE", active_revision_id: null });
    expect(created.created_at).toBe("2030-01-01T00:00:00.000Z");
    clock.advance(1999);
    expect(sim.store.get(created.id)?.active_revision_id).toBeNull();
    clock.advance(1);
    expect(sim.store.get(created.id)?.active_revision_id).toBe(created.latest_revision_id);
    expect(sim.store.get(created.id)?.status).toBe("AWAITING_DATABASE");
    clock.advance(1000);
    const listed = (await call(sim, "GET", "/v2/deployments")).body.resources[0];
    expect(listed.status).toBe("READY");
  });

  it("a changed source_revision_config makes a new revision that becomes active after the delay", async () => {
    const { sim, clock } = await start();
    const created = await create(sim);
    clock.advance(5000);
    const first = created.latest_revision_id;
    const patched = await patch(sim, created.id, { source_revision_config: { repo_ref: "release" } });
    expect(patched.latest_revision_id).not.toBe(first);
    expect(patched.active_revision_id).toBe(first);
    expect(patched.source_revision_config).toMatchObject({
      repo_ref: "release",
      graph_config_path: "langgraph.json",
    });
    expect(patched.updated_at).toBe("2030-01-01T00:00:05.000Z");
    clock.advance(2000);
    const later = (await call(sim, "GET", `/v2/deployments?deployment_ids=${created.id}`)).body.resources[0];
    expect(later.active_revision_id).toBe(patched.latest_revision_id);
    expect(sim.store.revisions(created.id)?.map((r) => r.source_revision_config.repo_ref)).toEqual([
      "main",
      "release",
    ]);
  });

  it("the same revision config, or only source_config, makes no revision; resource_spec is replaced whole", async () => {
    const { sim } = await start();
    const created = await create(sim);
    const same = await patch(sim, created.id, { source_revision_config: { repo_ref: "main" } });
    expect(same.latest_revision_id).toBe(created.latest_revision_id);
    const resized = await patch(sim, created.id, {
      source_config: { resource_spec: { cpu: 2 }, build_command: null },
    });
    expect(resized.latest_revision_id).toBe(created.latest_revision_id);
    expect(resized.source_config.resource_spec).toEqual({ cpu: 2 });
    // null means "leave as is": the repository stays.
    expect(resized.source_config.repo_url).toBe("https://github.com/acme/agent");
  });

  it("changed secrets make a revision; the same secrets in another order do not", async () => {
    const { sim } = await start();
    const created = await create(sim);
    const reordered = await patch(sim, created.id, {
      secrets: [
        { name: "B", value: "2" },
        { name: "A", value: "1" },
      ],
    });
    expect(reordered.latest_revision_id).toBe(created.latest_revision_id);
    const changed = await patch(sim, created.id, { secrets: [{ name: "A", value: "rotated" }] });
    expect(changed.latest_revision_id).not.toBe(created.latest_revision_id);
    expect(changed.secrets).toEqual([{ name: "A", value: "rotated" }]);
  });

  it("setting revision_source makes a revision even without other changes", async () => {
    const { sim } = await start();
    const created = await create(sim);
    const res = await patch(sim, created.id, { revision_source: "internal_source" });
    expect(res.latest_revision_id).not.toBe(created.latest_revision_id);
    expect(sim.store.revisions(created.id)?.at(-1)?.revision_source).toBe("internal_source");
  });

  it("zero delays mean immediate transitions", async () => {
    const { sim } = await start({ timing: { readyAfterMs: 0, revisionActiveAfterMs: 0, deleteAfterMs: 0 } });
    const created = await create(sim);
    expect(created.status).toBe("READY");
    expect(created.active_revision_id).toBe(created.latest_revision_id);
    expect((await call(sim, "DELETE", `/v2/deployments/${created.id}`)).status).toBe(204);
    expect(sim.store.get(created.id)).toBeUndefined();
    expect((await call(sim, "DELETE", `/v2/deployments/${created.id}`)).status).toBe(404);
  });
});

describe("deletion", () => {
  it("AWAITING_DELETE while listed and unpatchable, then gone; the name is free again", async () => {
    const { sim, clock } = await start();
    const created = await create(sim);
    expect((await call(sim, "DELETE", `/v2/deployments/${created.id}`)).status).toBe(204);
    const listed = (await call(sim, "GET", "/v2/deployments")).body.resources;
    expect(listed).toMatchObject([{ id: created.id, status: "AWAITING_DELETE" }]);
    expect((await call(sim, "PATCH", `/v2/deployments/${created.id}`, {})).status).toBe(409);
    const createAgain = async () =>
      (
        await call(sim, "POST", "/v2/deployments", {
          name: "agent",
          source: "github",
          source_config: {},
          source_revision_config: {},
          secrets: [],
        })
      ).status;
    expect(await createAgain()).toBe(409);
    expect((await call(sim, "DELETE", `/v2/deployments/${created.id}`)).status).toBe(204);
    clock.advance(1500);
    expect((await call(sim, "GET", "/v2/deployments")).body).toEqual({ resources: [], offset: 0 });
    expect((await call(sim, "DELETE", `/v2/deployments/${created.id}`)).status).toBe(404);
    expect(await createAgain()).toBe(201);
  });
});

describe("drift: changes made by someone else", () => {
  it("store.drift changes fields, pins a status, and moves the listing filters", async () => {
    const { sim } = await start({ seed: { deployments: [{ name: "seeded", source: "github" }] } });
    const seeded = sim.store.getByName("seeded");
    expect(seeded?.status).toBe("READY");
    expect(seeded?.active_revision_id).toBe(seeded?.latest_revision_id);
    const id = seeded?.id ?? "";
    const drifted = sim.store.drift(id, {
      source_config: { build_command: "make" },
      status: "UNKNOWN",
      image_version: "9.9.9",
      deployment_type: "prod",
      tag_value_ids: ["t1"],
    });
    expect(drifted).toMatchObject({ status: "UNKNOWN", image_version: "9.9.9" });
    expect(drifted.latest_revision_id).toBe(seeded?.latest_revision_id);
    const found = await call(
      sim,
      "GET",
      "/v2/deployments?deployment_type=prod&tag_value_ids=t1&status=UNKNOWN",
    );
    expect(found.body.resources.map((d: { id: string }) => d.id)).toEqual([id]);
  });

  it("PATCH /_sim/deployments/{id} drifts over HTTP, a new revision included; 404 and 422 as usual", async () => {
    const { sim } = await start();
    const created = await create(sim);
    const res = await call(sim, "PATCH", `/_sim/deployments/${created.id}`, {
      source_revision_config: { repo_commit_sha: "f".repeat(40) },
    });
    expect(res.status).toBe(200);
    expect(res.body.source_revision_config.repo_commit_sha).toBe("f".repeat(40));
    expect(res.body.latest_revision_id).not.toBe(created.latest_revision_id);
    const forced = await call(sim, "PATCH", `/_sim/deployments/${created.id}`, { new_revision: true });
    expect(forced.body.latest_revision_id).not.toBe(res.body.latest_revision_id);
    expect(
      (await call(sim, "PATCH", "/_sim/deployments/00000000-0000-4000-8000-000000000000", {})).status,
    ).toBe(404);
    const bad = await call(sim, "PATCH", `/_sim/deployments/${created.id}`, { status: "" });
    expect(bad.status).toBe(422);
    expect(bad.body.detail[0].loc).toEqual(["body", "status"]);
  });

  it("GET /_sim/state shows the clock, the timing and each deployment with its revisions", async () => {
    const { sim } = await start();
    const created = await create(sim);
    await patch(sim, created.id, { source_revision_config: { repo_ref: "next" } });
    const state = (await call(sim, "GET", "/_sim/state")).body;
    expect(state).toMatchObject({ now: "2030-01-01T00:00:00.000Z", timing, tenant_id: sim.store.tenantId });
    expect(state.deployments[0].revisions).toHaveLength(2);
    expect(state.deployments[0].revisions[0]).toMatchObject({
      activated: false,
      source_revision_config: { repo_ref: "main" },
    });
  });
});
