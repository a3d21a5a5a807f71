/**
 * What a reconcile does, decided without a call: `decide(spec, observation, status, now)` takes
 * the resource (its spec and annotations), what `external.ts`'s `observe` saw of the service and
 * of the spec's inputs, the status as read and the time, and returns a {@link Decision}: the plan
 * (`plan.ts`), what the rollout gate lets go now (`rollout-gate.ts`), whether a
 * redeploy is pending or wanted back (`apply-reuse.ts`), the write to make, the status it
 * concludes and the events to record, all as data. `external.ts`'s `execute` performs the write
 * and returns what it wrote; {@link settle} (pure too) joins the two into what the reconciler
 * concludes. No port, no clock, no I/O here: the table of cases is test/unit/decide.test.ts.
 */
import { formatTime } from "../conditions/kstatus.ts";
import type { DesiredDeployment } from "../crd/mapping.ts";
import { ANNOTATION_REBUILD_REQUESTED_AT, DEFAULT_DRIFT_POLICY } from "../crd/schema.ts";
import { type ApplyPatchResult, pendingSwitchBack, redeployedNote, switchBackPlan } from "./apply-reuse.ts";
import { rebuildRequestedAt, rolloutNow } from "./inputs.ts";
import { type ExternalRevision, externalRevisionOf } from "./live-revision.ts";
import {
  adoptedNote,
  changedFields,
  createdNote,
  driftCorrectedNote,
  externalRevisionNote,
  generationApplied,
  observedDrift,
  updateNote,
  updateReason,
} from "./notes.ts";
import { type CreatePlan, type NoopPlan, type PatchPlan, plan } from "./plan.ts";
import { keptSecretsProblem, lastAppliedFor } from "./plan-secrets.ts";
import type { StoredResource } from "./ports.ts";
import {
  configAfterPatch,
  type RevisionHistoryEntry,
  recordCreated,
  revisionConfigHash,
  splitForRedeploy,
  vouchedSecretsHash,
} from "./revision-reuse.ts";
import type { Counter } from "./rollout/rollout-windows.ts";
import {
  gatePatch,
  gateRollout,
  type InheritedWindows,
  type WindowsInEffect,
  windowsInEffect,
} from "./rollout-gate.ts";
import { type SecretDigest, UNKEYED_SECRET_DIGEST } from "./secret-hash.ts";
import type { Observation as Lookup } from "./service/observe.ts";
import type { RebuildOutcome } from "./service/rebuilder.ts";
import type { Deployment, Revision, SourceRevisionConfig } from "./service-types.ts";
import { CONDITION, outcomeFromProblems, REASON, type StatusRecord, type SyncOutcome } from "./status.ts";

/** The resource as a decision reads it: its spec and metadata (the status is passed apart). */
export type DecideSpec = Pick<StoredResource, "spec" | "metadata">;

/** What `observe` saw, all a decision needs of the outside world. */
export interface Observation {
  /** The spec in wire terms: its Secrets' values read (or left out when known unchanged). */
  desired: DesiredDeployment;
  /** The bookkeeping of reading the spec (handled annotations, the resolved repository). */
  record: StatusRecord;
  /** The service's deployment as the snapshot or a lookup sees it. */
  found: Lookup;
  /** The digest of the referenced Secrets' resourceVersions (`secretVersions` in inputs.ts). */
  versions: string | undefined;
  /** The Secrets' values were not read: known to be those last applied. */
  secretsUnread: boolean;
  /** The connection's rollout windows, the default of a resource that sets none. */
  inheritedWindows?: InheritedWindows | undefined;
  /** The clock when the observation ended (ms since the epoch): a create's grace runs on it. */
  at: number;
  /** Why the connection's rebuild route is known missing (`session.rebuilds.missing`), if it is. */
  rebuildMissing?: string | undefined;
  /**
   * The latest revision this process's own last write of the deployment answered, while the
   * connection's snapshot holds it: never taken for a revision made outside the resource.
   */
  ownLatest?: string | undefined;
}

/**
 * What a reconcile saw of the service's deployment: found, known not to exist, or created by
 * this operator and not listed yet (the status keeps the id the create answered with).
 */
