/**
 * A deployment as the simulator keeps it, and how it is rendered on the wire. Time-dependent
 * state (status, active revision, deletion) is derived from timestamps and the clock when read,
 * so no deployment owns a timer; the rendered JSON is cached until the next transition.
 */
import { createHash } from "node:crypto";
import {
  type Deployment,
  type DeploymentSource,
  REVISION_STATUSES,
  type Revision,
  type RevisionSource,
  type RevisionStatus,
  type SecretReference,
  type SourceConfig,
  type SourceRevisionConfig,
} from "../api/wire.ts";
import { isRecord } from "../runtime/json.ts";

/** How secret values appear in responses: as stored, as `********`, or left out. */
export type SecretsMode = "values" | "masked" | "none";

/** Delays of the simulated service's transitions, in ms of the injected clock. */
export interface Timing {
  readyAfterMs: number;
  revisionActiveAfterMs: number;
  deleteAfterMs: number;
}

/** Where a revision fails, when it is made to (see `fail_revisions`). */
export const REVISION_FAILURES = ["create", "build", "deploy"] as const;
export type RevisionFailure = (typeof REVISION_FAILURES)[number];

/**
 * A revision: created by a create or a revision-making PATCH, active from `activeAt` on (never,
 * when it fails). Between `createdAt` and `activeAt` its status walks through the build and
 * deploy phases (see {@link revisionStatusAt}).
 */
export interface RevisionRecord {
  readonly id: string;
  readonly createdAt: number;
  readonly activeAt: number;
  readonly sourceRevisionConfig: SourceRevisionConfig;
  readonly revisionSource: RevisionSource | null;
  /** The phase at which it fails, if it was made to fail. */
  readonly failure?: RevisionFailure;
  /** When it would have become active had it not failed: the end of its phases. */
  readonly settlesAt: number;
  /**
   * When a switch of the active revision back to it (the redeploy route's `switch-active`) failed
   * its deploy: DEPLOY_FAILED from then on, until a switch back to it succeeds.
   */
  readonly switchFailsAt?: number;
  /**
   * The revision it was made from by a redeploy (the route's `new-revision` behaviour): it has no
   * build, so its phases start at AWAITING_DEPLOY.
   */
  readonly redeployOf?: string;
}

/**
 * A redeploy that switched the active revision back (the route's `switch-active` behaviour):
 * `revisionId` is active from `activeAt` on, until a revision or switch activating later.
 */
export interface ActiveSwitch {
  readonly revisionId: string;
  readonly at: number;
  readonly activeAt: number;
}

/**
 * How the simulator makes a deployment answer like the real service rather than the spec, in
 * listings: top-level fields left out (`omit`, e.g. `["id"]`) and extra JSON merged in (`extra`:
 * objects merged key by key at any depth, anything else replaces; unknown fields and nulls alike).
 */
