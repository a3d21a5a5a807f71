/**
 * Which resource owns a service deployment name. Two resources may claim the same name on one
 * connection (in one namespace or in two); the older one keeps it and the other stalls, so the
 * service never gets two writers for one deployment. The same name on two connections (two
 * tenants) is no conflict. `plan` applies the same rule to the cluster's resources.
 *
 * A resource refused its connection (a namespace selector, see `connection/access.ts`) claims no
 * name on it and makes no call through it: a hostile namespace cannot hold another team's name
 * on a shared tenant by creating its resource first.
 */

import { connectionKey, connectionOf, DEFAULT_CONNECTION } from "../crd/conventions.ts";
import { effectiveName } from "../crd/mapping.ts";
import type { DeploymentSpec } from "../crd/schema.ts";
import { isRecord } from "../runtime/json.ts";
import { keyOfMeta } from "../runtime/queue-records.ts";
import type { ResourcePort, StoredResource } from "./ports.ts";

/**
 * What the rule reads of a resource. A {@link StoredResource} is one; so is a resource `plan`
 * reads from a file, which has no `creationTimestamp` until it is applied.
 */
export interface Claimant {
  metadata: { name: string; namespace?: string; creationTimestamp?: string };
  spec: DeploymentSpec;
}

/**
 * True when `a` was created before `b` (ties broken by namespace/name, so the order is total).
 * A resource without a `creationTimestamp` is not created yet: younger than any that has one.
 */
export function olderThan(a: Claimant, b: Claimant): boolean {
  const ta = a.metadata.creationTimestamp;
  const tb = b.metadata.creationTimestamp;
  if (ta !== tb) {
    if (ta === undefined) return false;
    if (tb === undefined) return true;
    return ta < tb;
  }
  return keyOfMeta(a) < keyOfMeta(b);
}

/** The service name a resource claims. */
export const claimedName = (o: Claimant): string => effectiveName(o.spec, o.metadata.name);

/** The key of the connection a resource uses (see `crd/conventions.ts`). */
export const connectionKeyOf = (o: Claimant): string =>
  connectionKey(connectionOf(o.metadata.namespace ?? "", o.spec.connectionRef));

/**
 * What a resource claims: its service name on its connection. On the default connection that is
 * the name itself (the string the resource already holds: 10,000 resources then cost no claim
 * strings of their own); on another, the connection's key, a newline and the name. A tenant
 * writes both `spec.name` and `spec.connectionRef.name`, and neither is kept from holding a
 * newline, so a claim is kept unambiguous by {@link claimOn} rather than by the names.
 */
export function claimOf(o: Claimant): string {
  return claimOn(connectionKeyOf(o), claimedName(o));
}

/**
 * The claim of a Deployment resource from the wire, read before its decode; undefined when its
 * metadata or spec is not as a claim needs (its decode then says whether it is usable).
 */
export function claimOnTheWire(raw: unknown): string | undefined {
  if (!isRecord(raw) || !isRecord(raw.metadata) || !isRecord(raw.spec)) return undefined;
  const { name, namespace } = raw.metadata;
  if (typeof name !== "string" || (namespace !== undefined && typeof namespace !== "string"))
    return undefined;
  try {
    return claimOf({
      metadata: { name, ...(namespace ? { namespace } : {}) },
      spec: raw.spec as DeploymentSpec,
    });
  } catch {
    return undefined;
  }
}

/**
 * The claim of the service name `name` on the connection `key` (see {@link claimOf}). The two
 * plain forms, the bare name and `key\nname`, are kept for the names and keys without a newline
 * (the claims of the names the service lists, and the sharder's placement by claim, stay as they
 * were); a default name or a key holding one would make a claim another connection's resource
 * also makes (`spec.name: "ClusterServiceConnection/shared\nweb"` on the default connection, to
 * hold the name `web` on `shared` against the team it is for), so those take a form neither plain
 * one can be: a newline, then the pair as JSON.
 */
export function claimOn(key: string, name: string): string {
  if (key === DEFAULT_CONNECTION) return name.includes("\n") ? escapedClaim(key, name) : name;
  return key.includes("\n") ? escapedClaim(key, name) : `${key}\n${name}`;
}

/** See {@link claimOn}: starts with a newline, which no plain claim does, and holds no other. */
const escapedClaim = (key: string, name: string): string => `\n${JSON.stringify([key, name])}`;

/** The cache index of resources by what they claim, so a claim check reads only its rivals. */
export const CLAIM_INDEX = "claim";

/** The index values of {@link CLAIM_INDEX}. */
export const claimIndexer = (o: Claimant): string[] => [claimOf(o)];

/** The cache index of resources by the key of the connection they use. */
export const CONNECTION_INDEX = "connection";

/**
 * The index values of {@link CONNECTION_INDEX}. Resources of the default connection are not
 * indexed: it is never counted or re-checked.
 */
export function connectionIndexer(o: Claimant): string[] {
  const key = connectionKeyOf(o);
  return key === DEFAULT_CONNECTION ? [] : [key];
}

/**
 * The resource that holds `obj`'s service name on its connection before it, if any, among `all`
 * (every resource will do: others are skipped). Resources being deleted still hold their name
 * until they are gone: their cleanup may still need the deployment.
 */
export function olderClaimant<T extends Claimant>(obj: Claimant, all: readonly T[]): T | undefined {
  const claim = claimOf(obj);
  let holder: T | undefined;
  for (const other of all) {
    if (keyOfMeta(other) === keyOfMeta(obj) || claimOf(other) !== claim) continue;
    if (olderThan(other, obj) && (!holder || olderThan(other, holder))) holder = other;
  }
  return holder;
}

/** Whether a resource's namespace may not use its connection now (the namespace access check). */
export type Refuses = (o: StoredResource) => boolean;

/**
 * Whether `o` holds its claim: not when it is refused its connection, unless it owns a
 * deployment there (its status records one: only the operator writes status), so that a
 * relabelled namespace does not hand its name to a rival.
 */
export function holdsClaim(o: StoredResource, refuses: Refuses): boolean {
  return Boolean(o.status?.deploymentId) || !refuses(o);
}

/** `resources` whose claimants are only those that {@link holdsClaim}. */
export function refusalAware<R extends Pick<ResourcePort, "claimants">>(resources: R, refuses: Refuses): R {
  return {
    ...resources,
    claimants: (claim) => resources.claimants(claim).filter((o) => holdsClaim(o, refuses)),
  };
}

/**
 * The deployment `o` owns that the operator may call about (poll, read): the one its status
 * records, unless `o` is refused its connection, through which it then makes no call at all.
 */
export function reachableDeployment(o: StoredResource, refuses: Refuses): string | undefined {
  const id = o.status?.deploymentId;
  return id && !refuses(o) ? id : undefined;
}

/** The older resource holding `obj`'s service name, if any (read from the claim index). */
export function holderOf(
  resources: Pick<ResourcePort, "claimants">,
  obj: StoredResource,
): StoredResource | undefined {
  return olderClaimant(obj, resources.claimants(claimOf(obj)));
}
