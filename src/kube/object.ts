/**
 * The slice of Kubernetes object metadata the adapters rely on, and the checks that turn a JSON
 * value from the API server into it (validate at the edge, then trust the types).
 */
import { isRecord } from "../json.ts";
import { type ObjectRef, objectKey } from "../runtime/keys.ts";

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

// The cache and the work queue share one key format.
export { type ObjectRef, objectKey };

/** The {@link ObjectRef} of an object. */
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

/** The `metadata.resourceVersion` of a list answer, or `undefined` when it is missing. */
export function listMeta(value: unknown): {
  resourceVersion: string | undefined;
  continue: string | undefined;
} {
  const metadata = isRecord(value) && isRecord(value.metadata) ? value.metadata : {};
  return {
    resourceVersion: typeof metadata.resourceVersion === "string" ? metadata.resourceVersion : undefined,
    continue:
      typeof metadata.continue === "string" && metadata.continue !== "" ? metadata.continue : undefined,
  };
}

/** The `items` of a list answer (empty when absent). */
export function listItems(value: unknown): unknown[] {
  return isRecord(value) && Array.isArray(value.items) ? value.items : [];
}
