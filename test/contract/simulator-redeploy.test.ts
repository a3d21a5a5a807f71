import { describe, expect, it } from "vitest";
import { REDEPLOY_ROUTE } from "../../src/api/redeploy.ts";
import type { RunningSimulator } from "../../src/simulator/server.ts";
import type { ManualClock } from "../support/manual-clock.ts";
import { call, simulatorPerTest } from "./simulator-http.ts";

// Builds take 6 s (six phases of 1 s); a redeploy walks the last two only.
const timing = { readyAfterMs: 1000, revisionActiveAfterMs: 6000, deleteAfterMs: 1500 };
const start = simulatorPerTest({ timing });

const GOOD = "registry.example/agent@sha256:1111111111111111111111111111111111111111111111111111111111111111";
const BAD = "registry.example/agent@sha256:2222222222222222222222222222222222222222222222222222222222222222";

/** A deployment whose first revision (GOOD) is live, then a second (BAD) live too: the revert case. */
async function twoRevisions(s: RunningSimulator, clock: ManualClock) {
  const created = await call(s, "POST", "/v2/deployments", {
    name: "agent",
    source: "external_docker",
    source_config: {},
    source_revision_config: { image_uri: GOOD },
    secrets: [],
  });
  expect(created.status).toBe(201);
  clock.advance(6000);
  const patched = await call(s, "PATCH", `/v2/deployments/${created.body.id}`, {
    source_revision_config: { image_uri: BAD },
  });
  expect(patched.status).toBe(200);
  clock.advance(6000);
  const id: string = created.body.id;
  const good: string = created.body.latest_revision_id;
  const bad: string = patched.body.latest_revision_id;
  expect(s.store.get(id)?.active_revision_id).toBe(bad);
  return { id, good, bad };
}

const redeployPath = (id: string, revision: string) =>
  REDEPLOY_ROUTE.replace("{deployment_id}", id).replace("{revision_id}", revision);

const revisionStatus = async (s: RunningSimulator, id: string, revision: string) =>
  (await call(s, "GET", `/v2/deployments/${id}/revisions/${revision}`)).body.status;

