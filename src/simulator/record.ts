/**
 * A deployment as the simulator keeps it, and how it is rendered on the wire. Time-dependent
 * state (status, active revision, deletion) is derived from timestamps and the clock when read,
 * so no deployment owns a timer; the rendered JSON is cached until the next transition.
 */
import { createHash } from "node:crypto";
import type {
  Deployment,
  DeploymentSource,
  DeploymentStatus,
  DeploymentType,
  RevisionSource,
  SecretReference,
  SourceConfig,
  SourceRevisionConfig,
} from "../api/wire.ts";

/** How secret values appear in responses: as stored, as `********`, or left out. */
export type SecretsMode = "values" | "masked" | "none";

/** Delays of the simulated service's transitions, in ms of the injected clock. */
export interface Timing {
  readyAfterMs: number;
  revisionActiveAfterMs: number;
  deleteAfterMs: number;
}

/** A revision: created by a create or a revision-making PATCH, active from `activeAt` on. */
export interface RevisionRecord {
  readonly id: string;
  readonly createdAt: number;
  readonly activeAt: number;
  readonly sourceRevisionConfig: SourceRevisionConfig;
  readonly revisionSource: RevisionSource | null;
}

/** The stored state of one deployment. Mutated only by the store, which then calls {@link invalidate}. */
export interface DeploymentRecord {
  readonly id: string;
  readonly name: string;
  readonly nameLower: string;
  readonly source: DeploymentSource;
  readonly tenantId: string;
  readonly createdAt: number;
  updatedAt: number;
  sourceConfig: SourceConfig;
  sourceRevisionConfig: SourceRevisionConfig;
  secrets: { name: string; value: string }[];
  secretReferences: SecretReference[] | null;
  imageVersion: string | null;
  /** Set by a seed or by drift; otherwise the status follows from `createdAt`. */
  statusOverride: DeploymentStatus | undefined;
  revisions: RevisionRecord[];
  deleteRequestedAt: number | undefined;
  deploymentType: DeploymentType;
  remoteReconciled: boolean;
  tagValueIds: string[];
  cache: { json: string; from: number; until: number } | undefined;
}

const MASK = "********";

/** Drops the cached rendering; call after every mutation of `record`. */
export function invalidate(record: DeploymentRecord): void {
  record.cache = undefined;
}

/** The status `record` shows at `now`. */
export function statusAt(record: DeploymentRecord, now: number, timing: Timing): DeploymentStatus {
  if (record.deleteRequestedAt !== undefined) return "AWAITING_DELETE";
  if (record.statusOverride !== undefined) return record.statusOverride;
  return now >= record.createdAt + timing.readyAfterMs ? "READY" : "AWAITING_DATABASE";
}

/** The newest revision already active at `now`, or undefined. */
function activeRevision(record: DeploymentRecord, now: number): RevisionRecord | undefined {
  for (let i = record.revisions.length - 1; i >= 0; i--) {
    const revision = record.revisions[i];
    if (revision !== undefined && revision.activeAt <= now) return revision;
  }
  return undefined;
}

/** When `record` is gone for good, or undefined when no delete was requested. */
export function goneAt(record: DeploymentRecord, timing: Timing): number | undefined {
  return record.deleteRequestedAt === undefined ? undefined : record.deleteRequestedAt + timing.deleteAfterMs;
}

/** `record` as the service returns it at `now`. */
export function render(record: DeploymentRecord, now: number, timing: Timing, mode: SecretsMode): Deployment {
  const latest = record.revisions.at(-1);
  return {
    name: record.name,
    source: record.source,
    source_config: structuredClone(record.sourceConfig),
    source_revision_config: { ...record.sourceRevisionConfig },
    secrets: record.secrets.map((s) =>
      mode === "values" ? { ...s } : mode === "masked" ? { name: s.name, value: MASK } : { name: s.name },
    ),
    id: record.id,
    tenant_id: record.tenantId,
    created_at: new Date(record.createdAt).toISOString(),
    updated_at: new Date(record.updatedAt).toISOString(),
    status: statusAt(record, now, timing),
    latest_revision_id: latest?.id ?? null,
    active_revision_id: activeRevision(record, now)?.id ?? null,
    secret_references:
      record.secretReferences === null ? null : record.secretReferences.map((r) => ({ ...r })),
    image_version: record.imageVersion,
  };
}

/** The next instant after `now` at which the rendering of `record` changes. */
function nextTransition(record: DeploymentRecord, now: number, timing: Timing): number {
  let until = Number.POSITIVE_INFINITY;
  const ready = record.createdAt + timing.readyAfterMs;
  if (record.statusOverride === undefined && ready > now) until = ready;
  for (const revision of record.revisions) {
    if (revision.activeAt > now) until = Math.min(until, revision.activeAt);
  }
  return until;
}

/** `render` as JSON, cached while the clock stays before the next transition. The hot path of listing. */
export function renderJson(record: DeploymentRecord, now: number, timing: Timing, mode: SecretsMode): string {
  const cache = record.cache;
  if (cache !== undefined && now >= cache.from && now < cache.until) return cache.json;
  const json = JSON.stringify(render(record, now, timing, mode));
  record.cache = { json, from: now, until: nextTransition(record, now, timing) };
  return json;
}

/** A plausible commit sha for a ref: stable for the same repository and ref, like a branch that did not move. */
export function fakeCommitSha(repoUrl: string | null | undefined, ref: string): string {
  return createHash("sha1")
    .update(`${repoUrl ?? ""}@${ref}`)
    .digest("hex");
}
