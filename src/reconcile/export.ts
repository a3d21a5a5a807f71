/**
 * `spec.export`: a ConfigMap in the resource's namespace that the applications calling the agent
 * server read, its URL and which revision is live (ACK's FieldExport, Azure Service Operator's
 * `operatorSpec.configMaps`). A step of its own after the conclusion: it reads the status just
 * concluded and the deployment observed, and adds to that status its condition `Exported` and
 * `status.exportedConfigMap`; the reconciler calls it only for a resource that has an export or
 * had one, so a resource without one runs nothing of it.
 *
 * - Owned by the resource: a controller ownerReference, so Kubernetes' garbage collector removes
 *   the ConfigMap with the resource, and the export label, which the operator's watch selects:
 *   only exported ConfigMaps are cached, as their metadata (`ConfigMapView`), never their data.
 * - Written only on change: when the cache shows the resource's ConfigMap at the version the
 *   operator last wrote or read, with the digest of the content to export, nothing is read or
 *   written; otherwise (another hand's version, a restart, a cache not synced yet) one GET, then a
 *   create, or a replace of exactly the version read.
 * - Never overwritten: a ConfigMap of that name whose controller is not this resource (none, or
 *   another object) is refused: `Exported=False`, reason `ExportConflict`, and a Warning.
 * - Removing `spec.export`, or naming another ConfigMap, deletes the one the operator wrote
 *   (only while this resource controls it, and exactly the version seen): an application must
 *   not keep reading an address nobody updates. One whose export label was removed by hand,
 *   which the export policy does not let the operator delete, is left, with a Warning
 *   `ExportConflict` saying so once; the ConfigMap now named is written all the same. Only a ConfigMap whose controller reference names
 *   this resource's uid is deleted: one the operator wrote, or one someone with write access to
 *   ConfigMaps in this namespace labelled and gave that controller reference by hand. Deleting
 *   the latter is harmless: that hand could delete it itself, and by naming this resource as its
 *   controller it already handed it to this resource (Kubernetes' garbage collector deletes it
 *   with the resource all the same). Any other ConfigMap, in this namespace or another, is never
 *   deleted.
 * - Without the ConfigMap permissions (a 403), every export fails with `ExportFailed` naming the
 *   missing RBAC; nothing else of the operator waits on ConfigMaps.
 */
import { createHash } from "node:crypto";
import { cutToLength, unprintableIn } from "../api/printable.ts";
import { type ConditionValue, MAX_MESSAGE_LENGTH, putConditions } from "../crd/conventions.ts";
import { API_VERSION, type DeploymentResourceStatus, KIND } from "../crd/schema.ts";
import { MAX_URL_LENGTH } from "../crd/source-schema.ts";
import { Action, type ReconcileResult } from "../runtime/controller.ts";
import { statusEqual } from "../runtime/json.ts";
import type { Conclusion } from "./conclude.ts";
import { recordEvent } from "./notes.ts";
import type {
  ConfigMapsPort,
  ConfigMapView,
  ConfigMapWrite,
  OwnerReference,
  ResourceRef,
  StoredResource,
} from "./ports.ts";
import { EXPORT_CONDITION } from "./reasons.ts";
import type { Decided, ReconcileDeps, Run } from "./run.ts";
import type { Deployment } from "./service-types.ts";

/** The label on every exported ConfigMap: the operator's watch of ConfigMaps selects it. */
export const EXPORT_LABEL = "dms.dev/export";
/** The label's value; the watch's selector is `dms.dev/export=true`. */
export const EXPORT_LABEL_VALUE = "true";
/** Reasons of the `Exported` condition and of the export's events. */
export const EXPORT_REASON = {
  /** The ConfigMap holds what the status says. */
  Exported: "Exported",
  /**
   * A ConfigMap of that name exists and this resource does not control it: never overwritten; or
   * the API server refuses every write of it (immutable, or an exported key in its binaryData).
   */
  ExportConflict: "ExportConflict",
  /** The API server refused a read or write of the ConfigMap (retried). */
  ExportFailed: "ExportFailed",
  /** The ConfigMap the operator wrote was deleted: spec.export went, or names another. */
  ExportRemoved: "ExportRemoved",
} as const;

/** The keys of an exported ConfigMap, in the order its message names them. */
export const EXPORT_KEYS = ["url", "deploymentId", "activeRevisionId", "imageUri", "repoCommitSha"] as const;

/** Longest `deploymentId` or `activeRevisionId` exported (the bound docs/tenant-inputs.md states). */
export const MAX_EXPORTED_ID_LENGTH = 64;

/**
 * While no export can work (the ConfigMap permissions are missing), a resource with one looks
 * again this often: a grant shows within a minute, without a reconcile every poll interval.
 */
