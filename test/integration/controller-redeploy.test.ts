// Redeploy instead of rebuild on the real control plane, the operator talking HTTP to the
// simulator: a spec that goes back to what an earlier revision the operator created deployed is
// redeployed (POST .../revisions/{id}/redeploy) rather than PATCHed and built again, with both
// behaviours of the route; a branch under Pinned, a secret rotated in between and revisionReuse
// Never are PATCHed; a service without the route gets one fallback PATCH and is not asked again.
import { afterEach, describe, expect, it } from "vitest";
import { REDEPLOY_ROUTE } from "../../src/api/redeploy.ts";
import { ROUTES } from "../../src/api/wire.ts";
import type { DeploymentSpec } from "../../src/crd/schema.ts";
import type { RedeployRouteMode } from "../../src/simulator/server.ts";
import { conditionOf } from "../support/resources.ts";
import { type Scenario, startScenario } from "../support/scenario.ts";

const PATCH = "/v2/deployments/{deployment_id}";
const GOOD = `registry.example.com/agent@sha256:${"a".repeat(64)}`;
const BAD = `registry.example.com/agent@sha256:${"b".repeat(64)}`;
const SHA_1 = "1111111111111111111111111111111111111111";
const SHA_2 = "2222222222222222222222222222222222222222";
/** A build is 6 s (six phases of 1 s); a redeploy walks the last two. */
const TIMING = { readyAfterMs: 300, revisionActiveAfterMs: 6_000, deleteAfterMs: 300 };

const image = (imageUri: string): DeploymentSpec => ({
  source: "external_docker",
  sourceRevisionConfig: { imageUri },
});
const repo = (repoRef: string): DeploymentSpec => ({
  source: "github",
  sourceConfig: {
    repoUrl: "https://github.com/acme/agent",
    integrationId: "0b6f3c2e-7d2a-4c59-9b8e-3f1a2b4c5d6e",
  },
  sourceRevisionConfig: { repoRef },
});

/**
 * The calls of `method route` the simulator received for the deployment `id`. A redeploy is
 * counted by its URL: a service without the route answers it as an unknown path.
 */
const calls = (s: Scenario, method: string, route: string, id: string) =>
  s.sim
    .requests({ method })
    .filter((r) =>
      route === REDEPLOY_ROUTE
        ? r.url.startsWith(`/v2/deployments/${id}/revisions/`) && r.url.endsWith("/redeploy")
        : r.route === `${method} ${route}` && r.url.includes(id),
    ).length;

