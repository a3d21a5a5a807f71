/**
 * The service's wire model: every resource and field of the Deployment Management Service API
 * (shared spec `service-api.md`), as TypeBox schemas with their static types.
 *
 * Field names are the service's (snake_case). Response schemas are strict about what the spec
 * marks required and about types, and tolerant of fields they do not know (a newer service may
 * add some). Request schemas are what we send and what the simulator accepts: they reject
 * unknown fields, as the service's own request models do.
 */
import {
  FormatRegistry,
  type Static,
  type TLiteral,
  type TNull,
  type TNumber,
  type TOptional,
  type TSchema,
  type TUnion,
  Type,
} from "@sinclair/typebox";

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
/** True when `value` is a uuid in its canonical textual form (any version). */
export const isUuid = (value: string): boolean => UUID.test(value);
if (!FormatRegistry.Has("uuid")) FormatRegistry.Set("uuid", isUuid);

/** `T | null`: the spec's nullable values. */
export const Nullable = <T extends TSchema>(schema: T) => Type.Union([schema, Type.Null()]);

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

/** Values of the `deployment_type` listing filter. */
export const DEPLOYMENT_TYPES = ["dev_free", "dev", "prod"] as const;
export type DeploymentType = (typeof DEPLOYMENT_TYPES)[number];

/** A union of string literals whose static type is the union of `values` (not plain `string`). */
const literals = <T extends readonly string[]>(values: T) =>
  Type.Union(values.map((v) => Type.Literal(v))) as TUnion<TLiteral<T[number]>[]>;

export const DeploymentSourceSchema = literals(DEPLOYMENT_SOURCES);
export const RevisionSourceSchema = literals(REVISION_SOURCES);
export const DeploymentStatusSchema = literals(DEPLOYMENT_STATUSES);

const open = { additionalProperties: true } as const;
const closed = { additionalProperties: false } as const;
const AnyObject = Type.Record(Type.String(), Type.Unknown());
const StringMap = Type.Record(Type.String(), Type.String());

/** An OAuth provider configuration, element of GET /v2/auth/providers. */
export const OAuthProviderSchema = Type.Object(
  {
    id: Type.String(),
    organization_id: Type.String(),
    provider_id: Type.String(),
    name: Type.String(),
    client_id: Type.String(),
    auth_url: Type.String(),
    token_url: Type.String(),
    uses_pkce: Type.Boolean(),
    code_challenge_method: Nullable(Type.String()),
    created_at: Type.String(),
    updated_at: Type.String(),
    provider_type: Type.Optional(Nullable(Type.String())),
    mcp_server_url: Type.Optional(Nullable(Type.String())),
    /** Defaults to `client_secret_post` when absent. */
    token_endpoint_auth_method: Type.Optional(Type.String()),
    /** Defaults to `false` when absent. */
    is_dynamic_client: Type.Optional(Type.Boolean()),
  },
  open,
);
export type OAuthProvider = Static<typeof OAuthProviderSchema>;
export const PROVIDER_DEFAULTS = {
  token_endpoint_auth_method: "client_secret_post",
  is_dynamic_client: false,
} as const;

/** A GitHub repository reachable through a forge integration. */
export const ForgeRepoSchema = Type.Object(
  {
    /** The value to send as `source_config.integration_id` when creating a deployment. */
    host_integration_id: Type.String(),
    id: Type.Integer(),
    name: Type.String(),
    owner: Type.String(),
    /** The value to send as `source_config.repo_url`. */
    url: Type.String(),
    /** The value to send as `source_revision_config.repo_ref`. */
    default_branch: Type.String(),
  },
  open,
);
export type ForgeRepo = Static<typeof ForgeRepoSchema>;

const VolumeMountSchema = Type.Object(
  {
    name: Type.Optional(Type.String()),
    mountPath: Type.Optional(Type.String()),
    subPath: Type.Optional(Type.String()),
    mountPropagation: Type.Optional(Type.String()),
    subPathExpr: Type.Optional(Type.String()),
    readOnly: Type.Optional(Type.Boolean()),
  },
  open,
);

const VolumeSchema = Type.Object(
  {
    name: Type.Optional(Type.String()),
    configMap: Type.Optional(AnyObject),
    secret: Type.Optional(AnyObject),
    emptyDir: Type.Optional(AnyObject),
    persistentVolumeClaim: Type.Optional(AnyObject),
    nfs: Type.Optional(AnyObject),
    projected: Type.Optional(AnyObject),
    downwardAPI: Type.Optional(AnyObject),
    csi: Type.Optional(AnyObject),
  },
  open,
);