export const EXPORT_UNAVAILABLE_RETRY_MS = 60_000;

/** After a write that lost a race (a name just taken, a version just changed), look again this soon. */
export const EXPORT_CONFLICT_RETRY_MS = 1_000;

/** What is exported, and the keys left out (with why). */
export interface ExportData {
  data: Record<string, string>;
  left: string[];
}

/**
 * The data of the ConfigMap: the deployment's custom URL (`url`) when it has one, its id, the
 * active revision, and what that revision deployed once the service reported it for that
 * revision (`imageUri` for images, `repoCommitSha` for repositories). Every value but the URL
 * comes from the concluded status (the status sink checked it); the URL and the two ids, which
 * the status's schema does not bound, are checked here the same way: one outside the printable
 * rule, or longer than a URL the spec accepts (the URL) or {@link MAX_EXPORTED_ID_LENGTH} (an id),
 * is left out and named.
 */
export function exportData(
  status: DeploymentResourceStatus,
  customUrl: string | null | undefined,
): ExportData {
  const data: Record<string, string> = {};
  const left: string[] = [];
  if (customUrl) {
    const character = unprintableIn(customUrl);
    if (character !== undefined) left.push(`url (the service's custom URL holds ${character})`);
    else if (customUrl.length > MAX_URL_LENGTH)
      left.push(`url (the service's custom URL is longer than ${MAX_URL_LENGTH} characters)`);
    else data.url = customUrl;
  }
  const id = (key: "deploymentId" | "activeRevisionId", value: string | undefined): string | undefined => {
    if (!value) return undefined;
    const character = unprintableIn(value);
    if (character !== undefined) left.push(`${key} (the service's id holds ${character})`);
    else if (value.length > MAX_EXPORTED_ID_LENGTH)
      left.push(`${key} (the service's id is longer than ${MAX_EXPORTED_ID_LENGTH} characters)`);
    else data[key] = value;
    return data[key];
  };
  id("deploymentId", status.deploymentId);
  const active = id("activeRevisionId", status.activeRevisionId);
  const revision = status.activeRevision;
  if (active && revision?.id === active) {
    if (revision.imageUri) data.imageUri = revision.imageUri;
    if (revision.repoCommitSha) data.repoCommitSha = revision.repoCommitSha;
  }
  return { data, left };
}

/**
 * The digest of a ConfigMap's data (every key, in order; a value that is no string counts as
 * none): what the cache keeps of an exported ConfigMap, and what the content to export is
 * compared with.
 */
export function exportDigest(data: Readonly<Record<string, unknown>> | undefined): string {
  const hash = createHash("sha256");
  for (const key of Object.keys(data ?? {}).sort()) {
    const value = data?.[key];
    hash.update(JSON.stringify([key, typeof value === "string" ? value : null]));
  }
  return hash.digest("hex");
}

/** The controller ownerReference the resource puts on its ConfigMap. */
export function ownerReferenceOf(obj: StoredResource): OwnerReference {
  return {
    apiVersion: API_VERSION,
    kind: KIND,
    name: obj.metadata.name,
    uid: obj.metadata.uid ?? "",
    controller: true,
    // A foreground deletion of the resource waits for its ConfigMap.
    blockOwnerDeletion: true,
  };
}

/** Whether `obj` is the controller of the ConfigMap `view`. */
export function controls(view: Pick<ConfigMapView, "controller">, obj: StoredResource): boolean {
  return obj.metadata.uid !== undefined && view.controller?.uid === obj.metadata.uid;
}

/** The refusal of a ConfigMap this resource does not control, naming the way out. */
export function conflictMessage(name: string, view: Pick<ConfigMapView, "controller">): string {
  const who = view.controller
    ? `is controlled by ${view.controller.kind}/${view.controller.name}`
    : "has no controller";
  return `ConfigMap ${name} exists and ${who}, not this resource: the operator never overwrites a ConfigMap it does not own; delete that ConfigMap, or set spec.export.configMapName to another name`;
}

/** What writing the export did. */
type Written = "unchanged" | "created" | "updated" | { conflict: string };

/**
 * Writes `write` when the ConfigMap does not hold it yet: nothing when the cache shows it,
 * else one GET, then a create (none of that name) or a replace of exactly the version read (this
 * resource's), or the refusal (another's).
 */
