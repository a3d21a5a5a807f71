/**
 * What the status records of the revisions this operator made (`status.revisionHistory`), and
 * what a reconcile reads from it: every revision it creates (by a create, a PATCH, a redeploy or
 * a rebuild) is recorded with the digests of its config and secrets, for only those can be
 * redeployed later (`revision-reuse.ts`) and never be taken for someone else's; a redeploy that
 * switched the active revision back stands, while it is the newest entry, for the revision the
 * spec asks to be live ({@link pendingRedeploy}, {@link targetView}). Pure.
 */
import { createHash } from "node:crypto";
import type { DeploymentResourceStatus, DeploymentSpec } from "../crd/schema.ts";
import { DEFAULT_REVISION_REUSE, type RevisionReusePolicy } from "../crd/spec-policies.ts";
import { REVISION_HISTORY_LIMIT } from "../crd/status-schema.ts";
import type { PatchPlan } from "./plan.ts";
import { hashSecrets } from "./secret-hash.ts";
import type { Deployment, PatchDeploymentBody, SourceRevisionConfig } from "./service-types.ts";

/** A PATCH plan of a deployment, with what of the resource decides its revision's digests. */
export interface PatchTarget {
  /** The service's deployment the plan was made against. */
  deployment: Deployment;
  decision: PatchPlan;
  spec: Pick<DeploymentSpec, "revisionReuse" | "secrets">;
  status: Pick<DeploymentResourceStatus, "revisionHistory" | "appliedSecretsHash">;
}

/** An element of `status.revisionHistory`. */
export type RevisionHistoryEntry = NonNullable<DeploymentResourceStatus["revisionHistory"]>[number];

/** The revision-defining fields compared (`repo_commit_sha` is what a build resolved, not asked for). */
export const REVISION_FIELDS = ["repo_ref", "graph_config_path", "image_uri", "source_tarball_path"] as const;

/** What the change would make a revision of. */
export interface DesiredRevision {
  /**
   * `source_revision_config` as the new revision would have it: the deployment's current values
   * with the spec's given fields over them (a PATCH keeps the fields it does not send).
   */
  config: SourceRevisionConfig;
  /** The source the revision would be built from: `spec.revisionSource`, else the deployment's. */
  source: string;
  /**
   * sha256 of the secret names and values the deployment would have (`hashSecrets`), or
   * undefined when the operator cannot vouch for them: then nothing is reused.
   */
  secretsHash: string | undefined;
}

/** `value` as compared: null, undefined and "" all mean "not set". */
export const given = (value: string | null | undefined): string | undefined =>
  value === null || value === undefined || value === "" ? undefined : value;

/**
 * sha256 of what defines a revision: its revision-defining fields (null, absent and "" alike) and
 * the source it is built from. Equal digests, equal revisions-to-be.
 */
export function revisionConfigHash(config: SourceRevisionConfig, source: string): string {
  const fields = REVISION_FIELDS.map((field) => given(config[field]) ?? null);
  return createHash("sha256")
    .update(JSON.stringify([source, ...fields]))
    .digest("hex");
}

/** Which earlier revision a redeploy made live, and why, as a history entry records it. */
export type RedeployedFrom = Pick<RevisionHistoryEntry, "redeployedFrom" | "redeployReason">;

/**
 * `history` after the operator created `revisionId` with secrets `secretsHash` (undefined: it
 * cannot vouch for them) and config `configHash` (by a redeploy: `from`): newest first, each
 * revision once, at most {@link REVISION_HISTORY_LIMIT}.
 */
export function recordCreated(
  history: readonly RevisionHistoryEntry[] | undefined,
  revisionId: string,
  secretsHash: string | undefined,
  configHash?: string,
  from: RedeployedFrom = {},
): RevisionHistoryEntry[] {
  const entry: RevisionHistoryEntry = {
    id: revisionId,
    ...(secretsHash === undefined ? {} : { secretsHash }),
    ...(configHash === undefined ? {} : { configHash }),
    ...from,
  };
  const rest = (history ?? []).filter((e) => e.id !== revisionId);
  return [entry, ...rest].slice(0, REVISION_HISTORY_LIMIT);
}

/**
 * The revision the operator last redeployed by switching the active revision back, while that is
 * its latest act (the newest entry of the history): the revision the spec asks to be live, even
 * though the service's latest revision is another. Undefined otherwise.
 */
export function pendingRedeploy(
  history: readonly RevisionHistoryEntry[] | undefined,
): RevisionHistoryEntry | undefined {
  const first = history?.[0];
  return first?.redeployedAt === undefined ? undefined : first;
}

/**
 * `history` with `revisionId` marked as having reached DEPLOYED (seen active, or reported
 * DEPLOYED); the same array when it is not there or already marked (no status write for nothing).
 */
