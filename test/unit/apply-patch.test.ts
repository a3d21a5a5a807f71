// A PATCH plan sent with spec.revisionReuse, against the simulated service: the redeploy for the
// revision part and a PATCH of the rest; both behaviours of the route, a redeploy pending, a
// service without the route, and the revisions the operator creates recorded.
import { describe, expect, it } from "vitest";
import { applyPatch } from "../../src/reconcile/execute.ts";
import type { PatchPlan } from "../../src/reconcile/plan.ts";
import { NO_SECRETS_HASH, type RevisionHistoryEntry } from "../../src/reconcile/revision-history.ts";
import { hashSecrets, keyedSecretDigest } from "../../src/reconcile/secret-hash.ts";
import {
  GOOD,
  configHashOf as hashOf,
  type RevertedWorldOptions,
  revertedWorld,
} from "../support/reverted-world.ts";

const NOW = "2030-01-01T00:01:00Z";
const signal = new AbortController().signal;

/** GOOD then BAD, both without secrets, their config digests recorded. */
const world = (route?: RevertedWorldOptions["route"]) => revertedWorld({ route, configHashes: true });

const back = (extra: Partial<PatchPlan["body"]> = {}): PatchPlan => ({
  action: "patch",
  body: { source_revision_config: { image_uri: GOOD }, ...extra },
  newRevision: true,
  summary: [],
  changes: [],
  problems: [],
});

/** `decision` sent in world `w` with the history `history` (default: the world's). */
function send(
  w: ReturnType<typeof world>,
  decision: PatchPlan,
  history: RevisionHistoryEntry[] | undefined = w.history,
  spec: Parameters<typeof applyPatch>[0]["spec"] = {},
) {
  return applyPatch({
    service: w.service,
    redeployer: w.redeployer,
    deployment: w.deployment(),
    decision,
    spec,
    status: { revisionHistory: history },
    now: NOW,
    signal,
  });
}

