/**
 * The cleanup arm of a reconcile: a resource being deleted, whatever its connection's state. Its
 * finalizer (kept by the reconciler exactly while `cleansUpOnDelete`, decide.ts) holds the deletion
 * while the service's deployment must go first.
 *
 * `deletionPolicy: Delete` removes the service's deployment this resource owns (the one its
 * status records, or the one its pending create made) and waits until it is gone; within the
 * create grace of its own create, a deployment not listed yet is waited for, not given up. A
 * deployment that merely carries the name is never deleted: it may be another resource's or
 * someone else's.
 * Nor is one the status records that is not this resource's: it carries another name, or an
 * older resource holds the name. Then nothing is deleted, a `NotOwned` warning says so, and the
 * resource is let go: a forged status must not be able to hold its deletion (and with it its
 * namespace's) for ever.
 */
import { cutToBytes, cutToLength, printableNote } from "../api/printable.ts";
import { MAX_MESSAGE_LENGTH } from "../crd/conventions.ts";
import { FINALIZER } from "../crd/schema.ts";
import { Action, type ReconcileResult } from "../runtime/controller.ts";
import { pendingCreateSince } from "./create.ts";
import { cleansUpOnDelete } from "./decide.ts";
import { claimedName, holderOf } from "./inputs.ts";
import { isBeingDeleted } from "./live-revision.ts";
import { describeResource, notOwnedMessage, recordEvent } from "./notes.ts";
import { listingGuard, lookUp } from "./observe.ts";
import type { StoredResource } from "./ports.ts";
import { REASON } from "./reasons.ts";
import type { Decided, ReconcileDeps, Run } from "./run.ts";
import type { ServiceSession, SessionLookup } from "./service/session.ts";
import type { Deployment } from "./service-types.ts";

/** Where a cleanup ended: done (`result`), or a decision for the status to conclude. */
export type CleanupStep = { result: ReconcileResult } | { decided: Decided };

/**
 * Cleans up after `run`'s resource, being deleted, through its `connection`:
 * - refused (a namespace selector): through a connection it may not use it owns nothing, and
 *   deleting through it is exactly what the selector forbids: the finalizer goes without a call;
 * - not checked since the start yet: its check enqueues this resource again;
 * - unusable (missing, not Ready, another namespace's): a resource with nothing to clean up on the
 *   service (Orphan, or no deployment id nor pending create in its status) lets its finalizer go;
 *   one that has keeps it, and says so, until the connection is usable (or its deletionPolicy is
 *   set to Orphan, see {@link heldDeletion});
 * - ready: the deployment is deleted, then the finalizer removed.
 */
export async function cleanup(
  deps: ReconcileDeps,
  run: Run,
  connection: SessionLookup,
  signal: AbortSignal,
): Promise<CleanupStep> {
  switch (connection.kind) {
    case "refused":
      return { result: await letRefusedGo(deps, run, connection.message, signal) };
    case "pending":
      return { result: Action.done() };
    case "unavailable": {
      // Nothing to clean up on the service: the deletion needs no connection. Nor does a resource
      // that never recorded a deployment or a pending create: with a connection too, it would be
      // let go without a call (see `owned`).
      if (!deletesOnService(run.obj) || !ownsAnything(run.obj)) return finalize(deps, run, undefined, signal);
      const message = heldDeletion(
        run.obj,
        `${connection.message}; the service's deployment is deleted once the connection is usable`,
      );
      const stalled = connection.retrying !== true;
      return {
        decided: { outcome: { kind: "failed", reason: REASON.ConnectionNotReady, message, stalled } },
      };
    }
    case "ready":
      return finalize(deps, { ...run, session: connection.session }, connection.session, signal);
  }
}

/**
 * Whether deleting `obj` deletes its deployment on the service: under `deletionPolicy: Delete`,
 * unless `spec.deletionProtection` is still true. Such a resource can be deleted only past the
 * deletion protection policy (its CRD deleted, or the policy not installed): never on purpose, so
 * its deployment is left in place, as under `Orphan`.
 */