export type Observed =
  | { kind: "found"; deployment: Deployment }
  | { kind: "none" }
  | { kind: "createdUnlisted" };

/** `deployment` as an {@link Observed}: `null` is none, `undefined` not looked at. */
export function observedAs(deployment: Deployment | null | undefined): Observed | undefined {
  if (deployment === undefined) return undefined;
  return deployment === null ? { kind: "none" } : { kind: "found", deployment };
}

/** What the status write and the requeue follow from: a decision with what was executed. */
export interface Decided {
  outcome: SyncOutcome;
  /** What the service showed; absent when it was not looked at. */
  observed?: Observed | undefined;
  /** Controller bookkeeping to write alongside. */
  record?: StatusRecord;
  /** Look again no later than this instant (ms since the epoch): a held change's window opens. */
  wakeAt?: number;
  /** `status.revisionHistory` after the revisions this reconcile created or redeployed. */
  history?: RevisionHistoryEntry[];
  /** The config of the revision it redeployed, for `status.activeRevision`. */
  known?: { id: string; config: SourceRevisionConfig };
  /** A revision the operator did not create, seen now: `status.externalRevision`. */
  externalRevision?: ExternalRevision;
  /** Changes made outside this resource noticed now, each counted by `dms_external_changes_total`. */
  externalChanges?: ExternalChangeKind[];
}

/** What `dms_external_changes_total` counts: a revision, or fields that differed from the spec. */
export type ExternalChangeKind = "revision" | "fields";

/** An event to record on the resource, as data. */
export interface DecidedEvent {
  type: "Normal" | "Warning";
  reason: string;
  note: string;
}

/** The write a decision asks `execute` to make. */
export type Write =
  /** Record the intent, then POST. */
  | { kind: "create"; plan: CreatePlan }
  /**
   * PATCH `plan` (its revision part redeployed instead when `spec.revisionReuse` allows).
   * `back`: a switch back to the service's latest revision (no event of its own); `adopted`: the
   * deployment was found by name; `redeployMessage`: a redeploy is said in `Synced`'s message.
   */
  | {
      kind: "send";
      plan: PatchPlan;
      deployment: Deployment;
      back: boolean;
      adopted: boolean;
      redeployMessage: boolean;
    };

/** What a reconcile decided (see the module comment). */
export interface Decision extends Decided {
  record: StatusRecord;
  /** Recorded before the write, whatever it comes to. */
  events: DecidedEvent[];
  /** Recorded once the write succeeded (or when there is none), after the write's own. */
  after: DecidedEvent[];
  /** A line for the reconcile's log. */
  log?: { fields?: object; message: string };
  write?: Write;
  /**
   * One new revision to create through the rebuild route, after the write (if any):
   * `dms.dev/rebuild-requested-at` carries `requestedAt`, not acted on yet.
   */
  rebuild?: { deploymentId: string; requestedAt: string };
  /**
   * The spec cannot be decided on (rollout windows that cannot be read: an `InvalidSpecError`):
   * reported as the reconcile's failure once {@link events} are recorded; no write.
   */
  failed?: { error: unknown };
}

/** What decide needs besides its four inputs: the operator's settings. */
export interface DecideSettings {
  /** How long a create's intent waits for the listing to show the deployment. */
  createGraceMs: number;
  /** The counter the rollout windows' search is timed on (`performance.now` unless given). */
  counter?: Counter;
  /** How secrets' digests are made and compared (keyed with the install key); default unkeyed. */
  secretDigest?: SecretDigest;
}

/**
 * Decides what the apply arm does for `spec` (see the module comment). `now`: the reconcile's
 * clock reading (ms since the epoch). Rollout windows in effect that cannot be read are
 * `failed` (an `InvalidSpecError`).
 */
