/**
 * Finding the service's deployment for a resource: by the id recorded in its status when there
 * is one, otherwise by name (listing with `name_contains`, exact match), which is also how a
 * deployment created before a crash, or by someone else, is found and adopted.
 */

import type { DeploymentLookups } from "../ports.ts";
import type { Deployment } from "../service-types.ts";
import { AmbiguousNameError, UnreadableDeploymentError, unreadableMessage } from "./lookup-errors.ts";
import type { RemoteSnapshot } from "./snapshot.ts";

/** What was found. `deployment` is null when the service has none for this resource. */
export interface Observation {
  deployment: Deployment | null;
  /** Found by name although the status did not point at it: the resource takes it over. */
  adopted: boolean;
  /**
   * A read of the service showed the deployment (not only the answer to this operator's create):
   * a recorded create intent is then fulfilled.
   */
  listed: boolean;
  /**
   * The deployment the status records, found carrying another name: not this resource's (a
   * forged or stale status), so it was ignored and the name looked up instead.
   */
  disowned?: Deployment;
}

/** What to look up, and how much the snapshot may answer for. */
export interface LookupTarget {
  /** The deployment the resource's status records, if any. */
  deploymentId: string | undefined;
  /** The service name the resource claims. */
  name: string;
  /** Ask the service about the recorded id (a changed spec, a requested reconcile). */
  live: boolean;
  /** Ask the service about the name (a create of ours may be pending, or a reconcile was requested). */
  liveName: boolean;
  /** Only a snapshot entry the service answered within this long will do (a rollout being polled). */
  withinMs?: number;
}

/**
 * Looks the deployment up: by recorded id, else by exact name. The snapshot answers where it may
 * (see {@link LookupTarget}); what the service is asked is remembered in the snapshot. A recorded
 * id the snapshot does not list is asked about before it is given up: a listing may lag.
 */
export async function observe(
  service: DeploymentLookups,
  snapshot: RemoteSnapshot,
  target: LookupTarget,
  signal: AbortSignal,
): Promise<Observation> {
  const { deploymentId: id, name } = target;
  let disowned: Deployment | undefined;
  if (id) {
    let found = target.live ? undefined : snapshot.byId(id, target.withinMs);
    // The snapshot answered: a poll's read of the entry is spent on this reconcile.
    if (found !== undefined) snapshot.takePollAnswer(id);
    if (!found) {
      found = (await service.getById(id, signal)) ?? null;
      if (found) snapshot.observed(found);
      else snapshot.forget(id);
    }
    if (found && found.name === name)
      return { deployment: found, adopted: false, listed: snapshot.isListed(found.id) };
    // The recorded deployment is gone (deleted on the service), or carries another name: then it
    // is not this resource's (status is a record, not an authority: anyone who may write the
    // status subresource can put another resource's id there), and nothing is written to it.
    // Fall back to the name, as for a resource never reconciled.
    if (found) disowned = found;
  }
  const listed = target.liveName ? undefined : await snapshot.byNameOrWholeListing(name, signal);
  const matches = listed ?? (await lookUpName(service, snapshot, name, signal));
  if (matches.length > 1) {
    throw new AmbiguousNameError(
      `the service has ${matches.length} deployments named "${name}" (ids ${matches.map((d) => d.id).join(", ")}): delete the extra ones on the service or give this resource another spec.name`,
    );
  }
  const [match] = matches;
  const also = disowned ? { disowned } : {};
  if (!match) return { deployment: null, adopted: false, listed: false, ...also };
  return { deployment: match, adopted: match.id !== id, listed: snapshot.isListed(match.id), ...also };
}

/**
 * The service's deployments named `name`, asked live and remembered in the snapshot. An item of
 * the listing the operator cannot read that may be this name's (its name, or no name at all)
 * stops the lookup: answering "none" would let the reconcile create a duplicate.
 */
async function lookUpName(
  service: Pick<DeploymentLookups, "findByName">,
  snapshot: RemoteSnapshot,
  name: string,
  signal: AbortSignal,
): Promise<Deployment[]> {
  const { deployments, unreadable } = await service.findByName(name, signal);
  const hidden = unreadable.find((item) => item.name === undefined || item.name === name);
  if (hidden) throw new UnreadableDeploymentError(unreadableMessage(name, hidden.message));
  for (const deployment of deployments) snapshot.observed(deployment);
  return deployments;
}
