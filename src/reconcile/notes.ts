/**
 * What the reconciler tells people: the notes of its Events and the lines of an ObserveOnly
 * drift report. Pure; never a secret value (the planner's summaries hold none).
 */

import { claimedName } from "./claims.ts";
import type { FieldChange, PatchPlan, Plan } from "./plan.ts";
import type { EventsPort, StoredResource } from "./ports.ts";
import { CONDITION } from "./reasons.ts";
import type { RevisionSent } from "./run.ts";
import type { Deployment } from "./service-types.ts";

/** Note of the `Created` event. */
export function createdNote(deployment: Deployment): string {
  return `created the service's deployment ${deployment.id} (${deployment.name})`;
}

/** Note of the `Adopted` event. */
export function adoptedNote(deployment: Deployment): string {
  return `adopted the service's deployment ${deployment.id}`;
}

/** Note of the event of a PATCH: what changed, and whether it made a new revision. */
export function updateNote(decision: PatchPlan): string {
  const revision = decision.newRevision ? " (new revision)" : "";
  return `updated the service's deployment${revision}: ${decision.summary.join("; ")}`;
}

/**
 * Whether `obj`'s spec, at its generation, was already applied in full (`status.appliedGeneration`;
 * before that field, `Synced=True` for it): a difference the service shows now was made outside
 * this resource. An edit whose first attempt failed (a 429, a 5xx) was never applied, although the
 * failure's status write already carried the generation in `observedGeneration`.
 */
export function generationApplied(obj: Pick<StoredResource, "metadata" | "status">): boolean {
  const generation = obj.metadata.generation;
  const applied = obj.status?.appliedGeneration;
  if (applied !== undefined) return applied === generation;
  const synced = obj.status?.conditions?.find((c) => c.type === CONDITION.Synced);
  return synced?.status === "True" && synced.observedGeneration === generation;
}

/**
 * Reason of the event of a PATCH: `DriftCorrected` when this generation of the spec was already
 * applied ({@link generationApplied}: someone changed the service since), `Updated` otherwise. A
 * secrets-only PATCH is a rotation of a Kubernetes Secret, hence `Updated`.
 */
export function updateReason(obj: StoredResource, decision: PatchPlan, adopted: boolean): string {
  if (adopted) return "Updated";
  const secretsOnly = decision.changes.every((c) => c.group === "secrets");
  return generationApplied(obj) && !secretsOnly ? "DriftCorrected" : "Updated";
}

/** The spec paths of `changes`, each once, in order: what differed, never a value. */
export function changedFields(changes: readonly FieldChange[]): string[] {
  return [...new Set(changes.map((c) => c.field))];
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

/** The note of the `Redeployed` event: which revision, why, how, and what else was sent. */
export function redeployedNote(
  sent: Extract<RevisionSent, { kind: "redeployed" }>,
  decision: PatchPlan,
): string {
  const how =
    sent.behaviour === "new-revision"
      ? `the service made revision ${sent.live} from it`
      : "the service switches the active revision back to it";
  const others = decision.changes.filter((c) => c.group !== "source_revision_config").map((c) => c.line);
  const also = others.length > 0 ? `; also updated: ${others.join("; ")}` : "";
  return `redeployed revision ${sent.revisionId} instead of building a new one (no build): ${sent.reason}; ${how}${also}`;
}

/** The `Synced` condition of `status`, if any. */
export const syncedOf = (status: NonNullable<StoredResource["status"]>) =>
  status.conditions?.find((c) => c.type === CONDITION.Synced);