describe("applyPatch", () => {
  it("new-revision: one redeploy, no PATCH carrying source_revision_config, the copy recorded", async () => {
    const w = world();
    const result = await send(w, back());
    expect(result.revision).toMatchObject({
      kind: "redeployed",
      revisionId: w.good,
      behaviour: "new-revision",
    });
    const copy = result.deployment.latest_revision_id;
    expect(result.history?.[0]).toEqual({
      id: copy,
      secretsHash: NO_SECRETS_HASH,
      configHash: hashOf(GOOD),
      redeployedFrom: w.good,
      redeployReason: expect.stringContaining(`revision ${w.good} deployed image ${GOOD}`),
    });
    expect(result.known).toEqual({ id: copy, config: expect.objectContaining({ image_uri: GOOD }) });
    expect(w.service.calls).toMatchObject({ recentRevisions: 1, redeploy: 1, patch: 0 });
  });

  it("the rest of the PATCH still goes, without the revision part", async () => {
    const w = world();
    await send(w, back({ source_config: { build_on_push: false } }));
    expect(w.service.calls).toMatchObject({ redeploy: 1, patch: 1 });
    expect(w.service.lastPatchBody).toEqual({ source_config: { build_on_push: false } });
  });

  it("switch-active: recorded as the newest entry; the next reconcile sends nothing for it", async () => {
    const w = world("switch-active");
    const first = await send(w, back());
    expect(first.revision).toMatchObject({ kind: "redeployed", behaviour: "switch-active", live: w.good });
    expect(first.history?.[0]).toMatchObject({
      id: w.good,
      redeployedAt: NOW,
      redeployedFrom: w.good,
      redeployReason: expect.stringContaining("with the same secrets"),
    });
    w.service.resetCalls();
    const again = await send(w, back(), first.history);
    expect(again.revision).toEqual({ kind: "pending", revisionId: w.good });
    expect(w.service.total).toBe(0);
    w.clock.advance(2000);
    expect(w.deployment().active_revision_id).toBe(w.good);
  });

  it("a service without the route: the PATCH, once asked", async () => {
    const w = world("missing");
    const result = await send(w, back());
    expect(result.revision).toEqual({ kind: "patched", why: "the service has no redeploy route" });
    expect(w.service.calls).toMatchObject({ redeploy: 1, patch: 1 });
    expect(result.history?.[0]?.id).toBe(result.deployment.latest_revision_id);
  });

  it("a PATCH that sends secrets is never replaced, and records its revision with their digest", async () => {
    const w = world();
    const decision = { ...back({ secrets: [{ name: "A", value: "1" }] }), secretsHash: "c".repeat(64) };
    const result = await send(w, decision, w.history, { secrets: [{ name: "A", value: "1" }] });
    expect(result.revision).toEqual({ kind: "patched" });
    expect(w.service.calls).toMatchObject({ recentRevisions: 0, redeploy: 0, patch: 1 });
    expect(result.history?.[0]).toMatchObject({ secretsHash: "c".repeat(64) });
  });

  it("secrets the service shows to be the spec's new values, the status still recording the old: never a redeploy of a revision with the old", async () => {
    const old = [{ name: "A", value: "old" }];
    const w = revertedWorld({ secrets: old, configHashes: true });
    // The plan found the spec's values in the service's answer: nothing to send, and their digest.
    const decision = { ...back(), secretsHash: hashSecrets([{ name: "A", value: "new" }]) };
    const result = await applyPatch({
      service: w.service,
      redeployer: w.redeployer,
      deployment: w.deployment(),
      decision,
      spec: { secrets: [{ name: "A", valueFrom: { secretKeyRef: { name: "s", key: "a" } } }] },
      status: { revisionHistory: w.history, appliedSecretsHash: hashSecrets(old) },
      now: NOW,
      signal,
    });
    expect(result.revision).toMatchObject({ kind: "patched" });
    expect(w.service.calls.redeploy).toBe(0);
  });

  describe("a history whose secrets digests predate the install key (plain sha256, not hmac-sha256:)", () => {
    const secrets = [{ name: "A", value: "1" }];
    const managed = { secrets: [{ name: "A", valueFrom: { secretKeyRef: { name: "s", key: "a" } } }] };
    /** The revert planned by an operator with the install key: the same values, digested keyed. */
    const keyed = { ...back(), secretsHash: keyedSecretDigest(new Uint8Array(32).fill(7)).digest(secrets) };
    const old = () => revertedWorld({ secrets, configHashes: true });

    it("never matches a keyed digest, even of the same values: a build (PATCH), the listing not read", async () => {
      const w = old();
      expect(w.history[1]?.secretsHash).toBe(hashSecrets(secrets));
      const result = await send(w, keyed, w.history, managed);
      expect(result.revision).toEqual({
        kind: "patched",
        why: "no earlier revision among the latest listed deployed the same config",
      });
      expect(w.service.calls).toMatchObject({ recentRevisions: 0, redeploy: 0, patch: 1 });
      // The revision built is recorded with the keyed digest: the next revert to it is a redeploy.
      expect(result.history?.[0]).toMatchObject({ secretsHash: keyed.secretsHash });
    });

    it("a switch back recorded so is not taken for the spec's revision live: a build, never a second redeploy", async () => {
      const w = old();
      // GOOD switched back to: the newest entry, marked so, BAD after it.
      const switched = [...w.history].reverse().map((e, i) => (i === 0 ? { ...e, redeployedAt: NOW } : e));
      const result = await send(w, keyed, switched, managed);
      expect(result.revision).toMatchObject({ kind: "patched" });
      expect(w.service.calls).toMatchObject({ recentRevisions: 0, redeploy: 0, patch: 1 });
    });

    it("a plain digest equal to the plan's is of the same values: redeployed (an operator without the key)", async () => {
      const w = old();
      const result = await send(w, { ...back(), secretsHash: hashSecrets(secrets) }, w.history, managed);
      expect(result.revision).toMatchObject({ kind: "redeployed", revisionId: w.good });
    });
  });
});
