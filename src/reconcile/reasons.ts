/**
 * The words of a Deployment resource's status, in one place: the condition types the operator
 * sets and their reasons (CamelCase, as metav1.Condition requires), the sync outcomes a reconcile
 * concludes (each drawn as conditions by `status.ts`), the bookkeeping it records beside them,
 * and what the service's state says of readiness on its own (a status other than READY, or no
 * deployment at all: tables built once). Data, types and the builders of a condition's value:
 * what reads them is `status.ts` (and `failure-evidence.ts` for a stalled rollout), the decision
 * and the error policy.
 */
import { type ConditionValue, KSTATUS } from "../crd/conventions.ts";
import type { Condition, DeploymentResourceStatus } from "../crd/schema.ts";
import { DEPLOYMENT_STATUSES } from "./service-types.ts";

/** Condition types the operator sets. */
export const CONDITION = {
  Ready: KSTATUS.Ready,
  Synced: "Synced",
  Reconciling: KSTATUS.Reconciling,
  Stalled: KSTATUS.Stalled,
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
  /** spec.sourceConfig.deploymentType differs from the type of the service's deployment. */
  DeploymentTypeMismatch: "DeploymentTypeMismatch",
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
  /**
   * The resource waits for its connection's share of the operator: its reconciles wait behind the
   * connection's others (`--max-reconciles-per-connection`), or its connection's rate limit
   * admits its next call later than a reconcile could end.
   */
  WaitingForConnectionShare: "WaitingForConnectionShare",
  /** The resource's connection is missing, not Ready, or not usable from its namespace. */
  ConnectionNotReady: "ConnectionNotReady",
  /** The resource's namespace is not one its connection (or the default connection) selects. */
  ConnectionNotAllowed: "ConnectionNotAllowed",
  /** The secret values the resource would send are more than the operator's limit. */
  SecretsTooLarge: "SecretsTooLarge",
  /** An answer of the resource's service was larger than the operator's limit. */
  ResponseTooLarge: "ResponseTooLarge",
  /** The periodic listing of the resource's connection did not end within its deadline. */
  ListingDeadlineExceeded: "ListingDeadlineExceeded",
  /** The deployment a status names is not this resource's (another name, or claimed by another). */
  NotOwned: "NotOwned",
  /** Deleted while `spec.deletionProtection` was true (a CRD deleted, no policy): its deployment left. */
  DeletionProtected: "DeletionProtected",
  /** The latest revision has not finished rolling out within `spec.rolloutTimeout`. */
  RolloutTimeout: "RolloutTimeout",
  /** A change that would create a revision is held until a rollout window opens. */
  OutsideRolloutWindow: "OutsideRolloutWindow",
  /** The name cannot be created: a tracing project of that name remains on the service. */
  NameReserved: "NameReserved",
  /** dms.dev/rebuild-requested-at asks for a revision, and the service has no rebuild route. */
  RebuildRouteMissing: "RebuildRouteMissing",
  /** An event: the deployment's latest revision is one this operator did not create. */
  ExternalRevision: "ExternalRevision",
} as const;

/** What the reconcile concluded about keeping the service in line with the spec. */
export type SyncOutcome =
  /** Manage: the service matches the spec (nothing to do, or the create/patch succeeded). */
  | { kind: "synced"; message?: string }
  /** ObserveOnly: `drift` holds the diff summary lines (empty: in line). */
  | { kind: "observed"; drift: readonly string[] }
  /** `spec.driftPolicy: Report`: the service differs from a spec already applied; nothing written. */
  | { kind: "drifted"; message: string }
  /** The paused annotation is set: no service call was made. */
  | { kind: "paused" }
  /** The resource is being deleted and the service's deployment with it. */
  | { kind: "deleting"; message?: string }
  /**
   * A change that makes a new revision is held outside the rollout windows (what makes none was
   * sent): not synced, but on its way (Reconciling, never Stalled).
   */
  | { kind: "held"; message: string }
  /**
   * Something failed. `stalled`: it cannot succeed without a change (spec, Secret, credentials).
   * `redacted`: the message was redacted of the reconcile's secret values already (failures.ts),
   * not to be searched again where it is shown.
   */
  | { kind: "failed"; reason: string; message: string; stalled?: boolean; redacted?: true };

/** Controller bookkeeping written alongside; `null` clears a field, `undefined` keeps it. */
export interface StatusRecord {
  appliedSecretsHash?: string | null;
  appliedSecretVersions?: string | null;
  lastHandledReconcileAt?: string | null;
  lastHandledRolloutNow?: string | null;
  lastHandledRebuildAt?: string | null;
  /** A rebuild whose answer was lost, until a new revision says what it came to (`unconfirmed-rebuild.ts`). */
  unconfirmedRebuild?: NonNullable<DeploymentResourceStatus["unconfirmedRebuild"]> | null;
  /** The generation whose spec was applied in full (see `generationApplied`, decide.ts). */
  appliedGeneration?: number | null;
  createRequestedAt?: string | null;
  /** The create's intent time, kept once the create answered (see `pendingCreateSince`, create.ts). */
  createdAt?: string | null;
  resolvedRepoUrl?: string | null;
  resolvedRepoRef?: string | null;
  /** The connection used: `Kind/name`, or `default`. */
  connection?: string | null;
}