const ContainerSchema = Type.Object(
  {
    name: Type.Optional(Type.String()),
    image: Type.Optional(Type.String()),
    imagePullPolicy: Type.Optional(Type.String()),
    workingDir: Type.Optional(Type.String()),
    restartPolicy: Type.Optional(Type.String()),
    command: Type.Optional(Type.Array(Type.String())),
    args: Type.Optional(Type.Array(Type.String())),
    env: Type.Optional(
      Type.Array(
        Type.Object(
          {
            name: Type.Optional(Type.String()),
            value: Type.Optional(Type.String()),
            valueFrom: Type.Optional(AnyObject),
          },
          open,
        ),
      ),
    ),
    envFrom: Type.Optional(Type.Array(AnyObject)),
    resources: Type.Optional(
      Type.Object({ limits: Type.Optional(AnyObject), requests: Type.Optional(AnyObject) }, open),
    ),
    volumeMounts: Type.Optional(Type.Array(VolumeMountSchema)),
    securityContext: Type.Optional(AnyObject),
  },
  open,
);

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

type OptionalNullableNumber = TOptional<TUnion<[TNumber, TNull]>>;
const numberFields = Object.fromEntries(
  RESOURCE_SPEC_NUMBER_FIELDS.map((f) => [f, Type.Optional(Nullable(Type.Number()))]),
) as { [K in ResourceSpecNumberField]: OptionalNullableNumber };

/** Resource settings of a deployment. The service replaces it as a whole on PATCH. */
export const ResourceSpecSchema = Type.Object(
  {
    ...numberFields,
    labels: Type.Optional(Nullable(StringMap)),
    annotations: Type.Optional(Nullable(StringMap)),
    service_account_name: Type.Optional(Nullable(Type.String())),
    image_pull_secrets: Type.Optional(Nullable(Type.Array(Type.Object({ name: Type.String() }, open)))),
    volumes: Type.Optional(Nullable(Type.Array(VolumeSchema))),
    volume_mounts: Type.Optional(Nullable(Type.Array(VolumeMountSchema))),
    init_containers: Type.Optional(Nullable(Type.Array(ContainerSchema))),
    sidecars: Type.Optional(Nullable(Type.Array(ContainerSchema))),
  },
  open,
);
export type ResourceSpec = Static<typeof ResourceSpecSchema>;

/** Source fields that need no new revision when changed (or cannot be changed). */
export const SourceConfigSchema = Type.Object(
  {
    integration_id: Type.Optional(Nullable(Type.String())),
    repo_url: Type.Optional(Nullable(Type.String())),
    build_on_push: Type.Optional(Nullable(Type.Boolean())),
    custom_url: Type.Optional(Nullable(Type.String())),
    resource_spec: Type.Optional(Nullable(ResourceSpecSchema)),
    listener_id: Type.Optional(Nullable(Type.String())),
    listener_config: Type.Optional(
      Nullable(Type.Object({ k8s_namespace: Type.Optional(Type.String()) }, open)),
    ),
    install_command: Type.Optional(Nullable(Type.String())),
    build_command: Type.Optional(Nullable(Type.String())),
  },
  open,
);
export type SourceConfig = Static<typeof SourceConfigSchema>;

/** Source fields whose change requires a new revision. `repo_commit_sha` only appears in responses. */
export const SourceRevisionConfigSchema = Type.Object(
  {
    repo_ref: Type.Optional(Nullable(Type.String())),
    graph_config_path: Type.Optional(Nullable(Type.String())),
    image_uri: Type.Optional(Nullable(Type.String())),
    source_tarball_path: Type.Optional(Nullable(Type.String())),
    repo_commit_sha: Type.Optional(Nullable(Type.String())),
  },
  open,
);
export type SourceRevisionConfig = Static<typeof SourceRevisionConfigSchema>;

/** A secret of a deployment. The service may return its value, a masked value, or none. */
export const SecretSchema = Type.Object({ name: Type.String(), value: Type.Optional(Type.String()) }, open);
export type Secret = Static<typeof SecretSchema>;

/** A reference to a Kubernetes Secret key (source `external_docker` only). */
export const SecretReferenceSchema = Type.Object(
  { name: Type.String(), secret_name: Type.String(), secret_key: Type.String() },
  open,
);
export type SecretReference = Static<typeof SecretReferenceSchema>;

/** A deployment as the service returns it. */
export const DeploymentSchema = Type.Object(
  {
    name: Type.String(),
    source: DeploymentSourceSchema,
    source_config: SourceConfigSchema,
    source_revision_config: SourceRevisionConfigSchema,
    secrets: Type.Array(SecretSchema),
    id: Type.String(),
    tenant_id: Type.String(),
    created_at: Type.String(),
    updated_at: Type.String(),
    status: DeploymentStatusSchema,
    latest_revision_id: Nullable(Type.String()),
    active_revision_id: Nullable(Type.String()),
    secret_references: Type.Optional(Nullable(Type.Array(SecretReferenceSchema))),
    image_version: Type.Optional(Nullable(Type.String())),
  },
  open,
);
export type Deployment = Static<typeof DeploymentSchema>;

