/**
 * How a deployment record comes to be and changes: creation, seeding, and the merge rules of a
 * PATCH (or a drift), including when a change makes a new revision.
 */
import { randomUUID } from "node:crypto";
import {
  DEFAULT_DEPLOYMENT_TYPE,
  DEPLOYMENT_SOURCES,
  type DeploymentSource,
  REVISION_SOURCES,
  type RevisionSource,
  type SourceRevisionConfig,
} from "../api/wire.ts";
import type { PatchDeploymentBody } from "../api/wire-requests.ts";
import { validationError } from "./errors.ts";
import {
  activeRevisionId,
  type DeploymentRecord,
  fakeCommitSha,
  invalidate,
  type RevisionRecord,
  redeployDelayMs,
  type Timing,
} from "./record.ts";
import type { SeedDeployment } from "./seed.ts";
import { oneOf } from "./validation.ts";

/** A change to a deployment: the PATCH fields, plus what a drift may add. */
export type Change = Pick<PatchDeploymentBody, "source_config" | "revision_source"> & {
  source_revision_config?: SourceRevisionConfig;
  secrets?: { name: string; value: string }[] | null;
  secret_references?: DeploymentRecord["secretReferences"];
  /** Make a new revision even when nothing revision-bearing changed. */
  new_revision?: boolean;
};

const dropNulls = <T extends object>(value: T | null | undefined): T => {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value ?? {})) if (v !== null && v !== undefined) out[k] = v;
  return out as T;
};

const sameSecrets = (a: readonly { name: string; value: string }[], b: typeof a): boolean => {
  if (a.length !== b.length) return false;
  const key = (s: { name: string; value: string }) => `${s.name}\u0000${s.value}`;
  const left = new Set(a.map(key));
  return b.every((s) => left.has(key(s)));
};

/** Throws a 422 when secret references are given for a source other than external_docker. */
export function checkSecretReferences(
  source: DeploymentSource,
  refs: readonly unknown[] | null | undefined,
): void {
  // Assumption: null and [] mean "none" and are accepted for every source.
  if (source === "external_docker" || refs === null || refs === undefined || refs.length === 0) return;
  throw validationError([
    {
      loc: ["body", "secret_references"],
      msg: "Value error, secret_references applies only to source external_docker",
      type: "value_error",
    },
  ]);
}

/**
 * An empty record of a new deployment, without revisions; the defaults of the listing attributes
 * and the service's deployment type (`prod`), which a create's `source_config` may override.
 */
export function newRecord(
  id: string,
  name: string,
  source: DeploymentSource,
  tenantId: string,
  createdAt: number,
): DeploymentRecord {
  return {
    id,
    name,
    nameLower: name.toLowerCase(),
    source,
    tenantId,
    createdAt,
    updatedAt: createdAt,
    sourceConfig: { deployment_type: DEFAULT_DEPLOYMENT_TYPE },
    sourceRevisionConfig: {},
    secrets: [],
    secretReferences: null,
    imageVersion: null,
    statusOverride: undefined,
    revisions: [],
    switches: [],
    failRevisions: undefined,
    quirks: undefined,
    deleteRequestedAt: undefined,
    displayName: undefined,
    remoteReconciled: true,
    tagValueIds: [],
    cache: undefined,
  };
}

/**
 * Applies `change` at `now`. `source_config` and `source_revision_config` are merged (given
 * non-null fields win; null means "leave as is"; `resource_spec` is replaced whole), secrets and
 * secret references replaced. A changed revision config or secret set, a `revision_source`, or
 * `new_revision` makes a new revision, active `revisionActiveAfterMs` later.
 */
