/**
 * Sending a PATCH plan, redeploying an earlier revision instead of building its new revision when
 * `spec.revisionReuse` allows (revision-reuse.ts): the redeploy for the revision part, then a
 * PATCH of only what needs no revision. Both behaviours of the service's route are followed: a
 * new revision copying the old one is recorded like any revision the operator creates; a switch
 * of the active revision back is recorded as the history's newest entry (`redeployedAt`), which
 * is what the spec asks to be live from then on, so that the next reconcile neither redeploys nor
 * PATCHes it again, and the resource is Ready when that revision is active. A service without
 * the route gets the PATCH, once asked (the connection remembers it).
 *
 * Every revision this operator creates is recorded in `status.revisionHistory` with the digests
 * of its secrets and config: only those can be redeployed later.
 */
import type { DeploymentResourceStatus, DeploymentSpec } from "../crd/schema.ts";
import { artifactOf } from "./live-revision.ts";
import type { CreatePlan, PatchPlan } from "./plan.ts";
import type { DeploymentWrites } from "./ports.ts";
import {
  chooseRevision,
  configAfterPatch,
  pendingRedeploy,
  type ReuseDecision,
  type ReuseInput,
  type RevisionHistoryEntry,
  recordCreated,
  recordRedeployed,
  redeployedFrom,
  revisionConfigHash,
  revisionReusePolicy,
  splitForRedeploy,
  switchedBackTo,
  vouchedSecretsHash,
} from "./revision-reuse.ts";
import type { RevisionRedeployer } from "./service/redeployer.ts";
import type { Deployment, SourceRevisionConfig } from "./service-types.ts";

/** What {@link applyPatch} needs. */
export interface ApplyPatchInput {
  service: Pick<DeploymentWrites, "patch">;
  redeployer: RevisionRedeployer;
  /** The service's deployment the plan was made against. */
  deployment: Deployment;
  decision: PatchPlan;
  spec: Pick<DeploymentSpec, "revisionReuse" | "secrets">;
  status: Pick<DeploymentResourceStatus, "revisionHistory" | "appliedSecretsHash">;
  /** RFC 3339, for `redeployedAt`. */
  now: string;
  signal: AbortSignal;
}

/** How the revision part went out. */
export type RevisionSent =
  /** No revision part, or it was PATCHed (built): `why` says why no redeploy, when one was weighed. */
  | { kind: "patched"; why?: string }
  /** Redeployed: `live` is the revision that goes live (a new copy, or `revisionId` itself). */
  | {
      kind: "redeployed";
      revisionId: string;
      reason: string;
      behaviour: "new-revision" | "switch-active";
      live: string;
    }
  /** Redeployed before (the history's newest entry) and not live yet: nothing sent for it again. */
  | { kind: "pending"; revisionId: string };

/** What was sent, and what the status must now remember. */
export interface ApplyPatchResult {
  /** The deployment as the last call answered it. */
  deployment: Deployment;
  revision: RevisionSent;
  /** `status.revisionHistory` after it (undefined: as before). */
  history: RevisionHistoryEntry[] | undefined;
  /** The config of the revision redeployed, for `status.activeRevision` once it is active. */
  known?: { id: string; config: SourceRevisionConfig };
  /**
   * The PATCH of the rest failed after the redeploy went out: the failure, reported with the
   * history the redeploy made, so that the retry knows the revision is redeployed and sends only
   * the rest, rather than reading the listing and redeploying again.
   */
  failed?: { error: unknown };
}

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
  const split = decision.newRevision ? splitForRedeploy(body) : undefined;

  /** The PATCH of `sent`, and the revision it created recorded. */
  const patch = async (sent: typeof body, why?: string): Promise<ApplyPatchResult> => {
    const updated = await service.patch(deployment.id, sent, signal);
    const made = updated.latest_revision_id;
    const created = made && made !== deployment.latest_revision_id ? made : undefined;
    // A redeploy pending before is no longer what the spec asks once something else was sent.
    const pending = pendingRedeploy(history);
    const cleared = pending ? history?.map((e) => (e.id === pending.id ? withoutRedeploy(e) : e)) : undefined;
    return {
      deployment: updated,
      revision: { kind: "patched", ...(why === undefined ? {} : { why }) },
      history: created ? recordCreated(cleared ?? history, created, secretsHash, configHash) : cleared,
    };
  };

  if (!split) return patch(body);
  // Redeployed by a switch of the active revision, and still the operator's latest act for this
  // very config and secrets: nothing to send for the revision again.
  const pending = pendingSwitchBack(input);
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

