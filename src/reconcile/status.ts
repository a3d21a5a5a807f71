/**
 * The resource's status, computed from what was observed on the service and what the reconcile
 * did. Pure. Conditions follow metav1.Condition and kstatus: `Ready` and `Synced` always,
 * `Reconciling` while work is in progress and `Stalled` when it cannot progress, each present
 * only while True. `lastTransitionTime` moves only when a condition's status moves, and
 * `statusEqual` lets the controller skip writes that would change nothing.
 */
import {
  DEPLOYMENT_STATUSES,
  type Deployment,
  DONE_REVISION_STATUSES,
  FAILED_REVISION_STATUSES,
} from "../api/wire.ts";
import type { Condition, DeploymentResourceStatus } from "../crd/schema.ts";
import { jsonEqual } from "./diff.ts";
import type { PlanProblem } from "./plan.ts";
import { redactSecrets } from "./secrets.ts";

/** Condition types the operator sets. */
export const CONDITION = {
  Ready: "Ready",
  Synced: "Synced",
  Reconciling: "Reconciling",
  Stalled: "Stalled",
} as const;
export type ConditionType = (typeof CONDITION)[keyof typeof CONDITION];

/** Condition reasons (CamelCase, as metav1.Condition requires). */
export const REASON = {
  Available: "Available",
  Creating: "Creating",
  RolloutInProgress: "RolloutInProgress",
  AwaitingDatabase: "AwaitingDatabase",
  Deleting: "Deleting",
  Unused: "Unused",
  Unknown: "Unknown",
  NotFound: "NotFound",
  ReconcileSuccess: "ReconcileSuccess",
  ReconcileError: "ReconcileError",
  Drifted: "Drifted",
  NameConflict: "NameConflict",
  SecretNotFound: "SecretNotFound",
  InvalidSpec: "InvalidSpec",
  Immutable: "Immutable",
  CannotClearSecrets: "CannotClearSecrets",
  Unauthorized: "Unauthorized",
  RateLimited: "RateLimited",
  ServiceUnavailable: "ServiceUnavailable",
  Paused: "Paused",
  ObserveOnly: "ObserveOnly",
  /** The latest revision failed to be created, built or deployed: it will never go live. */
  RevisionFailed: "RevisionFailed",
  /** The service reports a status this operator does not know: not ready, not failed. */
  UnrecognizedStatus: "UnrecognizedStatus",
  /** The service's deployment for this resource is in the listing but cannot be read. */
  UnreadableDeployment: "UnreadableDeployment",
  /** The resource's connection is missing, not Ready, or not usable from its namespace. */
  ConnectionNotReady: "ConnectionNotReady",
} as const;

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

/** What the reconcile concluded about keeping the service in line with the spec. */
export type SyncOutcome =
  /** Manage: the service matches the spec (nothing to do, or the create/patch succeeded). */
  | { kind: "synced"; message?: string }
  /** ObserveOnly: `drift` holds the diff summary lines (empty: in line). */
  | { kind: "observed"; drift: readonly string[] }
  /** The paused annotation is set: no service call was made. */
  | { kind: "paused" }
  /** The resource is being deleted and the service's deployment with it. */
  | { kind: "deleting"; message?: string }
  /** Something failed. `stalled`: it cannot succeed without a change (spec, Secret, credentials). */
  | { kind: "failed"; reason: string; message: string; stalled?: boolean };

/** Controller bookkeeping written alongside; `null` clears a field, `undefined` keeps it. */
export interface StatusRecord {
  appliedSecretsHash?: string | null;
  lastHandledReconcileAt?: string | null;
  createRequestedAt?: string | null;
  resolvedRepoUrl?: string | null;
  resolvedRepoRef?: string | null;
  /** The connection used: `Kind/name`, or `default`. */
  connection?: string | null;
}