export function decide(
  spec: DecideSpec,
  observation: Observation,
  status: NonNullable<StoredResource["status"]>,
  now: number,
  settings: DecideSettings,
): Decision {
  const { found, desired, versions } = observation;
  // A recorded create intent holds until a lookup shows the deployment: the listing may lag.
  const fulfilled = found.listed && Boolean(status.createRequestedAt);
  const record: StatusRecord = fulfilled
    ? { ...observation.record, createRequestedAt: null }
    : observation.record;
  const lastApplied = lastAppliedFor(
    spec.spec,
    desired,
    status.appliedSecretsHash,
    settings.secretDigest ?? UNKEYED_SECRET_DIGEST,
  );
  const planned = plan(desired, found.deployment ?? undefined, lastApplied);
  const none = { events: [], after: [], record };
  const policy = spec.spec.driftPolicy ?? DEFAULT_DRIFT_POLICY;
  const specApplied = generationApplied({ metadata: spec.metadata, status });
  // Drift: a PATCH of a spec already applied, which no rotated Secret asks for (that is the
  // team's change, as an edit is): someone changed the service since.
  const rotated =
    planned.action === "patch" &&
    planned.body.secrets !== undefined &&
    planned.secretsHash !== status.appliedSecretsHash;
  const drift = planned.action === "patch" && specApplied && !found.adopted && !rotated ? planned : undefined;
  const observeOnly = spec.spec.managementPolicy === "ObserveOnly";
  const external = seenExternal(observation, status, now, {
    follows: observeOnly
      ? "ObserveOnly: recorded in status.externalRevision, nothing is written"
      : policy === "Report"
        ? "spec.driftPolicy is Report: recorded in status.externalRevision, nothing is written for it"
        : planned.action === "patch" && planned.newRevision
          ? "spec.driftPolicy is Correct: the spec's revision is put back (by a redeploy of this operator's revision when spec.revisionReuse allows)"
          : "its revision-defining fields are the spec's: nothing to put back",
  });

  if (observeOnly) {
    const drifted = observedDrift(desired.name, found.deployment, planned);
    const observed = observedAs(found.deployment);
    return { ...none, ...external, outcome: { kind: "observed", drift: drifted }, observed };
  }
  if (planned.action === "blocked") {
    // A deployment found by name that cannot become the spec's (another source) is someone
    // else's: recording its id would make it ours, and deletionPolicy Delete would delete it.
    const owned = found.adopted ? undefined : found.deployment;
    const blocked = outcomeFromProblems(planned.problems) ?? { kind: "synced" as const };
    return { ...none, outcome: blocked, observed: observedAs(owned) };
  }
  const events: DecidedEvent[] = [...(external.events ?? [])];
  if (found.adopted && found.deployment) {
    // Found by name while a create of ours was pending: it is that create (a restart or a lost
    // answer hid it), not someone else's deployment.
    const created = Boolean(status.createRequestedAt);
    const note = created ? createdNote(found.deployment) : adoptedNote(found.deployment);
    events.push({ type: "Normal", reason: created ? "Created" : "Adopted", note });
  }
  // Read before any write: windows that cannot be read stall the resource (InvalidSpec), once
  // the events above are recorded.
  let windows: ReturnType<typeof windowsInEffect>;
  try {
    windows = windowsInEffect(spec.spec.rolloutWindows, observation.inheritedWindows, now);
  } catch (error) {
    return { ...none, ...external, events, outcome: { kind: "synced" }, failed: { error } };
  }
  if (planned.action === "create") {
    const requestedAt = status.createRequestedAt;
    if (requestedAt && observation.at - Date.parse(requestedAt) < settings.createGraceMs) {
      // A create was requested and the listing does not show it yet: it may lag behind.
      const waiting = { kind: "synced", message: "waiting for the created deployment to be listed" } as const;
      return {
        events,
        after: [],
        // The id the create answered with stays known while the listing catches up.
        outcome: waiting,
        observed: { kind: "createdUnlisted" },
        record,
        log: {
          fields: { requestedAt },
          message: "create requested earlier; waiting for the service to list it",
        },
      };
    }
    // The intent stays recorded until a lookup lists the deployment (see above).
    const applied: StatusRecord = {
      ...record,
      appliedSecretsHash: planned.secretsHash ?? null,
      appliedSecretVersions: appliedVersions(planned.secretsHash, versions),
      // The create builds the deployment's first revision: what a pending rebuild asks for.
      ...(pendingRebuild(spec, status) ? { lastHandledRebuildAt: rebuildRequestedAt(spec) } : {}),
      ...appliedAt(spec),
    };
    const write = { kind: "create", plan: planned } as const;
    return { events, after: [], outcome: { kind: "synced" }, record: applied, write };
  }

  const deployment = found.deployment;
  if (planned.action === "patch" && !deployment)
    throw new Error("a patch was planned without a deployment to patch");
  // spec.driftPolicy Report: the drift is said (Synced=False, Drifted), nothing is written for it.
  const reported = drift && policy === "Report" ? reportDrift(drift, status) : undefined;
  const sendable: typeof planned = reported && drift ? reportedNoop(drift) : planned;
  // A revision part that a switch of the active revision already made live (the service's
  // config still names its newest revision) is nothing to roll out: no window holds it, and
  // applyPatch sends only the rest, if any.
  const switchedBack =
    sendable.action === "patch" && deployment
      ? pendingSwitchBack({ deployment, decision: sendable, spec: spec.spec, status })
      : undefined;
  // A PATCH whose revision part waits for a rollout window sends the rest now, and holds the
  // revision part: `Synced=False` (OutsideRolloutWindow), Reconciling, and a look again when
  // the window opens, where the held part goes out in one PATCH.
  const gated =
    sendable.action !== "patch"
      ? {}
      : switchedBack
        ? splitForRedeploy(sendable.body)?.rest
          ? { send: sendable }
          : {}
        : gatePatch(sendable, {
            windows,
            now,
            rolloutNow: rolloutNow(spec),
            handledRolloutNow: status.lastHandledRolloutNow,
            ...(settings.counter ? { counter: settings.counter } : {}),
          });
  // The secrets held are not applied yet: their hash stays the last applied one, and the
  // Secrets are read again when the window opens.
  const secretsHeld =
    gated.held !== undefined && sendable.action === "patch" && sendable.body.secrets !== undefined;
  const applied: StatusRecord = {
    ...record,
    appliedSecretsHash: (secretsHeld ? undefined : sendable.secretsHash) ?? status.appliedSecretsHash ?? null,
    ...(observation.secretsUnread
      ? {}
      : { appliedSecretVersions: secretsHeld ? null : appliedVersions(sendable.secretsHash, versions) }),
  };
  // Nothing to send, unless a revision redeployed earlier (by a switch of the active revision)
  // is live where the spec now asks for the service's latest one again.
  const back =
    sendable.action === "noop" && deployment && !reported
      ? switchBackPlan(status.revisionHistory, deployment)
      : undefined;
  const sending = gated.send ?? back;
  const problems = outcomeFromProblems(sendable.problems);
  const write: Write | undefined =
    sending && deployment
      ? {
          kind: "send",
          plan: sending,
          deployment,
          back: back !== undefined,
          adopted: found.adopted,
          redeployMessage: !gated.held && !problems,
        }
      : undefined;
  // A rebuild asked for goes after the write, unless something holds it or the write makes a
  // revision itself (see decideRebuild).
  const rebuild =
    deployment && !problems && !gated.held && pendingRebuild(spec, status)
      ? decideRebuild(spec, status, observation, {
          deploymentId: deployment.id,
          windows,
          now,
          newRevision: sending?.newRevision === true,
          counter: settings.counter,
        })
      : undefined;
  const viaRolloutNow = gated.viaRolloutNow || rebuild?.viaRolloutNow;
  const log = viaRolloutNow
    ? { log: { message: "rolling out outside the rollout windows: dms.dev/rollout-now" } }
    : {};
  const held = gated.held ?? rebuild?.held;
  const handled = rebuild?.handled ? { lastHandledRebuildAt: rebuild.handled } : {};
  const kinds = [...(external.externalChanges ?? []), ...(reported?.counted ? (["fields"] as const) : [])];
  const decided = {
    events,
    // Applied in full unless a rollout window holds part of it.
    record: { ...applied, ...handled, ...(held ? {} : appliedAt(spec)) },
    observed: observedAs(deployment),
    ...log,
    ...(write ? { write } : {}),
    ...(rebuild?.send ? { rebuild: rebuild.send } : {}),
    ...(external.externalRevision ? { externalRevision: external.externalRevision } : {}),
    ...(kinds.length > 0 ? { externalChanges: kinds } : {}),
  };
  if (!held) {
    const refused = rebuild?.refused;
    const outcome = problems ?? reported?.outcome ?? { kind: "synced" as const };
    if (!refused) return { ...decided, after: [], outcome };
    return { ...decided, after: refused.events, outcome: refused.outcome };
  }
  const { message, wakeAt } = held;
  const synced = syncedOf(status);
  const after: DecidedEvent[] =
    synced?.reason !== REASON.OutsideRolloutWindow || synced.message !== message
      ? [{ type: "Normal", reason: REASON.OutsideRolloutWindow, note: message }]
      : [];
  return { ...decided, after, outcome: problems ?? { kind: "held", message }, wakeAt };
}