async function writeExport(
  port: ConfigMapsPort,
  obj: StoredResource,
  write: ConfigMapWrite,
  signal: AbortSignal,
): Promise<Written> {
  const ref = { namespace: write.namespace, name: write.name };
  const digest = exportDigest(write.data);
  const cached = port.cached(ref);
  if (cached?.labelled && cached.digest === digest && controls(cached, obj)) return "unchanged";
  const live = await port.read(ref, signal);
  if (!live) {
    await port.create(write, signal);
    return "created";
  }
  if (!controls(live, obj)) return { conflict: conflictMessage(write.name, live) };
  // The cache had not seen this resource's last write yet.
  if (live.labelled && live.digest === digest) return "unchanged";
  try {
    await port.replace(live, write, signal);
  } catch (error) {
    // Its label removed by hand: the export policy lets the operator update only labelled ones.
    if (!live.labelled && port.isForbidden?.(error)) return { conflict: unlabelledMessage(write.name) };
    throw error;
  }
  return "updated";
}

/** Why a ConfigMap this resource controls, whose export label was removed, is not written back. */
export function unlabelledMessage(name: string): string {
  return `ConfigMap ${name} is this resource's but no longer carries the label ${EXPORT_LABEL}: "${EXPORT_LABEL_VALUE}", and the operator updates only ConfigMaps that carry it (the ValidatingAdmissionPolicy dms-operator-export-configmaps): put the label back (kubectl label configmap ${name} ${EXPORT_LABEL}=${EXPORT_LABEL_VALUE}), or delete the ConfigMap (the operator then creates it)`;
}

/**
 * Deletes the ConfigMap `ref` when this resource controls it: whether there was one to delete,
 * or `unlabelled` when its export label was removed by hand and the export policy refused the
 * delete (it lets the operator delete only labelled ConfigMaps): then it is left as it is.
 */
async function removeExport(
  port: ConfigMapsPort,
  obj: StoredResource,
  ref: ResourceRef,
  signal: AbortSignal,
): Promise<boolean | "unlabelled"> {
  const seen = port.cached(ref) ?? (await port.read(ref, signal));
  if (!seen || !controls(seen, obj)) return false;
  try {
    await port.delete(ref, seen, signal);
  } catch (error) {
    if (!seen.labelled && port.isForbidden?.(error)) return "unlabelled";
    throw error;
  }
  return true;
}

/** Why the ConfigMap `name` an export no longer names (`why`) was left: its label was removed. */
export function leftMessage(name: string, why: string): string {
  return `ConfigMap ${name} was left as it is (${why}): it is this resource's, but no longer carries the label ${EXPORT_LABEL}: "${EXPORT_LABEL_VALUE}", and the operator deletes only ConfigMaps that carry it (the ValidatingAdmissionPolicy dms-operator-export-configmaps); delete it (kubectl delete configmap ${name}), or it goes with this resource (its garbage collection)`;
}

/** The condition's value, and what the step records of the ConfigMap it owns. */
interface ExportState {
  /** `status.exportedConfigMap`. */
  exported: string | undefined;
  /** The `Exported` condition: a value, none (removed), or kept as it was. */
  condition: ConditionValue | undefined | "kept";
  retryAfterMs?: number;
}

/**
 * The export step: `concluded` with the ConfigMap of `spec.export` brought in line, the
 * condition `Exported` and `status.exportedConfigMap` set, the status written if that changed
 * it, and a requeue when a write lost a race or failed. Nothing is written while the resource is
 * being deleted (the garbage collector removes the ConfigMap with it), nor without a deployment
 * observed by this reconcile (what was exported stays).
 */
export async function exportStep(
  deps: Pick<ReconcileDeps, "configMaps" | "events" | "pollMs">,
  run: Run,
  decided: Decided,
  concluded: Conclusion,
  signal: AbortSignal,
): Promise<Conclusion> {
  const { obj } = run;
  const previous = obj.status ?? {};
  const had = previous.exportedConfigMap;
  let state: ExportState = { exported: had, condition: "kept" };
  if (!obj.metadata.deletionTimestamp) {
    const observed = decided.observed?.kind === "found" ? decided.observed.deployment : undefined;
    state = await exported(deps, run, observed, concluded.status, signal);
  }
  const status: DeploymentResourceStatus = { ...concluded.status };
  if (state.exported === undefined) delete status.exportedConfigMap;
  else status.exportedConfigMap = state.exported;
  if (state.condition !== "kept") {
    status.conditions = putConditions(
      status.conditions ?? [],
      [{ type: EXPORT_CONDITION, value: state.condition }],
      { now: run.now, observedGeneration: obj.metadata.generation ?? 0 },
    );
    const before = previous.conditions?.find((c) => c.type === EXPORT_CONDITION);
    const after = state.condition;
    // A refusal or a failure is told once, when it starts (the condition says it meanwhile).
    if (after && after.status === "False" && before?.reason !== after.reason)
      recordEvent(deps, run, "Warning", after.reason, after.message);
  }
  const next = state.retryAfterMs === undefined ? concluded.next : sooner(concluded.next, state.retryAfterMs);
  return { status, changed: !statusEqual(previous, status), next };
}