describe("POST /v2/deployments/{id}/revisions/{revision_id}/redeploy", () => {
  it("new-revision (the default): a new revision copying the named one, deployed without a build", async () => {
    const { sim, clock } = await start();
    const { id, good, bad } = await twoRevisions(sim, clock);
    const res = await call(sim, "POST", redeployPath(id, good));
    expect(res.status).toBe(200);
    const copy: string = res.body.latest_revision_id;
    expect(copy).not.toBe(good);
    expect(copy).not.toBe(bad);
    // The deployment describes its latest revision: the copy, which deploys what `good` deployed.
    expect(res.body.source_revision_config.image_uri).toBe(GOOD);
    expect(res.body.active_revision_id).toBe(bad);
    // No build phase: straight to AWAITING_DEPLOY, then DEPLOYING, live after 2 s, not 6.
    expect(await revisionStatus(sim, id, copy)).toBe("AWAITING_DEPLOY");
    clock.advance(1000);
    expect(await revisionStatus(sim, id, copy)).toBe("DEPLOYING");
    clock.advance(999);
    expect(sim.store.get(id)?.active_revision_id).toBe(bad);
    clock.advance(1);
    expect(await revisionStatus(sim, id, copy)).toBe("DEPLOYED");
    const listed = (await call(sim, "GET", `/v2/deployments?deployment_ids=${id}`)).body.resources[0];
    expect(listed.active_revision_id).toBe(copy);
    const revisions = sim.store.revisions(id) ?? [];
    expect(revisions.map((r) => [r.source_revision_config.image_uri, r.redeploy_of])).toEqual([
      [GOOD, undefined],
      [BAD, undefined],
      [GOOD, good],
    ]);
    expect(sim.store.redeploys(id)).toEqual([
      {
        at: "2030-01-01T00:00:12.000Z",
        deployment_id: id,
        revision_id: good,
        behaviour: "new-revision",
        live_revision_id: copy,
      },
    ]);
  });

  it("switch-active: active_revision_id switches back to the named revision; latest stays", async () => {
    const { sim, clock } = await start({ redeployRoute: "switch-active" });
    const { id, good, bad } = await twoRevisions(sim, clock);
    const res = await call(sim, "POST", redeployPath(id, good));
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ latest_revision_id: bad, active_revision_id: bad });
    expect(res.body.source_revision_config.image_uri).toBe(BAD);
    clock.advance(2000);
    expect(sim.store.get(id)).toMatchObject({ latest_revision_id: bad, active_revision_id: good });
    expect(sim.store.revisions(id)).toHaveLength(2);
    expect(await revisionStatus(sim, id, good)).toBe("DEPLOYED");
    expect(sim.store.redeploys(id)).toMatchObject([
      { revision_id: good, behaviour: "switch-active", live_revision_id: good },
    ]);
    // A later revision takes over as usual.
    const next = await call(sim, "PATCH", `/v2/deployments/${id}`, {
      source_revision_config: { image_uri: `${GOOD.split("@")[0]}:v3` },
    });
    clock.advance(6000);
    expect(sim.store.get(id)?.active_revision_id).toBe(next.body.latest_revision_id);
  });

  it("the behaviour is switched while running, over /_sim/ as well", async () => {
    const { sim, clock } = await start();
    const { id, good } = await twoRevisions(sim, clock);
    const put = await call(sim, "PUT", "/_sim/redeploy-route", { mode: "switch-active" });
    expect(put).toMatchObject({ status: 200, body: { mode: "switch-active" } });
    expect(sim.redeployRoute.mode).toBe("switch-active");
    await call(sim, "POST", redeployPath(id, good));
    expect(sim.store.revisions(id)).toHaveLength(2);
    const bad = await call(sim, "PUT", "/_sim/redeploy-route", { mode: "sideways" });
    expect(bad.status).toBe(422);
    expect(bad.body.detail[0].loc).toEqual(["body", "mode"]);
    const listed = await call(sim, "GET", "/_sim/redeploys");
    expect(listed.body).toMatchObject([{ deployment_id: id, revision_id: good, behaviour: "switch-active" }]);
    const state = await call(sim, "GET", "/_sim/state");
    expect(state.body.redeploy_route).toBe("switch-active");
  });

  it("404 naming the deployment or the revision; 422 for an id that is no uuid; 409 while deleting", async () => {
    const { sim, clock } = await start();
    const { id, good } = await twoRevisions(sim, clock);
    const unknown = "00000000-0000-4000-8000-000000000000";
    const noDeployment = await call(sim, "POST", redeployPath(unknown, good));
    expect(noDeployment).toMatchObject({ status: 404, body: { detail: "Deployment not found" } });
    const noRevision = await call(sim, "POST", redeployPath(id, unknown));
    expect(noRevision).toMatchObject({ status: 404, body: { detail: "Revision not found" } });
    const badId = await call(sim, "POST", redeployPath(id, "not-a-uuid"));
    expect(badId.status).toBe(422);
    expect(badId.body.detail[0].loc).toEqual(["path", "revision_id"]);
    expect(sim.store.redeploys()).toEqual([]);
    await call(sim, "DELETE", `/v2/deployments/${id}`);
    expect((await call(sim, "POST", redeployPath(id, good))).status).toBe(409);
  });

  it("missing: the generic 404 of an unknown path; method-not-allowed: 405 with Allow", async () => {
    const { sim, clock } = await start({ redeployRoute: "missing" });
    const { id, good } = await twoRevisions(sim, clock);
    const missing = await call(sim, "POST", redeployPath(id, good));
    expect(missing).toMatchObject({ status: 404, body: { detail: "Not Found" } });
    sim.redeployRoute.mode = "method-not-allowed";
    const refused = await call(sim, "POST", redeployPath(id, good));
    expect(refused.status).toBe(405);
    expect(refused.headers.get("allow")).toBe("GET");
    expect(sim.store.redeploys()).toEqual([]);
    expect(sim.store.revisions(id)).toHaveLength(2);
  });

  it("a deployment made to fail deploys fails the copy too; the previous revision stays live", async () => {
    const { sim, clock } = await start();
    const { id, good, bad } = await twoRevisions(sim, clock);
    await call(sim, "PATCH", `/_sim/deployments/${id}`, { fail_revisions: "deploy" });
    const res = await call(sim, "POST", redeployPath(id, good));
    clock.advance(2000);
    expect(await revisionStatus(sim, id, res.body.latest_revision_id)).toBe("DEPLOY_FAILED");
    expect(sim.store.get(id)?.active_revision_id).toBe(bad);
  });

  it("switch-active on a deployment made to fail deploys: the switch fails, the named revision DEPLOY_FAILED, the active one stays", async () => {
    const { sim, clock } = await start({ redeployRoute: "switch-active" });
    const { id, good, bad } = await twoRevisions(sim, clock);
    await call(sim, "PATCH", `/_sim/deployments/${id}`, { fail_revisions: "deploy" });
    const res = await call(sim, "POST", redeployPath(id, good));
    expect(res.body).toMatchObject({ latest_revision_id: bad, active_revision_id: bad });
    clock.advance(1999);
    expect(await revisionStatus(sim, id, good)).toBe("DEPLOYED");
    clock.advance(1);
    expect(await revisionStatus(sim, id, good)).toBe("DEPLOY_FAILED");
    expect(sim.store.revisions(id)?.map((r) => r.status)).toEqual(["DEPLOY_FAILED", "DEPLOYED"]);
    clock.advance(60_000);
    expect(sim.store.get(id)?.active_revision_id).toBe(bad);
    // A switch that succeeds clears it.
    await call(sim, "PATCH", `/_sim/deployments/${id}`, { fail_revisions: null });
    await call(sim, "POST", redeployPath(id, good));
    clock.advance(2000);
    expect(await revisionStatus(sim, id, good)).toBe("DEPLOYED");
    expect(sim.store.get(id)?.active_revision_id).toBe(good);
  });

  it("a repository ref that is a full commit sha builds that commit; another ref resolves again", async () => {
    const { sim, clock } = await start();
    const sha = "0123456789abcdef0123456789abcdef01234567";
    const created = await call(sim, "POST", "/v2/deployments", {
      name: "repo",
      source: "github",
      source_config: { repo_url: "https://github.com/acme/agent" },
      source_revision_config: { repo_ref: sha },
      secrets: [],
    });
    expect(created.body.source_revision_config.repo_commit_sha).toBe(sha);
    clock.advance(6000);
    const branch = await call(sim, "PATCH", `/v2/deployments/${created.body.id}`, {
      source_revision_config: { repo_ref: "main" },
    });
    expect(branch.body.source_revision_config.repo_commit_sha).toMatch(/^[0-9a-f]{40}$/);
    expect(branch.body.source_revision_config.repo_commit_sha).not.toBe(sha);
  });

  it("counts the route by its template", async () => {
    const { sim, clock } = await start();
    const { id, good } = await twoRevisions(sim, clock);
    await call(sim, "POST", redeployPath(id, good));
    expect(sim.counters()[`POST ${REDEPLOY_ROUTE}`]).toEqual({ "200": 1 });
  });
});