const syncedOf = (status: NonNullable<StoredResource["status"]>) =>
  status.conditions?.find((c) => c.type === CONDITION.Synced);

/** `drift` as nothing to send: its secrets' hash kept when they were in line (not part of it). */
function reportedNoop(drift: PatchPlan): NoopPlan {
  const inLine = drift.body.secrets === undefined && drift.secretsHash !== undefined;
  return { action: "noop", problems: drift.problems, ...(inLine ? { secretsHash: drift.secretsHash } : {}) };
}

/** `status.appliedGeneration` of `spec` applied in full now. */
const appliedAt = (spec: DecideSpec): StatusRecord =>
  spec.metadata.generation === undefined ? {} : { appliedGeneration: spec.metadata.generation };

/**
 * What `spec.driftPolicy: Report` says of `drift`: Synced=False, reason Drifted, naming the fields
 * (never the values) and the way to put them back; `counted` the first time it is said.
 */
function reportDrift(
  drift: PatchPlan,
  status: NonNullable<StoredResource["status"]>,
): { outcome: SyncOutcome; counted: boolean } {
  const fields = changedFields(drift.changes).join(", ");
  const message = `spec.driftPolicy is Report: the service's deployment differs from the spec, which was applied, in ${fields} (changed outside this resource); nothing is written for it: to put the spec's values back, set spec.driftPolicy to Correct (a change of the spec, or a rotated Secret, applies the whole spec too); to keep the service's, write them into the spec`;
  const synced = syncedOf(status);
  const said = synced?.reason === REASON.Drifted && synced.message === message;
  return { outcome: { kind: "drifted", message }, counted: !said };
}

