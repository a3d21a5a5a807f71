/**
 * "Is my change live?": the states of a revision as the service reports them (failed, done, the
 * deployment being deleted, which part of an unfinished rollout holds it up), where the rollout
 * stands (its start, its timeout, whether its latest revision's log is due to be read, asked of
 * `failure-evidence.ts` only for a failed or timed-out revision: pure; the reads are
 * `evidence.ts`'s, entered only when one is needed), the active
 * revision's short id with what it deployed, for `status.liveRevision` (the `LIVE` column of
 * `kubectl get dmsd -o wide`, beside the short ids of `shortRevisions`), and the same in full for
 * `status.activeRevision` (what promotion tools read, docs/guide/promotion.md).
 */
import { formatTime } from "../crd/conventions.ts";
import type { DeploymentResourceStatus, DeploymentSpec } from "../crd/schema.ts";
import { DEFAULT_ROLLOUT_TIMEOUT } from "../crd/spec-policies.ts";
import { STATUS_ID_MAX_LENGTH, STATUS_VALUE_MAX_LENGTH } from "../crd/status-schema.ts";
import { isZeroDuration, parseDuration } from "../duration.ts";
import { type EvidenceReason, evidenceDue } from "./failure-evidence.ts";
import { REASON } from "./reasons.ts";
import { targetStatusView, targetView } from "./revision-history.ts";
import {
  type Deployment,
  DONE_REVISION_STATUSES,
  FAILED_REVISION_STATUSES,
  isUuid,
  type SourceRevisionConfig,
} from "./service-types.ts";

/** What is known of the deployment's latest revision (see `revisions.ts`). */
export interface RevisionObservation {
  /** The revision id: the deployment's `latest_revision_id` when it was read. */
  id: string;
  /** Its status as the service reports it (any string, kept raw). */
  status: string;
}

/** True when `status` says the revision will never go live. */
export function isFailedRevision(status: string | undefined): boolean {
  return (FAILED_REVISION_STATUSES as readonly (string | undefined)[]).includes(status);
}

/** True when `status` ends a rollout although the revision is not (yet) the active one. */
export function isDoneRevision(status: string | undefined): boolean {
  return (DONE_REVISION_STATUSES as readonly (string | undefined)[]).includes(status);
}

/**
 * Which part of an unfinished rollout holds it up: `revision` (the latest revision is not live),
 * `deployment` (it is, but the service does not report the deployment READY: say, still
 * `AWAITING_DATABASE`), or `both`. Undefined when nothing is unfinished, when the revision
 * failed (RevisionFailed says so), or while the deployment is being deleted.
 */
export function stuckPart(
  observed: Pick<Deployment, "latest_revision_id" | "active_revision_id" | "status">,
  revisionStatus: string | undefined,
): "revision" | "deployment" | "both" | undefined {
  const latest = observed.latest_revision_id;
  if (!latest || isBeingDeleted(observed.status) || isFailedRevision(revisionStatus)) return undefined;
  const live = latest === observed.active_revision_id || isDoneRevision(revisionStatus);
  const ready = observed.status === "READY";
  if (live) return ready ? undefined : "deployment";
  return ready ? "revision" : "both";
}

/**
 * True when the service says the deployment is on its way out: `AWAITING_DELETE`, and the values
 * outside the spec the real service uses while it finishes a delete (`AWAITING_FINAL_DELETE`).
 */
export function isBeingDeleted(remoteStatus: string): boolean {
  return remoteStatus.includes("DELETE");
}

/**
 * `<latest>/<active>` revision ids, 8 characters each (`-` for one the service does not report),
 * for `kubectl get dmsd -o wide`: full UUIDs are 36 characters each, and the first 8 tell the
 * revisions of one deployment apart in practice, as a short commit sha does.
 */
export function shortRevisions(d: Pick<Deployment, "latest_revision_id" | "active_revision_id">): string {
  return `${(d.latest_revision_id ?? "-").slice(0, 8)}/${(d.active_revision_id ?? "-").slice(0, 8)}`;
}

/**
 * `<active id, 8 characters>@<commit, 7 characters>` for a repository source, else
 * `@<image version>` (the service's `image_version`, else the tag of `image_uri`), or the short
 * id alone when the service reports neither.
 *
 * Contract: a deployment's `source_revision_config` and `image_version` describe its LATEST
 * revision (the spec says so), so they are read only while the latest revision is the active
 * one. During a rollout the active revision is an older one: `previous` (the value written
 * before) is kept when it names that same active revision, else the short id alone. Undefined
 * when the deployment has no active revision.
 */
export function liveRevision(d: Deployment, previous: string | undefined): string | undefined {
  const active = d.active_revision_id;
  if (!active) return undefined;
  const short = active.slice(0, 8);
  if (active !== d.latest_revision_id)
    return previous === short || previous?.startsWith(`${short}@`) ? previous : short;
  const config = d.source_revision_config;
  const what = keptWithin(
    config.repo_commit_sha?.slice(0, 7) || d.image_version || imageTag(config.image_uri ?? undefined),
    STATUS_VALUE_MAX_LENGTH,
  );
  return what ? `${short}@${what}` : short;
}