export function applyChange(record: DeploymentRecord, change: Change, now: number, timing: Timing): void {
  const revisionSource = oneOf(REVISION_SOURCES, change.revision_source) ? change.revision_source : null;
  let newRevision = change.new_revision === true || revisionSource !== null;
  if (change.source_config !== undefined) {
    record.sourceConfig = { ...record.sourceConfig, ...dropNulls(change.source_config) };
  }
  if (change.source_revision_config !== undefined) {
    const given = dropNulls(change.source_revision_config);
    const current: Record<string, unknown> = record.sourceRevisionConfig;
    if (Object.entries(given).some(([k, v]) => current[k] !== v)) newRevision = true;
    // Another ref builds another commit: the one resolved for the old ref goes (unless given).
    const { repo_commit_sha: _resolved, ...kept } = record.sourceRevisionConfig;
    const refMoved = given.repo_ref !== undefined && given.repo_ref !== current.repo_ref;
    record.sourceRevisionConfig = { ...(refMoved ? kept : record.sourceRevisionConfig), ...given };
  }
  if (change.secrets !== undefined && change.secrets !== null) {
    if (!sameSecrets(record.secrets, change.secrets)) newRevision = true;
    record.secrets = change.secrets.map((s) => ({ name: s.name, value: s.value }));
  }
  if (change.secret_references !== undefined) {
    record.secretReferences =
      change.secret_references === null ? null : structuredClone(change.secret_references);
  }
  if (newRevision) addRevision(record, revisionSource, now, now + timing.revisionActiveAfterMs);
  record.updatedAt = now;
  invalidate(record);
}

/**
 * Throws a 422 naming `source_config.deployment_type` when `given` would change the deployment's
 * type, which the service fixes at creation (the same type again, or none, is fine).
 */
export function checkDeploymentType(record: DeploymentRecord, given: string | null | undefined): void {
  const current = record.sourceConfig.deployment_type;
  if (given === null || given === undefined || given === current) return;
  throw validationError([
    {
      loc: ["body", "source_config", "deployment_type"],
      msg: `Value error, deployment_type cannot be changed after creation (it is '${current}'): a deployment of another type is a new deployment`,
      type: "value_error",
    },
  ]);
}

/**
 * A rebuild (POST /v2/deployments/{id}/revisions): a new revision of the deployment's current
 * configuration at `now`, as a revision-making PATCH would make it. Returns it.
 */
export function rebuild(record: DeploymentRecord, now: number, timing: Timing): RevisionRecord {
  addRevision(record, null, now, now + timing.revisionActiveAfterMs);
  record.updatedAt = now;
  invalidate(record);
  const made = record.revisions.at(-1);
  if (made === undefined) throw new Error("rebuild: no revision was added");
  return made;
}

/** Appends a revision; a github revision without a commit sha gets a plausible one for its ref. */
function addRevision(
  record: DeploymentRecord,
  revisionSource: RevisionSource | null,
  now: number,
  activeAt: number,
) {
  const config = record.sourceRevisionConfig;
  const source = revisionSource ?? record.source;
  if (source === "github" && typeof config.repo_ref === "string" && config.repo_commit_sha == null) {
    // A ref that is a full commit sha builds that commit; a branch or tag resolves to one.
    const sha = /^[0-9a-f]{40}$/i.test(config.repo_ref)
      ? config.repo_ref.toLowerCase()
      : fakeCommitSha(record.sourceConfig.repo_url, config.repo_ref);
    record.sourceRevisionConfig = { ...config, repo_commit_sha: sha };
  }
  const failure = record.failRevisions;
  record.revisions.push({
    id: randomUUID(),
    createdAt: now,
    // A revision that fails never becomes active: the previous one stays live.
    activeAt: failure === undefined ? activeAt : Number.POSITIVE_INFINITY,
    settlesAt: activeAt,
    sourceRevisionConfig: { ...record.sourceRevisionConfig },
    revisionSource,
    ...(failure === undefined ? {} : { failure }),
  });
}

/**
 * A seeded deployment, settled: READY unless the seed says otherwise, its one revision already
 * active at `start`. `defaultCreatedAt` applies when the seed gives no `created_at`.
 */
