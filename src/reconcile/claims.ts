/**
 * Which resource owns a service deployment name. Two resources may claim the same name (in one
 * namespace or in two); the older one keeps it and the other stalls, so the service never gets
 * two writers for one deployment.
 */
import { effectiveName } from "../crd/mapping.ts";
import type { StoredResource } from "./ports.ts";

const keyOf = (o: StoredResource) => `${o.metadata.namespace ?? ""}/${o.metadata.name}`;

/** True when `a` was created before `b` (ties broken by namespace/name, so the order is total). */
function olderThan(a: StoredResource, b: StoredResource): boolean {
  const ta = a.metadata.creationTimestamp ?? "";
  const tb = b.metadata.creationTimestamp ?? "";
  if (ta !== tb) return ta < tb;
  return keyOf(a) < keyOf(b);
}

/** The service name a resource claims. */
export const claimedName = (o: StoredResource): string => effectiveName(o.spec, o.metadata.name);

/**
 * The resource that holds `obj`'s service name before it, if any. Resources being deleted still
 * hold their name until they are gone: their cleanup may still need the deployment.
 */
export function olderClaimant(
  obj: StoredResource,
  all: readonly StoredResource[],
): StoredResource | undefined {
  const name = claimedName(obj);
  let holder: StoredResource | undefined;
  for (const other of all) {
    if (keyOf(other) === keyOf(obj) || claimedName(other) !== name) continue;
    if (olderThan(other, obj) && (!holder || olderThan(other, holder))) holder = other;
  }
  return holder;
}

/** Keys (`namespace/name`) of the other resources claiming the same service name as `obj`. */
export function sameNameKeys(obj: StoredResource, all: readonly StoredResource[]): string[] {
  const name = claimedName(obj);
  return all.filter((o) => keyOf(o) !== keyOf(obj) && claimedName(o) === name).map(keyOf);
}
