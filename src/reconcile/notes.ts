/**
 * What the reconciler tells people outside the steps that say it: the notes of the events of an
 * adoption, a create, a revision made elsewhere, a drift corrected, a redeploy (with what it says
 * in `Synced`), a name conflict, a deployment not owned, the lines of an ObserveOnly drift report
 * and the drift `spec.driftPolicy: Report` says, with the plan it leaves (nothing sent for it);
 * whether `Synced` says a message already, alone or beside another; and the recording of an event
 * by a step that records its own (cleanup, the observation's warning, the export). The note of a
 * PATCH's `Updated` event, what an edit says, is `settle`'s (conclude.ts).
 * Pure but {@link recordEvent}; never a secret value (the planner's summaries hold none).
 */

import { claimedName } from "./inputs.ts";
import type { FieldChange, NoopPlan, PatchPlan, Plan } from "./plan.ts";
import type { EventsPort, StoredResource } from "./ports.ts";
import { CONDITION, REASON, type SyncOutcome } from "./reasons.ts";
import type { DecidedEvent, RevisionSent } from "./run.ts";
import type { Deployment } from "./service-types.ts";

/** Note of the `Created` event. */
export function createdNote(deployment: Deployment): string {
  return `created the service's deployment ${deployment.id} (${deployment.name})`;
}

/** Note of the `Adopted` event. */
export function adoptedNote(deployment: Deployment): string {
  return `adopted the service's deployment ${deployment.id}`;
}

/** The spec paths of `changes`, each once, in order: what differed, never a value. */
export function changedFields(changes: readonly FieldChange[]): string[] {
  return [...new Set(changes.map((c) => c.field))];
}

/** Note of the `ExternalRevision` event: which revision, what it deployed, and what follows. */
export function externalRevisionNote(
  deploymentId: string,
  revision: { id: string; imageUri?: string; repoRef?: string; repoCommitSha?: string },
  follows: string,
): string {
  const { imageUri, repoRef, repoCommitSha } = revision;
  const commit = repoCommitSha ? `commit ${repoCommitSha}` : undefined;
  const what = imageUri
    ? `image ${imageUri}`
    : repoRef
      ? `ref ${repoRef}${commit ? ` at ${commit}` : ""}`
      : (commit ?? "what the service does not say");
  return `revision ${revision.id} of the service's deployment ${deploymentId} was not created by this operator (the service's UI, langgraph deploy, another tool): it deployed ${what}; ${follows}`;
}

/**
 * Note of the `DriftCorrected` event: the fields that differed from the spec (never their values,
 * which someone else set), and how they were put back (`how`: a PATCH, or a redeploy).
 */
export function driftCorrectedNote(decision: PatchPlan, how?: string): string {
  const revision = decision.newRevision ? " (new revision)" : "";
  const fields = changedFields(decision.changes).join(", ");
  return `put back a change made outside this resource: ${fields} differed from the spec${how === undefined ? revision : ""}; ${how ?? "the spec's values sent"}`;
}

/** The note of the `Redeployed` event: which revision, why, how, and what else was sent. */
function redeployedNote(sent: Extract<RevisionSent, { kind: "redeployed" }>, decision: PatchPlan): string {
  const how =
    sent.behaviour === "new-revision"
      ? `the service made revision ${sent.live} from it`
      : "the service switches the active revision back to it";
  const others = decision.changes.filter((c) => c.group !== "source_revision_config").map((c) => c.line);
  const also = others.length > 0 ? `; also updated: ${others.join("; ")}` : "";
  return `redeployed revision ${sent.revisionId} instead of building a new one (no build): ${sent.reason}; ${how}${also}`;
}

/**
 * What a redeploy of `sent` says (`settle`, conclude.ts): its event, `DriftCorrected` when it put
 * back a change made outside the resource (`corrected`), else `Redeployed`; and the `Synced`
 * message naming the revision and why it was redeployed.
 */
export function redeploySaid(
  sent: Extract<RevisionSent, { kind: "redeployed" }>,
  decision: PatchPlan,
  corrected: boolean,
): { event: DecidedEvent; message: string } {
  const how = `redeployed revision ${sent.revisionId}, its own, instead of building one (no build)`;
  const event: DecidedEvent = corrected
    ? { type: "Normal", reason: "DriftCorrected", note: driftCorrectedNote(decision, how) }
    : { type: "Normal", reason: "Redeployed", note: redeployedNote(sent, decision) };
  return { event, message: `redeployed revision ${sent.revisionId} (no build): ${sent.reason}` };
}

