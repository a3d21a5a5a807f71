/**
 * Redeploy instead of rebuild: when a change would create a revision, which earlier revision (if
 * any) deployed exactly what the change asks for, so that the operator can redeploy it (no build)
 * rather than PATCH and wait for the service to build the same thing again. Git is the truth: a
 * revert in Git is the rollback, and this makes it as fast as the service allows.
 *
 * "Exactly": the same revision-defining fields (`source_revision_config` as the new revision
 * would have it, and its source), the same secret values (the digest the operator recorded when
 * it created that revision: a revision it did not create, or whose secrets it cannot vouch for,
 * is never reused, so a redeploy never brings back old secret values), and the revision reached
 * DEPLOYED once. `spec.revisionReuse` then says which references are trusted not to have moved.
 *
 * Pure: the one read of the revision listing and the redeploy itself are the caller's.
 */

import { createHash } from "node:crypto";
import { SOURCE_REVISION_FIELDS } from "../crd/fields.ts";
import {
  DEFAULT_REVISION_REUSE,
  type DeploymentResourceStatus,
  type DeploymentSpec,
  type RevisionReusePolicy,
} from "../crd/schema.ts";
import { REDEPLOY_REASON_MAX_LENGTH, REVISION_HISTORY_LIMIT } from "../crd/status-schema.ts";
import { hashSecrets } from "./secret-hash.ts";
import type { Deployment, PatchDeploymentBody, Revision, SourceRevisionConfig } from "./service-types.ts";

/** An element of `status.revisionHistory`. */
export type RevisionHistoryEntry = NonNullable<DeploymentResourceStatus["revisionHistory"]>[number];

/** The revision-defining fields compared (`repo_commit_sha` is what a build resolved, not asked for). */
export const REVISION_FIELDS = ["repo_ref", "graph_config_path", "image_uri", "source_tarball_path"] as const;

/** `spec.revisionReuse`, the default (`Pinned`) when unset. */
export function revisionReusePolicy(spec: Pick<DeploymentSpec, "revisionReuse">): RevisionReusePolicy {
  return spec.revisionReuse ?? DEFAULT_REVISION_REUSE;
}

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

/** Everything {@link chooseRevision} weighs. */
export interface ReuseInput {
  policy: RevisionReusePolicy;
  desired: DesiredRevision;
  /** The first page of the deployment's revisions (newest first), as the service listed them. */
  revisions: readonly Revision[];
  /** `status.revisionHistory`: the revisions this operator created. */
  history: readonly RevisionHistoryEntry[];
}

/** The verdict: redeploy `revisionId`, or build (PATCH), each with the reason to show. */
export type ReuseDecision =
  | { kind: "redeploy"; revisionId: string; revision: Revision; reason: string }
  | { kind: "build"; reason: string };

const DIGEST = /@sha256:[0-9a-f]{64}$/;
const COMMIT_SHA = /^[0-9a-f]{40}$/i;

/** `value` as compared: null, undefined and "" all mean "not set". */
const given = (value: string | null | undefined): string | undefined =>
  value === null || value === undefined || value === "" ? undefined : value;

/** The first revision-defining field on which `a` and `b` differ, or undefined when they agree. */
function differingField(a: SourceRevisionConfig, b: SourceRevisionConfig): string | undefined {
  return REVISION_FIELDS.find((field) => given(a[field]) !== given(b[field]));
}

/**
 * Why the references of `config` may have moved since `revision` was built, under `Pinned`, or
 * undefined when none can: an image must be named by digest, a repository ref must be the full
 * commit sha the revision built (`repo_commit_sha`), and an uploaded tarball's path can always be
 * uploaded again.
 */