export function deletesOnService(obj: StoredResource): boolean {
  return cleansUpOnDelete(obj) && obj.spec.deletionProtection !== true;
}

/**
 * `cause`, the reason `obj`'s deletion waits (its connection unusable, the service failing or
 * still deleting), and how its user ends the wait on purpose: `deletionPolicy: Orphan` leaves the
 * service's deployment in place and lets the finalizer go at the next reconcile, as under Orphan.
 * Within a condition's message, or with `maxBytes` an Event's note (1,024 bytes).
 */
export function heldDeletion(obj: StoredResource, cause: string, maxBytes?: number): string {
  const { name, namespace } = obj.metadata;
  const patch = `kubectl patch dmsd ${name}${namespace ? ` -n ${namespace}` : ""} --type merge -p '{"spec":{"deletionPolicy":"Orphan"}}'`;
  const hint = `; the resource's deletion waits until the service's deployment is deleted: to leave that deployment on the service and let the resource go, set spec.deletionPolicy to Orphan: ${patch}`;
  // A long cause (a service's error) is cut, never the way out: a note's cause as the recorder
  // shows it (a control taken out is a U+FFFD of 3 bytes, more than the control took), so that
  // what it cuts to the note's bytes is none of the way out.
  const shown =
    maxBytes === undefined
      ? cutToLength(cause, MAX_MESSAGE_LENGTH - hint.length)
      : cutToBytes(printableNote(cause), maxBytes - Buffer.byteLength(hint));
  return `${shown}${hint}`;
}

/** Whether `obj`'s status records a deployment of its own, or a create that may have made one. */
function ownsAnything(obj: StoredResource): boolean {
  return Boolean(obj.status?.deploymentId || obj.status?.createRequestedAt);
}

/** A resource refused its connection lets its finalizer go without a call to the service. */
async function letRefusedGo(
  deps: ReconcileDeps,
  run: Run,
  message: string,
  signal: AbortSignal,
): Promise<ReconcileResult> {
  if (!(run.obj.metadata.finalizers ?? []).includes(FINALIZER)) return Action.gone();
  const id = run.obj.status?.deploymentId;
  recordEvent(
    deps,
    run,
    "Warning",
    REASON.ConnectionNotAllowed,
    `${message}. Deleted without a call to the service: a resource refused its connection owns nothing there${id ? `, so the service's deployment ${id} is left in place` : ""}`,
  );
  await deps.resources.removeFinalizer(run.obj, FINALIZER, signal);
  return Action.gone();
}

/**
 * Deletes the deployment `run`'s resource owns (see the module comment) through `session`, then
 * removes the finalizer once it is gone. Without a session only a resource that cleans nothing
 * up gets here (see {@link cleanup}).
 */
