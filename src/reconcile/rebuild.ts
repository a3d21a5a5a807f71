/**
 * A rebuild asked by `dms.dev/rebuild-requested-at`, in the two pure steps of a reconcile that
 * weigh it: what the decision makes of a pending request ({@link decideRebuild}: handled by a
 * write that makes a revision anyway, refused on a service without the route, held by the
 * rollout windows, or sent after the write), and what the conclusion makes of the rebuild
 * `execute` sent ({@link withRebuild}). The call itself is `service/rebuilder.ts`'s. A resource
 * with no request pending never enters this module.
 */
import { ANNOTATION_REBUILD_REQUESTED_AT } from "../crd/schema.ts";
import { rebuildRequestedAt, rolloutNow } from "./inputs.ts";
import { syncedOf } from "./notes.ts";
import type { StoredResource } from "./ports.ts";
import { REASON, type SyncOutcome } from "./reasons.ts";
import {
  configAfterPatch,
  type RevisionHistoryEntry,
  recordCreated,
  revisionConfigHash,
  vouchedSecretsHash,
} from "./revision-history.ts";
import type { Counter } from "./rollout/rollout-windows.ts";
import { gateRollout, type WindowsInEffect } from "./rollout-gate.ts";
import type { Decided, DecidedEvent, DecideSpec, Decision, Executed, Observation } from "./run.ts";
import type { Deployment, Revision } from "./service-types.ts";

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
 *   {@link REASON.RebuildRouteMissing}, an event the first time), nothing else written for it,
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
  },
): RebuildDecision {
  const requestedAt = rebuildRequestedAt(spec) ?? "";
  if (at.newRevision) return { handled: requestedAt };
  if (observation.rebuildMissing !== undefined) {
    // The PATCH's revision, if its answer names one, is the one asked for: weighed once answered.
    if (at.patching) return { send: { deploymentId: at.deploymentId, requestedAt } };
    return { refused: refusal(status, observation.rebuildMissing) };
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

/** A refusal for `why` ({@link rebuildRefused}), with its Warning unless `Synced` says it already. */
function refusal(
  status: NonNullable<StoredResource["status"]>,
  why: string,
): { outcome: SyncOutcome; events: DecidedEvent[] } {
  const outcome = rebuildRefused(why);
  const synced = syncedOf(status);
  const said = synced?.reason === outcome.reason && synced.message === outcome.message;
  const event = { type: "Warning", reason: REASON.RebuildRouteMissing, note: outcome.message } as const;
  return { outcome, events: said ? [] : [event] };
}

/**
 * `settled` with what the rebuild came to: a revision the PATCH made is the one asked for (handled,
 * said by the PATCH's event); a revision created is recorded as handled, with an
 * event `Rebuilt` naming it, and the deployment read after it (its new latest revision) is what
 * the status shows; a route found missing refuses the request (see {@link rebuildRefused}); a
 * deployment the service no longer has leaves it pending (the next reconcile looks it up); a
 * lost answer records it as handled, with a Warning `RebuildUnconfirmed` (never a second build).
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
    const refused = refusal(status, outcome.why);
    return { decided: { ...decided, outcome: refused.outcome }, events: [...events, ...refused.events] };
  }
  if (outcome.kind === "unknown" || requestedAt === undefined) return settled;
  const handled = { ...decided.record, lastHandledRebuildAt: requestedAt };
  // The PATCH made the revision (recorded, and said, as its own): the request is handled.
  if (outcome.kind === "written") return { decided: { ...decided, record: handled }, events };
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