export function unpinnedReference(config: SourceRevisionConfig, revision: Revision): string | undefined {
  const image = given(config.image_uri);
  if (image !== undefined && !DIGEST.test(image)) return `image ${image} is not pinned by digest (@sha256:)`;
  const ref = given(config.repo_ref);
  if (ref !== undefined) {
    if (!COMMIT_SHA.test(ref)) return `repoRef ${ref} is a branch or tag name, not a full commit sha`;
    const built = given(revision.source_revision_config?.repo_commit_sha);
    if (built?.toLowerCase() !== ref.toLowerCase())
      return `repoRef ${ref} is not the commit revision ${revision.id} built (${built ?? "not reported"})`;
  }
  if (given(config.source_tarball_path) !== undefined)
    return "an uploaded source tarball's path can be uploaded again";
  if (image === undefined && ref === undefined) return "the change names no image or repository ref";
  return undefined;
}

/** What a revision deployed, in a few words: `image <uri>` or `commit <sha>`. */
export function deployedArtifact(config: SourceRevisionConfig): string {
  const image = given(config.image_uri);
  if (image !== undefined) return `image ${image}`;
  const sha = given(config.repo_commit_sha);
  const ref = given(config.repo_ref);
  if (sha !== undefined) return `commit ${sha}${ref !== undefined && ref !== sha ? ` (${ref})` : ""}`;
  if (ref !== undefined) return `ref ${ref}`;
  return "the same source";
}

/**
 * The earlier revision to redeploy instead of building `input.desired`, or why none. The newest
 * match wins. Every revision of the page is weighed against every rule, and the reason given for
 * building is the closest miss: a revision that deployed the same config but cannot be reused
 * says why (other secrets, not created by this operator, never deployed, a reference that may
 * have moved), else that none deployed the same.
 */
export function chooseRevision(input: ReuseInput): ReuseDecision {
  const { policy, desired, revisions, history } = input;
  if (policy === "Never") return { kind: "build", reason: "spec.revisionReuse is Never" };
  const created = new Map(history.map((entry) => [entry.id, entry]));
  let closest: string | undefined;
  const miss = (reason: string) => {
    closest ??= reason;
  };
  for (const revision of revisions) {
    const config = revision.source_revision_config;
    if (!config || differingField(config, desired.config) !== undefined) continue;
    const source = given(revision.source);
    if (source !== desired.source) {
      miss(
        `revision ${revision.id} deployed the same config from source ${source ?? "(not reported)"}, not ${desired.source}`,
      );
      continue;
    }
    const entry = created.get(revision.id);
    if (entry === undefined) {
      miss(
        `revision ${revision.id} deployed the same config, but this operator did not create it: its secrets cannot be vouched for`,
      );
      continue;
    }
    if (desired.secretsHash === undefined || entry.secretsHash === undefined) {
      miss(
        `revision ${revision.id} deployed the same config, but the secrets cannot be vouched for (they are not all set by spec.secrets)`,
      );
      continue;
    }
    if (entry.secretsHash !== desired.secretsHash) {
      miss(`revision ${revision.id} deployed the same config with other secret values`);
      continue;
    }
    if (entry.deployed !== true && revision.status !== "DEPLOYED") {
      miss(`revision ${revision.id} has the same config but never reached DEPLOYED`);
      continue;
    }
    if (policy === "Pinned") {
      const unpinned = unpinnedReference(desired.config, revision);
      if (unpinned !== undefined) {
        miss(`${unpinned}: under spec.revisionReuse Pinned only a reference that cannot move is redeployed`);
        continue;
      }
    }
    const why =
      policy === "Pinned" ? "a pinned reference" : "the same reference (spec.revisionReuse SameReference)";
    return {
      kind: "redeploy",
      revisionId: revision.id,
      revision,
      reason: `revision ${revision.id} deployed ${deployedArtifact(config)} with the same secrets (${why})`,
    };
  }
  return {
    kind: "build",
    reason: closest ?? "no earlier revision among the latest listed deployed the same config",
  };
}

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

