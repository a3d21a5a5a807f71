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
 * Pure. Whether any revision of the history could match at all, before a listing is read
 * (`reuseExcluded`), and the one read of the listing, are `execute.ts`'s; the redeploy itself and
 * its records, `redeploy.ts`'s. Here are what a switch back deployed ({@link pendingConfig}), what a
 * switch back pending comes to (the revision waited for, {@link switchingBack}; superseded by a
 * revision made since, {@link switchBackSuperseded}; already what a change asks,
 * {@link switchedBackTo}, {@link pendingSwitchBack}), and the plan that undoes a switch back the
 * spec no longer asks for ({@link switchBackPlan}): entered only for a redeploy, or while one
 * switched the active revision back (the callers ask {@link pendingRedeploy} first).
 */
import { SOURCE_REVISION_FIELDS } from "../crd/mapping.ts";
import type { DeploymentResourceStatus, DeploymentSpec } from "../crd/schema.ts";
import type { RevisionReusePolicy } from "../crd/spec-policies.ts";
import type { PatchPlan } from "./plan.ts";
import {
  configAfterPatch,
  type DesiredRevision,
  given,
  type PatchTarget,
  pendingRedeploy,
  REVISION_FIELDS,
  type RevisionHistoryEntry,
  revisionConfigHash,
  revisionDigests,
  revisionReusePolicy,
  splitForRedeploy,
  vouchedSecretsHash,
} from "./revision-history.ts";
import type { Deployment, Revision, SourceRevisionConfig } from "./service-types.ts";

/** Why a change builds rather than redeploys when no revision could be reused (`chooseRevision`'s own words). */
export const NOT_REUSED = {
  never: "spec.revisionReuse is Never",
  noMatch: "no earlier revision among the latest listed deployed the same config",
} as const;

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
  if (policy === "Never") return { kind: "build", reason: NOT_REUSED.never };
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
    reason: closest ?? NOT_REUSED.noMatch,
  };
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
  status:
    | Pick<DeploymentResourceStatus, "revisionHistory" | "appliedSecretsHash" | "latestRevisionId">
    | undefined,
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
  const history = (status && (switchBackSuperseded(status, deployment) ?? status))?.revisionHistory;
  if (switchedBackTo(history, desired)) return undefined;
  return chooseRevision({
    policy: revisionReusePolicy(spec),
    desired,
    revisions,
    history: status?.revisionHistory ?? [],
  });
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
 * The revision a redeploy pending in `history` ({@link pendingRedeploy}) switched back to, while
 * `deployment` does not show it active: the one its rollout waits for, whose failure is news.
 */
export function switchingBack(
  deployment: Pick<Deployment, "active_revision_id">,
  history: readonly RevisionHistoryEntry[] | undefined,
): string | undefined {
  const pending = pendingRedeploy(history);
  return pending && pending.id !== deployment.active_revision_id ? pending.id : undefined;
}

/** `entry` without its mark of a redeploy pending (`redeployedAt`). */
export function withoutRedeploy(entry: RevisionHistoryEntry): RevisionHistoryEntry {
  const { redeployedAt: _at, ...rest } = entry;
  return rest;
}

/**
 * `status` with the redeploy pending in its history ({@link pendingRedeploy}) no longer pending,
 * once the service's latest revision is another than the one the status last recorded: a
 * revision made since (someone else's, a build on push) replaced what the switch made live, so
 * the spec's revision is put back or waited for as any other, not taken to be live. Undefined
 * when nothing changes.
 */
export function switchBackSuperseded<
  T extends Pick<DeploymentResourceStatus, "revisionHistory" | "latestRevisionId">,
>(status: T, deployment: Pick<Deployment, "latest_revision_id"> | null | undefined): T | undefined {
  const history = status.revisionHistory;
  const latest = deployment?.latest_revision_id ?? undefined;
  const recorded = status.latestRevisionId;
  if (!pendingRedeploy(history) || latest === undefined || recorded === undefined || latest === recorded)
    return undefined;
  return { ...status, revisionHistory: history?.map((e, i) => (i === 0 ? withoutRedeploy(e) : e)) };
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
 * The redeploy that switched the active revision back (the history's newest entry) when it is
 * exactly the revision `decision` would make (same config and secrets digests, and the PATCH
 * can be split: no secrets sent): then its revision part is already live, and only the rest is
 * to send. Undefined otherwise.
 */
export function pendingSwitchBack(input: PatchTarget): RevisionHistoryEntry | undefined {
  if (!input.decision.newRevision || !splitForRedeploy(input.decision.body)) return undefined;
  return switchedBackTo(input.status.revisionHistory, revisionDigests(input));
}

/**
 * When a redeploy that switched the active revision back is pending but the spec no longer asks
 * for it (Git moved on to what the service's latest revision already holds, so the planner sees
 * no revision to make), the plan that brings the spec's revision back: its revision-defining
 * fields sent again, which `applyPatch` turns into a redeploy of the revision that has them,
 * beside what `alongside` sends (a PATCH planned that makes no revision: a `sourceConfig`
 * change, say). `pending`: that redeploy ({@link pendingRedeploy}: the caller asks first).
 * Undefined while it is still what the spec asks.
 */
export function switchBackPlan(
  pending: RevisionHistoryEntry,
  deployment: Deployment,
  alongside?: PatchPlan,
): PatchPlan | undefined {
  const config = configAfterPatch(deployment.source_revision_config, {});
  if (pending.configHash === revisionConfigHash(config, deployment.source)) return undefined;
  const line = `back to the latest revision ${deployment.latest_revision_id ?? "(none)"}`;
  // A change of the revision live, as the rollout windows weigh it.
  const change = { group: "source_revision_config", field: "sourceRevisionConfig", line } as const;
  return {
    action: "patch",
    problems: [],
    ...alongside,
    body: { ...alongside?.body, source_revision_config: config },
    newRevision: true,
    changes: [...(alongside?.changes ?? []), change],
    summary: [...(alongside?.summary ?? []), line],
  };
}
