/**
 * The adapter from the service client to the reconciler's {@link DeploymentsPort}: what a
 * connection's client becomes for the session built over it (see `registry.ts`'s
 * `ConnectionService`), as `kube/deployments.ts`'s `resourcePort` is for the Kubernetes client. It lives
 * here, not beside the client in `api/`, because `reconcile/` already imports `api/`.
 */

import type { ServiceClient } from "../api/client.ts";
import type { ListDeploymentsOptions } from "../api/client-options.ts";
import { isServiceError } from "../api/errors.ts";
import type { Deployment, DeploymentFilters, UnreadableDeployment } from "../api/wire.ts";
import type { DeploymentsPort } from "../reconcile/ports.ts";
import { IdBatches } from "../reconcile/service/id-batches.ts";
import { UnreadableDeploymentError } from "../reconcile/service/lookup-errors.ts";

/** Unreadable items a lookup by name keeps: its caller needs the first one that may be the name's. */
const UNREADABLE_KEPT = 100;

/** Page size of the full listings: the spec's maximum, so N deployments cost ceil(N/100) calls. */
const FULL_PAGE = 100;

/**
 * Adapts `client` to {@link DeploymentsPort}; `findByName` keeps exact matches of `name_contains`,
 * and concurrent `getById` calls are coalesced: build one port per connection.
 */
export function deploymentsPort(client: ServiceClient): DeploymentsPort {
  // Lookups by id waiting at the same moment share `deployment_ids` calls (see id-batches.ts).
  const byId = new IdBatches({
    list: (ids, signal, skipped, enough) =>
      client.listDeployments(
        { deployment_ids: ids },
        { pageSize: FULL_PAGE, signal, onUnreadable: skipped, enoughAfterShortPage: enough },
      ),
    single: (id, signal) => client.getDeployment(id, { signal }),
  });
  return {
    readAheadFrom: (ahead) => byId.readAheadFrom(ahead),
    getById: (id, signal) =>
      byId.get(id, signal).catch((error: unknown) => {
        // The listing holds the id, or an item without one, that cannot be read.
        if (isServiceError(error, "bad_response") && error.status === 200)
          throw new UnreadableDeploymentError(error.detail);
        throw error;
      }),
    getByIds: async (ids, signal) => {
      // The answer has at most ids.length items: stop once every id came, with no empty last page.
      const wanted = new Set(ids);
      const found: Deployment[] = [];
      if (wanted.size === 0) return found;
      const listing = client.listDeployments(
        { deployment_ids: [...wanted] },
        { pageSize: FULL_PAGE, signal },
      );
      for await (const deployment of listing) {
        if (!wanted.delete(deployment.id)) continue;
        found.push(deployment);
        if (wanted.size === 0) break;
      }
      return found;
    },
    findByName: async (name, signal) => {
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
    },
    listAll: (signal, each, skipped) => listing(client, {}, { signal }, each, skipped),
    create: (body, signal) => client.createDeployment(body, { signal }),
    patch: (id, body, signal) => client.patchDeployment(id, body, { signal }),
    delete: (id, signal, options) =>
      client.deleteDeployment(id, { signal, deleteTracingProject: options?.deleteTracingProject === true }),
    listRepos: (integrationId, signal) => client.listRepos(integrationId, { signal }),
    getRevision: (deploymentId, revisionId, signal) =>
      client.getRevision(deploymentId, revisionId, { signal }),
    getRevisionLogs: (deploymentId, revisionId, query, signal) =>
      client.getRevisionLogs(deploymentId, revisionId, query, { signal }),
    recentRevisions: async (deploymentId, signal) =>
      (await client.firstRevisionPage(deploymentId, { signal })).flatMap((row) =>
        row.ok ? [row.revision] : [],
      ),
    redeploy: (deploymentId, revisionId, signal) => client.redeploy(deploymentId, revisionId, { signal }),
    createRevision: (deploymentId, signal) => client.createRevision(deploymentId, { signal }),
  };
}

/** Every page of a listing, each item handed to `each` as read and each one skipped to `skipped`. */
async function listing(
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
