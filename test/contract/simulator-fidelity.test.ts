// What the simulator knows beyond the shared spec, as the service and its own provider behave:
// `source_config.deployment_type` (default prod, fixed at creation, unknown types kept), the
// rebuild route (POST /v2/deployments/{id}/revisions, behind a switch that removes it),
// `display_name` (PATCH only, never cleared) and the switch under which an empty `secrets` list
// in a PATCH means "unchanged".
import { describe, expect, it } from "vitest";
import { ROUTES } from "../../src/api/wire.ts";
import { type RunningSimulator, startSimulator } from "../../src/simulator/server.ts";
import { call, simulatorPerTest } from "./simulator-http.ts";

const timing = { readyAfterMs: 1000, revisionActiveAfterMs: 6000, deleteAfterMs: 1500 };
const start = simulatorPerTest({ timing });

const REPO = "https://github.com/acme/agent";

/** Creates a github deployment tracking `main` (source_config extra fields merged in). */
async function create(s: RunningSimulator, name: string, sourceConfig: Record<string, unknown> = {}) {
  const created = await call(s, "POST", "/v2/deployments", {
    name,
    source: "github",
    source_config: { repo_url: REPO, ...sourceConfig },
    source_revision_config: { repo_ref: "main" },
    secrets: [{ name: "OPENAI_API_KEY", value: "sk-1" }],
  });
  return created;
}

const listed = async (s: RunningSimulator, query: string) =>
  ((await call(s, "GET", `/v2/deployments?${query}`)).body.resources as { name: string }[]).map(
    (d) => d.name,
  );

describe("source_config.deployment_type", () => {
  it("is prod when a create sends none, as the service's default, and shows in source_config", async () => {
    const { sim } = await start();
    const created = await create(sim, "agent");
    expect(created.status).toBe(201);
    expect(created.body.source_config.deployment_type).toBe("prod");
    expect(sim.store.get(created.body.id)?.source_config.deployment_type).toBe("prod");
  });

  it("keeps each known type, and an unknown one it is given; the listing filters by it", async () => {
    const { sim } = await start();
    for (const type of ["dev_free", "dev", "prod", "dev_zero", "dev_free_zero", "gpu_large"]) {
      const created = await create(sim, `agent-${type}`, { deployment_type: type });
      expect(created.status, type).toBe(201);
      expect(created.body.source_config.deployment_type).toBe(type);
    }
    expect(await listed(sim, "deployment_type=dev")).toEqual(["agent-dev"]);
    expect(await listed(sim, "deployment_type=prod")).toEqual(["agent-prod"]);
  });

  it("refuses a PATCH that changes it, naming the field; the same type again or null is no change", async () => {
    const { sim } = await start();
    const created = await create(sim, "agent", { deployment_type: "dev" });
    const path = `/v2/deployments/${created.body.id}`;
    const refused = await call(sim, "PATCH", path, { source_config: { deployment_type: "prod" } });
    expect(refused.status).toBe(422);
    expect(refused.body.detail).toEqual([
      {
        loc: ["body", "source_config", "deployment_type"],
        msg: "Value error, deployment_type cannot be changed after creation (it is 'dev'): a deployment of another type is a new deployment",
        type: "value_error",
      },
    ]);
    // Refused whole: the other fields of the refused PATCH did not apply either.
    const withOther = await call(sim, "PATCH", path, {
      source_config: { deployment_type: "dev_zero", build_on_push: true },
    });
    expect(withOther.status).toBe(422);
    expect(sim.store.get(created.body.id)?.source_config).toEqual({
      deployment_type: "dev",
      repo_url: REPO,
    });
    for (const same of ["dev", null]) {
      const res = await call(sim, "PATCH", path, {
        source_config: { deployment_type: same, build_on_push: true },
      });
      expect(res.status, String(same)).toBe(200);
      expect(res.body.source_config.deployment_type).toBe("dev");
    }
    // Someone else's change through the simulator's back door still can (an adoption test's setup).
    sim.store.drift(created.body.id, { deployment_type: "prod" });
    expect(sim.store.get(created.body.id)?.source_config.deployment_type).toBe("prod");
  });

  it("takes a seed's type from source_config or from the older field beside the deployment, default prod", async () => {
    const { sim } = await start({
      seed: {
        deployments: [
          { name: "a", source: "github", source_config: { deployment_type: "dev_free_zero" } },
          { name: "b", source: "github", deployment_type: "dev" },
          { name: "c", source: "github" },
        ],
      },
    });
    expect(sim.store.list().map((d) => [d.name, d.source_config.deployment_type])).toEqual([
      ["a", "dev_free_zero"],
      ["b", "dev"],
      ["c", "prod"],
    ]);
  });
});

