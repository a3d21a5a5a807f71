/**
 * The resource's status, computed from what was observed on the service and what the reconcile
 * did, and written through the status sink. Pure. Conditions follow metav1.Condition and kstatus:
 * `Ready` and `Synced` always, `Reconciling` while work is in progress and `Stalled` when it
 * cannot progress, each present only while True. `lastTransitionTime` moves only when a
 * condition's status moves (conditions are set through `src/crd/conventions.ts`, as the
 * connections' are), and `statusEqual` lets the controller skip writes that would change nothing.
 *
 * The sink ({@link statusSink}): every string of a status passes it before it is written, by the
 * treatment its field declares (`status-fields.ts`, which says what each does), found by walking
 * the status schema (`crd/status-schema.ts`) with the status: a field added there passes too (as
 * a value until it declares otherwise). The connections' status passes it with their own table.
 */
import type { TSchema } from "@sinclair/typebox";
import { cutToLength, printableLine, unprintableIn } from "../api/printable.ts";
import { redactAndTruncate } from "../api/redact.ts";
import {
  type ConditionValue,
  formatTime,
  kstatusOf,
  MAX_MESSAGE_LENGTH,
  putConditions,
  unknownFieldsOf,
} from "../crd/conventions.ts";
import type { Condition, DeploymentResourceStatus } from "../crd/schema.ts";
import {
  DeploymentResourceStatusSchema,
  STATUS_ID_MAX_LENGTH as ID,
  STATUS_FIELDS,
  STATUS_VALUE_MAX_LENGTH,
} from "../crd/status-schema.ts";
import { keptExternalRevision } from "./external-revision.ts";
import { revisionFailedStall, rolloutTimeoutStall } from "./failure-evidence.ts";
import {
  activeRevision,
  isBeingDeleted,
  isDoneRevision,
  isFailedRevision,
  keptWithin,
  liveRevision,
  type RevisionObservation,
  type RolloutEvidence,
  shortRevisions,
  stuckPart,
} from "./live-revision.ts";
import {
  absentReadiness,
  available,
  CONDITION,
  CONDITION_ORDER,
  CONDITION_TYPES,
  type ConditionType,
  type ConditionValues,
  inProgress,
  LATEST_ACTIVE,
  NO_REVISION,
  notObservedYet,
  notReady,
  PAUSED,
  REASON,
  RECORD_FIELDS,
  type SyncOutcome,
  value,
} from "./reasons.ts";
import { pendingRedeploy, recordDeployed, targetView } from "./revision-history.ts";
import { pendingConfig } from "./revision-reuse.ts";
import type { StatusInput } from "./run.ts";
import type { Deployment } from "./service-types.ts";
import {
  compile,
  type Declarations,
  type Node,
  STATUS_STRINGS,
  type UnsetField,
  unsetNote,
} from "./status-fields.ts";

/** What the service's deployment says of readiness: its status, and its latest revision's. */
function readiness(
  observed: Deployment,
  revision: RevisionObservation | undefined,
  previous: DeploymentResourceStatus,
  rollout: RolloutEvidence | undefined,
): ConditionValues {
  const { status, latest_revision_id: latest, active_revision_id: active } = observed;
  const latestRevision = revision && revision.id === latest ? revision : undefined;
  if (latestRevision && isFailedRevision(latestRevision.status) && !isBeingDeleted(status))
    return revisionFailedStall(latestRevision, active, rollout?.log);
  // Past spec.rolloutTimeout the rollout is stalled whatever the deployment's status: a first
  // rollout whose deployment stays AWAITING_DATABASE included.
  const timedOutAfter = rollout?.timedOutAfter;
  const part = timedOutAfter === undefined ? undefined : stuckPart(observed, latestRevision?.status);
  if (part !== undefined && latest && timedOutAfter !== undefined)
    return rolloutTimeoutStall(observed, latest, latestRevision?.status, part, timedOutAfter, rollout?.log);
  if (status !== "READY") return notReady(status);
  if (active === latest) return { ready: active ? LATEST_ACTIVE : NO_REVISION };
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
      ready: available(
        `revision ${latestRevision.id} is ${latestRevision.status}; ${active ?? "no revision"} is active`,
      ),
    };
  }
  const revisionStatus = latestRevision ? ` (${latestRevision.status})` : "";
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
      return { synced: PAUSED };
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

type ObservedRead = (d: Deployment, input: StatusInput) => string | undefined;

/**
 * The status fields read from the service's deployment, each with how it is read (within its
 * bound, else left out). All of them are written from an observed deployment, cleared when it is
 * known not to exist, and kept as they were when it was not looked at.
 */
