/**
 * The service client seen through the reconciler's {@link DeploymentsPort}.
 */
import type { DeploymentsPort } from "../reconcile/ports.ts";
import type { ServiceClient } from "./client.ts";
import type { Deployment } from "./wire.ts";

/** Page size of the full listings: the spec's maximum, so N deployments cost ceil(N/100) calls. */
const FULL_PAGE = 100;

/** Adapts `client` to {@link DeploymentsPort}; `findByName` keeps exact matches of `name_contains`. */
export function deploymentsPort(client: ServiceClient): DeploymentsPort {
  return {
    getById: (id, signal) => client.getDeployment(id, { signal }),
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
    findByName: async (name, signal) =>
      (await client.listAllDeployments({ name_contains: name }, { pageSize: FULL_PAGE, signal })).filter(
        (d) => d.name === name,
      ),
    listAll: (signal) => client.listAllDeployments({}, { pageSize: FULL_PAGE, signal }),
    create: (body, signal) => client.createDeployment(body, { signal }),
    patch: (id, body, signal) => client.patchDeployment(id, body, { signal }),
    delete: (id, signal) => client.deleteDeployment(id, { signal }),
    listRepos: (integrationId, signal) => client.listRepos(integrationId, { signal }),
    getRevision: (deploymentId, revisionId, signal) =>
      client.getRevision(deploymentId, revisionId, { signal }),
  };
}