/** The tag of an image reference (`registry:5000/app:1.4.2` → `1.4.2`), or undefined without one. */
export function imageTag(uri: string | undefined): string | undefined {
  if (!uri) return undefined;
  const name = uri.split("@")[0] ?? "";
  const last = name.slice(name.lastIndexOf("/") + 1);
  const colon = last.lastIndexOf(":");
  return colon === -1 || colon === last.length - 1 ? undefined : last.slice(colon + 1);
}

/** `status.activeRevision`. */
type ActiveRevision = NonNullable<DeploymentResourceStatus["activeRevision"]>;

/**
 * `value` for a status field of at most `max` characters: undefined when empty or longer (left
 * out, not cut: a cut id or version would name something else).
 */
export const keptWithin = (value: string | null | undefined, max: number): string | undefined =>
  value !== null && value !== undefined && value !== "" && value.length <= max ? value : undefined;

/** What `status.activeRevision` holds of a revision's config, each field within its bound (else left out). */
export function artifactOf(config: SourceRevisionConfig): Omit<ActiveRevision, "id" | "deployedAt"> {
  const imageUri = keptWithin(config.image_uri, STATUS_VALUE_MAX_LENGTH);
  const repoRef = keptWithin(config.repo_ref, STATUS_VALUE_MAX_LENGTH);
  const repoCommitSha = keptWithin(config.repo_commit_sha, STATUS_ID_MAX_LENGTH);
  return {
    ...(imageUri === undefined ? {} : { imageUri }),
    ...(repoRef === undefined ? {} : { repoRef }),
    ...(repoCommitSha === undefined ? {} : { repoCommitSha }),
  };
}

/**
 * `status.activeRevision` after observing `d` at `now` (RFC 3339): the active revision's id, what
 * it deployed, and when the operator first saw it active (`deployedAt`, kept while the same
 * revision stays active). What it deployed is read from the deployment while the active revision
 * is the latest (the spec says the deployment's `source_revision_config` is the latest's), else
 * from `known` when the caller has that revision's config (the revision it redeployed), else kept
 * from `previous` for the same revision. Undefined when no revision is active.
 */
export function activeRevision(
  d: Deployment,
  previous: ActiveRevision | undefined,
  now: string,
  known?: { id: string; config: SourceRevisionConfig },
): ActiveRevision | undefined {
  const id = d.active_revision_id;
  if (!id || id.length > 64) return undefined;
  const base: ActiveRevision = previous?.id === id ? previous : { id, deployedAt: now };
  const config =
    id === d.latest_revision_id ? d.source_revision_config : known?.id === id ? known.config : undefined;
  if (config === undefined) return base;
  return { id, ...artifactOf(config), deployedAt: base.deployedAt };
}

/**
 * What a look at `deployment`'s latest revision comes to without a call, whatever the connection
 * (`RevisionTracker.look`, service/revisions.ts, starts with it, and the evidence asks it first):
 * nothing without a latest revision; `DEPLOYED` when it is the active one; nothing for a revision
 * first seen now (the answer to this reconcile's create or PATCH), which is read from the next
 * poll on, unless a reconcile was `requested` by annotation. Undefined when it takes a look.
 */
export function lookedWithoutCall(
  deployment: Pick<Deployment, "latest_revision_id" | "active_revision_id">,
  previous: Pick<DeploymentResourceStatus, "latestRevisionId"> | undefined,
  requested: boolean,
): { revision?: RevisionObservation } | undefined {
  const latest = deployment.latest_revision_id;
  if (!latest) return {};
  if (latest === deployment.active_revision_id) return { revision: { id: latest, status: "DEPLOYED" } };
  // A revision that has barely started: a create or an edit then costs its one call.
  if (previous?.latestRevisionId !== latest && !requested) return {};
  return undefined;
}

/**
 * What the failure evidence gives the status: `rolloutStartedAt` and `failedRevisionLog` to
 * write (each absent: cleared), and the `spec.rolloutTimeout` text when the rollout has run past it.
 */
export interface RolloutEvidence {
  startedAt?: string | undefined;
  log?: DeploymentResourceStatus["failedRevisionLog"] | undefined;
  timedOutAfter?: string | undefined;
}

/**
 * Where the rollout of an observed deployment stands ({@link rolloutState}): what the status
 * records of it (the log as recorded: a read replaces it), the deployment as it sees it (a
 * redeploy that switched back waits for its revision), the latest revision's status when known,
 * and why its log (its id a uuid) must be read now, if it must.
 */
interface RolloutState {
  status: RolloutEvidence;
  observed: Deployment;
  revisionStatus: string | undefined;
  due: EvidenceReason | undefined;
}

