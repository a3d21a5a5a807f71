/**
 * Which resource owns a service deployment name. Two resources may claim the same name (in one
 * namespace or in two); the older one keeps it and the other stalls, so the service never gets
 * two writers for one deployment. `plan` applies the same rule to the cluster's resources.
 */
import { effectiveName } from "../crd/mapping.ts";
import type { DeploymentSpec } from "../crd/schema.ts";
import { objectKey } from "../runtime/keys.ts";

/**
 * What the rule reads of a resource. A {@link StoredResource} is one; so is a resource `plan`
 * reads from a file, which has no `creationTimestamp` until it is applied.
 */
export interface Claimant {
  metadata: { name: string; namespace?: string; creationTimestamp?: string };
  spec: DeploymentSpec;
}

const keyOf = (o: Claimant) => objectKey({ namespace: o.metadata.namespace ?? "", name: o.metadata.name });

/**
 * True when `a` was created before `b` (ties broken by namespace/name, so the order is total).
 * A resource without a `creationTimestamp` is not created yet: younger than any that has one.
 */
function olderThan(a: Claimant, b: Claimant): boolean {
  const ta = a.metadata.creationTimestamp;
  const tb = b.metadata.creationTimestamp;
  if (ta !== tb) {
    if (ta === undefined) return false;
    if (tb === undefined) return true;
    return ta < tb;
  }
  return keyOf(a) < keyOf(b);
}

/** The service name a resource claims. */
export const claimedName = (o: Claimant): string => effectiveName(o.spec, o.metadata.name);

/** The cache index of resources by the name they claim, so a claim check reads only its rivals. */
export const CLAIM_INDEX = "claimedName";

/** The index values of {@link CLAIM_INDEX}. */
export const claimIndexer = (o: Claimant): string[] => [claimedName(o)];

/**
 * The resource that holds `obj`'s service name before it, if any, among `all` (every resource
 * claiming the name will do: others are skipped). Resources being deleted still hold their name
 * until they are gone: their cleanup may still need the deployment.
 */
export function olderClaimant<T extends Claimant>(obj: Claimant, all: readonly T[]): T | undefined {
  const name = claimedName(obj);
  let holder: T | undefined;
  for (const other of all) {
    if (keyOf(other) === keyOf(obj) || claimedName(other) !== name) continue;
    if (olderThan(other, obj) && (!holder || olderThan(other, holder))) holder = other;
  }
  return holder;
}

/** Keys (`namespace/name`) of the other resources claiming the same service name as `obj`. */
export function sameNameKeys(obj: Claimant, all: readonly Claimant[]): string[] {
  const name = claimedName(obj);
  return all.filter((o) => keyOf(o) !== keyOf(obj) && claimedName(o) === name).map(keyOf);
}
