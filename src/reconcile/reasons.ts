/**
 * The words of a Deployment resource's status, in one place: the condition types the operator
 * sets and their reasons (CamelCase, as metav1.Condition requires), the sync outcomes a reconcile
 * concludes (each drawn as conditions by `status.ts`), and the bookkeeping it records beside
 * them. Data and types only: what reads them is `status.ts`, the decision and the error policy.
 */
import { KSTATUS } from "../crd/conventions.ts";
import type { DeploymentResourceStatus } from "../crd/schema.ts";

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
  /** A rebuild whose answer was lost, until a new revision says what it came to (`rebuild.ts`). */
  unconfirmedRebuild?: NonNullable<DeploymentResourceStatus["unconfirmedRebuild"]> | null;
  /** The generation whose spec was applied in full (see `generationApplied`, decide.ts). */
  appliedGeneration?: number | null;
  createRequestedAt?: string | null;
  /** The create's intent time, kept once the create answered (see `pendingCreateSince`, decide.ts). */
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