/** `next`, or a requeue after `ms` when that comes first (a retry with backoff stays one). */
function sooner(next: ReconcileResult, ms: number): ReconcileResult {
  if (next.kind === "requeueAfter") return Action.requeueAfter(Math.min(next.ms, ms));
  return next.kind === "done" ? Action.requeueAfter(ms) : next;
}

/** The export brought in line (see {@link exportStep}); API failures become its condition. */
async function exported(
  deps: Pick<ReconcileDeps, "configMaps" | "events" | "pollMs">,
  run: Run,
  observed: Deployment | undefined,
  status: DeploymentResourceStatus,
  signal: AbortSignal,
): Promise<ExportState> {
  const { obj } = run;
  const wanted = obj.spec.export?.configMapName;
  const had = obj.status?.exportedConfigMap;
  const namespace = obj.metadata.namespace ?? "";
  const port = deps.configMaps;
  const unavailable = port ? port.unavailable?.() : "this operator was started without access to ConfigMaps";
  if (!port || unavailable !== undefined) {
    const message = `${unavailable}: spec.export is not written`;
    return {
      exported: had,
      condition: wanted ? failed(message) : undefined,
      ...(wanted ? { retryAfterMs: EXPORT_UNAVAILABLE_RETRY_MS } : {}),
    };
  }
  let exported = had;
  try {
    if (had !== undefined && had !== wanted) {
      const removed = await removeExport(port, obj, { namespace, name: had }, signal);
      const why = wanted ? `spec.export.configMapName now names ${wanted}` : "spec.export was removed";
      if (removed === true)
        recordEvent(deps, run, "Normal", EXPORT_REASON.ExportRemoved, `deleted ConfigMap ${had}: ${why}`);
      // Never deleted, never a reason to hold the export back: said once, the new one written.
      else if (removed)
        recordEvent(deps, run, "Warning", EXPORT_REASON.ExportConflict, leftMessage(had, why));
      exported = undefined;
    }
    if (wanted === undefined) return { exported, condition: undefined };
    // Nothing observed now: what was exported stays, and so does what the condition says.
    if (!observed) return { exported: exported === wanted ? wanted : undefined, condition: "kept" };
    const { data, left } = exportData(status, observed.source_config.custom_url);
    const write: ConfigMapWrite = { namespace, name: wanted, owner: ownerReferenceOf(obj), data };
    const written = await writeExport(port, obj, write, signal);
    if (typeof written === "object")
      return {
        exported: undefined,
        condition: {
          status: "False",
          reason: EXPORT_REASON.ExportConflict,
          message: cutToLength(written.conflict, MAX_MESSAGE_LENGTH),
        },
      };
    const keys = EXPORT_KEYS.filter((k) => data[k] !== undefined);
    if (written !== "unchanged")
      recordEvent(
        deps,
        run,
        "Normal",
        EXPORT_REASON.Exported,
        `${written} ConfigMap ${wanted}: ${keys.join(", ")}`,
      );
    const leftOut = left.length > 0 ? `; left out: ${left.join(", ")}, outside what a value may hold` : "";
    const message = cutToLength(
      `ConfigMap ${wanted} holds ${keys.join(", ") || "no key yet"}${leftOut}`,
      MAX_MESSAGE_LENGTH,
    );
    return { exported: wanted, condition: { status: "True", reason: EXPORT_REASON.Exported, message } };
  } catch (error) {
    if (signal.aborted) throw error;
    if (port.isConflict(error))
      return { exported, condition: "kept", retryAfterMs: EXPORT_CONFLICT_RETRY_MS };
    const said = error instanceof Error ? error.message : String(error);
    if (port.isInvalid?.(error)) {
      const message = `the API server refuses every write of ConfigMap ${wanted}: ${said}; it is immutable, or holds one of the exported keys (${EXPORT_KEYS.join(", ")}) in binaryData: delete it (the operator then creates it), or set spec.export.configMapName to another name`;
      const condition = { status: "False", reason: EXPORT_REASON.ExportConflict, message } as const;
      return { exported, condition: { ...condition, message: cutToLength(message, MAX_MESSAGE_LENGTH) } };
    }
    const rbac = port.isForbidden?.(error)
      ? "; the operator's ServiceAccount needs get, list, watch, create, update and delete on configmaps (the ClusterRole dms-operator of manifests/rbac grants them)"
      : "";
    const message = `the ConfigMap of spec.export could not be written: ${said}${rbac}; retried`;
    return { exported, condition: failed(message), retryAfterMs: deps.pollMs };
  }
}

/** The condition of an export the API server refused. */
function failed(message: string): ConditionValue {
  return {
    status: "False",
    reason: EXPORT_REASON.ExportFailed,
    message: cutToLength(message, MAX_MESSAGE_LENGTH),
  };
}
