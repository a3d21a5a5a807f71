/**
 * The slice of Kubernetes object metadata the adapters rely on, and the checks that turn a JSON
 * value from the API server into it (validate at the edge, then trust the types): what a cached
 * object keeps and which change of it is more than a status write, a custom resource's decode
 * and a Deployment resource's, whose values many resources share are held once.
 */
import { CONNECTION_FINALIZER } from "../crd/connection-schema.ts";
import {
  ANNOTATION_PAUSED,
  ANNOTATION_REBUILD_REQUESTED_AT,
  ANNOTATION_RECONCILE_INTERVAL,
  ANNOTATION_RECONCILE_REQUESTED_AT,
  ANNOTATION_ROLLOUT_NOW,
  type DeploymentResource,
  type DeploymentResourceStatus,
  FINALIZER,
} from "../crd/schema.ts";
import { keptAnnotationValue } from "../reconcile/inputs.ts";
import {
  Interner,
  internFields,
  isRecord,
  SharedObjects,
  shareEqualString,
  shareFrom,
} from "../runtime/json.ts";
import type { ObjectRef } from "../runtime/queue-records.ts";
import { DRAIN_LABEL, OWNER_LABEL } from "../sharding/labels.ts";
import { UnnamableObjectError } from "./errors.ts";

/** Metadata fields read by the adapters. Optional ones may be absent on the wire. */
export interface ObjectMeta {
  name: string;
  namespace?: string;
  uid?: string;
  resourceVersion: string;
  generation?: number;
  creationTimestamp?: string;
  deletionTimestamp?: string;
  finalizers?: string[];
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}

/** Any Kubernetes object: only its metadata is known here. */
export interface KubeObject {
  apiVersion?: string;
  kind?: string;
  metadata: ObjectMeta;
}

export function refOf(obj: KubeObject): ObjectRef {
  return { namespace: obj.metadata.namespace ?? "", name: obj.metadata.name };
}

const isStringArray = (value: unknown): value is string[] =>
  Array.isArray(value) && value.every((v) => typeof v === "string");

const isStringMap = (value: unknown): value is Record<string, string> =>
  isRecord(value) && Object.values(value).every((v) => typeof v === "string");

/**
 * True when `value` is an object whose metadata has a string name and resourceVersion and, where
 * present, correctly typed namespace, uid, generation, finalizers, labels and annotations.
 */
export function isKubeObject(value: unknown): value is KubeObject {
  if (!isRecord(value) || !isRecord(value.metadata)) return false;
  const m = value.metadata;
  return (
    typeof m.name === "string" &&
    typeof m.resourceVersion === "string" &&
    (m.namespace === undefined || typeof m.namespace === "string") &&
    (m.uid === undefined || typeof m.uid === "string") &&
    (m.generation === undefined || typeof m.generation === "number") &&
    (m.finalizers === undefined || isStringArray(m.finalizers)) &&
    (m.labels === undefined || isStringMap(m.labels)) &&
    (m.annotations === undefined || isStringMap(m.annotations))
  );
}

/**
 * The annotations the operator reads on its own resources (see `reconcile/inputs.ts`): the
 * only ones a cached resource keeps.
 */
export const READ_ANNOTATIONS: readonly string[] = [
  ANNOTATION_PAUSED,
  ANNOTATION_RECONCILE_INTERVAL,
  ANNOTATION_RECONCILE_REQUESTED_AT,
  ANNOTATION_ROLLOUT_NOW,
  ANNOTATION_REBUILD_REQUESTED_AT,
];

/**
 * The metadata a cached resource keeps: the fields the operator reads (name, namespace, uid,
 * resourceVersion, generation, creation and deletion times, finalizers) and of the annotations
 * only {@link READ_ANNOTATIONS}, of the labels only {@link READ_LABELS} (the shard labels, at most
 * 63 characters each by the API server's own rule). Everything else a tenant may put there goes
 * at decode: other annotations (up to 256 KiB on each object, `kubectl apply`'s copy of the
 * manifest among them), other labels (label selectors are applied by the API server, never to
 * the cache), managedFields, ownerReferences. A kept value longer than `MAX_ANNOTATION_VALUE` becomes
 * `sha256:<hex>`: still a different value when the original changes (what `reconcile-requested-at`
 * and `rollout-now` need), and never `true` or a duration. Finalizers are kept as
 * {@link keptFinalizers} says. So one cached resource's metadata is bounded by the number of its
 * finalizers (a pointer each), whatever its annotations, labels and finalizer names weigh.
 *
 * Safe because the operator never writes metadata it read: its writes are a status apply naming
 * only name, namespace and resourceVersion, JSON Patches of single finalizer entries, and merge
 * patches of the shard labels alone.
 */