/** Message of the NameConflict condition and event. */
export function nameConflictMessage(obj: StoredResource, holder: StoredResource): string {
  return `the service name "${claimedName(obj)}" is already claimed by the older resource ${holder.metadata.namespace}/${holder.metadata.name}; give this resource another spec.name`;
}

/** ObserveOnly: the lines saying how the service differs from the spec (empty: in line). */
export function observedDrift(name: string, deployment: Deployment | null, decision: Plan): string[] {
  if (!deployment) return [`the service has no deployment named "${name}" (ObserveOnly never creates one)`];
  if (decision.action === "noop") return decision.problems.map((p) => p.message);
  return decision.action === "create" ? [] : decision.summary;
}

/**
 * What `spec.driftPolicy: Report` says of `drift`: Synced=False, reason Drifted, naming the fields
 * (never the values) and the way to put them back; `counted` the first time it is said (alone, or
 * beside a rebuild refused or held: {@link bothSaid}). The revision part a switch of the active
 * revision back already made live (`switchedBack`) is none of it: undefined when it is all.
 */
export function reportDrift(
  drift: PatchPlan,
  status: NonNullable<StoredResource["status"]>,
  switchedBack = false,
): { outcome: SyncOutcome & { kind: "drifted" }; counted: boolean } | undefined {
  const changes = drift.changes.filter((c) => !switchedBack || c.group !== "source_revision_config");
  if (changes.length === 0) return undefined;
  const fields = changedFields(changes).join(", ");
  const message = `spec.driftPolicy is Report: the service's deployment differs from the spec, which was applied, in ${fields} (changed outside this resource); nothing is written for it: to put the spec's values back, set spec.driftPolicy to Correct (a change of the spec, or a rotated Secret, applies the whole spec too); to keep the service's, write them into the spec`;
  return { outcome: { kind: "drifted", message }, counted: !syncedSays(status, REASON.Drifted, message) };
}

/** `drift` reported, as nothing to send: its secrets' hash kept when they were in line (not part of it). */
export function reportedNoop(drift: PatchPlan): NoopPlan {
  const inLine = drift.body.secrets === undefined && drift.secretsHash !== undefined;
  return { action: "noop", problems: drift.problems, ...(inLine ? { secretsHash: drift.secretsHash } : {}) };
}

/** What joins the two messages of {@link bothSaid}. */
const BESIDE = ". Also: ";

/**
 * The message of one `Synced` condition saying two outcomes: `first`, whose reason it carries,
 * then `second` (a drift reported beside a rebuild refused or held, which alone would hide it).
 */
export const bothSaid = (first: string, second: string): string => `${first}${BESIDE}${second}`;

/**
 * Whether the `Synced` condition of `status` says `message` already: alone with `reason`, first of
 * {@link bothSaid}'s two with `reason`, or second of them (under the first's reason).
 */
export function syncedSays(
  status: NonNullable<StoredResource["status"]>,
  reason: string,
  message: string,
): boolean {
  const said = syncedOf(status);
  if (said?.message === undefined) return false;
  if (said.message.endsWith(`${BESIDE}${message}`)) return true;
  return (
    said.reason === reason && (said.message === message || said.message.startsWith(`${message}${BESIDE}`))
  );
}

/** `namespace/name` of a resource, as events and messages name it. */
export function describeResource(obj: StoredResource): string {
  const { namespace, name } = obj.metadata;
  return namespace ? `${namespace}/${name}` : name;
}

/**
 * The `NotOwned` warning: `obj`'s status records `deployment`, which carries another name than
 * the one `obj` claims. `consequence`: what the operator does instead.
 */
export function notOwnedMessage(obj: StoredResource, deployment: Deployment, consequence: string): string {
  return `${describeResource(obj)} records the service's deployment ${deployment.id} in status.deploymentId, but that deployment is named "${deployment.name}" and ${describeResource(obj)} claims "${claimedName(obj)}": it is not this resource's; ${consequence}`;
}

/** Records an event of the reconcile on `run`'s object. */
export function recordEvent(
  deps: { events: EventsPort },
  run: { obj: StoredResource },
  type: "Normal" | "Warning",
  reason: string,
  note: string,
): void {
  deps.events.record(run.obj, { type, reason, action: "Reconcile", note });
}

/** The `Synced` condition of `status`, if any. */
export const syncedOf = (status: NonNullable<StoredResource["status"]>) =>
  status.conditions?.find((c) => c.type === CONDITION.Synced);
