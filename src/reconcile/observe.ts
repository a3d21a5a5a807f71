/**
 * Finding the service's deployment for a resource: by the id recorded in its status when there
 * is one, otherwise by name (listing with `name_contains`, exact match), which is also how a
 * deployment created before a crash, or by someone else, is found and adopted.
 */
import type { Deployment } from "../api/wire.ts";
import type { DeploymentsPort } from "./ports.ts";
import type { RemoteSnapshot } from "./remote.ts";

/** What was found. `deployment` is null when the service has none for this resource. */
export interface Observation {
  deployment: Deployment | null;
  /** Found by name although the status did not point at it: the resource takes it over. */
  adopted: boolean;
}

/** The service has several deployments with the name: which one is meant cannot be told. */
export class AmbiguousNameError extends Error {
  override readonly name = "AmbiguousNameError";
}

/**
 * Looks the deployment up. `live` forces a request (a changed spec, a reconcile requested by
 * annotation); otherwise a fresh resync snapshot answers for ids it covers.
 */
export async function observe(
  service: DeploymentsPort,
  snapshot: RemoteSnapshot,
  target: { deploymentId: string | undefined; name: string; live: boolean },
  signal: AbortSignal,
): Promise<Observation> {
  const { deploymentId: id, name } = target;
  if (id) {
    let found = target.live ? undefined : snapshot.byId(id);
    if (found === undefined) found = (await service.getById(id, signal)) ?? null;
    if (found && found.name === name) {
      snapshot.remember(found);
      return { deployment: found, adopted: false };
    }
    // The recorded deployment is gone (deleted on the service) or is not this name's any more:
    // fall back to the name, as for a resource never reconciled.
    if (!found) snapshot.forget(id);
  }
  const matches = await service.findByName(name, signal);
  if (matches.length > 1) {
    throw new AmbiguousNameError(
      `the service has ${matches.length} deployments named "${name}" (ids ${matches.map((d) => d.id).join(", ")}): delete the extra ones on the service or give this resource another spec.name`,
    );
  }
  const [match] = matches;
  if (!match) return { deployment: null, adopted: false };
  snapshot.remember(match);
  return { deployment: match, adopted: match.id !== id };
}