describe("POST /v2/deployments/{id}/revisions (rebuild)", () => {
  const rebuildPath = (id: string) => ROUTES.CREATE_REVISION.replace("{deployment_id}", id);

  it("makes a revision of the current configuration, answered as the Revision, which goes live", async () => {
    const { sim, clock } = await start();
    const created = await create(sim, "agent");
    const id: string = created.body.id;
    clock.advance(6000);
    const res = await call(sim, "POST", rebuildPath(id), {});
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({
      status: "CREATING",
      source: "github",
      source_revision_config: { repo_ref: "main" },
    });
    expect(res.body.id).not.toBe(created.body.latest_revision_id);
    const deployment = sim.store.get(id);
    expect(deployment?.latest_revision_id).toBe(res.body.id);
    expect(deployment?.active_revision_id).toBe(created.body.latest_revision_id);
    // Nothing else changed: the same configuration, the same secrets.
    expect(deployment?.source_revision_config).toEqual(created.body.source_revision_config);
    expect(deployment?.secrets).toEqual(created.body.secrets);
    clock.advance(6000);
    expect(sim.store.get(id)?.active_revision_id).toBe(res.body.id);
    const fetched = await call(sim, "GET", `/v2/deployments/${id}/revisions/${res.body.id}`);
    expect(fetched.body.status).toBe("DEPLOYED");
    expect(sim.counters()["POST /v2/deployments/{deployment_id}/revisions"]).toEqual({ "201": 1 });
  });

  it("answers 404 naming an unknown deployment, 409 while one is deleted, 422 for a body with fields", async () => {
    const { sim } = await start();
    const unknown = await call(sim, "POST", rebuildPath("00000000-0000-4000-8000-000000000000"), {});
    expect(unknown).toMatchObject({ status: 404, body: { detail: "Deployment not found" } });
    const created = await create(sim, "agent");
    const extra = await call(sim, "POST", rebuildPath(created.body.id), { repo_ref: "dev" });
    expect(extra.status).toBe(422);
    expect(extra.body.detail).toEqual([
      { loc: ["body", "repo_ref"], msg: "Extra inputs are not permitted", type: "extra_forbidden" },
    ]);
    const badId = await call(sim, "POST", rebuildPath("nope"), {});
    expect(badId.status).toBe(422);
    expect(badId.body.detail[0].loc).toEqual(["path", "deployment_id"]);
    await call(sim, "DELETE", `/v2/deployments/${created.body.id}`);
    const deleting = await call(sim, "POST", rebuildPath(created.body.id), {});
    expect(deleting.status).toBe(409);
    expect(sim.store.revisions(created.body.id)).toHaveLength(1);
  });

  it("is missing (404 Not Found, as any unknown path) or 405 behind its switch; the listing stays", async () => {
    const { sim } = await start({ rebuildRoute: "missing" });
    const created = await create(sim, "agent");
    const path = rebuildPath(created.body.id);
    expect(await call(sim, "POST", path, {})).toMatchObject({ status: 404, body: { detail: "Not Found" } });
    expect((await call(sim, "GET", path)).status).toBe(200);
    // At run time, over HTTP as another process would.
    const set = await call(sim, "PUT", "/_sim/rebuild-route", { mode: "method-not-allowed" });
    expect(set.body).toEqual({ mode: "method-not-allowed" });
    const refused = await call(sim, "POST", path, {});
    expect(refused.status).toBe(405);
    expect(refused.headers.get("allow")).toBe("GET");
    sim.rebuildRoute.mode = "present";
    expect((await call(sim, "POST", path, {})).status).toBe(201);
    expect((await call(sim, "PUT", "/_sim/rebuild-route", { mode: "gone" })).status).toBe(422);
    expect(sim.store.revisions(created.body.id)).toHaveLength(2);
  });
});

describe("display_name", () => {
  it("is set by a PATCH only, makes no revision, and cannot be cleared", async () => {
    const { sim } = await start();
    const refused = await call(sim, "POST", "/v2/deployments", {
      name: "agent",
      source: "github",
      source_config: {},
      source_revision_config: {},
      secrets: [],
      display_name: "Agent",
    });
    expect(refused.status).toBe(422);
    expect(refused.body.detail).toEqual([
      { loc: ["body", "display_name"], msg: "Extra inputs are not permitted", type: "extra_forbidden" },
    ]);
    const created = await create(sim, "agent");
    expect(created.body).not.toHaveProperty("display_name");
    const path = `/v2/deployments/${created.body.id}`;
    const named = await call(sim, "PATCH", path, { display_name: "Support agent" });
    expect(named.status).toBe(200);
    expect(named.body.display_name).toBe("Support agent");
    expect(named.body.latest_revision_id).toBe(created.body.latest_revision_id);
    const emptied = await call(sim, "PATCH", path, { display_name: "" });
    expect(emptied.status).toBe(422);
    expect(emptied.body.detail[0]).toMatchObject({ loc: ["body", "display_name"], type: "string_too_short" });
    const nulled = await call(sim, "PATCH", path, { display_name: null });
    expect(nulled.body.display_name).toBe("Support agent");
    expect((await listed(sim, "name_contains=agent")).length).toBe(1);
    const listedOne = (await call(sim, "GET", "/v2/deployments")).body.resources[0];
    expect(listedOne.display_name).toBe("Support agent");
  });
});

