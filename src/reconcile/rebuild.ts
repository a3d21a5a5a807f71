/**
 * A rebuild asked by `dms.dev/rebuild-requested-at`, in the steps of a reconcile that weigh it:
 * what the decision makes of a pending request ({@link decideRebuild}: handled by a write that
 * makes a revision anyway, refused on a service without the route, held by the rollout windows,
 * or sent after the write), the call sent after the write once its intent is written
 * ({@link performRebuild}, for `execute`; the call itself is `service/rebuilder.ts`'s), and what
 * the conclusion makes of what it came to ({@link withRebuild}). A rebuild whose answer was lost
 * is remembered (`status.unconfirmedRebuild`) until the next new revision says what it came to
 * (`unconfirmed-rebuild.ts`). A resource with neither a request pending nor such a rebuild never
 * enters this module.
 */
import { loggedError } from "../api/errors.ts";
import { ANNOTATION_REBUILD_REQUESTED_AT } from "../crd/schema.ts";
import { STATUS_ID_MAX_LENGTH } from "../crd/status-schema.ts";
import { handledValue, rebuildRequestedAt, rolloutNow } from "./inputs.ts";
import { keptWithin } from "./live-revision.ts";
import { bothSaid, syncedSays } from "./notes.ts";
import type { StoredResource } from "./ports.ts";
import { REASON, type StatusRecord, type SyncOutcome } from "./reasons.ts";
import {
  configAfterPatch,
  type RevisionHistoryEntry,
  recordCreated,
  revisionConfigHash,
  vouchedSecretsHash,
} from "./revision-history.ts";
import type { Counter } from "./rollout/next-opening.ts";
import { gateRollout, type WindowsInEffect } from "./rollout-gate.ts";
import type {
  Connected,
  Decided,
  DecidedEvent,
  DecideSpec,
  Decision,
  Executed,
  Execution,
  Observation,
  ReconcileDeps,
} from "./run.ts";
import type { Deployment, Revision, SourceRevisionConfig } from "./service-types.ts";

/** The status as a reconcile reads it. */
type Status = NonNullable<StoredResource["status"]>;

/** `status.unconfirmedRebuild`. */
export type UnconfirmedRebuild = NonNullable<Status["unconfirmedRebuild"]>;

/** The change a rebuild makes, as the rollout gate's message names it. */
const REBUILD_CHANGE = {
  group: "source_revision_config",
  field: `the rebuild asked by ${ANNOTATION_REBUILD_REQUESTED_AT}`,
  line: `rebuild (${ANNOTATION_REBUILD_REQUESTED_AT})`,
} as const;

/** What a pending rebuild comes to in a reconcile that decided the rest (see {@link decide}). */
export interface RebuildDecision {
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
 *   and the request is handled (no second build); a PATCH that may make one (new secret values,
 *   which the service may not show) is looked at once answered ({@link performRebuild});
 * - the connection's service has no rebuild route: refused (Synced=False, Stalled,
 *   {@link REASON.RebuildRouteMissing}, an event the first time; a drift `reported` beside it is
 *   named in the same message, see {@link refusal}), nothing else written for it,
 *   not recorded as handled; unless a PATCH goes out (`patching`) whose answer may name a new
 *   revision (new secret values): then that answer decides (`withRebuild`), and the rebuild,
 *   should it come to one, makes no call (the connection knows the route missing);
 * - else the rollout gate decides, as for any revision: open, it is sent; closed, it is held.
 */
