/**
 * The execute half of the apply arm's one boundary with the service (crossplane-runtime's
 * `ExternalClient` Create and Update): performs what `decide` decided (a create with its intent
 * recorded first, `create.ts`; a PATCH, a redeploy then a PATCH, the history's bookkeeping, a rebuild with its
 * intent recorded first) and
 * returns what it wrote, a failure after a write included, as a value.
 *
 * A PATCH plan is sent redeploying an earlier revision instead of building its new revision when
 * `spec.revisionReuse` allows (`revision-reuse.ts`): the redeploy for the revision part, then a
 * PATCH of only what needs no revision. Both behaviours of the service's route are followed: a
 * new revision copying the old one is recorded like any revision the operator creates; a switch
 * of the active revision back is recorded as the history's newest entry (`redeployedAt`), which
 * is what the spec asks to be live from then on, so that the next reconcile neither redeploys nor
 * PATCHes it again, and the resource is Ready when that revision is active. A service without
 * the route gets the PATCH, once asked (the connection remembers it). Every revision this
 * operator creates is recorded in `status.revisionHistory` (`revision-history.ts`).
 */
import { isServiceError, loggedError } from "../api/errors.ts";
import { formatTime } from "../crd/conventions.ts";
import type { RevisionReusePolicy } from "../crd/spec-policies.ts";

import { create } from "./create.ts";
import { artifactOf } from "./live-revision.ts";
import type { DeploymentWrites, StoredResource } from "./ports.ts";
import type { StatusRecord } from "./reasons.ts";
import { intentUndone, rebuildIntent } from "./rebuild.ts";
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
  recordRedeployed,
  redeployedFrom,
  withoutRedeploy,
} from "./revision-reuse.ts";
import type { ApplyPatchResult, Connected, Decision, Executed, ReconcileDeps } from "./run.ts";
import type { RevisionRedeployer } from "./service/redeployer.ts";
import type { Deployment } from "./service-types.ts";

/**
 * What `execute` came to: what it wrote, or the failure that stopped it once something was
 * written (`written`: the resource's version a create's or a rebuild's intent answered with;
 * `record`: a rebuild's intent undone, the service having refused the call; `history`: what a
 * redeploy made before the PATCH of the rest failed). A failure before any write rejects.
 */
type Execution =
  | Executed
  | {
      kind: "failed";
      error: unknown;
      written?: StoredResource;
      history?: Decision["history"];
      /** What the failure's status records besides (a rebuild's intent undone). */
      record?: StatusRecord;
    };

/**
 * Performs `decision`'s write, if any, then its rebuild, if any (see {@link Execution}). A PATCH
 * that made a revision itself (new secret values do; values the service already had, which a
 * service that masks them is sent again, do not) is the revision the rebuild asked for: no
 * second build. A rebuild's call is sent once its intent is written (`rebuildIntent`, rebuild.ts:
 * never sent again, whatever becomes of its answer), unless the connection knows the route
 * missing (no call). A revision the rebuild created is followed by a read of the deployment (its new
 * latest revision, for the status and the rollout's tracking); that read failing costs only the
 * tracking until the next lookup, never a second build.
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
  const done = executed ?? { kind: "none" };
  const patched = revisionPatched(done, decision);
  if (patched) return { ...done, rebuilt: { outcome: { kind: "written", revisionId: patched } } };
  const { service, snapshot, rebuilds } = run.session;
  const history = done.kind === "sent" && done.sent.history ? { history: done.sent.history } : {};
  let written: { written: StoredResource } | undefined;
  if (rebuilds.missing === undefined) {
    // With the history as decided (a lost rebuild's revision seen now) and written.
    const kept = history.history ?? decision.history;
    const status = { ...run.obj.status, ...(kept ? { revisionHistory: kept } : {}) };
    const sent = done.kind === "sent" ? done.sent.deployment : observedDeployment(decision);
    const intent = rebuildIntent(status, sent, rebuild.requestedAt);
    try {
      written = { written: await deps.resources.patchStatus(run.obj, intent, signal) };
    } catch (error) {
      return { kind: "failed", error, ...history };
    }
  }
  let outcome: Awaited<ReturnType<typeof rebuilds.rebuild>>;
  try {
    outcome = await rebuilds.rebuild(rebuild.deploymentId, signal);
  } catch (error) {
    // Refused by the service, it is pending again; cut off by the signal, it may have gone out.
    const undone = written && !signal.aborted ? { record: intentUndone(run.obj.status ?? {}) } : {};
    return { kind: "failed", error, ...written, ...history, ...undone };
  }
  if (outcome.kind !== "rebuilt") {
    // Gone, or perhaps rebuilt: the next reconcile looks the deployment up.
    if (outcome.kind !== "missing") snapshot.forget(rebuild.deploymentId);
    return { ...done, ...written, rebuilt: { outcome } };
  }
  const deployment = await service.getById(rebuild.deploymentId, signal).catch((error: unknown) => {
    if (signal.aborted) throw error;
    run.log.warn({ err: loggedError(error) }, "could not read the deployment after its rebuild");
    return undefined;
  });
  if (deployment) snapshot.remember(deployment);
  else snapshot.forget(rebuild.deploymentId);
  return { ...done, ...written, rebuilt: { outcome, deployment } };
}

/** The deployment `decision` observed, if it found one. */
const observedDeployment = (decision: Decision): Deployment | undefined =>
  decision.observed?.kind === "found" ? decision.observed.deployment : undefined;

