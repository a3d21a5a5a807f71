/**
 * What a lookup of a resource's deployment fails with when the service's answer cannot be used.
 * The lookup (`lookUp`, reconcile/observe.ts; `lookUpName`, snapshot.ts), the snapshot (`snapshot-store.ts`) and the service adapter throw them; the
 * reconciler turns them into conditions (`failures.ts`). A file of its own, importing nothing,
 * so that each of those can import it without importing the others.
 */

/**
 * The service lists a deployment this resource would own (its recorded id, or its name) but the
 * operator cannot read it (see `UnreadableDeployment` in service-types.ts). Creating one would make a
 * duplicate, so the resource reports `Synced=False UnreadableDeployment` with this message and
 * waits (stalled, no retry loop: the next resync or spec change looks again).
 */
export class UnreadableDeploymentError extends Error {
  override readonly name = "UnreadableDeploymentError";
}

/** The service has several deployments with the name: which one is meant cannot be told. */
export class AmbiguousNameError extends Error {
  override readonly name = "AmbiguousNameError";
}

/** The message of a resource whose deployment the operator cannot read. */
export function unreadableMessage(name: string, problem: string): string {
  return `the service lists a deployment that may be "${name}" but the operator cannot read it (${problem}); nothing is created meanwhile, to avoid a duplicate`;
}