/**
 * A revision of the deployment `observation` found that this operator did not create, seen now
 * for the first time (`externalRevisionOf`): its status record, the `ExternalRevision` event
 * (`follows`: what the operator does about it), and its count. Nothing otherwise.
 */
function seenExternal(
  observation: Observation,
  status: NonNullable<StoredResource["status"]>,
  now: number,
  say: { follows: string },
): Pick<Decided, "externalRevision" | "externalChanges"> & { events?: DecidedEvent[] } {
  const deployment = observation.found.deployment;
  if (!deployment) return {};
  const { desired } = observation;
  const external = externalRevisionOf(deployment, {
    status,
    buildOnPush: desired.source_config?.build_on_push === true,
    repoRef: desired.source_revision_config?.repo_ref ?? undefined,
    adopted: observation.found.adopted,
    now: formatTime(new Date(now)),
    ownLatest: observation.ownLatest,
  });
  if (!external) return {};
  const note = externalRevisionNote(deployment.id, external, say.follows);
  return {
    externalRevision: external,
    externalChanges: ["revision"],
    events: [{ type: "Warning", reason: REASON.ExternalRevision, note }],
  };
}

/** Whether `dms.dev/rebuild-requested-at` carries a value not acted on yet. */
function pendingRebuild(spec: DecideSpec, status: NonNullable<StoredResource["status"]>): boolean {
  const requested = rebuildRequestedAt(spec);
  return requested !== undefined && requested !== status.lastHandledRebuildAt;
}

/** The change a rebuild makes, as the rollout gate's message names it. */
const REBUILD_CHANGE = {
  group: "source_revision_config",
  field: `the rebuild asked by ${ANNOTATION_REBUILD_REQUESTED_AT}`,
  line: `rebuild (${ANNOTATION_REBUILD_REQUESTED_AT})`,
} as const;