const OBSERVED_FIELDS = {
  deploymentId: (d) => keptWithin(d.id, ID),
  tenantId: (d) => keptWithin(d.tenant_id, ID),
  remoteStatus: (d) => keptWithin(d.status, ID),
  latestRevisionId: (d) => keptWithin(d.latest_revision_id, ID),
  activeRevisionId: (d) => keptWithin(d.active_revision_id, ID),
  imageVersion: (d) => keptWithin(d.image_version, STATUS_VALUE_MAX_LENGTH),
  repoCommitSha: (d) => keptWithin(d.source_revision_config.repo_commit_sha, ID),
  latestRevisionStatus: (d, { revision }) =>
    revision && revision.id === d.latest_revision_id ? keptWithin(revision.status, ID) : undefined,
  shortRevisions: (d) => (d.latest_revision_id ? shortRevisions(d) : undefined),
  // It may carry over what an earlier observation knew (see liveRevision).
  liveRevision: (d, { previous }) => liveRevision(d, previous?.liveRevision),
} satisfies Partial<Record<keyof DeploymentResourceStatus, ObservedRead>>;

/**
 * The status to write after a reconcile. Observed fields come from `observed` (cleared when it
 * is `null`, kept when `undefined`); bookkeeping from `previous` overridden by `record`; every
 * condition set carries `generation` and passes through secret redaction. Every string passes
 * the sink: a value holding a character of the printable rule is left unset, and the `Synced`
 * message says which. Of `previous`, a field this version does not know is kept as it is, a
 * condition of a type it does not set is not.
 */
export function statusFrom(input: StatusInput): DeploymentResourceStatus {
  const { previous = {}, observed, sync, now, generation } = input;
  const status: DeploymentResourceStatus = unknownFieldsOf(previous, STATUS_FIELDS);
  for (const key of Object.keys(OBSERVED_FIELDS) as (keyof typeof OBSERVED_FIELDS)[]) {
    const value = observed ? OBSERVED_FIELDS[key](observed, input) : undefined;
    if (value !== undefined) status[key] = value;
    else if (observed === undefined && previous[key] !== undefined) status[key] = previous[key];
  }
  const gone = observed === null && !input.createdUnlisted;
  const pending = pendingRedeploy(input.revisionHistory ?? previous.revisionHistory);
  const known =
    input.knownRevision ?? (pending ? { id: pending.id, config: pendingConfig(pending) } : undefined);
  const active = observed
    ? activeRevision(observed, previous.activeRevision, formatTime(now), known)
    : gone
      ? undefined
      : previous.activeRevision;
  if (active !== undefined) status.activeRevision = active;
  // The last revision seen that the operator did not create: kept as the record of what
  // happened, until the deployment is known gone.
  const external = gone
    ? undefined
    : (input.externalRevision ??
      (previous.externalRevision && keptExternalRevision(previous.externalRevision, observed ?? undefined)));
  if (external !== undefined) status.externalRevision = external;
  // The revisions of a deployment known to be gone are no candidates for anything.
  let history = gone ? undefined : (input.revisionHistory ?? previous.revisionHistory);
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
      ? absentReadiness(sync.kind)
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
    if (value !== null && value !== undefined) (status as Record<string, unknown>)[key] = value;
  }
  // What the service or a tenant gave passes the sink before the conditions are set, so that
  // Synced can say which value was left unset.
  const sunk = keepPrintable(status);
  const note = sunk.unset.length === 0 ? undefined : unsetNote(sunk.unset);
  const synced = note ? { ...outcome.synced, message: `${outcome.synced.message}; ${note}` } : outcome.synced;

  // A change held for a rollout window replaces the service's failed or stuck revision when it
  // goes out by itself: on its way (Reconciling, as held), not stalled.
  const stalled = outcome.stalled ?? (sync.kind === "held" ? undefined : service.stalled);
  const values: Record<ConditionType, ConditionValue | undefined> = {
    [CONDITION.Ready]: service.ready,
    [CONDITION.Synced]: synced,
    [CONDITION.Stalled]: stalled,
    // Reconciling and Stalled never stand together: a stalled resource is not making progress.
    [CONDITION.Reconciling]: stalled ? undefined : (outcome.progress ?? service.progress),
  };
  const previousConditions = (previous.conditions ?? []).filter((c) => CONDITION_TYPES.has(c.type));
  if (!values.Ready && !previousConditions.some((c) => c.type === CONDITION.Ready)) {
    values.Ready = notObservedYet(sync.kind === "paused");
  }
  // Ready is kept as it was when nothing speaks of it.
  const wanted = CONDITION_ORDER.flatMap((type) =>
    type === CONDITION.Ready && !values[type] ? [] : [{ type, value: values[type] }],
  );
  const conditions: Condition[] = putConditions(previousConditions, wanted, {
    now,
    observedGeneration: generation,
    message: messageOf(input.secretValues ?? [], sync.kind === "failed" && sync.redacted ? sync.message : ""),
  });
  // The conditions pass it too: a message is printable already, a condition kept from before is checked.
  return { ...sunk.status, conditions: keepPrintableConditions(conditions) };
}