export function keptMetadata(meta: ObjectMeta): ObjectMeta {
  const { name, resourceVersion, namespace, uid, generation, creationTimestamp } = meta;
  // What every object of a namespace has, in one literal (with the finalizers when it has them):
  // V8 then holds the fields in the object itself, where fields added one by one go to an array
  // of their own (64 bytes a cached object; 40 for the finalizers alone).
  const finalizers = meta.finalizers === undefined ? undefined : keptFinalizers(meta.finalizers);
  const kept: ObjectMeta =
    namespace !== undefined &&
    uid !== undefined &&
    generation !== undefined &&
    typeof creationTimestamp === "string"
      ? finalizers !== undefined
        ? { name, resourceVersion, namespace, uid, generation, creationTimestamp, finalizers }
        : { name, resourceVersion, namespace, uid, generation, creationTimestamp }
      : { name, resourceVersion };
  if (kept.uid === undefined) {
    if (namespace !== undefined) kept.namespace = namespace;
    if (uid !== undefined) kept.uid = uid;
    if (generation !== undefined) kept.generation = generation;
    if (typeof creationTimestamp === "string") kept.creationTimestamp = creationTimestamp;
  }
  if (typeof meta.deletionTimestamp === "string") kept.deletionTimestamp = meta.deletionTimestamp;
  if (finalizers !== undefined && kept.finalizers === undefined) kept.finalizers = finalizers;
  const annotations = readAnnotations(meta.annotations);
  if (annotations) kept.annotations = annotations;
  const labels = readLabels(meta.labels);
  if (labels) kept.labels = labels;
  return kept;
}

/** The labels the operator reads on its own resources: the shard labels (`--sharded`). */
const READ_LABELS: readonly string[] = [OWNER_LABEL, DRAIN_LABEL];

/**
 * The label `key` of `labels`, if it is one: a label value is at most 63 characters; anything
 * longer did not come from an API server.
 */
export function labelValue(labels: Record<string, string> | undefined, key: string): string | undefined {
  const value = labels && Object.hasOwn(labels, key) ? labels[key] : undefined;
  return value !== undefined && value.length <= 63 ? value : undefined;
}

function readLabels(all: Record<string, string> | undefined): Record<string, string> | undefined {
  if (!all) return undefined;
  let kept: Record<string, string> | undefined;
  for (const key of READ_LABELS) {
    const value = labelValue(all, key);
    if (value === undefined) continue;
    kept ??= {};
    kept[key] = value;
  }
  return kept;
}

/** The finalizers the operator writes: the only names a cached object keeps. */
const OUR_FINALIZERS: ReadonlySet<string> = new Set([FINALIZER, CONNECTION_FINALIZER]);

/**
 * `finalizers` as a cached object keeps them: the same length, the operator's own names as
 * given, every other name as "" (one shared string). A tenant may put thousands of names of up
 * to 317 characters on an object (1.5 MiB); the operator only asks whether its own is there and
 * at which index (the JSON Patch that removes it names the index, under the object's
 * resourceVersion, so the other entries' names are never needed), and whether the list changed
 * in length. A change of another controller's name alone is thus not seen: none concerns it.
 */
function keptFinalizers(finalizers: readonly string[]): string[] {
  return finalizers.map((f) => (OUR_FINALIZERS.has(f) ? f : ""));
}

function readAnnotations(all: Record<string, string> | undefined): Record<string, string> | undefined {
  if (!all) return undefined;
  let kept: Record<string, string> | undefined;
  for (const key of READ_ANNOTATIONS) {
    const value = Object.hasOwn(all, key) ? all[key] : undefined;
    if (value === undefined) continue;
    kept ??= {};
    kept[key] = keptAnnotationValue(value);
  }
  return kept;
}

/**
 * True when an update is more than a status write: spec, annotations, labels (but the shard owner
 * label), finalizers, deletion.
 * The operator's own finalizer being added is not: the reconcile that adds it goes on to act, and
 * another one at once would only repeat it (a refused create sent twice).
 */
export function specOrMetaChanged(old: KubeObject, o: KubeObject): boolean {
  const a = old.metadata;
  const b = o.metadata;
  return (
    a.generation !== b.generation ||
    a.deletionTimestamp !== b.deletionTimestamp ||
    JSON.stringify(a.annotations ?? {}) !== JSON.stringify(b.annotations ?? {}) ||
    !sameLabelsButOwner(a.labels, b.labels) ||
    (JSON.stringify(a.finalizers ?? []) !== JSON.stringify(b.finalizers ?? []) &&
      !onlyOursAdded(a.finalizers ?? [], b.finalizers ?? []))
  );
}