/** The bookkeeping fields of {@link StatusRecord}, in the order they are written. */
export const RECORD_FIELDS = [
  "appliedSecretsHash",
  "appliedSecretVersions",
  "lastHandledReconcileAt",
  "lastHandledRolloutNow",
  "lastHandledRebuildAt",
  "unconfirmedRebuild",
  "appliedGeneration",
  "createRequestedAt",
  "createdAt",
  "resolvedRepoUrl",
  "resolvedRepoRef",
  "connection",
] as const satisfies readonly (keyof StatusRecord & keyof DeploymentResourceStatus)[];

// Every field of StatusRecord is written: one added there and not here fails to compile.
const _everyRecordField: Record<Exclude<keyof StatusRecord, (typeof RECORD_FIELDS)[number]>, never> = {};

/** The conditions, in the order a new one is added. Ready is kept when nothing speaks of it. */
export const CONDITION_ORDER = [
  CONDITION.Ready,
  CONDITION.Synced,
  CONDITION.Stalled,
  CONDITION.Reconciling,
] as const;

/** The condition that says how the export went (`export.ts`). */
export const EXPORT_CONDITION = "Exported";

/**
 * Every condition type the operator sets on a Deployment resource. A status read may hold
 * another (a newer release's, before a rollback): it is not kept, because this version cannot
 * keep it current, and a stale signal is worse than none.
 */
export const CONDITION_TYPES: ReadonlySet<string> = new Set([...CONDITION_ORDER, EXPORT_CONDITION]);

/**
 * What one source of evidence (the service's state, or the reconcile's outcome) says of the
 * conditions: `ready` and `synced` where it speaks of them, `progress` (Reconciling) and
 * `stalled` when they apply.
 */
export interface ConditionValues {
  ready?: ConditionValue;
  synced?: ConditionValue;
  progress?: ConditionValue;
  stalled?: ConditionValue;
}

export const value = (status: Condition["status"], reason: string, message: string): ConditionValue => ({
  status,
  reason,
  message,
});

/** Not ready because work is under way: Ready False and Reconciling True, for one reason. */
export const inProgress = (reason: string, message: string, progressMessage = message): ConditionValues => ({
  ready: value("False", reason, message),
  progress: value("True", reason, progressMessage),
});

/** Not ready, and it will not get there without a change: Ready False and Stalled True. */
export const stuck = (reason: string, message: string): ConditionValues => ({
  ready: value("False", reason, message),
  stalled: value("True", reason, message),
});

/** Readiness for the service statuses that settle it alone (READY also looks at the revisions). */
const BY_REMOTE_STATUS = new Map<string, ConditionValues>([
  ["AWAITING_DATABASE", inProgress(REASON.AwaitingDatabase, "the service is provisioning the database")],
  ["AWAITING_DELETE", { ready: value("False", REASON.Deleting, "the service is deleting this deployment") }],
  ["UNUSED", { ready: value("False", REASON.Unused, "the service reports this deployment as unused") }],
  ["UNKNOWN", { ready: value("Unknown", REASON.Unknown, "the service reports status UNKNOWN") }],
]);

/** Readiness of a deployment whose status the service does not report READY. */
export function notReady(status: string): ConditionValues {
  // A value the spec does not list (a newer or looser service): not ready, not failed.
  return (
    BY_REMOTE_STATUS.get(status) ?? {
      ready: value(
        "False",
        REASON.UnrecognizedStatus,
        `the service reports status ${status}, which this operator does not know (known: ${DEPLOYMENT_STATUSES.join(", ")}); treated as not ready`,
      ),
    }
  );
}

/** Ready: the service's deployment is live. */
export const available = (message: string) => value("True", REASON.Available, message);
/** Its message names no revision (the ids are in the status): the cache holds it once (`kube/object.ts`). */
export const LATEST_ACTIVE = available("the latest revision is active (status.activeRevisionId)");
export const NO_REVISION = available("the service reports the deployment READY and no revision");

/** Synced while the resource is paused: no call is made to the service. */
export const PAUSED = value(
  "False",
  REASON.Paused,
  "paused by annotation dms.dev/paused=true: no call is made to the service",
);

/** Ready before the service's deployment was ever observed (`paused`: because it is). */
export const notObservedYet = (paused: boolean) =>
  value(
    "Unknown",
    paused ? REASON.Paused : REASON.Unknown,
    "the service's deployment has not been observed yet",
  );

/** Readiness when the service is known to have no deployment for the resource, by the outcome. */
const WHEN_ABSENT: Partial<Record<SyncOutcome["kind"], ConditionValues>> = {
  deleting: { ready: value("False", REASON.Deleting, "the service's deployment is gone") },
  synced: inProgress(REASON.Creating, "creation requested; waiting for the service to list the deployment"),
};

const NOT_FOUND: ConditionValues = {
  ready: value("False", REASON.NotFound, "the service has no such deployment"),
};

/** Readiness when the service is known to have no deployment for the resource (`kind`: the outcome). */
export function absentReadiness(kind: SyncOutcome["kind"]): ConditionValues {
  return WHEN_ABSENT[kind] ?? NOT_FOUND;
}