/**
 * A condition's message: redacted of the resource's secret values, then cut to
 * {@link MAX_MESSAGE_LENGTH}. With no value to hide, or for the failure's message `redacted`
 * already (each search has a time budget of its own: not spent twice on one text), only cut.
 */
function messageOf(secretValues: readonly string[], redacted: string): (text: string) => string {
  const search = secretValues.some((v) => v !== "");
  return (text) =>
    search && text !== redacted
      ? redactAndTruncate(text, secretValues, MAX_MESSAGE_LENGTH)
      : cutToLength(text, MAX_MESSAGE_LENGTH);
}

/** Printable ASCII, most of a status: nothing of the rule, checked in one quick pass. */
const PLAIN = /^[ -~]*$/;

/** What {@link walk} answers for a value left unset. */
const UNSET = Symbol("unset");

/** Where a walk is (keys and list indexes), as the note writes it: `status.revisionHistory[2].id`. */
function shownOf(trail: readonly (string | number)[]): string {
  return trail.reduce<string>(
    (at, part) => (typeof part === "number" ? `${at}[${part}]` : `${at}.${part}`),
    "status",
  );
}

/**
 * `given` walked with its compiled schema: itself when nothing in it changes (most statuses:
 * nothing is copied), a copy with text escaped and values left unset, or {@link UNSET} when it is
 * left unset (a value holding a character of the rule, or an object missing a required field
 * for that reason).
 */
function walk(node: Node, given: unknown, trail: (string | number)[], unset: UnsetField[]): unknown {
  switch (node.kind) {
    case "string": {
      if (typeof given !== "string" || PLAIN.test(given)) return given;
      const character = unprintableIn(given);
      if (character === undefined) return given;
      if (node.declared.treatment === "text") return printableLine(given);
      unset.push({ field: shownOf(trail), from: node.declared.from, character });
      return UNSET;
    }
    case "list": {
      if (!Array.isArray(given)) return given;
      let out: unknown[] | undefined;
      given.forEach((item: unknown, i) => {
        trail.push(i);
        const kept = walk(node.items, item, trail, unset);
        trail.pop();
        if (kept !== item) out ??= given.slice(0, i);
        if (out !== undefined && kept !== UNSET) out.push(kept);
      });
      return out ?? given;
    }
    case "object": {
      if (given === null || typeof given !== "object" || Array.isArray(given)) return given;
      const record = given as Record<string, unknown>;
      let out: Record<string, unknown> | undefined;
      const before = unset.length;
      for (const key of Object.keys(record)) {
        const field = node.fields.get(key);
        const inner = record[key];
        if (field === undefined || inner === undefined) continue;
        trail.push(key);
        const kept = walk(field, inner, trail, unset);
        trail.pop();
        if (kept === inner) continue;
        if (kept === UNSET && node.required.has(key)) {
          // Without it the object is not one: it goes, and the note names it for its field.
          const shown = shownOf(trail);
          const dropped = unset.splice(before);
          const cause = dropped.find((u) => u.field === `${shown}.${key}`) ?? dropped[0];
          if (cause) unset.push({ ...cause, field: shown, because: key });
          return UNSET;
        }
        out ??= { ...record };
        if (kept === UNSET) delete out[key];
        else out[key] = kept;
      }
      return out ?? given;
    }
    case "other":
      return given;
  }
}

/**
 * The sink of the status `schema` describes, each string field treated as `declarations` says:
 * `keepPrintable` answers `status` as written (its text fields printable, every other string kept
 * exactly as given or left unset) with the fields left unset, the same object when nothing
 * changes; `keepPrintableConditions`, `conditions` as written within a status, for conditions set
 * after the rest of the status passed (their messages are printable already; one kept from
 * before is checked).
 */
export function statusSink<S extends object>(schema: TSchema, declarations: Declarations) {
  const root = compile(schema, declarations);
  const conditionsNode = root.kind === "object" ? root.fields.get("conditions") : undefined;
  return {
    keepPrintable: (status: S): { status: S; unset: UnsetField[] } => {
      const unset: UnsetField[] = [];
      const written = walk(root, status, [], unset);
      return { status: (written === UNSET ? {} : written) as S, unset };
    },
    keepPrintableConditions: (conditions: Condition[]): Condition[] => {
      if (conditionsNode === undefined) return conditions;
      const written = walk(conditionsNode, conditions, ["conditions"], []);
      return written === UNSET ? [] : (written as Condition[]);
    },
  };
}

/** The Deployment resource's status and conditions as written. */
export const { keepPrintable, keepPrintableConditions } = statusSink<DeploymentResourceStatus>(
  DeploymentResourceStatusSchema,
  STATUS_STRINGS,
);