export function seededRecord(
  d: SeedDeployment,
  tenantId: string,
  start: number,
  defaultCreatedAt: number,
): DeploymentRecord {
  const createdAt = d.created_at === undefined ? defaultCreatedAt : Date.parse(d.created_at);
  // The seed was validated against its schema; the guards only narrow the types.
  const source = oneOf(DEPLOYMENT_SOURCES, d.source) ? d.source : "github";
  const record = newRecord(d.id?.toLowerCase() ?? randomUUID(), d.name, source, tenantId, createdAt);
  // `deployment_type` beside the deployment is the seed's older spelling of source_config's.
  record.sourceConfig = {
    deployment_type: d.deployment_type ?? DEFAULT_DEPLOYMENT_TYPE,
    ...dropNulls(d.source_config),
  };
  record.sourceRevisionConfig = dropNulls(d.source_revision_config);
  record.secrets = (d.secrets ?? []).map((s) => ({ ...s }));
  record.secretReferences = d.secret_references ?? null;
  record.imageVersion = d.image_version ?? null;
  record.statusOverride = d.status ?? "READY";
  if (d.quirks !== undefined) record.quirks = structuredClone(d.quirks);
  record.remoteReconciled = d.remote_reconciled ?? true;
  record.tagValueIds = [...(d.tag_value_ids ?? [])];
  addRevision(record, null, createdAt, Math.min(createdAt, start));
  // Only the revisions made after the start fail: a seeded deployment starts settled.
  record.failRevisions = d.fail_revisions ?? undefined;
  return record;
}

/** How the simulated redeploy route behaves (the service's documentation does not say). */
export const REDEPLOY_BEHAVIOURS = ["new-revision", "switch-active"] as const;
export type RedeployBehaviour = (typeof REDEPLOY_BEHAVIOURS)[number];

/**
 * Redeploys `revision` of `record` at `now`, without a build: its phases start at
 * AWAITING_DEPLOY, so it is live after the deploy phases' share of `revisionActiveAfterMs`.
 * - `new-revision`: a new revision copying the old one's `source_revision_config` and
 *   `revision_source`, which becomes the latest; the deployment's `source_revision_config` is
 *   the copy's (it describes the latest revision). A deployment made to fail deploys fails it.
 * - `switch-active`: no new revision; `active_revision_id` switches back to `revision` once
 *   deployed, while `latest_revision_id` and `source_revision_config` stay the latest's. A
 *   deployment made to fail deploys fails the switch: the active revision stays, and `revision`
 *   shows DEPLOY_FAILED once the deploy phases' time has passed.
 * Returns the id of the revision that goes live.
 */
export function redeployRevision(
  record: DeploymentRecord,
  revision: RevisionRecord,
  behaviour: RedeployBehaviour,
  now: number,
  timing: Timing,
): string {
  const activeAt = now + redeployDelayMs(timing);
  record.updatedAt = now;
  invalidate(record);
  if (behaviour === "switch-active") {
    const fails = record.failRevisions === "deploy";
    const { switchFailsAt: _failed, ...named } = revision;
    record.revisions[record.revisions.indexOf(revision)] = fails
      ? { ...named, switchFailsAt: activeAt }
      : named;
    if (fails) return revision.id;
    // Switching to the revision already active (and staying so) changes nothing.
    const activeNow = activeRevisionId(record, now);
    const pending = [...record.revisions, ...record.switches].some((r) => r.activeAt > now);
    if (activeNow !== revision.id || pending)
      record.switches.push({ revisionId: revision.id, at: now, activeAt });
    return revision.id;
  }
  const fails = record.failRevisions === "deploy";
  const id = randomUUID();
  record.sourceRevisionConfig = { ...revision.sourceRevisionConfig };
  record.revisions.push({
    id,
    createdAt: now,
    activeAt: fails ? Number.POSITIVE_INFINITY : activeAt,
    settlesAt: activeAt,
    sourceRevisionConfig: { ...revision.sourceRevisionConfig },
    revisionSource: revision.revisionSource,
    redeployOf: revision.id,
    ...(fails ? { failure: "deploy" as const } : {}),
  });
  return id;
}