export function decideRebuild(
  spec: DecideSpec,
  status: NonNullable<StoredResource["status"]>,
  observation: Observation,
  at: {
    deploymentId: string;
    windows: WindowsInEffect;
    now: number;
    newRevision: boolean;
    /** A PATCH goes out (not a switch back), whose answer may name a revision it made. */
    patching: boolean;
    counter?: Counter | undefined;
    /** The drift `spec.driftPolicy: Report` says in this reconcile, if any. */
    reported?: SyncOutcome | undefined;
  },
): RebuildDecision {
  const requestedAt = rebuildRequestedAt(spec) ?? "";
  if (at.newRevision) return { handled: requestedAt };
  if (observation.rebuildMissing !== undefined) {
    // The PATCH's revision, if its answer names one, is the one asked for: weighed once answered.
    if (at.patching) return { send: { deploymentId: at.deploymentId, requestedAt } };
    return { refused: refusal(status, observation.rebuildMissing, at.reported) };
  }
  const gate = gateRollout({
    windows: at.windows,
    now: at.now,
    rolloutNow: rolloutNow(spec),
    handledRolloutNow: handledValue(status.lastHandledRolloutNow),
    held: [REBUILD_CHANGE],
    ...(at.counter ? { counter: at.counter } : {}),
  });
  if (gate.kind === "held") return { held: { message: gate.message, wakeAt: gate.wakeAt } };
  return { send: { deploymentId: at.deploymentId, requestedAt }, viaRolloutNow: gate.viaRolloutNow };
}

/** The outcome of a rebuild refused because the service has no rebuild route (`why`). */
function rebuildRefused(why: string): SyncOutcome & { kind: "failed" } {
  return {
    kind: "failed",
    reason: REASON.RebuildRouteMissing,
    message: `${ANNOTATION_REBUILD_REQUESTED_AT} asks for a new revision, but ${why}: no revision was created, and nothing else was written for the request; remove the annotation (a change of spec.sourceRevisionConfig still makes a revision by PATCH)`,
    stalled: true,
  };
}

/**
 * A refusal for `why` ({@link rebuildRefused}), with its Warning unless `Synced` says it already.
 * A drift that `spec.driftPolicy: Report` says beside it (`beside`) is named after it in the same
 * message, under the refusal's reason: the refusal stalls the resource until the annotation goes
 * (Stalled), the drift only reports, and is said (and counted) once either way.
 */
function refusal(
  status: Status,
  why: string,
  beside: SyncOutcome | undefined,
): { outcome: SyncOutcome; events: DecidedEvent[] } {
  const refused = rebuildRefused(why);
  const said = syncedSays(status, refused.reason, refused.message);
  const event = { type: "Warning", reason: REASON.RebuildRouteMissing, note: refused.message } as const;
  const outcome =
    beside?.kind === "drifted" ? { ...refused, message: bothSaid(refused.message, beside.message) } : refused;
  return { outcome, events: said ? [] : [event] };
}

/**
 * `settled` with what the rebuild came to: a revision the PATCH made is the one asked for (handled,
 * said by the PATCH's event); a revision created is recorded as handled, with an
 * event `Rebuilt` naming it, and the deployment read after it (its new latest revision) is what
 * the status shows; a route found missing refuses the request (see {@link rebuildRefused}); a
 * deployment the service no longer has leaves it pending (the next reconcile looks it up); a
 * lost answer records it as handled, with a Warning `RebuildUnconfirmed` (never a second build),
 * and remembers it in `status.unconfirmedRebuild` ({@link unconfirmedRecord}).
 */