/** Everything {@link statusFrom} needs. */
export interface StatusInput {
  previous?: DeploymentResourceStatus | undefined;
  /** `metadata.generation` of the object reconciled. */
  generation: number;
  /** The service's deployment: `null` when known not to exist, `undefined` when not looked at. */
  observed: Deployment | null | undefined;
  sync: SyncOutcome;
  now: Date;
  record?: StatusRecord;
  /** Secret values to scrub from every message (service error details may echo them). */
  secretValues?: readonly string[];
  /** The latest revision's status, when it was read or is known (see `revisions.ts`). */
  revision?: RevisionObservation | undefined;
}

/** Longest condition message written; longer ones are cut (the API allows 32768). */
export const MAX_MESSAGE_LENGTH = 4096;

/** A time as metav1.Time serializes it (RFC 3339, whole seconds), so re-reads compare equal. */
export function formatTime(now: Date): string {
  return now.toISOString().replace(/\.\d{3}Z$/, "Z");
}

/**
 * `conditions` with `condition` set: replaced in place when one of its type exists (keeping its
 * lastTransitionTime when the status is unchanged), appended otherwise. Returns a new array.
 */
export function setCondition(
  conditions: readonly Condition[],
  condition: Omit<Condition, "lastTransitionTime">,
  now: Date,
): Condition[] {
  const index = conditions.findIndex((c) => c.type === condition.type);
  const existing = conditions[index];
  const lastTransitionTime =
    existing && existing.status === condition.status ? existing.lastTransitionTime : formatTime(now);
  const next: Condition = { ...condition, lastTransitionTime };
  if (!existing) return [...conditions, next];
  return conditions.map((c, i) => (i === index ? next : c));
}

/** `conditions` without the condition of `type`. */
export function removeCondition(conditions: readonly Condition[], type: string): Condition[] {
  return conditions.filter((c) => c.type !== type);
}

/** True when writing `b` over `a` would change nothing (the controller then skips the write). */
export function statusEqual(
  a: DeploymentResourceStatus | undefined,
  b: DeploymentResourceStatus | undefined,
): boolean {
  return jsonEqual(a ?? {}, b ?? {});
}

/** The sync outcome for plan problems (immutable fields stall; an un-clearable list only fails). */
export function outcomeFromProblems(problems: readonly PlanProblem[]): SyncOutcome | undefined {
  const [first] = problems;
  if (!first) return undefined;
  const stalled = problems.some((p) => p.reason === "Immutable");
  const reason = stalled ? REASON.Immutable : REASON.CannotClearSecrets;
  return { kind: "failed", reason, message: problems.map((p) => p.message).join("; "), stalled: true };
}

type Verdict = { status: Condition["status"]; reason: string; message: string };