export interface Quirks {
  omit?: string[];
  extra?: Record<string, unknown>;
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
  /** Set by a seed or by drift (any string, also one the spec does not list); otherwise from `createdAt`. */
  statusOverride: string | undefined;
  revisions: RevisionRecord[];
  /** Redeploys that switched the active revision back, oldest first (see {@link ActiveSwitch}). */
  switches: ActiveSwitch[];
  /** New revisions fail at this phase (seed or drift `fail_revisions`); undefined: they succeed. */
  failRevisions: RevisionFailure | undefined;
  /** How listings show it (seed or drift `quirks`). */
  quirks: Quirks | undefined;
  deleteRequestedAt: number | undefined;
  /** Set by a PATCH only (or drift); never cleared by a PATCH. Rendered once set. */
  displayName: string | undefined;
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
export function statusAt(record: DeploymentRecord, now: number, timing: Timing): string {
  if (record.deleteRequestedAt !== undefined) return "AWAITING_DELETE";
  if (record.statusOverride !== undefined) return record.statusOverride;
  return now >= record.createdAt + timing.readyAfterMs ? "READY" : "AWAITING_DATABASE";
}

/**
 * The id of the revision active at `now`, or undefined: of the revisions and switches already
 * active, the one that became active last (the later one in the record on a tie). A redeployed
 * revision skips the build, so it may go live before an older revision still building; that
 * one, once built, takes over, as a later rollout does.
 */
export function activeRevisionId(record: DeploymentRecord, now: number): string | undefined {
  let best: { id: string; activeAt: number } | undefined;
  for (const revision of record.revisions) {
    if (revision.activeAt <= now && (best === undefined || revision.activeAt >= best.activeAt))
      best = { id: revision.id, activeAt: revision.activeAt };
  }
  for (const change of record.switches) {
    if (change.activeAt <= now && (best === undefined || change.activeAt >= best.activeAt))
      best = { id: change.revisionId, activeAt: change.activeAt };
  }
  return best?.id;
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
    active_revision_id: activeRevisionId(record, now) ?? null,
    secret_references:
      record.secretReferences === null ? null : record.secretReferences.map((r) => ({ ...r })),
    image_version: record.imageVersion,
    ...(record.displayName === undefined ? {} : { display_name: record.displayName }),
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
  for (const change of record.switches) {
    if (change.activeAt > now) until = Math.min(until, change.activeAt);
  }
  return until;
}

/**
 * `render` as a listing shows it (with the record's {@link Quirks}), as JSON, cached while the
 * clock stays before the next transition. The hot path of listing.
 */
export function renderJson(record: DeploymentRecord, now: number, timing: Timing, mode: SecretsMode): string {
  const cache = record.cache;
  if (cache !== undefined && now >= cache.from && now < cache.until) return cache.json;
  const rendered = render(record, now, timing, mode);
  const json = JSON.stringify(record.quirks === undefined ? rendered : withQuirks(rendered, record.quirks));
  record.cache = { json, from: now, until: nextTransition(record, now, timing) };
  return json;
}

function withQuirks(rendered: Deployment, quirks: Quirks): Record<string, unknown> {
  const out: Record<string, unknown> = merge(rendered, quirks.extra ?? {}) as Record<string, unknown>;
  for (const key of quirks.omit ?? []) delete out[key];
  return out;
}

function merge(base: unknown, extra: unknown): unknown {
  if (!isRecord(base) || !isRecord(extra)) return structuredClone(extra);
  const out: Record<string, unknown> = { ...base };
  for (const [key, value] of Object.entries(extra)) out[key] = merge(base[key], value);
  return out;
}

// The phases of a revision, spread evenly over `revisionActiveAfterMs`.
// CREATING, QUEUED, AWAITING_BUILD, BUILDING, AWAITING_DEPLOY, DEPLOYING.
const PHASES: readonly RevisionStatus[] = REVISION_STATUSES.slice(
  0,
  REVISION_STATUSES.indexOf("CREATE_FAILED"),
);
/** The first phase of a redeployed revision: it has nothing to build. */
export const REDEPLOY_FIRST_PHASE = PHASES.indexOf("AWAITING_DEPLOY");

/** How long a redeployed revision takes to go live: the deploy phases' share of a revision's time. */
export function redeployDelayMs(timing: Timing): number {
  return (timing.revisionActiveAfterMs * (PHASES.length - REDEPLOY_FIRST_PHASE)) / PHASES.length;
}

// The phase after which a failure shows: creation fails after CREATING, a build after BUILDING,
// a deploy after DEPLOYING.
const FAILS_AFTER: Record<RevisionFailure, { phase: number; status: RevisionStatus }> = {
  create: { phase: 1, status: "CREATE_FAILED" },
  build: { phase: 4, status: "BUILD_FAILED" },
  deploy: { phase: 6, status: "DEPLOY_FAILED" },
};

/** The status of `revision` at `now`, and since when it holds. */
export function revisionStatusAt(
  revision: RevisionRecord,
  now: number,
): { status: RevisionStatus; since: number } {
  const failed = revision.switchFailsAt;
  if (failed !== undefined && now >= failed) return { status: "DEPLOY_FAILED", since: failed };
  const span = revision.settlesAt - revision.createdAt;
  // A redeployed revision walks only the deploy phases, spread over its (shorter) span.
  const first = revision.redeployOf === undefined ? 0 : REDEPLOY_FIRST_PHASE;
  const walked = PHASES.length - first;
  const phaseStart = (phase: number) => revision.createdAt + (span * (phase - first)) / walked;
  if (revision.failure !== undefined) {
    const { phase, status } = FAILS_AFTER[revision.failure];
    if (now >= phaseStart(phase)) return { status, since: phaseStart(phase) };
  } else if (now >= revision.activeAt) {
    return { status: "DEPLOYED", since: revision.activeAt };
  }
  const phase =
    span <= 0
      ? PHASES.length - 1
      : Math.min(PHASES.length - 1, first + Math.floor(((now - revision.createdAt) / span) * walked));
  return { status: PHASES[phase] ?? "UNKNOWN", since: phaseStart(phase) };
}

/** `revision` of `record` as GET .../revisions/{revision_id} answers it at `now`. */
export function renderRevision(record: DeploymentRecord, revision: RevisionRecord, now: number): Revision {
  const { status, since } = revisionStatusAt(revision, now);
  return {
    id: revision.id,
    created_at: new Date(revision.createdAt).toISOString(),
    updated_at: new Date(since).toISOString(),
    status,
    source: revision.revisionSource ?? record.source,
    source_revision_config: { ...revision.sourceRevisionConfig },
  };
}

/** A plausible commit sha for a ref: stable for the same repository and ref, like a branch that did not move. */
export function fakeCommitSha(repoUrl: string | null | undefined, ref: string): string {
  return createHash("sha1")
    .update(`${repoUrl ?? ""}@${ref}`)
    .digest("hex");
}