export function withRebuild(
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
    const refused = refusal(status, outcome.why, decided.outcome);
    return { decided: { ...decided, outcome: refused.outcome }, events: [...events, ...refused.events] };
  }
  if (outcome.kind === "unknown" || requestedAt === undefined) return settled;
  const handled = { ...decided.record, lastHandledRebuildAt: requestedAt };
  // The PATCH made the revision (recorded, and said, as its own): the request is handled.
  if (outcome.kind === "written") return { decided: { ...decided, record: handled }, events };
  if (outcome.kind === "unconfirmed") {
    const note = `the rebuild asked by ${ANNOTATION_REBUILD_REQUESTED_AT} (${requestedAt}) got no answer (${outcome.error}): the revision may or may not have been created; the request is recorded as handled so that it never builds twice (the next new revision of the configuration it would have built is taken for its own, in status.revisionHistory); set a new value to ask again`;
    const unconfirmedRebuild = unconfirmedRecord(observedIn(decided), requestedAt) ?? null;
    return {
      decided: { ...decided, record: { ...handled, unconfirmedRebuild } },
      events: [...events, { type: "Warning", reason: "RebuildUnconfirmed", note }],
    };
  }
  const note = `created revision ${outcome.revision.id} of the deployment's current configuration (${ANNOTATION_REBUILD_REQUESTED_AT}: ${requestedAt})`;
  const before = observedIn(decision);
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
  const configHash = config && source ? builtHash(config, source) : undefined;
  return recordCreated(decided.history ?? status.revisionHistory, revision.id, secretsHash, configHash);
}

/** The digest of what a revision of `config` and `source` defines (`revisionHistory[].configHash`). */
export const builtHash = (config: SourceRevisionConfig, source: string): string =>
  revisionConfigHash(configAfterPatch(config, {}), source);

/**
 * `status.unconfirmedRebuild` for a rebuild sent for `requestedAt` to `sent` (the deployment as
 * the write, if any, answered): its latest revision and the digest of its configuration, which
 * the rebuild would have built. Undefined when that revision cannot be recorded (none, or an id
 * past the bound): no later one could be told from it. The request's value is left out past the
 * bound.
 */
function unconfirmedRecord(
  sent: Deployment | undefined,
  requestedAt: string,
): UnconfirmedRebuild | undefined {
  const after = keptWithin(sent?.latest_revision_id, STATUS_ID_MAX_LENGTH);
  if (!sent || after === undefined) return undefined;
  const value = keptWithin(requestedAt, STATUS_ID_MAX_LENGTH);
  return {
    ...(value === undefined ? {} : { requestedAt: value }),
    afterRevisionId: after,
    configHash: builtHash(sent.source_revision_config, sent.source),
  };
}

/**
 * The status a rebuild's call is sent under, written before it on the version the reconcile read
 * (as a create's intent is): the request handled, remembered as a rebuild whose answer was lost
 * ({@link unconfirmedRecord}), which the answer then settles; without the request's value, which
 * a lost answer adds (so `kubectl dms rebuild --wait` tells a call still out from one answered).
 * A call cut off (a timeout, a halt), or whose answer is never written (a conflict, a crash), is
 * so never sent again, and a reconcile of a stale copy gets a conflict before it.
 */
export function rebuildIntent(status: Status, sent: Deployment | undefined, requestedAt: string): Status {
  const { unconfirmedRebuild: _earlier, ...rest } = status;
  const record = unconfirmedRecord(sent, requestedAt);
  if (!record) return { ...rest, lastHandledRebuildAt: requestedAt };
  const { requestedAt: _value, ...out } = record;
  return { ...rest, lastHandledRebuildAt: requestedAt, unconfirmedRebuild: out };
}

/** What {@link rebuildIntent} wrote over, as `status` (read before it) had it. */
export const intentUndone = (status: Status): StatusRecord => ({
  lastHandledRebuildAt: status.lastHandledRebuildAt ?? null,
  unconfirmedRebuild: status.unconfirmedRebuild ?? null,
});

/**
 * Performs the rebuild `decision` asked after its write (`done`; `execute.ts`). A PATCH that made
 * a revision itself (new secret values do; values the service already had, which a service that
 * masks them is sent again, do not) is the revision asked for: no second build. The call is sent
 * once its intent is written ({@link rebuildIntent}: never sent again, whatever becomes of its
 * answer), unless the connection knows the route missing (no call). A revision it created is
 * followed by a read of the deployment (its new latest revision, for the status and the rollout's
 * tracking); that read failing costs only the tracking until the next lookup, never a second build.
 */
