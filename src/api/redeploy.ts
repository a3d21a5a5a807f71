/**
 * Redeploying an earlier revision: `POST /v2/deployments/{deployment_id}/revisions/{revision_id}/redeploy`.
 *
 * The route is not in the shared spec: the service's public documentation describes it only as
 * "Redeploy a specific revision ID", answering 200 with the Deployment (404 for an unknown
 * deployment or revision, 422 for a bad id). It does not say whether the service makes a new
 * revision copying the old one or switches `active_revision_id` back: a caller must handle both,
 * and a service without the route (404 "Not Found" of an unknown path, or 405).
 */
import { RouteMissingError, type ServiceError } from "./errors.ts";

/** The route template, as errors and metrics name it. */
export const REDEPLOY_ROUTE = "/v2/deployments/{deployment_id}/revisions/{revision_id}/redeploy";

/** The service has no redeploy route: a caller should send the change as a PATCH and stop asking. */
export class RedeployRouteMissingError extends RouteMissingError {
  override readonly name = "RedeployRouteMissingError";
  constructor(cause: ServiceError) {
    super("redeploy", cause);
  }
}