export function recordDeployed(
  history: readonly RevisionHistoryEntry[] | undefined,
  revisionId: string | null | undefined,
): readonly RevisionHistoryEntry[] | undefined {
  if (!history || !revisionId) return history;
  const i = history.findIndex((e) => e.id === revisionId);
  if (i < 0 || history[i]?.deployed === true) return history;
  return history.map((e, j) => (j === i ? { ...e, deployed: true } : e));
}

/**
 * `source_revision_config` as a PATCH carrying `sent` would leave it: the deployment's `current`
 * values with the given (non-null) fields over them, without the sha a build resolved.
 */
export function configAfterPatch(
  current: SourceRevisionConfig,
  sent: PatchDeploymentBody["source_revision_config"],
): SourceRevisionConfig {
  const out: Record<string, string> = {};
  for (const field of REVISION_FIELDS) {
    const value = given(sent?.[field]) ?? given(current[field]);
    if (value !== undefined) out[field] = value;
  }
  return out;
}

/**
 * How a PATCH that would create a revision splits when that revision is redeployed instead:
 * `rest` is the PATCH of what needs no revision (`source_config`, `secret_references`), or
 * undefined when nothing is left to send. Undefined when the PATCH cannot be replaced: it sends
 * secrets (new values make a revision of their own, and a redeploy must never stand in for
 * them), or it changes no revision-defining field.
 */
export function splitForRedeploy(
  body: PatchDeploymentBody,
): { rest: PatchDeploymentBody | undefined } | undefined {
  if (body.secrets !== undefined && body.secrets !== null) return undefined;
  if (body.source_revision_config === undefined && (body.revision_source ?? undefined) === undefined)
    return undefined;
  const { source_revision_config: _config, revision_source: _source, secrets: _secrets, ...rest } = body;
  return { rest: Object.keys(rest).length === 0 ? undefined : rest };
}

/** The digest of no secrets at all (`hashSecrets([])`). */
export const NO_SECRETS_HASH = hashSecrets([]);

/**
 * The secrets digest a revision made now would be created with, as far as the operator can vouch
 * for it: the digest of the secrets sent with it, or that the plan found in sync (`sentHash`);
 * else, when the spec manages the secrets, the digest last applied (`appliedHash`,
 * `status.appliedSecretsHash`); else, when the spec leaves them out, the digest of no secrets if
 * the service reports none. Undefined when it cannot vouch: secrets someone else set, which a
 * redeploy might bring back as they were.
 */
export function vouchedSecretsHash(input: {
  managed: boolean;
  sentHash?: string | undefined;
  appliedHash?: string | undefined;
  serviceSecretCount: number;
}): string | undefined {
  if (input.sentHash !== undefined) return input.sentHash;
  if (input.managed) return input.appliedHash;
  return input.serviceSecretCount === 0 ? NO_SECRETS_HASH : undefined;
}

/**
 * `observed` as the rollout reads it: while a redeploy that switched the active revision back is
 * pending ({@link pendingRedeploy}), the revision the spec asks to be live is that one, not the
 * service's latest; so `latest_revision_id` is it (Ready once it is active, no rollout timing
 * the latest that will never be live again). Otherwise `observed` itself.
 */
export function targetView<T extends Pick<Deployment, "latest_revision_id">>(
  observed: T,
  history: readonly RevisionHistoryEntry[] | undefined,
): T {
  const pending = pendingRedeploy(history);
  return pending ? { ...observed, latest_revision_id: pending.id } : observed;
}

/**
 * The resource's `status` as the rollout reads it, as {@link targetView} reads the service's
 * deployment: while a switch-back is pending, `latestRevisionId` is the revision switched back
 * to (the status records the service's latest), so that the rollout's start is carried by the
 * revision it waits for.
 */
export function targetStatusView<
  T extends Pick<DeploymentResourceStatus, "latestRevisionId" | "revisionHistory">,
>(status: T): T {
  const pending = pendingRedeploy(status.revisionHistory);
  return pending ? { ...status, latestRevisionId: pending.id } : status;
}

/** What a PATCH `decision` of `deployment` would make a revision of, and its digests. */
export function revisionDigests(input: PatchTarget) {
  const { deployment, decision, spec, status } = input;
  const body = decision.body;
  const config = configAfterPatch(deployment.source_revision_config, body.source_revision_config);
  const source = body.revision_source ?? deployment.source;
  const secretsHash = vouchedSecretsHash({
    managed: spec.secrets !== undefined,
    // The plan's digest, secrets sent or found in sync (the service may show values the status
    // does not record yet, as after a status write that failed): before the one last applied.
    sentHash: decision.secretsHash,
    appliedHash: status.appliedSecretsHash,
    serviceSecretCount: deployment.secrets.length,
  });
  return { config, source, secretsHash, configHash: revisionConfigHash(config, source) };
}

/** `spec.revisionReuse`, the default (`Pinned`) when unset. */
export function revisionReusePolicy(spec: Pick<DeploymentSpec, "revisionReuse">): RevisionReusePolicy {
  return spec.revisionReuse ?? DEFAULT_REVISION_REUSE;
}
