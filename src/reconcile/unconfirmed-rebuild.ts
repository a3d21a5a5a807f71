/**
 * A rebuild whose answer was lost (`status.unconfirmedRebuild`, which the rebuild's intent
 * records, `rebuild.ts`): remembered until the deployment's next new revision says what it came
 * to ({@link rebuildSeen}, joined to the decision by {@link withRebuildSeen}), or until a revision
 * of this operator's own write ends the wait ({@link revisionMadeSince}). A resource without such
 * a record never enters this module.
 */
import { ANNOTATION_REBUILD_REQUESTED_AT } from "../crd/schema.ts";
import type { StoredResource } from "./ports.ts";
import type { StatusRecord } from "./reasons.ts";
import { builtHash } from "./rebuild.ts";
import { configAfterPatch, type RevisionHistoryEntry, recordCreated } from "./revision-history.ts";
import type { Decided, DecidedEvent, Decision, Executed, Observation } from "./run.ts";
import type { Deployment } from "./service-types.ts";

/** The status as a reconcile reads it. */
type Status = NonNullable<StoredResource["status"]>;

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
