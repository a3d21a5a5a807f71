/**
 * The resource's status, computed from what was observed on the service and what the reconcile
 * did. Pure. Conditions follow metav1.Condition and kstatus: `Ready` and `Synced` always,
 * `Reconciling` while work is in progress and `Stalled` when it cannot progress, each present
 * only while True. `lastTransitionTime` moves only when a condition's status moves (conditions are
 * set through `src/conditions/kstatus.ts`, as the connections' are), and `statusEqual` lets the
 * controller skip writes that would change nothing.
 */
import { cutToLength } from "../api/cut-text.ts";
import { redactAndTruncate } from "../api/redact.ts";
import {
  type ConditionValue,
  formatTime,
  KSTATUS,
  kstatusOf,
  MAX_MESSAGE_LENGTH,
  putConditions,
} from "../conditions/kstatus.ts";
import type { Condition, DeploymentResourceStatus } from "../crd/schema.ts";
import {
  activeRevision,
  type ExternalRevision,
  keptExternalRevision,
  liveRevision,
} from "./live-revision.ts";
import type { PlanProblem } from "./plan.ts";
import {
  pendingConfig,
  pendingRedeploy,
  type RevisionHistoryEntry,
  recordDeployed,
  targetView,
} from "./revision-history.ts";
import {
  DEPLOYMENT_STATUSES,
  type Deployment,
  DONE_REVISION_STATUSES,
  FAILED_REVISION_STATUSES,
  type SourceRevisionConfig,
} from "./service-types.ts";
import { keepPrintable, keepPrintableConditions, unsetNote } from "./status-sink.ts";

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
  /** Something failed. `stalled`: it cannot succeed without a change (spec, Secret, credentials). */
  | { kind: "failed"; reason: string; message: string; stalled?: boolean };