/** A page of GET /v2/deployments. `offset` is what to pass to fetch the next page. */
export const DeploymentPageSchema = Type.Object(
  { resources: Type.Array(DeploymentSchema), offset: Type.Integer() },
  open,
);
export type DeploymentPage = Static<typeof DeploymentPageSchema>;

export const ProviderListSchema = Type.Array(OAuthProviderSchema);
export const ForgeRepoListSchema = Type.Array(ForgeRepoSchema);

// ---- Requests ---------------------------------------------------------------------------------

const RequestSecretSchema = Type.Object({ name: Type.String(), value: Type.String() }, closed);
const RequestSecretReferenceSchema = Type.Object(
  { name: Type.String(), secret_name: Type.String(), secret_key: Type.String() },
  closed,
);

/** `source_config` of a PATCH or POST body: every field nullable, validated by source. */
export const SourceConfigRequestSchema = Type.Object(
  {
    integration_id: Type.Optional(Nullable(Type.String({ format: "uuid" }))),
    repo_url: Type.Optional(Nullable(Type.String())),
    build_on_push: Type.Optional(Nullable(Type.Boolean())),
    custom_url: Type.Optional(Nullable(Type.String())),
    resource_spec: Type.Optional(Nullable(ResourceSpecSchema)),
    listener_id: Type.Optional(Nullable(Type.String({ format: "uuid" }))),
    listener_config: Type.Optional(
      Nullable(Type.Object({ k8s_namespace: Type.Optional(Type.String()) }, closed)),
    ),
    install_command: Type.Optional(Nullable(Type.String())),
    build_command: Type.Optional(Nullable(Type.String())),
  },
  closed,
);
export type SourceConfigRequest = Static<typeof SourceConfigRequestSchema>;

/** `source_revision_config` of a PATCH or POST body. Any change here makes a new revision. */
export const SourceRevisionConfigRequestSchema = Type.Object(
  {
    repo_ref: Type.Optional(Nullable(Type.String())),
    graph_config_path: Type.Optional(Nullable(Type.String())),
    image_uri: Type.Optional(Nullable(Type.String())),
    source_tarball_path: Type.Optional(Nullable(Type.String())),
  },
  closed,
);
export type SourceRevisionConfigRequest = Static<typeof SourceRevisionConfigRequestSchema>;

/** Body of PATCH /v2/deployments/{id}. It never carries `name` or `source`. */
export const PatchDeploymentBodySchema = Type.Object(
  {
    revision_source: Type.Optional(Nullable(RevisionSourceSchema)),
    source_config: Type.Optional(SourceConfigRequestSchema),
    source_revision_config: Type.Optional(SourceRevisionConfigRequestSchema),
    secrets: Type.Optional(Nullable(Type.Array(RequestSecretSchema))),
    secret_references: Type.Optional(Nullable(Type.Array(RequestSecretReferenceSchema))),
  },
  closed,
);
export type PatchDeploymentBody = Static<typeof PatchDeploymentBodySchema>;

/**
 * Body of POST /v2/deployments. The spec does not show this operation's request; this shape
 * (the PATCH fields plus `name` and `source`) is our assumption, kept here alone so that it is
 * corrected in one place.
 */
export const CreateDeploymentBodySchema = Type.Object(
  {
    name: Type.String({ minLength: 1 }),
    source: DeploymentSourceSchema,
    source_config: Type.Optional(SourceConfigRequestSchema),
    source_revision_config: Type.Optional(SourceRevisionConfigRequestSchema),
    secrets: Type.Optional(Nullable(Type.Array(RequestSecretSchema))),
    secret_references: Type.Optional(Nullable(Type.Array(RequestSecretReferenceSchema))),
  },
  closed,
);
export type CreateDeploymentBody = Static<typeof CreateDeploymentBodySchema>;

/** Query filters of GET /v2/deployments (pagination is the client's business). */
export interface DeploymentFilters {
  name_contains?: string;
  status?: DeploymentStatus;
  remote_reconciled?: boolean;
  /** Tag value ids; sent comma-separated. */
  tag_value_ids?: readonly string[];
  image_version?: string;
  deployment_type?: DeploymentType;
  /** Deployment ids; sent comma-separated. */
  deployment_ids?: readonly string[];
}

/** Limits of the listing's pagination parameters. */
export const PAGE_LIMIT = { min: 1, max: 100, default: 20 } as const;