function readiness(
  observed: Deployment,
  revision: RevisionObservation | undefined,
  previous: DeploymentResourceStatus,
): { ready: Verdict; progress?: Verdict; stalled?: Verdict } {
  const { status, latest_revision_id: latest, active_revision_id: active } = observed;
  const latestRevision = revision && revision.id === latest ? revision : undefined;
  // A revision read DEPLOYED after the deployment was read: the deployment will show it active at
  // the next look. Only when a second look still does not (a service that never says so) does
  // the revision's word end the rollout.
  const deployedBefore = previous.latestRevisionId === latest && previous.latestRevisionStatus === "DEPLOYED";
  const done =
    latestRevision !== undefined &&
    isDoneRevision(latestRevision.status) &&
    (latestRevision.status !== "DEPLOYED" || deployedBefore);
  if (latestRevision && isFailedRevision(latestRevision.status) && !isBeingDeleted(status)) {
    const v = {
      status: "False" as const,
      reason: REASON.RevisionFailed,
      message: `revision ${latestRevision.id} ${latestRevision.status}: it will not go live; ${active ? `revision ${active} stays active` : "no revision is active"}. Change the spec (a new revision) or set dms.dev/reconcile-requested-at to look again`,
    };
    return { ready: v, stalled: { ...v, status: "True" } };
  }
  switch (status) {
    case "READY":
      if (active === latest) {
        return {
          ready: {
            status: "True",
            reason: REASON.Available,
            message: `revision ${active ?? "(none)"} is active`,
          },
        };
      }
      if (latestRevision && done) {
        return {
          ready: {
            status: "True",
            reason: REASON.Available,
            message: `revision ${latestRevision.id} is ${latestRevision.status}; ${active ?? "no revision"} is active`,
          },
        };
      }
      return {
        ready: {
          status: "False",
          reason: REASON.RolloutInProgress,
          message: `revision ${latest ?? "(none)"} is rolling out${latestRevision ? ` (${latestRevision.status})` : ""}; ${active ?? "no revision"} is active`,
        },
        progress: {
          status: "True",
          reason: REASON.RolloutInProgress,
          message: `rolling out revision ${latest ?? "(none)"}${latestRevision ? ` (${latestRevision.status})` : ""}`,
        },
      };
    case "AWAITING_DATABASE": {
      const v = {
        status: "False" as const,
        reason: REASON.AwaitingDatabase,
        message: "the service is provisioning the database",
      };
      return { ready: v, progress: { ...v, status: "True" } };
    }
    case "AWAITING_DELETE":
      return {
        ready: {
          status: "False",
          reason: REASON.Deleting,
          message: "the service is deleting this deployment",
        },
      };
    case "UNUSED":
      return {
        ready: {
          status: "False",
          reason: REASON.Unused,
          message: "the service reports this deployment as unused",
        },
      };
    case "UNKNOWN":
      return {
        ready: { status: "Unknown", reason: REASON.Unknown, message: `the service reports status ${status}` },
      };
    default:
      // A value the spec does not list (a newer or looser service): not ready, not failed.
      return {
        ready: {
          status: "False",
          reason: REASON.UnrecognizedStatus,
          message: `the service reports status ${status}, which this operator does not know (known: ${DEPLOYMENT_STATUSES.join(", ")}); treated as not ready`,
        },
      };
  }
}

function syncVerdict(sync: SyncOutcome): Verdict {
  switch (sync.kind) {
    case "synced":
      return {
        status: "True",
        reason: REASON.ReconcileSuccess,
        message: sync.message ?? "the service's deployment matches the spec",
      };
    case "observed":
      return sync.drift.length === 0
        ? {
            status: "True",
            reason: REASON.ObserveOnly,
            message: "ObserveOnly: the service's deployment matches the spec",
          }
        : {
            status: "False",
            reason: REASON.Drifted,
            message: `ObserveOnly: the service differs from the spec: ${sync.drift.join("; ")}`,
          };
    case "paused":
      return {
        status: "False",
        reason: REASON.Paused,
        message: "paused by annotation dms.dev/paused=true: no call is made to the service",
      };
    case "deleting":
      return {
        status: "False",
        reason: REASON.Deleting,
        message: sync.message ?? "deleting the service's deployment",
      };
    case "failed":
      return { status: "False", reason: sync.reason, message: sync.message };
  }
}

const REMOTE_FIELDS = [
  "deploymentId",
  "tenantId",
  "remoteStatus",
  "latestRevisionId",
  "activeRevisionId",
  "imageVersion",
  "repoCommitSha",
  "latestRevisionStatus",
  "shortRevisions",
] as const;

/**
 * The status to write after a reconcile. Remote fields come from `observed` (cleared when it is
 * `null`, kept when `undefined`); bookkeeping from `previous` overridden by `record`; every
 * condition carries `generation` and passes through secret redaction.
 */