/** Controller bookkeeping written alongside; `null` clears a field, `undefined` keeps it. */
export interface StatusRecord {
  appliedSecretsHash?: string | null;
  appliedSecretVersions?: string | null;
  lastHandledReconcileAt?: string | null;
  lastHandledRolloutNow?: string | null;
  lastHandledRebuildAt?: string | null;
  /** The generation whose spec was applied in full (see `generationApplied`, notes.ts). */
  appliedGeneration?: number | null;
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
  /** The rollout's timing and log evidence, when the deployment was observed (failure-evidence.ts). */
  rollout?: RolloutEvidence | undefined;
  /**
   * `status.revisionHistory` after this reconcile's writes (a revision created: `recordCreated`,
   * revision-reuse.ts); undefined: the previous one. Marked deployed here when seen active.
   */
  revisionHistory?: readonly RevisionHistoryEntry[] | undefined;
  /** The config of a revision this reconcile redeployed, for `status.activeRevision` once it is active. */
  knownRevision?: { id: string; config: SourceRevisionConfig } | undefined;
  /** A revision the operator did not create, seen now (`externalRevisionOf`, live-revision.ts). */
  externalRevision?: ExternalRevision | undefined;
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

/** The sentence a `Stalled` message ends with for the log read of `revisionId` for `reason`. */
function excerptSentence(rollout: RolloutEvidence | undefined, revisionId: string, reason: string): string {
  const log = rollout?.log;
  if (!log?.excerpt || log.revisionId !== revisionId || log.reason !== reason) return "";
  return ` Last ${log.type ?? "build"} log lines: ${log.excerpt}`;
}

/** The sync outcome for plan problems (immutable fields stall; an un-clearable list only fails). */
export function outcomeFromProblems(problems: readonly PlanProblem[]): SyncOutcome | undefined {
  const [first] = problems;
  if (!first) return undefined;
  // What cannot change (the name, the source, the deployment type) is named before the rest.
  const fixed = problems.find((p) => p.reason === "Immutable" || p.reason === "DeploymentTypeMismatch");
  const reason = fixed ? REASON[fixed.reason] : REASON.CannotClearSecrets;
  return { kind: "failed", reason, message: problems.map((p) => p.message).join("; "), stalled: true };
}

/**
 * What one source of evidence (the service's state, or the reconcile's outcome) says of the
 * conditions: `ready` and `synced` where it speaks of them, `progress` (Reconciling) and
 * `stalled` when they apply.
 */
interface ConditionValues {
  ready?: ConditionValue;
  synced?: ConditionValue;
  progress?: ConditionValue;
  stalled?: ConditionValue;
}

const value = (status: Condition["status"], reason: string, message: string): ConditionValue => ({
  status,
  reason,
  message,
});
/** Not ready because work is under way: Ready False and Reconciling True, for one reason. */
const inProgress = (reason: string, message: string, progressMessage = message): ConditionValues => ({
  ready: value("False", reason, message),
  progress: value("True", reason, progressMessage),
});
/** Not ready, and it will not get there without a change: Ready False and Stalled True. */
const stuck = (reason: string, message: string): ConditionValues => ({
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

/** Readiness when the service is known to have no deployment for the resource, by the outcome. */
const WHEN_ABSENT: Partial<Record<SyncOutcome["kind"], ConditionValues>> = {
  deleting: { ready: value("False", REASON.Deleting, "the service's deployment is gone") },
  synced: inProgress(REASON.Creating, "creation requested; waiting for the service to list the deployment"),
};
const NOT_FOUND: ConditionValues = {
  ready: value("False", REASON.NotFound, "the service has no such deployment"),
};

/** What the service's deployment says of readiness: its status, and its latest revision's. */
function readiness(
  observed: Deployment,
  revision: RevisionObservation | undefined,
  previous: DeploymentResourceStatus,
  rollout: RolloutEvidence | undefined,
): ConditionValues {
  const { status, latest_revision_id: latest, active_revision_id: active } = observed;
  const latestRevision = revision && revision.id === latest ? revision : undefined;
  if (latestRevision && isFailedRevision(latestRevision.status) && !isBeingDeleted(status)) {
    return stuck(
      REASON.RevisionFailed,
      `revision ${latestRevision.id} ${latestRevision.status}: it will not go live; ${active ? `revision ${active} stays active` : "no revision is active"}. Change the spec (a new revision) or set dms.dev/reconcile-requested-at to look again.${excerptSentence(rollout, latestRevision.id, REASON.RevisionFailed)}`,
    );
  }
  const revisionStatus = latestRevision ? ` (${latestRevision.status})` : "";
  // Past spec.rolloutTimeout the rollout is stalled whatever the deployment's status: a first
  // rollout whose deployment stays AWAITING_DATABASE included. The message says what is stuck.
  const part = rollout?.timedOutAfter === undefined ? undefined : stuckPart(observed, latestRevision?.status);
  if (part !== undefined && latest && rollout?.timedOutAfter !== undefined) {
    const within = `spec.rolloutTimeout ${rollout.timedOutAfter}`;
    const message =
      part === "deployment"
        ? `revision ${latest} is live, but the service has reported the deployment ${status} for longer than ${within}: the deployment is stuck, not the revision. Nothing is sent again: this ends when the service reports it READY.`
        : `revision ${latest}${revisionStatus} has not gone live within ${within}${part === "both" ? ` and the service still reports the deployment ${status}` : ""}; ${active ?? "no revision"} is active. Nothing is sent again: this ends when the revision goes live or fails.`;
    return stuck(
      REASON.RolloutTimeout,
      `${message}${excerptSentence(rollout, latest, REASON.RolloutTimeout)}`,
    );
  }
  if (status !== "READY") {
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
  if (active === latest)
    return { ready: value("True", REASON.Available, `revision ${active ?? "(none)"} is active`) };
  // A revision read DEPLOYED after the deployment was read: the deployment will show it active at
  // the next look. Only when a second look still does not (a service that never says so) does
  // the revision's word end the rollout.
  const deployedBefore = previous.latestRevisionId === latest && previous.latestRevisionStatus === "DEPLOYED";
  if (
    latestRevision &&
    isDoneRevision(latestRevision.status) &&
    (latestRevision.status !== "DEPLOYED" || deployedBefore)
  ) {
    return {
      ready: value(
        "True",
        REASON.Available,
        `revision ${latestRevision.id} is ${latestRevision.status}; ${active ?? "no revision"} is active`,
      ),
    };
  }
  return inProgress(
    REASON.RolloutInProgress,
    `revision ${latest ?? "(none)"} is rolling out${revisionStatus}; ${active ?? "no revision"} is active`,
    `rolling out revision ${latest ?? "(none)"}${revisionStatus}`,
  );
}

/** What the reconcile's outcome says: Synced always, Reconciling or Stalled when they apply. */
function outcomeValues(sync: SyncOutcome): ConditionValues & { synced: ConditionValue } {
  switch (sync.kind) {
    case "synced": {
      const message = sync.message ?? "the service's deployment matches the spec";
      return { synced: kstatusOf({ ok: true, reason: REASON.ReconcileSuccess, message }).ready };
    }
    case "observed":
      return {
        synced:
          sync.drift.length === 0
            ? value("True", REASON.ObserveOnly, "ObserveOnly: the service's deployment matches the spec")
            : value(
                "False",
                REASON.Drifted,
                `ObserveOnly: the service differs from the spec: ${sync.drift.join("; ")}`,
              ),
      };
    case "drifted":
      return { synced: value("False", REASON.Drifted, sync.message) };
    case "paused":
      return {
        synced: value(
          "False",
          REASON.Paused,
          "paused by annotation dms.dev/paused=true: no call is made to the service",
        ),
      };
    case "deleting":
      return {
        synced: value("False", REASON.Deleting, sync.message ?? "deleting the service's deployment"),
        progress: value("True", REASON.Deleting, sync.message ?? "deleting"),
      };
    case "held":
      return {
        synced: value("False", REASON.OutsideRolloutWindow, sync.message),
        progress: value("True", REASON.OutsideRolloutWindow, sync.message),
      };
    case "failed": {
      const { reason, message } = sync;
      const said = kstatusOf({ ok: false, reason, message, transient: !sync.stalled });
      return {
        synced: said.ready,
        ...(said.reconciling ? { progress: said.reconciling } : {}),
        ...(said.stalled ? { stalled: said.stalled } : {}),
      };
    }
  }
}

/**
 * The status fields read from the service's deployment, each with how it is read. All of them
 * are written from an observed deployment, cleared when it is known not to exist, and kept as
 * they were when it was not looked at.
 */
const OBSERVED_FIELDS = {
  deploymentId: (d) => d.id,
  tenantId: (d) => d.tenant_id || undefined,
  remoteStatus: (d) => d.status,
  latestRevisionId: (d) => d.latest_revision_id || undefined,
  activeRevisionId: (d) => d.active_revision_id || undefined,
  imageVersion: (d) => d.image_version || undefined,
  repoCommitSha: (d) => d.source_revision_config.repo_commit_sha || undefined,
  latestRevisionStatus: (d, revision) =>
    revision && revision.id === d.latest_revision_id ? revision.status : undefined,
  shortRevisions: (d) => (d.latest_revision_id ? shortRevisions(d) : undefined),
} satisfies Partial<
  Record<
    keyof DeploymentResourceStatus,
    (d: Deployment, revision: RevisionObservation | undefined) => string | undefined
  >
>;
type ObservedField = keyof typeof OBSERVED_FIELDS;

/** The bookkeeping fields of {@link StatusRecord}, in the order they are written. */
const RECORD_FIELDS = [
  "appliedSecretsHash",
  "appliedSecretVersions",
  "lastHandledReconcileAt",
  "lastHandledRolloutNow",
  "lastHandledRebuildAt",
  "appliedGeneration",
  "createRequestedAt",
  "resolvedRepoUrl",
  "resolvedRepoRef",
  "connection",
] as const satisfies readonly (keyof StatusRecord & keyof DeploymentResourceStatus)[];
// Every field of StatusRecord is written: one added there and not here fails to compile.
const _everyRecordField: Record<Exclude<keyof StatusRecord, (typeof RECORD_FIELDS)[number]>, never> = {};

/** The conditions, in the order a new one is added. Ready is kept when nothing speaks of it. */
const CONDITION_ORDER = [
  CONDITION.Ready,
  CONDITION.Synced,
  CONDITION.Stalled,
  CONDITION.Reconciling,
] as const;

/**
 * The status to write after a reconcile. Observed fields come from `observed` (cleared when it
 * is `null`, kept when `undefined`); bookkeeping from `previous` overridden by `record`; every
 * condition set carries `generation` and passes through secret redaction. Every string passes
 * the status sink (`status-sink.ts`): a value holding a character of the printable rule is left
 * unset, and the `Synced` message says which.
 */
export function statusFrom(input: StatusInput): DeploymentResourceStatus {
  const { previous = {}, observed, sync, now, generation } = input;
  const status: DeploymentResourceStatus = {};
  for (const key of Object.keys(OBSERVED_FIELDS) as ObservedField[]) {
    const value = observed ? OBSERVED_FIELDS[key](observed, input.revision) : undefined;
    if (value !== undefined) status[key] = value;
    else if (observed === undefined && previous[key] !== undefined) status[key] = previous[key];
  }
  // Unlike the fields above, it may carry over what an earlier observation knew (see liveRevision).
  const live = observed
    ? liveRevision(observed, previous.liveRevision)
    : observed === null
      ? undefined
      : previous.liveRevision;
  if (live !== undefined) status.liveRevision = live;
  const pending = pendingRedeploy(input.revisionHistory ?? previous.revisionHistory);
  const known =
    input.knownRevision ?? (pending ? { id: pending.id, config: pendingConfig(pending) } : undefined);
  const active = observed
    ? activeRevision(observed, previous.activeRevision, formatTime(now), known)
    : observed === null
      ? undefined
      : previous.activeRevision;
  if (active !== undefined) status.activeRevision = active;
  // The last revision seen that the operator did not create: kept as the record of what
  // happened, until the deployment is known gone.
  const external =
    observed === null
      ? undefined
      : (input.externalRevision ?? keptExternalRevision(previous.externalRevision, observed));
  if (external !== undefined) status.externalRevision = external;
  // The revisions of a deployment known to be gone are no candidates for anything.
  let history = observed === null ? undefined : (input.revisionHistory ?? previous.revisionHistory);
  if (observed) {
    history = recordDeployed(history, observed.active_revision_id);
    const latest = input.revision;
    if (latest?.status === "DEPLOYED") history = recordDeployed(history, latest.id);
  }
  if (history !== undefined && history.length > 0) status.revisionHistory = [...history];

  // The revision the spec asks to be live: a redeploy that switched the active revision back
  // stands for the service's latest (revision-reuse.ts).
  const target = input.revisionHistory ?? previous.revisionHistory;
  const service = observed
    ? readiness(targetView(observed, target), input.revision, previous, input.rollout)
    : observed === null
      ? (WHEN_ABSENT[sync.kind] ?? NOT_FOUND)
      : {};
  const outcome = outcomeValues(sync);

  // The rollout's evidence: written from an observed deployment, cleared when it is known not to
  // exist, kept when it was not looked at (as the observed fields).
  const rollout = observed ? input.rollout : observed === null ? {} : undefined;
  const startedAt = rollout ? rollout.startedAt : previous.rolloutStartedAt;
  if (startedAt !== undefined) status.rolloutStartedAt = startedAt;
  const log = rollout ? rollout.log : previous.failedRevisionLog;
  if (log !== undefined) status.failedRevisionLog = log;

  status.observedGeneration = generation;
  for (const key of RECORD_FIELDS) {
    const value = input.record?.[key] === undefined ? previous[key] : input.record[key];
    if (typeof value === "string" || typeof value === "number")
      (status as Record<string, unknown>)[key] = value;
  }
  // What the service or a tenant gave passes the status sink before the conditions are set, so
  // that Synced can say which value was left unset (status-sink.ts).
  const sunk = keepPrintable(status);
  const note = unsetNote(sunk.unset);
  const synced = note ? { ...outcome.synced, message: `${outcome.synced.message}; ${note}` } : outcome.synced;

  const stalled = outcome.stalled ?? service.stalled;
  const values: Record<ConditionType, ConditionValue | undefined> = {
    [CONDITION.Ready]: service.ready,
    [CONDITION.Synced]: synced,
    [CONDITION.Stalled]: stalled,
    // Reconciling and Stalled never stand together: a stalled resource is not making progress.
    [CONDITION.Reconciling]: stalled ? undefined : (outcome.progress ?? service.progress),
  };
  const previousConditions = previous.conditions ?? [];
  if (!values.Ready && !previousConditions.some((c) => c.type === CONDITION.Ready)) {
    values.Ready = value(
      "Unknown",
      sync.kind === "paused" ? REASON.Paused : REASON.Unknown,
      "the service's deployment has not been observed yet",
    );
  }
  // Ready is kept as it was when nothing speaks of it.
  const wanted = CONDITION_ORDER.flatMap((type) =>
    type === CONDITION.Ready && !values[type] ? [] : [{ type, value: values[type] }],
  );
  const conditions: Condition[] = putConditions(previousConditions, wanted, {
    now,
    observedGeneration: generation,
    message: messageOf(input.secretValues ?? []),
  });
  // The conditions pass it too: a message is printable already, a condition kept from before is checked.
  return { ...sunk.status, conditions: keepPrintableConditions(conditions) };
}

/**
 * A condition's message: redacted of the resource's secret values, then cut to
 * {@link MAX_MESSAGE_LENGTH}. With no value to hide, only cut: what the redaction gives then,
 * without entering it (a resource that sends no secret, the common case).
 */
function messageOf(secretValues: readonly string[]): (text: string) => string {
  return secretValues.some((v) => v !== "")
    ? (text) => redactAndTruncate(text, secretValues, MAX_MESSAGE_LENGTH)
    : (text) => cutToLength(text, MAX_MESSAGE_LENGTH);
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
