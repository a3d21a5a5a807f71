/**
 * The values of the wire model (wire.ts) that need no schema library: the enums, the routes, the
 * pagination limits and the defaults the service fills in. A command that only reads the service
 * imports these and the response checks (validate.ts), never the schemas, so that it does not
 * load TypeBox's two hundred modules to start (`npm run bench -- cli-start`). wire.ts re-exports
 * every one of them.
 */
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
/** True when `value` is a uuid in its canonical textual form (any version). */
export const isUuid = (value: string): boolean => UUID.test(value);

/**
 * An enum value as read from the service: one of `T`, or any other string kept raw (a newer or
 * looser service uses values the spec does not list, e.g. status `AWAITING_FINAL_DELETE`).
 */
export type OpenEnum<T extends string> = T | (string & {});

/** Sources a deployment can be created from. Fixed at creation. */
export const DEPLOYMENT_SOURCES = [
  "github",
  "external_docker",
  "internal_docker",
  "internal_source",
  "internal_template",
] as const;
export type DeploymentSource = (typeof DEPLOYMENT_SOURCES)[number];

/** Sources a single revision may override the deployment's source with (PATCH `revision_source`). */
export const REVISION_SOURCES = ["github", "internal_docker", "internal_source"] as const;
export type RevisionSource = (typeof REVISION_SOURCES)[number];

/** Values of a deployment's read-only `status`. */
export const DEPLOYMENT_STATUSES = [
  "AWAITING_DATABASE",
  "READY",
  "UNUSED",
  "AWAITING_DELETE",
  "UNKNOWN",
] as const;
export type DeploymentStatus = (typeof DEPLOYMENT_STATUSES)[number];

/** Values of the `deployment_type` listing filter: the types of the service's published API. */
export const DEPLOYMENT_TYPES = ["dev_free", "dev", "prod"] as const;
export type DeploymentType = (typeof DEPLOYMENT_TYPES)[number];

/**
 * Every deployment type known (`source_config.deployment_type`): the published API's, and the two
 * that scale to zero, which the service's own provider knows too. It decides the tier and the
 * price and cannot change after creation; a create without one gets {@link DEFAULT_DEPLOYMENT_TYPE}.
 * Read as an {@link OpenEnum}: a newer service may answer a type not listed here.
 */
export const KNOWN_DEPLOYMENT_TYPES = [...DEPLOYMENT_TYPES, "dev_zero", "dev_free_zero"] as const;
export type KnownDeploymentType = (typeof KNOWN_DEPLOYMENT_TYPES)[number];
/** The type the service gives a deployment created without one. */
export const DEFAULT_DEPLOYMENT_TYPE: KnownDeploymentType = "prod";

/** What the service means by an OAuth provider's fields left out or null. */
export const PROVIDER_DEFAULTS = {
  token_endpoint_auth_method: "client_secret_post",
  is_dynamic_client: false,
} as const;

/** Numeric ResourceSpec fields, grouped as in the spec. Units and bounds are not documented. */
export const RESOURCE_SPEC_NUMBER_FIELDS = [
  "min_scale",
  "max_scale",
  "cpu",
  "cpu_limit",
  "memory_mb",
  "memory_limit_mb",
  "queue_min_scale",
  "queue_max_scale",
  "queue_cpu",
  "queue_cpu_limit",
  "queue_memory_mb",
  "queue_memory_limit_mb",
  "orchestrator_cpu",
  "orchestrator_cpu_limit",
  "orchestrator_memory_mb",
  "orchestrator_memory_limit_mb",
  "orchestrator_min_scale",
  "orchestrator_max_scale",
  "executor_cpu",
  "executor_cpu_limit",
  "executor_memory_mb",
  "executor_memory_limit_mb",
  "redis_cpu",
  "redis_cpu_limit",
  "redis_memory_mb",
  "redis_memory_limit_mb",
  "db_cpu",
  "db_cpu_limit",
  "db_memory_mb",
  "db_memory_limit_mb",
  "db_storage_gi",
  "db_max_connections",
] as const;
export type ResourceSpecNumberField = (typeof RESOURCE_SPEC_NUMBER_FIELDS)[number];

/** Values of a revision's `status` (not in the shared spec; as the service answers them). */
export const REVISION_STATUSES = [
  "CREATING",
  "QUEUED",
  "AWAITING_BUILD",
  "BUILDING",
  "AWAITING_DEPLOY",
  "DEPLOYING",
  "CREATE_FAILED",
  "BUILD_FAILED",
  "DEPLOY_FAILED",
  "DEPLOYED",
  "SKIPPED",
  "INTERRUPTED",
  "UNKNOWN",
] as const;
export type RevisionStatus = (typeof REVISION_STATUSES)[number];

/** Revision statuses that say the revision will never go live. */
export const FAILED_REVISION_STATUSES: readonly RevisionStatus[] = [
  "CREATE_FAILED",
  "BUILD_FAILED",
  "DEPLOY_FAILED",
];
/** Revision statuses that end a rollout: the revision is live, or the service chose not to deploy it. */
export const DONE_REVISION_STATUSES: readonly RevisionStatus[] = ["DEPLOYED", "SKIPPED"];

/**
 * The service's route templates as the spec writes them: the client fills them in, the simulator
 * serves them, and both name a route by its template (metrics labels, counters, error messages).
 */
export const ROUTES = {
  PROVIDERS: "/v2/auth/providers",
  REPOS: "/v1/integrations/forge/github/{integration_id}/repos",
  DEPLOYMENTS: "/v2/deployments",
  DEPLOYMENT: "/v2/deployments/{deployment_id}",
  REVISION: "/v2/deployments/{deployment_id}/revisions/{revision_id}",
  REVISIONS: "/v2/deployments/{deployment_id}/revisions",
  /**
   * POST on the revisions template (not in the shared spec; the service's public documentation
   * describes it): creates a revision from the deployment's current configuration, body `{}`,
   * answering the Revision. A rebuild, e.g. of a branch's new head.
   */
  CREATE_REVISION: "/v2/deployments/{deployment_id}/revisions",
} as const;

/** Limits of the listing's pagination parameters. */
export const PAGE_LIMIT = { min: 1, max: 100, default: 20 } as const;
