/**
 * The service client seen through the reconciler's {@link DeploymentsPort}.
 */
import type { DeploymentsPort } from "../reconcile/ports.ts";
import type { ServiceClient } from "./client.ts";

/** Page size of the full listings: the spec's maximum, so N deployments cost ceil(N/100) calls. */
const FULL_PAGE = 100;

/** Adapts `client` to {@link DeploymentsPort}; `findByName` keeps exact matches of `name_contains`. */
export function deploymentsPort(client: ServiceClient): DeploymentsPort {
  return {
    getById: (id, signal) => client.getDeployment(id, { signal }),
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