async function finalize(
  deps: ReconcileDeps,
  run: Run,
  session: ServiceSession | undefined,
  signal: AbortSignal,
): Promise<CleanupStep> {
  const { obj } = run;
  if (!(obj.metadata.finalizers ?? []).includes(FINALIZER)) return { result: Action.gone() };
  if (cleansUpOnDelete(obj) && !deletesOnService(obj)) {
    const id = obj.status?.deploymentId;
    const note = `deleted while spec.deletionProtection is true, which only a deletion past the deletion protection policy can do (its CRD deleted, or the policy not installed): the service's deployment${id ? ` ${id}` : ""} is left in place, as under deletionPolicy Orphan`;
    recordEvent(deps, run, "Warning", REASON.DeletionProtected, note);
  } else if (session && deletesOnService(obj)) {
    const holder = holderOf(deps.resources, obj);
    const recorded = obj.status?.deploymentId;
    if (holder && recorded) {
      const message = `${describeResource(obj)} records the service's deployment ${recorded} in status.deploymentId, but the name "${claimedName(obj)}" on its connection is held by the older resource ${describeResource(holder)}: not deleting it, and letting ${describeResource(obj)} go`;
      recordEvent(deps, run, "Warning", REASON.NotOwned, message);
    } else if (!holder) {
      const missed = listingGuard({ ...run, session });
      if (missed) {
        const message = heldDeletion(
          obj,
          `${missed.message}; the service's deployment is deleted once one does`,
        );
        return { decided: { outcome: { ...missed, message } } };
      }
      const found = await owned(session, obj, signal);
      // Not for a record that names someone else's deployment (a forged status holds nothing).
      const since = found.deployment || found.disowned ? undefined : pendingCreateSince(obj.status ?? {});
      // Either side of now: a time forged far ahead must not hold the deletion for ever.
      const age = since === undefined ? Number.NaN : run.now.getTime() - Date.parse(since);
      if (Math.abs(age) < deps.createGraceMs) {
        // A create of its own may not be listed yet: let go now, the deployment it made would
        // stay on the service. Looked for again until the create grace has passed.
        const message = "waiting for the created deployment to be listed, to delete it";
        return { decided: { outcome: { kind: "deleting", message } } };
      }
      if (found.disowned) {
        const letGo = found.deployment ? "" : `, and letting ${describeResource(obj)} go`;
        const note = notOwnedMessage(obj, found.disowned, `not deleting it${letGo}`);
        recordEvent(deps, run, "Warning", REASON.NotOwned, note);
      }
      if (found.deployment) {
        // Asked once: a deployment already being deleted is not asked again on every poll.
        if (!isBeingDeleted(found.deployment.status)) {
          await session.service.delete(found.deployment.id, signal, {
            deleteTracingProject: obj.spec.deleteTracingProject === true,
          });
          const note = `deleting the service's deployment ${found.deployment.id}`;
          recordEvent(deps, run, "Normal", "Deleting", note);
        }
        const observed = { kind: "found", deployment: found.deployment } as const;
        // The service may take its time, or never confirm: the condition says how to stop waiting.
        const deleting = heldDeletion(obj, `deleting the service's deployment ${found.deployment.id}`);
        // Found, its create is settled: from now on the id the status records answers alone (else,
        // once the deployment is gone, the name would be looked up again and a deployment created
        // anew under it deleted too), and a miss is its deletion done, not a listing that lags.
        const { createRequestedAt, createdAt } = obj.status ?? {};
        const record =
          createRequestedAt || createdAt ? { record: { createRequestedAt: null, createdAt: null } } : {};
        return { decided: { outcome: { kind: "deleting", message: deleting }, observed, ...record } };
      }
      if (recorded && !found.disowned) {
        // The lookup found it gone: the snapshot forgets it too.
        session.snapshot.forget(recorded);
        recordEvent(deps, run, "Normal", "Deleted", `the service's deployment ${recorded} is gone`);
      }
    }
  }
  await deps.resources.removeFinalizer(obj, FINALIZER, signal);
  return { result: Action.gone() };
}

/**
 * The deployment `obj` owns: by its recorded id, when that deployment carries the name `obj`
 * claims (else it is `disowned`), or by name while its create is pending. The caller has
 * checked that no older resource holds the name.
 */
async function owned(
  session: ServiceSession,
  obj: StoredResource,
  signal: AbortSignal,
): Promise<{ deployment: Deployment | null; disowned?: Deployment }> {
  const id = obj.status?.deploymentId;
  const byId = id ? await session.service.getById(id, signal) : undefined;
  if (byId && byId.name === claimedName(obj)) return { deployment: byId };
  const disowned = byId ? { disowned: byId } : {};
  // Otherwise only a create of ours still pending (its answer lost, or not listed yet) can
  // have made the deployment that carries the name.
  if (!obj.status?.createRequestedAt) return { deployment: null, ...disowned };
  const target = { deploymentId: undefined, name: claimedName(obj), live: true, liveName: true };
  const found = await lookUp(session.service, session.snapshot, target, signal);
  return { deployment: found.deployment, ...disowned };
}