/**
 * Whether two label sets are the same but for the shard owner label: a resource relabelled for
 * the replica that holds it (a moved or inherited one, reconciled already while it came) is not
 * reconciled again for its label alone. The drain label still counts (its lifting resumes it).
 */
function sameLabelsButOwner(
  a: Readonly<Record<string, string>> | undefined,
  b: Readonly<Record<string, string>> | undefined,
): boolean {
  // Every status write's event comes here: the common case compares as before, no copy made.
  if (JSON.stringify(a ?? {}) === JSON.stringify(b ?? {})) return true;
  if (a?.[OWNER_LABEL] === b?.[OWNER_LABEL]) return false;
  const without = (labels: Readonly<Record<string, string>> | undefined) => {
    const { [OWNER_LABEL]: _owner, ...rest } = labels ?? {};
    return JSON.stringify(rest);
  };
  return without(a) === without(b);
}

/** Whether `after` is `before` with the operator's finalizer added and nothing else changed. */
function onlyOursAdded(before: readonly string[], after: readonly string[]): boolean {
  if (before.includes(FINALIZER) || after.length !== before.length + 1) return false;
  return JSON.stringify(after.filter((f) => f !== FINALIZER)) === JSON.stringify(before);
}

/**
 * Checks the object metadata and that `spec` is an object. The spec's fields are not re-validated:
 * the API server already checked them against the CRD schema generated from the same TypeBox
 * schema, and skipping an object here would also block its deletion (its finalizer would never go).
 *
 * Keeps only the metadata the operator reads ({@link keptMetadata}): annotations and labels a
 * tenant may fill (256 KiB of annotations on each object, `kubectl apply`'s copy of the manifest
 * among them) and `metadata.managedFields` would otherwise be held for every
 * cached resource. Every write the operator makes is a patch, so a dropped field is never written
 * back. `raw` is not modified.
 */
export function decodeCustomResource<T extends KubeObject>(raw: unknown): T | undefined {
  if (!isKubeObject(raw) || !isRecord((raw as { spec?: unknown }).spec)) return undefined;
  return { ...raw, metadata: keptMetadata(raw.metadata) } as unknown as T;
}

/** A Deployment resource as read from the API server: metadata name and resourceVersion are known. */
export type DeploymentObject = DeploymentResource & KubeObject;

/**
 * The strings shared by the Deployment resources decoded in this process (see {@link Interner}),
 * one table for every cache and command of the process, as values repeat across them. 1,024
 * strings hold the values many resources share; the rest are met once.
 */
const DEPLOYMENT_STRINGS = new Interner(1024);

/**
 * The objects and arrays shared by the Deployment resources decoded in this process (see
 * {@link SharedObjects}): a source configuration, a condition, the finalizer list that many
 * resources hold alike, held once and frozen.
 */
const DEPLOYMENT_OBJECTS = new SharedObjects(1024);

/**
 * A Deployment resource from the wire (see {@link decodeCustomResource}, which checks it and drops
 * what the operator never reads), undefined when unusable. The values most resources share
 * (apiVersion, kind, namespace, source, tenant, connection, the digest of no secrets, the reasons
 * and messages of settled conditions, the times to the second) are held once rather than once per
 * cached resource, in {@link DEPLOYMENT_STRINGS}, and so are the objects many share alike (the
 * source configuration, a condition set in the same second and the list of them, the finalizer
 * list), frozen, in {@link DEPLOYMENT_OBJECTS}. `raw` is not modified.
 */
