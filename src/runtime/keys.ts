/**
 * The work queue's keys: one format for every object, namespaced or cluster-scoped (client-go's).
 */

/** Namespace and name of an object; `namespace` is `""` for a cluster-scoped one. */
export interface ObjectRef {
  namespace: string;
  name: string;
}

/** The key of an object: `namespace/name`, or `name` when cluster-scoped. */
export function objectKey(ref: ObjectRef): string {
  return ref.namespace ? `${ref.namespace}/${ref.name}` : ref.name;
}

/** The reference a key was made from: the inverse of {@link objectKey} (names hold no `/`). */
export function parseObjectKey(key: string): ObjectRef {
  const slash = key.indexOf("/");
  return slash < 0
    ? { namespace: "", name: key }
    : { namespace: key.slice(0, slash), name: key.slice(slash + 1) };
}
