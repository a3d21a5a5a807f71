/**
 * The port's reads of many deployments, every page of a listing by filter (`deploymentsPort` in
 * deployments-port.ts): the lookup by exact name, the read by ids, the whole listing.
 */
import type { ServiceClient } from "../../api/client.ts";
import type { ListDeploymentsOptions } from "../../api/client-options.ts";
import type { Listing } from "../ports.ts";
import type { Deployment, DeploymentFilters, UnreadableDeployment } from "../service-types.ts";

/** Unreadable items a lookup by name keeps: its caller needs the first one that may be the name's. */
const UNREADABLE_KEPT = 100;

/** Page size of the full listings: the spec's maximum, so N deployments cost ceil(N/100) calls. */
export const FULL_PAGE = 100;

/** The deployments whose ids are among `ids` (`DeploymentListings.getByIds`). */
export async function deploymentsByIds(
  client: ServiceClient,
  ids: readonly string[],
  signal: AbortSignal,
): Promise<Deployment[]> {
  // The answer has at most ids.length items: stop once every id came, with no empty last page.
  const wanted = new Set(ids);
  const found: Deployment[] = [];
  if (wanted.size === 0) return found;
  const pages = client.listDeployments({ deployment_ids: [...wanted] }, { pageSize: FULL_PAGE, signal });
  for await (const deployment of pages) {
    if (!wanted.delete(deployment.id)) continue;
    found.push(deployment);
    if (wanted.size === 0) break;
  }
  return found;
}

/** The deployments named exactly `name`, found through `name_contains` (`DeploymentLookups.findByName`). */
export async function deploymentsNamed(
  client: ServiceClient,
  name: string,
  signal: AbortSignal,
): Promise<Listing> {
  const deployments: Deployment[] = [];
  const unreadable: UnreadableDeployment[] = [];
  await listing(
    client,
    { name_contains: name },
    { signal, enoughAfterShortPage: () => deployments.length > 0 },
    (d) => {
      // A service repeating an item on a later page lists it once; past two, the name is
      // ambiguous however many more there are, and none is kept.
      if (d.name === name && deployments.length < 2 && !deployments.some((o) => o.id === d.id))
        deployments.push(d);
    },
    (item) => {
      // Only an item that may be this name's matters, and the first few say so.
      const mayBe = item.name === undefined || item.name === name;
      if (mayBe && unreadable.length < UNREADABLE_KEPT) unreadable.push(item);
    },
  );
  return { deployments, unreadable };
}

/** Every page of a listing, each item handed to `each` as read and each one skipped to `skipped`. */
export async function listing(
  client: ServiceClient,
  filters: DeploymentFilters,
  opts: Pick<ListDeploymentsOptions, "signal" | "enoughAfterShortPage">,
  each: (deployment: Deployment) => void,
  skipped: (item: UnreadableDeployment) => void,
): Promise<void> {
  for await (const deployment of client.listDeployments(filters, {
    pageSize: FULL_PAGE,
    ...opts,
    onUnreadable: skipped,
  }))
    each(deployment);
}
