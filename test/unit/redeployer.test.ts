// The redeploys of one connection against the simulated service: the one read that finds the
// candidate and when it is not made at all, both behaviours of the route, and a service without
// the route or the listing remembered for the connection (one call, then none).
import { describe, expect, it } from "vitest";
import { chooseRedeploy } from "../../src/reconcile/execute.ts";
import type { RevisionHistoryEntry } from "../../src/reconcile/revision-history.ts";
import { hashSecrets } from "../../src/reconcile/secret-hash.ts";
import { GOOD, type RevertedWorldOptions, revertedWorld } from "../support/reverted-world.ts";

const TOKEN = [{ name: "TOKEN", value: "one" }];
const SECRETS = hashSecrets(TOKEN);
const signal = new AbortController().signal;

/** A deployment that deployed GOOD then BAD, both created by the operator with SECRETS. */
const world = (route?: RevertedWorldOptions["route"]) => revertedWorld({ route, secrets: TOKEN });

const wantGood = (history: RevisionHistoryEntry[], secretsHash: string | undefined) => ({
  policy: "Pinned" as const,
  desired: { config: { image_uri: GOOD }, source: "external_docker", secretsHash },
  history,
});

describe("RevisionRedeployer", () => {
  it("one read of the listing's first page finds the revision; one call redeploys it", async () => {
    const { service, redeployer, id, good, history } = world();
    const decision = await chooseRedeploy(redeployer, id, wantGood(history, SECRETS), signal);
    expect(decision).toMatchObject({ kind: "redeploy", revisionId: good });
    expect(service.calls.recentRevisions).toBe(1);
    const outcome = await redeployer.redeploy(id, good, signal);
    expect(outcome.kind).toBe("redeployed");
    expect(service.store.redeploys(id)).toMatchObject([{ revision_id: good, behaviour: "new-revision" }]);
    expect(service.total).toBe(2);
  });

  it("switch-active: the same calls, the active revision switches back", async () => {
    const { clock, service, redeployer, id, good, history } = world("switch-active");
    const decision = await chooseRedeploy(redeployer, id, wantGood(history, SECRETS), signal);
    const outcome = await redeployer.redeploy(
      id,
      decision.kind === "redeploy" ? decision.revisionId : "",
      signal,
    );
    expect(outcome.kind).toBe("redeployed");
    clock.advance(2000);
    expect(service.store.get(id)?.active_revision_id).toBe(good);
  });

  it("reads nothing when nothing in the history could match: Never, other secrets, unvouched secrets", async () => {
    const { service, redeployer, id, history } = world();
    expect(
      (await chooseRedeploy(redeployer, id, { ...wantGood(history, SECRETS), policy: "Never" }, signal)).kind,
    ).toBe("build");
    const rotated = hashSecrets([{ name: "TOKEN", value: "two" }]);
    expect((await chooseRedeploy(redeployer, id, wantGood(history, rotated), signal)).kind).toBe("build");
    expect((await chooseRedeploy(redeployer, id, wantGood(history, undefined), signal)).kind).toBe("build");
    expect((await chooseRedeploy(redeployer, id, wantGood([], SECRETS), signal)).kind).toBe("build");
    expect(service.total).toBe(0);
  });

  it("a service without the redeploy route: one call, remembered, then none", async () => {
    const { service, redeployer, id, good, history } = world("missing");
    expect(await redeployer.redeploy(id, good, signal)).toEqual({ kind: "missing" });
    expect(redeployer.missing).toBe("the service has no redeploy route");
    expect(await redeployer.redeploy(id, good, signal)).toEqual({ kind: "missing" });
    expect(await chooseRedeploy(redeployer, id, wantGood(history, SECRETS), signal)).toEqual({
      kind: "build",
      reason: "the service has no redeploy route",
    });
    expect(service.calls.redeploy).toBe(1);
    expect(service.calls.recentRevisions).toBe(0);
  });

  it("a revision the service no longer has: unknown, and the caller builds", async () => {
    const { redeployer, id } = world();
    expect(await redeployer.redeploy(id, "00000000-0000-4000-8000-000000000000", signal)).toEqual({
      kind: "unknown",
    });
    expect(redeployer.missing).toBeUndefined();
  });

  it("a listing that fails for a passing reason builds this time and asks again next time", async () => {
    const { service, redeployer, id, good, history } = world();
    service.failNext("recentRevisions", { status: 503 });
    expect(await chooseRedeploy(redeployer, id, wantGood(history, SECRETS), signal)).toEqual({
      kind: "build",
      reason: "the revisions could not be read (503 unavailable)",
    });
    expect(await chooseRedeploy(redeployer, id, wantGood(history, SECRETS), signal)).toMatchObject({
      revisionId: good,
    });
  });
});