/** The revision the PATCH of `done` made, if it made one (its answer names a new latest revision). */
function revisionPatched(done: Executed, decision: Decision): string | undefined {
  if (done.kind !== "sent" || done.sent.revision.kind !== "patched") return undefined;
  const before = observedDeployment(decision);
  const made = done.sent.deployment.latest_revision_id;
  return before && made && made !== before.latest_revision_id ? made : undefined;
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
  // The revision part is redeployed instead of built when spec.revisionReuse allows (see the module comment).
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

/** What {@link applyPatch} needs. */
interface ApplyPatchInput extends PatchTarget {
  service: Pick<DeploymentWrites, "patch">;
  redeployer: RevisionRedeployer;
  /** RFC 3339, for `redeployedAt`. */
  now: string;
  signal: AbortSignal;
  /** A rebuild was asked (`dms.dev/rebuild-requested-at`): the revision is built, never reused. */
  build?: true;
}

/** Why a revision is built when a rebuild was asked, whatever `spec.revisionReuse` allows. */
const REBUILD_ASKED = "a rebuild was asked (dms.dev/rebuild-requested-at)";

/**
 * Sends `decision` (see the module comment). Rejects as the PATCH or the redeploy reject, before
 * anything was written; a PATCH of the rest failing after a redeploy is returned as `failed`,
 * with the history the redeploy made.
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
  const outcome = await redeployer.redeploy(deployment.id, choice.revisionId, signal);
  if (outcome.kind === "missing") return patch(body, "the service has no redeploy route");
  if (outcome.kind === "unknown")
    return patch(body, `the service no longer has revision ${choice.revisionId}`);
  const answered = outcome.deployment;
  const copy =
    answered.latest_revision_id &&
    answered.latest_revision_id !== deployment.latest_revision_id &&
    answered.latest_revision_id !== choice.revisionId
      ? answered.latest_revision_id
      : undefined;
  const from = redeployedFrom(choice.revisionId, choice.reason);
  const next = copy
    ? recordCreated(history, copy, secretsHash, configHash, from)
    : recordRedeployed(history, choice.revisionId, input.now, {
        ...artifactOf(choice.revision.source_revision_config ?? {}),
        ...from,
      });
  // Sent after the redeploy, so that the spec's values stand whatever the redeploy brings back.
  // Its failure carries the history: the retry then sends the rest alone (no second redeploy).
  let after = answered;
  let failed: ApplyPatchResult["failed"];
  if (split.rest)
    after = await service.patch(deployment.id, split.rest, signal).catch((error: unknown) => {
      failed = { error };
      return answered;
    });
  const known = choice.revision.source_revision_config
    ? { id: choice.revisionId, config: choice.revision.source_revision_config }
    : undefined;
  return {
    deployment: after,
    revision: {
      kind: "redeployed",
      revisionId: choice.revisionId,
      reason: choice.reason,
      behaviour: copy ? "new-revision" : "switch-active",
      live: copy ?? choice.revisionId,
    },
    history: next,
    ...(known ? { known: copy ? { id: copy, config: known.config } : known } : {}),
    ...(failed ? { failed } : {}),
  };
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
