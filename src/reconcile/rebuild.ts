/**
 * A rebuild asked by `dms.dev/rebuild-requested-at`, in the two pure steps of a reconcile that
 * weigh it: what the decision makes of a pending request ({@link decideRebuild}: handled by a
 * write that makes a revision anyway, refused on a service without the route, held by the
 * rollout windows, or sent after the write), and what the conclusion makes of the rebuild
 * `execute` sent ({@link withRebuild}). The call itself is `service/rebuilder.ts`'s. A rebuild
 * whose answer was lost is remembered (`status.unconfirmedRebuild`) until the next new revision
 * says what it came to ({@link rebuildSeen}, {@link revisionMadeSince}). A resource with neither a
 * request pending nor such a rebuild never enters this module.
 */
import { ANNOTATION_REBUILD_REQUESTED_AT } from "../crd/schema.ts";
import { STATUS_ID_MAX_LENGTH } from "../crd/status-schema.ts";
import { rebuildRequestedAt, rolloutNow } from "./inputs.ts";
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
import type { Decided, DecidedEvent, DecideSpec, Decision, Executed, Observation } from "./run.ts";
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
 *   which the service may not show) is looked at once answered (`execute.ts`);
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
    handledRolloutNow: status.lastHandledRolloutNow,
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
    const sent = decided.observed?.kind === "found" ? decided.observed.deployment : undefined;
    const unconfirmedRebuild = unconfirmedRecord(sent, requestedAt) ?? null;
    return {
      decided: { ...decided, record: { ...handled, unconfirmedRebuild } },
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
  const configHash = config && source ? builtHash(config, source) : undefined;
  return recordCreated(decided.history ?? status.revisionHistory, revision.id, secretsHash, configHash);
}

/** The digest of what a revision of `config` and `source` defines (`revisionHistory[].configHash`). */
const builtHash = (config: SourceRevisionConfig, source: string): string =>
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

/** What a look at the deployment makes of `status.unconfirmedRebuild` ({@link rebuildSeen}). */
export interface RebuildSeen {
  /** The status as the decision reads it: the rebuild's revision in its history once seen. */
  status: Status;
  /** `status.revisionHistory` with that revision. */
  history?: RevisionHistoryEntry[];
  /** The Normal event `Rebuilt` naming it. */
  event?: DecidedEvent;
  /**
   * That revision is of another configuration than the spec asks now (the spec changed since the
   * rebuild was sent: a Git revert): the operator's own change undid the spec, which is applied
   * again as an edit is (never a drift, whatever `spec.driftPolicy`; see {@link withRebuildSeen}).
   */
  reapply?: true;
}

/**
 * What `observation` says of the rebuild whose answer was lost (`status.unconfirmedRebuild`):
 * nothing while the deployment's latest revision is still the one it was sent after (the service
 * may be at it still, a listing may lag: the record stays); else the record is done with (cleared
 * by {@link withRebuildSeen}), and the new latest revision is:
 * - the rebuild's, when it is of the configuration the rebuild would have built and no write of
 *   this operator made it: recorded in the history as a rebuild is, with its config's digest but
 *   none of its secrets (the answer never came: the operator does not vouch for them, so it is
 *   never redeployed), with a Normal event `Rebuilt` saying so; `externalRevisionOf` then never
 *   names it someone else's; of another configuration than the spec asks now, it undid the spec
 *   ({@link RebuildSeen.reapply});
 * - the operator's own write's (in the history, or this process's last write's answer): nothing;
 * - anyone else's, or on a deployment gone or taken over by name: nothing here
 *   (`externalRevisionOf` names it).
 */
export function rebuildSeen(status: Status, observation: Observation): RebuildSeen | undefined {
  const sent = status.unconfirmedRebuild;
  if (!sent) return undefined;
  const { deployment: d, adopted } = observation.found;
  const latest = d?.latest_revision_id ?? undefined;
  const ours = d !== null && !adopted && d.id === status.deploymentId;
  if (ours && (latest === undefined || latest === sent.afterRevisionId)) return undefined;
  if (!ours || latest === undefined || observation.ownLatest === latest) return { status };
  if (status.revisionHistory?.some((e) => e.id === latest)) return { status };
  if (builtHash(d.source_revision_config, d.source) !== sent.configHash) return { status };
  const history = recordCreated(status.revisionHistory, latest, undefined, sent.configHash);
  const asked = sent.requestedAt === undefined ? "" : ` (${sent.requestedAt})`;
  const note = `the rebuild asked by ${ANNOTATION_REBUILD_REQUESTED_AT}${asked}, whose answer was lost, made revision ${latest}: the first new revision since, of the configuration it would have built; recorded as this operator's (status.revisionHistory)`;
  const spec = configAfterPatch(d.source_revision_config, observation.desired.source_revision_config);
  return {
    status: { ...status, revisionHistory: history },
    history,
    event: { type: "Normal", reason: "Rebuilt", note },
    ...(builtHash(spec, d.source) === sent.configHash ? {} : { reapply: true }),
  };
}

/**
 * `decision` (made on {@link RebuildSeen.status}) with what `seen` settled: the record cleared,
 * the rebuild's revision in the history and its event said once the write succeeded. A decision
 * that fails before any write (windows that cannot be read) leaves it all to the retry. A spec
 * applied again over the rebuild's revision ({@link RebuildSeen.reapply}): its write is said as an
 * edit's, and, held by a rollout window, the spec is recorded as not applied (`appliedGeneration`
 * cleared), so that the held part is never taken for a drift.
 */
export function withRebuildSeen(decision: Decision, seen: RebuildSeen): Decision {
  if (decision.failed) return decision;
  const record: StatusRecord = { ...decision.record, unconfirmedRebuild: null };
  if (seen.reapply) record.appliedGeneration ??= null;
  const history = seen.history ? { history: seen.history } : {};
  const after = seen.event ? [...decision.after, seen.event] : decision.after;
  const write = decision.write;
  const reapplied =
    write?.kind === "send" && seen.reapply ? { write: { ...write, reapplied: true as const } } : {};
  return { ...decision, ...history, record, after, ...reapplied };
}

/**
 * `settled` with `status.unconfirmedRebuild` cleared when `executed` made a revision of the
 * operator's own (a create, a PATCH or a redeploy that recorded one, its answer naming a latest
 * revision other than `before`'s; a rebuild answered): a revision after it is not the lost
 * rebuild's. A write that made none (a switch of the active revision back, a redeploy pending
 * marked no longer so) leaves the record to the look that settles it. A record this reconcile
 * set or cleared stands.
 */
export function revisionMadeSince(
  settled: { decided: Decided; events: DecidedEvent[] },
  executed: Executed,
  before: Deployment | undefined,
): { decided: Decided; events: DecidedEvent[] } {
  const record = settled.decided.record;
  if (record?.unconfirmedRebuild !== undefined) return settled;
  const sent = executed.kind === "sent" ? executed.sent : undefined;
  const made =
    executed.kind === "created" ||
    (sent?.history !== undefined && sent.deployment.latest_revision_id !== before?.latest_revision_id) ||
    executed.rebuilt?.outcome.kind === "rebuilt";
  if (!made) return settled;
  return { ...settled, decided: { ...settled.decided, record: { ...record, unconfirmedRebuild: null } } };
}