describe("an empty secrets list in a PATCH", () => {
  it("clears the secrets by default, as the spec reads, with a new revision", async () => {
    const { sim } = await start();
    const created = await create(sim, "agent");
    const res = await call(sim, "PATCH", `/v2/deployments/${created.body.id}`, { secrets: [] });
    expect(res.body.secrets).toEqual([]);
    expect(sim.store.revisions(created.body.id)).toHaveLength(2);
  });

  it("means unchanged behind the switch, as the service's provider treats it: the last secret stays", async () => {
    const { sim } = await start({ emptySecretsOnUpdate: "unchanged" });
    const created = await create(sim, "agent");
    const path = `/v2/deployments/${created.body.id}`;
    const res = await call(sim, "PATCH", path, { secrets: [] });
    expect(res.status).toBe(200);
    expect(res.body.secrets).toEqual([{ name: "OPENAI_API_KEY", value: "********" }]);
    expect(sim.store.revisions(created.body.id)).toHaveLength(1);
    // A non-empty list still replaces them; a create's empty list is still none.
    const replaced = await call(sim, "PATCH", path, { secrets: [{ name: "B", value: "2" }] });
    expect(replaced.body.secrets).toEqual([{ name: "B", value: "********" }]);
    const bare = await call(sim, "POST", "/v2/deployments", {
      name: "bare",
      source: "github",
      source_config: {},
      source_revision_config: {},
      secrets: [],
    });
    expect(bare.body.secrets).toEqual([]);
    // Switched back at run time over HTTP.
    expect((await call(sim, "PUT", "/_sim/empty-secrets", { mode: "clears" })).body).toEqual({
      mode: "clears",
    });
    expect((await call(sim, "PATCH", path, { secrets: [] })).body.secrets).toEqual([]);
    expect((await call(sim, "PUT", "/_sim/empty-secrets", { mode: "sometimes" })).status).toBe(422);
  });

  it("refuses an unknown switch value at start, naming the option", async () => {
    await expect(startSimulator({ emptySecretsOnUpdate: "never" as unknown as "clears" })).rejects.toThrow(
      /emptySecretsOnUpdate: must be one of clears, unchanged, got never/,
    );
  });
});

describe("a revision made outside the operator (the service's UI, langgraph deploy, a build on push)", () => {
  it("is made by drift over HTTP, with or without a change, and listed as the latest revision with what it built", async () => {
    const { sim } = await start();
    const created = await create(sim, "agent");
    const id = created.body.id;
    const first = created.body.latest_revision_id;
    // A build on push: the same branch, a new commit.
    const sha = "d".repeat(40);
    const pushed = await call(sim, "PATCH", `/_sim/deployments/${id}`, {
      new_revision: true,
      source_revision_config: { repo_commit_sha: sha },
    });
    expect(pushed.status).toBe(200);
    expect(pushed.body.latest_revision_id).not.toBe(first);
    expect(pushed.body.source_revision_config).toMatchObject({ repo_ref: "main", repo_commit_sha: sha });
    // Someone's deploy of another branch: a change makes the revision itself.
    const deployed = await call(sim, "PATCH", `/_sim/deployments/${id}`, {
      source_revision_config: { repo_ref: "hotfix" },
    });
    const listed = await call(sim, "GET", `/v2/deployments/${id}/revisions`);
    const revisions = listed.body.resources as { id: string; source_revision_config: { repo_ref: string } }[];
    expect(revisions.map((r) => r.id)).toEqual([
      deployed.body.latest_revision_id,
      pushed.body.latest_revision_id,
      first,
    ]);
    expect(revisions[0]?.source_revision_config.repo_ref).toBe("hotfix");
    // Another client's rebuild through the public route is one too.
    const rebuilt = await call(sim, "POST", `/v2/deployments/${id}/revisions`, {});
    expect(rebuilt.status).toBe(201);
    const after = await call(sim, "GET", `/v2/deployments?deployment_ids=${id}`);
    expect(after.body.resources[0].latest_revision_id).toBe(rebuilt.body.id);
  });
});