export function statusFrom(input: StatusInput): DeploymentResourceStatus {
  const { previous = {}, observed, sync, now, generation } = input;
  const clean = (message: string) =>
    redactSecrets(message, input.secretValues ?? []).slice(0, MAX_MESSAGE_LENGTH);
  const status: DeploymentResourceStatus = {};
  if (observed) Object.assign(status, remoteFields(observed));
  else if (observed === undefined)
    for (const key of REMOTE_FIELDS) if (previous[key] !== undefined) status[key] = previous[key];

  let ready: Verdict | undefined;
  let progress: Verdict | undefined;
  let revisionStall: Verdict | undefined;
  if (observed) {
    ({ ready, progress, stalled: revisionStall } = readiness(observed, input.revision, previous));
    if (input.revision && input.revision.id === observed.latest_revision_id)
      status.latestRevisionStatus = input.revision.status;
  } else if (observed === null && sync.kind === "deleting")
    ready = { status: "False", reason: REASON.Deleting, message: "the service's deployment is gone" };
  else if (observed === null && sync.kind === "synced") {
    ready = {
      status: "False",
      reason: REASON.Creating,
      message: "creation requested; waiting for the service to list the deployment",
    };
    progress = { ...ready, status: "True" };
  } else if (observed === null)
    ready = { status: "False", reason: REASON.NotFound, message: "the service has no such deployment" };
  if (sync.kind === "deleting")
    progress = { status: "True", reason: REASON.Deleting, message: sync.message ?? "deleting" };
  if (sync.kind === "failed" && !sync.stalled)
    progress = { status: "True", reason: sync.reason, message: `retrying: ${sync.message}` };

  let conditions: Condition[] = [...(previous.conditions ?? [])];
  const put = (type: ConditionType, v: Verdict) => {
    conditions = setCondition(
      conditions,
      { type, status: v.status, reason: v.reason, message: clean(v.message), observedGeneration: generation },
      now,
    );
  };
  if (ready) put(CONDITION.Ready, ready);
  else if (!conditions.some((c) => c.type === CONDITION.Ready)) {
    put(CONDITION.Ready, {
      status: "Unknown",
      reason: sync.kind === "paused" ? REASON.Paused : REASON.Unknown,
      message: "the service's deployment has not been observed yet",
    });
  }
  put(CONDITION.Synced, syncVerdict(sync));
  const syncStalled = sync.kind === "failed" && sync.stalled === true;
  const stalled = syncStalled || revisionStall !== undefined;
  if (sync.kind === "failed" && syncStalled)
    put(CONDITION.Stalled, { status: "True", reason: sync.reason, message: sync.message });
  else if (revisionStall) put(CONDITION.Stalled, revisionStall);
  else conditions = removeCondition(conditions, CONDITION.Stalled);
  if (progress && !stalled) put(CONDITION.Reconciling, progress);
  else conditions = removeCondition(conditions, CONDITION.Reconciling);

  status.observedGeneration = generation;
  status.conditions = conditions;
  const record: Record<string, string | null | undefined> = { ...input.record };
  for (const key of [
    "appliedSecretsHash",
    "lastHandledReconcileAt",
    "createRequestedAt",
    "resolvedRepoUrl",
    "resolvedRepoRef",
    "connection",
  ] as const) {
    const value = record[key] === undefined ? previous[key] : record[key];
    if (typeof value === "string") status[key] = value;
  }
  return status;
}

function remoteFields(observed: Deployment): DeploymentResourceStatus {
  const out: DeploymentResourceStatus = { deploymentId: observed.id, remoteStatus: observed.status };
  if (observed.tenant_id) out.tenantId = observed.tenant_id;
  if (observed.latest_revision_id) out.latestRevisionId = observed.latest_revision_id;
  if (observed.active_revision_id) out.activeRevisionId = observed.active_revision_id;
  if (observed.latest_revision_id) out.shortRevisions = shortRevisions(observed);
  if (observed.image_version) out.imageVersion = observed.image_version;
  const sha = observed.source_revision_config.repo_commit_sha;
  if (sha) out.repoCommitSha = sha;
  return out;
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
 * True when the service says the deployment is on its way out: `AWAITING_DELETE`, and the values
 * outside the spec the real service uses while it finishes a delete (`AWAITING_FINAL_DELETE`).
 */
export function isBeingDeleted(remoteStatus: string): boolean {
  return remoteStatus.includes("DELETE");
}