/** {@link RedeployedFrom} of a redeploy of `revisionId` for `reason`, the reason cut to its bound. */
export function redeployedFrom(revisionId: string, reason: string): RedeployedFrom {
  const max = REDEPLOY_REASON_MAX_LENGTH;
  const redeployReason = reason.length <= max ? reason : `${reason.slice(0, max - 1)}…`;
  return { redeployedFrom: revisionId, redeployReason };
}

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
 * `history` after the operator redeployed `revisionId` at `at` (RFC 3339) without a new revision
 * (the route switched the active revision back): that entry first, marked `redeployedAt`, so that
 * it stands for what the spec asks to be live ({@link pendingRedeploy}), with what it deployed
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

/** What a redeployed entry recorded it deployed, as a config (for `status.activeRevision`). */
export function pendingConfig(entry: RevisionHistoryEntry): SourceRevisionConfig {
  return {
    ...(entry.imageUri === undefined ? {} : { image_uri: entry.imageUri }),
    ...(entry.repoRef === undefined ? {} : { repo_ref: entry.repoRef }),
    ...(entry.repoCommitSha === undefined ? {} : { repo_commit_sha: entry.repoCommitSha }),
  };
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
 * The redeploy pending in `history` ({@link pendingRedeploy}) when it is exactly `desired` (the
 * same digests of config and secrets): that revision is already what the spec asks to be live,
 * so a change planned against the service's latest revision sends nothing for it. Undefined
 * otherwise.
 */
export function switchedBackTo(
  history: readonly RevisionHistoryEntry[] | undefined,
  desired: DesiredRevision,
): RevisionHistoryEntry | undefined {
  const pending = pendingRedeploy(history);
  if (!pending) return undefined;
  const same =
    pending.configHash === revisionConfigHash(desired.config, desired.source) &&
    pending.secretsHash === desired.secretsHash;
  return same ? pending : undefined;
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
 * for it: the digest of the secrets sent with it (`sentHash`); else, when the spec manages the
 * secrets, the digest last applied (`appliedHash`, `status.appliedSecretsHash`); else, when the
 * spec leaves them out, the digest of no secrets if the service reports none. Undefined when it
 * cannot vouch: secrets someone else set, which a redeploy might bring back as they were.
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
 * The revision `spec`'s change would redeploy instead of building one, read from a listing
 * (`revisions`) and the resource's `status` (`revisionHistory`, `appliedSecretsHash`): what
 * `dms-operator revisions` marks. Undefined when the spec's revision-defining fields ask for
 * nothing the deployment does not already have (no new revision: nothing to reuse), or what a
 * pending switch-back already made live ({@link switchedBackTo}). The secrets are taken as last
 * applied (a change of secret values is never a redeploy).
 */
export function reuseTarget(
  spec: Pick<DeploymentSpec, "sourceRevisionConfig" | "revisionSource" | "revisionReuse" | "secrets">,
  status: Pick<DeploymentResourceStatus, "revisionHistory" | "appliedSecretsHash"> | undefined,
  deployment: Deployment,
  revisions: readonly Revision[],
): ReuseDecision | undefined {
  const sent: Record<string, string> = {};
  for (const [specField, wireField] of SOURCE_REVISION_FIELDS) {
    const value = spec.sourceRevisionConfig?.[specField];
    if (value !== undefined && value !== "") sent[wireField] = value;
  }
  const current = deployment.source_revision_config;
  const changes = Object.entries(sent).some(
    ([field, value]) => given(current[field as keyof SourceRevisionConfig]) !== value,
  );
  if (!changes && spec.revisionSource === undefined) return undefined;
  const desired: DesiredRevision = {
    config: configAfterPatch(current, sent),
    source: spec.revisionSource ?? deployment.source,
    secretsHash: vouchedSecretsHash({
      managed: spec.secrets !== undefined,
      appliedHash: status?.appliedSecretsHash,
      serviceSecretCount: deployment.secrets.length,
    }),
  };
  // Switched back to already: nothing will be sent, so nothing would be reused.
  if (switchedBackTo(status?.revisionHistory, desired)) return undefined;
  return chooseRevision({
    policy: revisionReusePolicy(spec),
    desired,
    revisions,
    history: status?.revisionHistory ?? [],
  });
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
