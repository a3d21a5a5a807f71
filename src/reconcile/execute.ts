/**
 * The execute half of the apply arm's one boundary with the service (crossplane-runtime's
 * `ExternalClient` Create and Update): performs what `decide` decided (a create with its intent
 * recorded first, `create.ts`; a PATCH, its revision part redeployed instead of built when
 * `spec.revisionReuse` allows and an earlier revision matches, `redeploy.ts`; a rebuild with
 * its intent recorded first, `rebuild.ts`) and returns what it wrote, a failure after a write
 * included, as a value. Every revision this operator creates is recorded in
 * `status.revisionHistory` (`revision-history.ts`).
 */
import { isServiceError } from "../api/errors.ts";
import { formatTime } from "../crd/conventions.ts";
import type { RevisionReusePolicy } from "../crd/spec-policies.ts";

import { create } from "./create.ts";
import { performRebuild } from "./rebuild.ts";
import { redeploy } from "./redeploy.ts";
import {
  type DesiredRevision,
  type PatchTarget,
  pendingRedeploy,
  type RevisionHistoryEntry,
  recordCreated,
  revisionConfigHash,
  revisionDigests,
  revisionReusePolicy,
  splitForRedeploy,
} from "./revision-history.ts";
import {
  chooseRevision,
  NOT_REUSED,
  pendingSwitchBack,
  type ReuseDecision,
  type ReuseInput,
  withoutRedeploy,
} from "./revision-reuse.ts";
import type {
  ApplyPatchInput,
  ApplyPatchResult,
  Connected,
  Decision,
  Execution,
  ReconcileDeps,
} from "./run.ts";
import type { RevisionRedeployer } from "./service/redeployer.ts";

/**
 * Performs `decision`'s write, if any, then its rebuild, if any (`performRebuild`, rebuild.ts).
 * A failure before any write rejects; one after a write is returned as a value ({@link Execution}).
 */
export async function execute(
  deps: Pick<ReconcileDeps, "resources">,
  run: Connected,
  decision: Decision,
  signal: AbortSignal,
): Promise<Execution | undefined> {
  const executed = await write(deps, run, decision, signal);
  const rebuild = decision.rebuild;
  if (!rebuild || executed?.kind === "failed") return executed;
  return performRebuild(deps, run, { decision, rebuild, done: executed ?? { kind: "none" } }, signal);
}

/** Performs `decision`'s write, if any. */
async function write(
  deps: Pick<ReconcileDeps, "resources">,
  run: Connected,
  decision: Decision,
  signal: AbortSignal,
): Promise<Execution | undefined> {
  const write = decision.write;
  if (!write) return undefined;
  if (write.kind === "create") return create(deps, run, write.plan, signal);
  // The revision part is redeployed instead of built when spec.revisionReuse allows (revision-reuse.ts).
  const target: PatchTarget = {
    deployment: write.deployment,
    decision: write.plan,
    spec: run.obj.spec,
    // The history as decided (a revision the decision recorded: a lost rebuild's, rebuild.ts).
    status: decision.history
      ? { ...run.obj.status, revisionHistory: decision.history }
      : (run.obj.status ?? {}),
  };
  const { id, latest_revision_id: after } = write.deployment;
  const sent = await applyPatch({
    ...target,
    service: run.session.service,
    redeployer: run.session.redeploys,
    now: formatTime(run.now),
    signal,
    ...(write.build ? { build: true } : {}),
  }).catch((error: unknown) => {
    // Its answer lost (or the call cut off), the revision it may have made is still its own.
    if (signal.aborted || (isServiceError(error) && error.maybeApplied))
      run.session.unanswered.lost(id, after, revisionDigests(target).configHash);
    throw error;
  });
  // Answered: its answer tells what is the operator's from now on.
  run.session.unanswered.delete(id);
  if (sent.failed) return { kind: "failed", error: sent.failed.error, history: sent.history };
  return { kind: "sent", sent };
}

/** Why a revision is built when a rebuild was asked, whatever `spec.revisionReuse` allows. */
const REBUILD_ASKED = "a rebuild was asked (dms.dev/rebuild-requested-at)";

