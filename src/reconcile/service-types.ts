/**
 * The service's shapes as `reconcile/` speaks them: the vocabulary of the service port
 * (`ports.ts`) and of the logic behind it. The one file of `reconcile/` that names `api/wire.ts`
 * (and its requests, `api/wire-requests.ts`), so that what the reconcile logic depends on of the wire format is listed in one place, and a
 * change there shows which of it the reconciler sees. These are the wire types themselves, not
 * copies: the deployments a snapshot holds are never mapped object by object.
 */

export type {
  Deployment,
  ForgeRepo,
  Revision,
  Secret,
  SourceRevisionConfig,
  UnreadableDeployment,
} from "../api/wire.ts";
/**
 * The rules of those shapes the reconcile logic applies: what a deployment id looks like, and
 * which statuses a deployment and a revision can have.
 */
export {
  DEPLOYMENT_STATUSES,
  DONE_REVISION_STATUSES,
  FAILED_REVISION_STATUSES,
  isUuid,
} from "../api/wire.ts";
export type {
  CreateDeploymentBody,
  DeploymentFilters,
  PatchDeploymentBody,
  SourceConfigRequest,
} from "../api/wire-requests.ts";