/** What a pending rebuild comes to in a reconcile that decided the rest (see {@link decide}). */
interface RebuildDecision {
  /** Recorded as handled (`status.lastHandledRebuildAt`) with this value. */
  handled?: string;
  /** Sent after the write. */
  send?: { deploymentId: string; requestedAt: string };
  /** Held outside the rollout windows. */
  held?: { message: string; wakeAt: number };
  /** Refused: the connection's service has no rebuild route. */
  refused?: { outcome: SyncOutcome; events: DecidedEvent[] };
  viaRolloutNow?: boolean;
}

/**
 * A pending `dms.dev/rebuild-requested-at` on the deployment `deploymentId`:
 * - the write makes a new revision itself (`newRevision`): that revision is the one asked for,
 *   and the request is handled (no second build);
 * - the connection's service has no rebuild route: refused (Synced=False, Stalled,
 *   {@link REASON.RebuildRouteMissing}, an event the first time), nothing else written for it,
 *   not recorded as handled;
 * - else the rollout gate decides, as for any revision: open, it is sent; closed, it is held.
 */
function decideRebuild(
  spec: DecideSpec,
  status: NonNullable<StoredResource["status"]>,
  observation: Observation,
  at: {
    deploymentId: string;
    windows: WindowsInEffect;
    now: number;
    newRevision: boolean;
    counter?: Counter | undefined;
  },
): RebuildDecision {
  const requestedAt = rebuildRequestedAt(spec) ?? "";
  if (at.newRevision) return { handled: requestedAt };
  if (observation.rebuildMissing !== undefined) {
    const outcome = rebuildRefused(observation.rebuildMissing);
    const synced = syncedOf(status);
    const said = synced?.reason === outcome.reason && synced.message === outcome.message;
    const event = { type: "Warning", reason: REASON.RebuildRouteMissing, note: outcome.message } as const;
    return { refused: { outcome, events: said ? [] : [event] } };
  }
  const gate = gateRollout({
    windows: at.windows,
    now: at.now,
    rolloutNow: rolloutNow(spec),
    handledRolloutNow: status.lastHandledRolloutNow,
    held: [REBUILD_CHANGE],
    ...(at.counter ? { counter: at.counter } : {}),
  });
  if (gate.kind === "held") return { held: { message: gate.message, wakeAt: gate.wakeAt } };
  return { send: { deploymentId: at.deploymentId, requestedAt }, viaRolloutNow: gate.viaRolloutNow };
}

/** The outcome of a rebuild refused because the service has no rebuild route (`why`). */
export function rebuildRefused(why: string): SyncOutcome & { kind: "failed" } {
  return {
    kind: "failed",
    reason: REASON.RebuildRouteMissing,
    message: `${ANNOTATION_REBUILD_REQUESTED_AT} asks for a new revision, but ${why}: no revision was created, and nothing else was written for the request; remove the annotation (a change of spec.sourceRevisionConfig still makes a revision by PATCH)`,
    stalled: true,
  };
}

/**
 * What `execute` wrote, as `settle` needs it; `rebuilt`: what the decision's rebuild came to
 * (after the write, if any: `none` when there was none).
 */
export type Executed =
  /** The create: the deployment it answered, and the history of its first revision. */
  (
    | {
        kind: "created";
        deployment: Deployment;
        history?: RevisionHistoryEntry[] | undefined;
        /** The resource as the intent's write answered: the status goes on that version. */
        written: StoredResource;
      }
    /** The PATCH (or the redeploy then the PATCH): what `applyPatch` answered. */
    | { kind: "sent"; sent: ApplyPatchResult }
    /** No write: only the rebuild. */
    | { kind: "none" }
  ) & { rebuilt?: { outcome: RebuildOutcome; deployment?: Deployment | undefined } };

/**
 * `decision` with what was `executed` of its write (none when it had none): the conclusion's
 * input, and the events to record now, the write's own first.
 */
export function settle(
  spec: DecideSpec,
  status: NonNullable<StoredResource["status"]>,
  decision: Decision,
  executed: Executed | undefined,
): { decided: Decided; events: DecidedEvent[] } {
  const settled = settleWrite(spec, status, decision, executed);
  return executed?.rebuilt ? withRebuild(spec, status, settled, decision, executed.rebuilt) : settled;
}