/** What a PATCH `decision` of `deployment` would make a revision of, and its digests. */
function revisionDigests(input: Pick<ApplyPatchInput, "deployment" | "decision" | "spec" | "status">) {
  const { deployment, decision, spec, status } = input;
  const body = decision.body;
  const config = configAfterPatch(deployment.source_revision_config, body.source_revision_config);
  const source = body.revision_source ?? deployment.source;
  const secretsHash = vouchedSecretsHash({
    managed: spec.secrets !== undefined,
    sentHash: body.secrets ? decision.secretsHash : undefined,
    appliedHash: status.appliedSecretsHash,
    serviceSecretCount: deployment.secrets.length,
  });
  return { config, source, secretsHash, configHash: revisionConfigHash(config, source) };
}

/**
 * The redeploy that switched the active revision back (the history's newest entry) when it is
 * exactly the revision `decision` would make (same config and secrets digests, and the PATCH
 * can be split: no secrets sent): then its revision part is already live, and only the rest is
 * to send. Undefined otherwise.
 */
export function pendingSwitchBack(
  input: Pick<ApplyPatchInput, "deployment" | "decision" | "spec" | "status">,
): RevisionHistoryEntry | undefined {
  if (!input.decision.newRevision || !splitForRedeploy(input.decision.body)) return undefined;
  return switchedBackTo(input.status.revisionHistory, revisionDigests(input));
}

/** `status.revisionHistory` after a create made `revisionId`, the deployment's first revision. */
export function createdHistory(
  revisionId: string,
  decision: CreatePlan,
  spec: Pick<DeploymentSpec, "secrets">,
  created: Deployment,
): RevisionHistoryEntry[] {
  const secretsHash = vouchedSecretsHash({
    managed: spec.secrets !== undefined,
    sentHash: decision.secretsHash,
    serviceSecretCount: created.secrets.length,
  });
  const config = configAfterPatch({}, decision.body.source_revision_config);
  const source = decision.body.source;
  return recordCreated(undefined, revisionId, secretsHash, revisionConfigHash(config, source));
}

/** The note of the `Redeployed` event: which revision, why, how, and what else was sent. */
export function redeployedNote(
  sent: Extract<RevisionSent, { kind: "redeployed" }>,
  decision: PatchPlan,
): string {
  const how =
    sent.behaviour === "new-revision"
      ? `the service made revision ${sent.live} from it`
      : "the service switches the active revision back to it";
  const others = decision.changes.filter((c) => c.group !== "source_revision_config").map((c) => c.line);
  const also = others.length > 0 ? `; also updated: ${others.join("; ")}` : "";
  return `redeployed revision ${sent.revisionId} instead of building a new one (no build): ${sent.reason}; ${how}${also}`;
}

/**
 * When a redeploy that switched the active revision back is pending but the spec no longer asks
 * for it (Git moved on to what the service's latest revision already holds, so the planner sees
 * nothing to send), the plan that brings the spec's revision back: its revision-defining fields
 * sent again, which `applyPatch` turns into a redeploy of the revision that has them. Undefined
 * when no such redeploy is pending, or it is still what the spec asks.
 */
export function switchBackPlan(
  history: readonly RevisionHistoryEntry[] | undefined,
  deployment: Deployment,
): PatchPlan | undefined {
  const pending = pendingRedeploy(history);
  if (!pending) return undefined;
  const config = configAfterPatch(deployment.source_revision_config, {});
  if (pending.configHash === revisionConfigHash(config, deployment.source)) return undefined;
  return {
    action: "patch",
    body: { source_revision_config: config },
    newRevision: true,
    summary: [`back to the latest revision ${deployment.latest_revision_id ?? "(none)"}`],
    changes: [],
    problems: [],
  };
}

function withoutRedeploy(entry: RevisionHistoryEntry): RevisionHistoryEntry {
  const { redeployedAt: _at, ...rest } = entry;
  return rest;
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
  if (input.policy === "Never") return chooseRevision({ ...input, revisions: [] });
  const wanted = input.desired.secretsHash;
  const config = revisionConfigHash(input.desired.config, input.desired.source);
  const candidate = (e: ReuseInput["history"][number]) =>
    e.secretsHash === wanted && (e.configHash === undefined || e.configHash === config);
  if (wanted === undefined || !input.history.some(candidate))
    return chooseRevision({ ...input, revisions: [] });
  if (redeployer.missing !== undefined) return { kind: "build", reason: redeployer.missing };
  const read = await redeployer.revisions(deploymentId, signal);
  if (read.kind === "unavailable") return { kind: "build", reason: read.reason };
  return chooseRevision({ ...input, revisions: read.revisions });
}