describe("controller: redeploy instead of rebuild", () => {
  const running: Scenario[] = [];
  afterEach(async () => {
    for (const s of running.splice(0)) await s.stop();
  });

  async function scenario(prefix: string, redeployRoute: RedeployRouteMode = "new-revision") {
    const s = await startScenario(prefix, { sim: { timing: TIMING, redeployRoute } });
    running.push(s);
    return s;
  }

  /** `name` created with `first`, then `second` live, then back to `first`'s spec; the deployment id. */
  async function revert(s: Scenario, name: string, first: DeploymentSpec, second: DeploymentSpec) {
    await s.user.create(s.namespace, name, first);
    const created = await s.user.waitReady(s.namespace, name, 30_000);
    await s.user.patch(s.namespace, name, { spec: second });
    await s.user.waitReady(s.namespace, name, 30_000);
    const id = created.status?.deploymentId ?? "";
    const before = {
      patches: calls(s, "PATCH", PATCH, id),
      redeploys: calls(s, "POST", REDEPLOY_ROUTE, id),
      listings: calls(s, "GET", ROUTES.REVISIONS, id),
    };
    await s.user.patch(s.namespace, name, { spec: first });
    const back = await s.user.waitReady(s.namespace, name, 30_000);
    return {
      id,
      firstRevision: created.status?.activeRevisionId,
      back,
      patches: calls(s, "PATCH", PATCH, id) - before.patches,
      redeploys: calls(s, "POST", REDEPLOY_ROUTE, id) - before.redeploys,
      listings: calls(s, "GET", ROUTES.REVISIONS, id) - before.listings,
    };
  }

  it("image digests and commit shas changed back: one redeploy each, no PATCH, the old config live again without a build", async () => {
    const s = await scenario("redeploy");
    const [img, sha] = await Promise.all([
      revert(s, "by-digest", image(GOOD), image(BAD)),
      revert(s, "by-commit", repo(SHA_1), repo(SHA_2)),
    ]);
    for (const r of [img, sha]) {
      expect(r.redeploys).toBe(1);
      // One read of the listing found the candidate.
      expect(r.listings).toBe(1);
      expect(r.patches).toBe(0);
      const named = s.sim.store.redeploys(r.id).at(-1);
      expect(named?.revision_id).toBe(r.firstRevision);
      // The revision that went live is a copy of the first one: no build phase at all.
      const copy = s.sim.store.revisions(r.id)?.find((rev) => rev.id === named?.live_revision_id);
      expect(copy?.redeploy_of).toBe(r.firstRevision);
      expect(r.back.status?.activeRevisionId).toBe(copy?.id);
    }
    // Live after the deploy phases alone: the live revision is a copy (`redeploy_of` above), which
    // starts at the deploy phases (`REDEPLOY_FIRST_PHASE`, src/simulator/record.ts), not a build;
    // how long it took is the benchmarks' to show, not a bound here.
    expect(img.back.status?.activeRevision).toMatchObject({ imageUri: GOOD });
    expect(sha.back.status?.activeRevision).toMatchObject({ repoRef: SHA_1, repoCommitSha: SHA_1 });
    const events = await s.user.events(s.namespace, "by-digest");
    expect(events.find((e) => e.reason === "Redeployed")?.note).toContain(
      `redeployed revision ${img.firstRevision} instead of building a new one (no build)`,
    );
  });

  it("a branch under Pinned, a secret rotated in between, revisionReuse Never: PATCH, never a redeploy", async () => {
    const s = await scenario("no-redeploy");
    await s.user.putSecret(s.namespace, "agent-secrets", { token: "one" });
    const withSecret = (spec: DeploymentSpec): DeploymentSpec => ({
      ...spec,
      secrets: [{ name: "TOKEN", valueFrom: { secretKeyRef: { name: "agent-secrets", key: "token" } } }],
    });
    const rotated = (async () => {
      await s.user.create(s.namespace, "rotated", withSecret(image(GOOD)));
      const created = await s.user.waitReady(s.namespace, "rotated", 30_000);
      await s.user.putSecret(s.namespace, "agent-secrets", { token: "two" });
      await s.user.patch(s.namespace, "rotated", { spec: { sourceRevisionConfig: { imageUri: BAD } } });
      await s.user.waitReady(s.namespace, "rotated", 30_000);
      const id = created.status?.deploymentId ?? "";
      const patches = calls(s, "PATCH", PATCH, id);
      await s.user.patch(s.namespace, "rotated", { spec: { sourceRevisionConfig: { imageUri: GOOD } } });
      await s.user.waitReady(s.namespace, "rotated", 30_000);
      return {
        redeploys: calls(s, "POST", REDEPLOY_ROUTE, id),
        patches: calls(s, "PATCH", PATCH, id) - patches,
      };
    })();
    const [branch, never, secret] = await Promise.all([
      revert(s, "branch", repo("main"), repo("release")),
      revert(
        s,
        "never",
        { ...image(GOOD), revisionReuse: "Never" },
        { ...image(BAD), revisionReuse: "Never" },
      ),
      rotated,
    ]);
    for (const r of [branch, never, secret]) {
      expect(r.redeploys).toBe(0);
      expect(r.patches).toBe(1);
    }
  });

  it("switch-active: the active revision switches back, Ready when it is active, nothing sent again", async () => {
    const s = await scenario("switch", "switch-active");
    const r = await revert(s, "switched", image(GOOD), image(BAD));
    expect(r).toMatchObject({ redeploys: 1, patches: 0 });
    const deployment = s.sim.store.get(r.id);
    expect(deployment?.active_revision_id).toBe(r.firstRevision);
    expect(deployment?.latest_revision_id).not.toBe(r.firstRevision);
    expect(r.back.status?.activeRevision).toMatchObject({ id: r.firstRevision, imageUri: GOOD });
    expect(conditionOf(r.back, "Ready")).toMatchObject({ status: "True", reason: "Available" });
    expect(r.back.status?.activeRevisionId).toBe(r.firstRevision);
    // Settled: a resync later, no redeploy, no PATCH.
    const settled = {
      patches: calls(s, "PATCH", PATCH, r.id),
      redeploys: calls(s, "POST", REDEPLOY_ROUTE, r.id),
      listings: calls(s, "GET", ROUTES.REVISIONS, r.id),
    };
    await s.user.annotate(s.namespace, "switched", {
      "dms.dev/reconcile-requested-at": "2030-01-01T00:00:00Z",
    });
    await s.user.waitFor(
      s.namespace,
      "switched",
      (o) => o?.status?.lastHandledReconcileAt === "2030-01-01T00:00:00Z",
      "the requested reconcile handled",
    );
    expect(calls(s, "PATCH", PATCH, r.id)).toBe(settled.patches);
    expect(calls(s, "POST", REDEPLOY_ROUTE, r.id)).toBe(settled.redeploys);
    // Steady: no read of the revision listing either.
    expect(calls(s, "GET", ROUTES.REVISIONS, r.id)).toBe(settled.listings);
  });

  it("a service without the route: one fallback PATCH, and the next revert is not asked again", async () => {
    const s = await scenario("no-route", "missing");
    const first = await revert(s, "fallback", image(GOOD), image(BAD));
    expect(first).toMatchObject({ redeploys: 1, patches: 1 });
    const second = await revert(s, "fallback-2", image(GOOD), image(BAD));
    expect(second).toMatchObject({ redeploys: 0, patches: 1 });
  });
});