export async function performRebuild(
  deps: Pick<ReconcileDeps, "resources">,
  run: Connected,
  {
    decision,
    rebuild,
    done,
  }: { decision: Decision; rebuild: NonNullable<Decision["rebuild"]>; done: Executed },
  signal: AbortSignal,
): Promise<Execution> {
  const patched = revisionPatched(done, decision);
  if (patched) return { ...done, rebuilt: { outcome: { kind: "written", revisionId: patched } } };
  const { service, snapshot, rebuilds } = run.session;
  const history = done.kind === "sent" && done.sent.history ? { history: done.sent.history } : {};
  let written: { written: StoredResource } | undefined;
  if (rebuilds.missing === undefined) {
    // With the history as decided (a lost rebuild's revision seen now) and written.
    const kept = history.history ?? decision.history;
    const status = { ...run.obj.status, ...(kept ? { revisionHistory: kept } : {}) };
    const sent = done.kind === "sent" ? done.sent.deployment : observedIn(decision);
    const intent = rebuildIntent(status, sent, rebuild.requestedAt);
    try {
      written = { written: await deps.resources.patchStatus(run.obj, intent, signal) };
    } catch (error) {
      return { kind: "failed", error, ...history };
    }
  }
  let outcome: Awaited<ReturnType<typeof rebuilds.rebuild>>;
  try {
    outcome = await rebuilds.rebuild(rebuild.deploymentId, signal);
  } catch (error) {
    // Refused by the service, it is pending again; cut off by the signal, it may have gone out.
    const undone = written && !signal.aborted ? { record: intentUndone(run.obj.status ?? {}) } : {};
    return { kind: "failed", error, ...written, ...history, ...undone };
  }
  if (outcome.kind !== "rebuilt") {
    // Gone, or perhaps rebuilt: the next reconcile looks the deployment up.
    if (outcome.kind !== "missing") snapshot.forget(rebuild.deploymentId);
    return { ...done, ...written, rebuilt: { outcome } };
  }
  const deployment = await service.getById(rebuild.deploymentId, signal).catch((error: unknown) => {
    if (signal.aborted) throw error;
    run.log.warn({ err: loggedError(error) }, "could not read the deployment after its rebuild");
    return undefined;
  });
  if (deployment) snapshot.remember(deployment);
  else snapshot.forget(rebuild.deploymentId);
  return { ...done, ...written, rebuilt: { outcome, deployment } };
}

/** The deployment `decided` observed, if it found one. */
const observedIn = (decided: Decided): Deployment | undefined =>
  decided.observed?.kind === "found" ? decided.observed.deployment : undefined;

/** The revision the PATCH of `done` made, if it made one (its answer names a new latest revision). */
function revisionPatched(done: Executed, decision: Decision): string | undefined {
  if (done.kind !== "sent" || done.sent.revision.kind !== "patched") return undefined;
  const before = observedIn(decision);
  const made = done.sent.deployment.latest_revision_id;
  return before && made && made !== before.latest_revision_id ? made : undefined;
}

/**
 * `settled` concluded on the status its rebuild's intent was written to ({@link rebuildIntent}):
 * `lastHandledRebuildAt` and `unconfirmedRebuild` as the reconcile settled them, else as `status`
 * (read before the intent) had them: a rebuild refused, or of a deployment gone, is pending again.
 */
export function intentSettled(
  settled: { decided: Decided; events: DecidedEvent[] },
  status: Status,
): { decided: Decided; events: DecidedEvent[] } {
  const record = settled.decided.record ?? {};
  const undone = intentUndone(status);
  const full: StatusRecord = {
    ...record,
    lastHandledRebuildAt: record.lastHandledRebuildAt ?? undone.lastHandledRebuildAt,
    unconfirmedRebuild:
      record.unconfirmedRebuild === undefined ? undone.unconfirmedRebuild : record.unconfirmedRebuild,
  };
  return { ...settled, decided: { ...settled.decided, record: full } };
}
