/**
 * A redeploy of an earlier revision instead of a build, once `execute.ts` chose one
 * (`chooseRedeploy`, by the rules of `revision-reuse.ts`): the call to the service's redeploy
 * route, then the PATCH of what needs no revision, and the records it leaves in
 * `status.revisionHistory` (where it came from and why, {@link redeployedFrom}; a switch of the
 * active revision back, {@link recordRedeployed}). Entered only for a redeploy.
 */
import { cutToLength } from "../api/printable.ts";
import { REDEPLOY_REASON_MAX_LENGTH } from "../crd/status-schema.ts";
import { artifactOf } from "./live-revision.ts";
import { type RedeployedFrom, type RevisionHistoryEntry, recordCreated } from "./revision-history.ts";
import type { ReuseDecision } from "./revision-reuse.ts";
import type { ApplyPatchInput, ApplyPatchResult } from "./run.ts";
import type { PatchDeploymentBody } from "./service-types.ts";

/** {@link RedeployedFrom} of a redeploy of `revisionId` for `reason`, the reason cut to its bound. */
export function redeployedFrom(revisionId: string, reason: string): RedeployedFrom {
  return { redeployedFrom: revisionId, redeployReason: cutToLength(reason, REDEPLOY_REASON_MAX_LENGTH) };
}

/**
 * `history` after the operator redeployed `revisionId` at `at` (RFC 3339) without a new revision
 * (the route switched the active revision back): that entry first, marked `redeployedAt`, so that
 * it stands for what the spec asks to be live (`pendingRedeploy`, revision-history.ts), with what it deployed
 * and why it was redeployed (`artifact`). Unchanged when the
 * revision is not in the history (only a revision the operator created is ever redeployed).
 */
export function recordRedeployed(
  history: readonly RevisionHistoryEntry[] | undefined,
  revisionId: string,
  at: string,
  artifact: Pick<RevisionHistoryEntry, "imageUri" | "repoRef" | "repoCommitSha"> & RedeployedFrom = {},
): RevisionHistoryEntry[] | undefined {
  const entry = history?.find((e) => e.id === revisionId);
  if (!history || !entry) return history ? [...history] : undefined;
  return [{ ...entry, ...artifact, redeployedAt: at }, ...history.filter((e) => e.id !== revisionId)];
}

/**
 * Redeploys `choice` instead of building the revision `input` would make (`applyPatch`,
 * execute.ts, chose it), then PATCHes only what needs no revision (`made.rest`). Both behaviours
 * of the service's route are followed: a new revision copying the old one is recorded like any
 * revision the operator creates; a switch of the active revision back is recorded as the
 * history's newest entry (`redeployedAt`), which is what the spec asks to be live from then on,
 * so that the next reconcile neither redeploys nor PATCHes it again, and the resource is Ready
 * when that revision is active. A service without the route gets the PATCH (`build`, with why),
 * once asked (the connection remembers it), as does one that no longer has the revision. Rejects
 * as the redeploy rejects; the PATCH of the rest failing after it is returned as `failed`, with
 * the history the redeploy made.
 */
export async function redeploy(
  input: ApplyPatchInput,
  choice: Extract<ReuseDecision, { kind: "redeploy" }>,
  made: { rest: PatchDeploymentBody | undefined; secretsHash: string | undefined; configHash: string },
  build: (why: string) => Promise<ApplyPatchResult>,
): Promise<ApplyPatchResult> {
  const { service, redeployer, deployment, signal } = input;
  const history = input.status.revisionHistory;
  const outcome = await redeployer.redeploy(deployment.id, choice.revisionId, signal);
  if (outcome.kind === "missing") return build("the service has no redeploy route");
  if (outcome.kind === "unknown") return build(`the service no longer has revision ${choice.revisionId}`);
  const answered = outcome.deployment;
  const copy =
    answered.latest_revision_id &&
    answered.latest_revision_id !== deployment.latest_revision_id &&
    answered.latest_revision_id !== choice.revisionId
      ? answered.latest_revision_id
      : undefined;
  const from = redeployedFrom(choice.revisionId, choice.reason);
  const next = copy
    ? recordCreated(history, copy, made.secretsHash, made.configHash, from)
    : recordRedeployed(history, choice.revisionId, input.now, {
        ...artifactOf(choice.revision.source_revision_config ?? {}),
        ...from,
      });
  // Sent after the redeploy, so that the spec's values stand whatever the redeploy brings back.
  // Its failure carries the history: the retry then sends the rest alone (no second redeploy).
  let after = answered;
  let failed: ApplyPatchResult["failed"];
  if (made.rest)
    after = await service.patch(deployment.id, made.rest, signal).catch((error: unknown) => {
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