/**
 * Where the rollout of `deployment` stands at `now`, given its latest `revision`'s status when
 * known and the `previous` status: when it started, whether it ran past `spec.rolloutTimeout`,
 * the failure evidence kept for the revision it was read for while that one is not live (a live
 * one needs none), and whether the log of a failed or timed-out revision is due to be read
 * ({@link evidenceDue}).
 */
export function rolloutState(
  previous: DeploymentResourceStatus | undefined,
  spec: Pick<DeploymentSpec, "rolloutTimeout">,
  deployment: Deployment,
  revision: RevisionObservation | undefined,
  now: Date,
): RolloutState {
  const recorded = previous?.failedRevisionLog;
  // A redeploy that switched the active revision back is what the rollout waits for.
  const observed = targetView(deployment, previous?.revisionHistory);
  const latest = observed.latest_revision_id ?? undefined;
  // The start is carried by the revision waited for: the same view of the previous status.
  const startedAt = rolloutStart(targetStatusView(previous ?? {}), observed, now);
  const revisionStatus = latest !== undefined && revision?.id === latest ? revision.status : undefined;
  const timedOut = rolloutTimedOut(observed, revisionStatus, startedAt, rolloutTimeoutMs(spec), now);
  const status: RolloutEvidence = {
    startedAt,
    log: startedAt !== undefined && recorded?.revisionId === latest ? recorded : undefined,
    timedOutAfter: timedOut ? (spec.rolloutTimeout ?? DEFAULT_ROLLOUT_TIMEOUT) : undefined,
  };
  const failed = isFailedRevision(revisionStatus) && !isBeingDeleted(observed.status);
  const reason = failed ? REASON.RevisionFailed : timedOut ? REASON.RolloutTimeout : undefined;
  // A revision id that is no uuid cannot be asked about (nor recorded within the status's bounds).
  const due =
    reason === undefined || latest === undefined || !isUuid(latest)
      ? undefined
      : evidenceDue(recorded, latest, reason, now);
  return { status, observed, revisionStatus, due };
}

/** {@link DEFAULT_ROLLOUT_TIMEOUT} in ms, read once rather than at every reconcile that sets none. */
const DEFAULT_ROLLOUT_TIMEOUT_MS = parseDuration(DEFAULT_ROLLOUT_TIMEOUT) as number;

/**
 * `spec.rolloutTimeout` in ms: the default (30m) when unset, undefined (disabled) when it is a
 * duration of no length at all, however written (`0`, `0s`, `0m0s`, `0.0h`: the CRD's pattern
 * admits them all, and each says "no timeout" as plainly as `0`). A value the CRD would have
 * refused is read as the default: the check is the API server's.
 */
export function rolloutTimeoutMs(spec: Pick<DeploymentSpec, "rolloutTimeout">): number | undefined {
  if (spec.rolloutTimeout === undefined) return DEFAULT_ROLLOUT_TIMEOUT_MS;
  const text = spec.rolloutTimeout.trim();
  if (isZeroDuration(text)) return undefined;
  return parseDuration(text) ?? DEFAULT_ROLLOUT_TIMEOUT_MS;
}

/**
 * `status.rolloutStartedAt` after observing `observed` at `now`: set to `now` when a new latest
 * revision is first seen not active, kept while the rollout has not finished, cleared once it
 * has (or there is no revision). A rollout finishes when its revision is active AND the service
 * reports the deployment READY: a first rollout whose revision went live while the deployment is
 * still `AWAITING_DATABASE` (or any status but READY) is still running. A deployment being
 * deleted has no rollout.
 */
export function rolloutStart(
  previous: DeploymentResourceStatus,
  observed: Deployment,
  now: Date,
): string | undefined {
  const latest = observed.latest_revision_id;
  if (!latest || isBeingDeleted(observed.status)) return undefined;
  const carried =
    previous.latestRevisionId === latest && previous.rolloutStartedAt ? previous.rolloutStartedAt : undefined;
  if (latest !== observed.active_revision_id) return carried ?? formatTime(now);
  // The revision is live: the rollout it started runs on while the deployment is not READY.
  return observed.status === "READY" ? undefined : carried;
}

/**
 * Whether the rollout of `observed`'s latest revision has run past its timeout at `now`: it
 * started `timeoutMs` or more ago and has not finished, whatever status the service reports
 * for the deployment (`AWAITING_DATABASE` included): its revision is not live (and not known to
 * have failed: RevisionFailed says that), or it is and the deployment is not READY. Which of
 * the two is stuck: {@link stuckPart}.
 */
export function rolloutTimedOut(
  observed: Deployment,
  revisionStatus: string | undefined,
  startedAt: string | undefined,
  timeoutMs: number | undefined,
  now: Date,
): boolean {
  if (stuckPart(observed, revisionStatus) === undefined) return false;
  if (startedAt === undefined || timeoutMs === undefined) return false;
  const started = Date.parse(startedAt);
  return !Number.isNaN(started) && now.getTime() - started >= timeoutMs;
}