export function decodeDeployment(raw: unknown): DeploymentObject | undefined {
  const strings = DEPLOYMENT_STRINGS;
  const objects = DEPLOYMENT_OBJECTS;
  const decoded = decodeCustomResource<DeploymentObject>(raw);
  if (!decoded) return undefined;
  internFields(strings, decoded.metadata, ["namespace", "creationTimestamp"]);
  if (Array.isArray(decoded.metadata.finalizers))
    decoded.metadata.finalizers = objects.of(decoded.metadata.finalizers);
  internFields(strings, decoded, ["apiVersion", "kind"]);
  const spec = internFields(strings, { ...decoded.spec }, ["source"]);
  if (isRecord(spec.sourceConfig)) spec.sourceConfig = objects.of(spec.sourceConfig);
  decoded.spec = spec;
  if (isRecord(decoded.status)) {
    const status = internFields(strings, { ...decoded.status }, [
      "connection",
      "tenantId",
      "remoteStatus",
      "latestRevisionStatus",
      "imageVersion",
      "appliedSecretsHash",
      "appliedSecretVersions",
      "createRequestedAt",
      "createdAt",
      "rolloutStartedAt",
    ]);
    // Once a rollout is done the active revision is the latest: one string for both.
    shareEqualString(status, "latestRevisionId", "activeRevisionId");
    // A settled resource's conditions say what every one says: one list for all set in that second.
    if (Array.isArray(status.conditions))
      status.conditions = objects.of(
        status.conditions.map((c) =>
          isRecord(c)
            ? objects.of(internFields(strings, { ...c }, ["reason", "message", "lastTransitionTime"]))
            : c,
        ),
      );
    shareRevisionStrings(status, decoded.spec.sourceRevisionConfig, strings);
    decoded.status = status;
  }
  return decoded;
}

/**
 * The live revision and the revision history repeat what the status and the spec already hold
 * (the active revision's id, the image or ref it deployed, the commit) and what every resource
 * shares (the digest of no secrets, the times to the second): held once, in place. At 10,000
 * resources that is about 3 MiB of the watch cache.
 */
function shareRevisionStrings(
  status: DeploymentResourceStatus,
  config: DeploymentObject["spec"]["sourceRevisionConfig"],
  strings: Interner,
): void {
  const ids = [status.activeRevisionId, status.latestRevisionId];
  const artifacts = [config?.imageUri, config?.repoRef, status.repoCommitSha];
  const share = (entry: Record<string, unknown>) => {
    shareFrom(entry, "id", ids);
    shareFrom(entry, "imageUri", artifacts);
    shareFrom(entry, "repoRef", artifacts);
    shareFrom(entry, "repoCommitSha", artifacts);
  };
  if (isRecord(status.activeRevision)) {
    const active = internFields(strings, { ...status.activeRevision }, ["deployedAt"]);
    share(active);
    status.activeRevision = active;
  }
  if (Array.isArray(status.revisionHistory))
    status.revisionHistory = status.revisionHistory.map((e) => {
      if (!isRecord(e)) return e;
      const entry = { ...e };
      share(entry);
      shareFrom(entry, "secretsHash", [status.appliedSecretsHash]);
      // The digest of no secrets (or of the same shared ones) is every such resource's.
      if (entry.secretsHash !== status.appliedSecretsHash) internFields(strings, entry, ["secretsHash"]);
      internFields(strings, entry, ["redeployedAt"]);
      return entry;
    });
}

/** A resource type: `group` is `""` for the core API. */
export interface ResourceType {
  group: string;
  version: string;
  plural: string;
}

/** The collection path of `type` in `namespace` (all namespaces when `undefined`). */
export function collectionPath(type: ResourceType, namespace?: string): string {
  const root = type.group === "" ? `/api/${type.version}` : `/apis/${type.group}/${type.version}`;
  return namespace
    ? `${root}/namespaces/${encodeURIComponent(namespace)}/${type.plural}`
    : `${root}/${type.plural}`;
}

/**
 * Whether `name` can be one object's segment of an API path, as the API server requires of every
 * object name: not empty, not `.` or `..` (which a URL resolves to the collection or the
 * namespace: a GET of one Secret would read them all), without `/` or `%`.
 */
export function isPathSegmentName(name: string): boolean {
  return name !== "" && name !== "." && name !== ".." && !/[/%]/.test(name);
}

/**
 * The path of the object `ref` of `type` (cluster-scoped when `ref.namespace` is empty or absent).
 * Throws an {@link UnnamableObjectError} for a name no object can have ({@link isPathSegmentName}):
 * a tenant writes the names of its references freely, and `.` or `..` would send the request to
 * the collection or the namespace instead.
 */
export function itemPath(type: ResourceType, ref: { namespace?: string; name: string }): string {
  if (!isPathSegmentName(ref.name)) throw new UnnamableObjectError(type, ref.name);
  return `${collectionPath(type, ref.namespace || undefined)}/${encodeURIComponent(ref.name)}`;
}

/**
 * True when resourceVersion `a` is a later etcd revision than `b` (both decimal numbers); false when
 * either is not one (a server may use other versions: then no order is assumed).
 */
export function isNewerVersion(a: string, b: string): boolean {
  if (!/^\d+$/.test(a) || !/^\d+$/.test(b)) return false;
  return a.length !== b.length ? a.length > b.length : a > b;
}