/**
 * `settled` with what the rebuild came to: a revision created is recorded as handled, with an
 * event `Rebuilt` naming it, and the deployment read after it (its new latest revision) is what
 * the status shows; a route found missing refuses the request (see {@link rebuildRefused}); a
 * deployment the service no longer has leaves it pending (the next reconcile looks it up); a
 * lost answer records it as handled, with a Warning `RebuildUnconfirmed` (never a second build).
 */
function withRebuild(
  spec: DecideSpec,
  status: NonNullable<StoredResource["status"]>,
  settled: { decided: Decided; events: DecidedEvent[] },
  decision: Decision,
  rebuilt: NonNullable<Executed["rebuilt"]>,
): { decided: Decided; events: DecidedEvent[] } {
  const { decided, events } = settled;
  const { outcome, deployment } = rebuilt;
  const requestedAt = decision.rebuild?.requestedAt;
  if (outcome.kind === "missing") {
    const refused = rebuildRefused(outcome.why);
    const event = { type: "Warning", reason: REASON.RebuildRouteMissing, note: refused.message } as const;
    return { decided: { ...decided, outcome: refused }, events: [...events, event] };
  }
  if (outcome.kind === "unknown" || requestedAt === undefined) return settled;
  const handled = { ...decided.record, lastHandledRebuildAt: requestedAt };
  if (outcome.kind === "unconfirmed") {
    const note = `the rebuild asked by ${ANNOTATION_REBUILD_REQUESTED_AT} (${requestedAt}) got no answer (${outcome.error}): the revision may or may not have been created; the request is recorded as handled so that it never builds twice; set a new value to ask again`;
    return {
      decided: { ...decided, record: handled },
      events: [...events, { type: "Warning", reason: "RebuildUnconfirmed", note }],
    };
  }
  const note = `created revision ${outcome.revision.id} of the deployment's current configuration (${ANNOTATION_REBUILD_REQUESTED_AT}: ${requestedAt})`;
  const before = decision.observed?.kind === "found" ? decision.observed.deployment : undefined;
  return {
    decided: {
      ...decided,
      record: handled,
      history: rebuiltHistory(spec, status, decided, outcome.revision, deployment ?? before),
      ...(deployment ? { observed: { kind: "found", deployment } } : {}),
    },
    events: [...events, { type: "Normal", reason: "Rebuilt", note }],
  };
}

/**
 * `status.revisionHistory` after a rebuild made `revision` (of `deployment`'s configuration):
 * recorded like any revision this operator creates, with the digests it can vouch for, so that
 * it is never taken for someone else's.
 */
function rebuiltHistory(
  spec: DecideSpec,
  status: NonNullable<StoredResource["status"]>,
  decided: Decided,
  revision: Revision,
  deployment: Deployment | undefined,
): RevisionHistoryEntry[] {
  const secretsHash = vouchedSecretsHash({
    managed: spec.spec.secrets !== undefined,
    appliedHash: decided.record?.appliedSecretsHash ?? status.appliedSecretsHash,
    serviceSecretCount: deployment?.secrets.length ?? 0,
  });
  const config = revision.source_revision_config ?? deployment?.source_revision_config;
  const source = revision.source ?? deployment?.source;
  const configHash = config && source ? revisionConfigHash(configAfterPatch(config, {}), source) : undefined;
  return recordCreated(decided.history ?? status.revisionHistory, revision.id, secretsHash, configHash);
}