/**
 * Sends `decision`: a PATCH, or its revision part redeployed (`redeploy`, redeploy.ts) then a
 * PATCH of the rest. Rejects as the PATCH or the redeploy reject, before anything was written; a
 * PATCH of the rest failing after a redeploy is returned as `failed`, with the history it made.
 */
export async function applyPatch(input: ApplyPatchInput): Promise<ApplyPatchResult> {
  const { service, redeployer, deployment, decision, spec, status, signal } = input;
  const body = decision.body;
  const { config, source, secretsHash, configHash } = revisionDigests(input);
  const history = status.revisionHistory;
  const split = decision.newRevision && !input.build ? splitForRedeploy(body) : undefined;

  /** The PATCH of `sent`, and the revision it created recorded. */
  const patch = async (sent: typeof body, why?: string): Promise<ApplyPatchResult> => {
    const updated = await service.patch(deployment.id, sent, signal);
    const made = updated.latest_revision_id;
    const created = made && made !== deployment.latest_revision_id ? made : undefined;
    // A redeploy pending before is no longer what the spec asks once a revision part was sent (a
    // PATCH of what makes no revision, its revision part held by a rollout window, leaves it).
    const pending = sent.source_revision_config || created ? pendingRedeploy(history) : undefined;
    const cleared = pending ? history?.map((e) => (e.id === pending.id ? withoutRedeploy(e) : e)) : undefined;
    return {
      deployment: updated,
      revision: { kind: "patched", ...(why === undefined ? {} : { why }) },
      history: created ? recordCreated(cleared ?? history, created, secretsHash, configHash) : cleared,
    };
  };

  if (!split) return patch(body, input.build && decision.newRevision ? REBUILD_ASKED : undefined);
  // Redeployed by a switch of the active revision, and still the operator's latest act for this
  // very config and secrets: nothing to send for the revision again.
  const pending = pendingRedeploy(history) && pendingSwitchBack(input);
  if (pending) {
    const rest = split.rest ? await service.patch(deployment.id, split.rest, signal) : deployment;
    return { deployment: rest, revision: { kind: "pending", revisionId: pending.id }, history: undefined };
  }
  const choice = await chooseRedeploy(
    redeployer,
    deployment.id,
    { policy: revisionReusePolicy(spec), desired: { config, source, secretsHash }, history: history ?? [] },
    signal,
  );
  if (choice.kind === "build") return patch(body, choice.reason);
  return redeploy(input, choice, { rest: split.rest, secretsHash, configHash }, (why) => patch(body, why));
}

/**
 * The revision to redeploy instead of building `input.desired`, or why none (`chooseRevision`).
 * At most one call (the first page of the listing), and none when the policy is Never, when no
 * revision of the history has the same digests of config and secrets (the listing could not
 * change the answer), or once the connection found either route missing.
 */
export async function chooseRedeploy(
  redeployer: RevisionRedeployer,
  deploymentId: string,
  input: Omit<ReuseInput, "revisions">,
  signal: AbortSignal,
): Promise<ReuseDecision> {
  const excluded = reuseExcluded(input.policy, input.desired, input.history);
  if (excluded !== undefined) return { kind: "build", reason: excluded };
  if (redeployer.missing !== undefined) return { kind: "build", reason: redeployer.missing };
  const read = await redeployer.revisions(deploymentId, signal);
  if (read.kind === "unavailable") return { kind: "build", reason: read.reason };
  return chooseRevision({ ...input, revisions: read.revisions });
}

/**
 * Why no revision of `history` can be redeployed for `desired` under `policy`, whatever a listing
 * of the service's revisions would show: the policy is Never, or no entry has the digests of the
 * config and the secrets the change would make. Undefined when one may (then the listing is read).
 */
function reuseExcluded(
  policy: RevisionReusePolicy,
  desired: DesiredRevision,
  history: readonly RevisionHistoryEntry[],
): string | undefined {
  if (policy === "Never") return NOT_REUSED.never;
  const wanted = desired.secretsHash;
  const config = revisionConfigHash(desired.config, desired.source);
  const candidate = (e: RevisionHistoryEntry) =>
    e.secretsHash === wanted && (e.configHash === undefined || e.configHash === config);
  return wanted === undefined || !history.some(candidate) ? NOT_REUSED.noMatch : undefined;
}