/** {@link settle} of the write alone. */
function settleWrite(
  spec: DecideSpec,
  status: NonNullable<StoredResource["status"]>,
  decision: Decision,
  executed: Executed | undefined,
): { decided: Decided; events: DecidedEvent[] } {
  const { outcome, observed, record, wakeAt, externalRevision, externalChanges } = decision;
  const decided: Decided = {
    outcome,
    observed,
    record,
    ...(wakeAt === undefined ? {} : { wakeAt }),
    ...(externalRevision ? { externalRevision } : {}),
    ...(externalChanges ? { externalChanges } : {}),
  };
  const write = decision.write;
  if (!executed || !write || executed.kind === "none") return { decided, events: decision.after };
  if (executed.kind === "created") {
    const created = { type: "Normal", reason: "Created", note: createdNote(executed.deployment) } as const;
    const history = executed.history ? { history: executed.history } : {};
    return {
      decided: { ...decided, observed: { kind: "found", deployment: executed.deployment }, ...history },
      events: [created, ...decision.after],
    };
  }
  if (write.kind !== "send") throw new Error("a create was answered as a PATCH");
  const { sent } = executed;
  const sending = write.plan;
  const reuse = {
    ...(sent.history ? { history: sent.history } : {}),
    ...(sent.known ? { known: sent.known } : {}),
  };
  const events: DecidedEvent[] = [];
  let message: string | undefined;
  const { revision } = sent;
  // Someone changed the service since this spec was applied: the event names the fields, never
  // the values someone else set, and the change is counted.
  const corrected =
    !write.back && updateReason({ ...spec, status }, sending, write.adopted) === "DriftCorrected";
  if (revision.kind === "redeployed") {
    const how = `redeployed revision ${revision.revisionId}, its own, instead of building one (no build)`;
    events.push(
      corrected
        ? { type: "Normal", reason: "DriftCorrected", note: driftCorrectedNote(sending, how) }
        : { type: "Normal", reason: "Redeployed", note: redeployedNote(revision, sending) },
    );
    message = `redeployed revision ${revision.revisionId} (no build): ${revision.reason}`;
  } else if (
    !write.back &&
    (revision.kind !== "pending" || sending.changes.some((c) => c.group !== "source_revision_config"))
  ) {
    // A redeploy sent before and not live yet sends nothing for it again: no event for it.
    events.push(
      corrected
        ? { type: "Normal", reason: "DriftCorrected", note: driftCorrectedNote(sending) }
        : { type: "Normal", reason: "Updated", note: updateNote(sending) },
    );
  }
  const counted = corrected && events.some((e) => e.reason === "DriftCorrected");
  const changes = counted ? { externalChanges: [...(externalChanges ?? []), "fields" as const] } : {};
  const said =
    message !== undefined && write.redeployMessage ? { outcome: { kind: "synced", message } as const } : {};
  // An empty secrets list the service answered with its secrets kept: it reads such a list as
  // "unchanged". Said now; the next plans send it no more (plan-secrets.ts).
  const kept = sending.body.secrets?.length === 0 ? sent.deployment.secrets.map((s) => s.name) : [];
  const refused = kept.length > 0 ? keptSecretsProblem([...new Set(kept)].sort()) : undefined;
  const stalled = refused ? { outcome: outcomeFromProblems([refused]) ?? decided.outcome } : {};
  const warning: DecidedEvent[] = refused
    ? [{ type: "Warning", reason: REASON.CannotClearSecrets, note: refused.message }]
    : [];
  return {
    decided: { ...decided, observed: observedAs(sent.deployment), ...reuse, ...said, ...changes, ...stalled },
    events: [...events, ...warning, ...decision.after],
  };
}

/**
 * The finalizer rule: whether deleting `obj` must delete its service deployment, and so it
 * carries the finalizer (the reconciler keeps it exactly while this holds).
 */
export function cleansUpOnDelete(obj: DecideSpec): boolean {
  return obj.spec.deletionPolicy === "Delete" && obj.spec.managementPolicy !== "ObserveOnly";
}

/** Whether the service's deployment has exactly the secret names of `spec` (false when none). */
export function sameSecretNames(
  spec: DecideSpec["spec"],
  deployment: Deployment | null | undefined,
): boolean {
  if (!deployment) return false;
  const wanted = [...new Set((spec.secrets ?? []).map((s) => s.name))].sort();
  const shown = [...new Set(deployment.secrets.map((s) => s.name))].sort();
  return wanted.length === shown.length && wanted.every((name, i) => name === shown[i]);
}

/**
 * `status.appliedSecretVersions` after a plan that read the Secrets: their versions when the
 * secrets are (or, once the write succeeds, will be) what the service has, else none.
 */
function appliedVersions(secretsHash: string | undefined, versions: string | undefined): string | null {
  return secretsHash !== undefined && versions !== undefined ? versions : null;
}
