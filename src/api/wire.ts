/**
 * The service's wire model: every resource and field of the Deployment Management Service API
 * (shared spec `service-api.md`), as TypeBox schemas with their static types.
 *
 * Field names are the service's (snake_case). Response schemas are strict only about what the
 * operator relies on (ids, names, the types of the fields it compares) and tolerant of the rest,
 * because the real service answers more loosely than the spec reads: an enum value outside the
 * spec's list is kept as its raw string, `null` is accepted wherever a field is optional, and
 * unknown fields are kept. The request bodies are in wire-requests.ts, and the schemas checked by
 * name (answers and requests alike) in wire-schemas.ts.
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
import {
  DEPLOYMENT_SOURCES,
  DEPLOYMENT_STATUSES,
  isUuid,
  KNOWN_DEPLOYMENT_TYPES,
  type OpenEnum,
  RESOURCE_SPEC_NUMBER_FIELDS,
  REVISION_SOURCES,
  REVISION_STATUSES,
  type ResourceSpecNumberField,
} from "./wire-values.ts";

export * from "./wire-values.ts";

if (!FormatRegistry.Has("uuid")) FormatRegistry.Set("uuid", isUuid);

/** `T | null`: the spec's nullable values. */
export const Nullable = <T extends TSchema>(schema: T) => Type.Union([schema, Type.Null()]);

/** An optional field of a response: the real service also answers `null` for "not set". */
const Opt = <T extends TSchema>(schema: T) => Type.Optional(Nullable(schema));

/** A string read as an {@link OpenEnum} of `values`: any string passes, the type names the known ones. */
const openEnum = <T extends readonly string[]>(_values: T) => Type.Unsafe<OpenEnum<T[number]>>(Type.String());

/** A union of string literals whose static type is the union of `values` (not plain `string`). */
const literals = <T extends readonly string[]>(values: T) =>
  Type.Union(values.map((v) => Type.Literal(v))) as TUnion<TLiteral<T[number]>[]>;

export const DeploymentSourceSchema = literals(DEPLOYMENT_SOURCES);
export const RevisionSourceSchema = literals(REVISION_SOURCES);

const open = { additionalProperties: true } as const;
const AnyObject = Type.Record(Type.String(), Type.Unknown());
// A label or annotation the service leaves unset may come back as null.
const StringMap = Type.Record(Type.String(), Nullable(Type.String()));

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
    provider_type: Opt(Type.String()),
    mcp_server_url: Opt(Type.String()),
    /** Defaults to `client_secret_post` when absent or null. */
    token_endpoint_auth_method: Opt(Type.String()),
    /** Defaults to `false` when absent or null. */
    is_dynamic_client: Opt(Type.Boolean()),
  },
  open,
);
export type OAuthProvider = Static<typeof OAuthProviderSchema>;

/**
 * A GitHub repository reachable through a forge integration. What the operator sends is checked
 * as the spec types it (a repository whose `host_integration_id` is no uuid is skipped from the
 * listing, not sent to fail the create); its `id` is not relied upon and is kept as answered (a
 * numeric string, as services wary of 64-bit integers send it, drops no repository).
 */
export const ForgeRepoSchema = Type.Object(
  {
    /** The value to send as `source_config.integration_id` when creating a deployment. */
    host_integration_id: Type.String({ format: "uuid" }),
    id: Type.Optional(Type.Unknown()),
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
    name: Opt(Type.String()),
    mountPath: Opt(Type.String()),
    subPath: Opt(Type.String()),
    mountPropagation: Opt(Type.String()),
    subPathExpr: Opt(Type.String()),
    readOnly: Opt(Type.Boolean()),
  },
  open,
);

const VolumeSchema = Type.Object(
  {
    name: Opt(Type.String()),
    configMap: Opt(AnyObject),
    secret: Opt(AnyObject),
    emptyDir: Opt(AnyObject),
    persistentVolumeClaim: Opt(AnyObject),
    nfs: Opt(AnyObject),
    projected: Opt(AnyObject),
    downwardAPI: Opt(AnyObject),
    csi: Opt(AnyObject),
  },
  open,
);

const ContainerSchema = Type.Object(
  {
    name: Opt(Type.String()),
    image: Opt(Type.String()),
    imagePullPolicy: Opt(Type.String()),
    workingDir: Opt(Type.String()),
    restartPolicy: Opt(Type.String()),
    command: Opt(Type.Array(Type.String())),
    args: Opt(Type.Array(Type.String())),
    env: Opt(
      Type.Array(
        Type.Object(
          {
            name: Opt(Type.String()),
            value: Opt(Type.String()),
            valueFrom: Opt(AnyObject),
          },
          open,
        ),
      ),
    ),
    envFrom: Opt(Type.Array(AnyObject)),
    resources: Opt(Type.Object({ limits: Opt(AnyObject), requests: Opt(AnyObject) }, open)),
    volumeMounts: Opt(Type.Array(VolumeMountSchema)),
    securityContext: Opt(AnyObject),
  },
  open,
);

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
    image_pull_secrets: Opt(Type.Array(Type.Object({ name: Opt(Type.String()) }, open))),
    volumes: Type.Optional(Nullable(Type.Array(VolumeSchema))),
    volume_mounts: Type.Optional(Nullable(Type.Array(VolumeMountSchema))),
    init_containers: Type.Optional(Nullable(Type.Array(ContainerSchema))),
    sidecars: Type.Optional(Nullable(Type.Array(ContainerSchema))),
  },
  open,
);
export type ResourceSpec = Static<typeof ResourceSpecSchema>;

/**
 * The fields of `source_config` that a response and a request type alike; the ids and the
 * listener's config are read more loosely than they are written (see the request schema).
 */
export const sourceConfigFields = {
  repo_url: Type.Optional(Nullable(Type.String())),
  build_on_push: Type.Optional(Nullable(Type.Boolean())),
  custom_url: Type.Optional(Nullable(Type.String())),
  resource_spec: Type.Optional(Nullable(ResourceSpecSchema)),
  install_command: Type.Optional(Nullable(Type.String())),
  build_command: Type.Optional(Nullable(Type.String())),
  /** See {@link KNOWN_DEPLOYMENT_TYPES}: set on create, never changed (a PATCH changing it is refused). */
  deployment_type: Type.Optional(Nullable(openEnum(KNOWN_DEPLOYMENT_TYPES))),
};

/** Source fields that need no new revision when changed (or cannot be changed). */
export const SourceConfigSchema = Type.Object(
  {
    ...sourceConfigFields,
    integration_id: Type.Optional(Nullable(Type.String())),
    listener_id: Type.Optional(Nullable(Type.String())),
    listener_config: Opt(Type.Object({ k8s_namespace: Opt(Type.String()) }, open)),
  },
  open,
);
export type SourceConfig = Static<typeof SourceConfigSchema>;

/** The fields of `source_revision_config` a request may carry. */
export const sourceRevisionFields = {
  repo_ref: Type.Optional(Nullable(Type.String())),
  graph_config_path: Type.Optional(Nullable(Type.String())),
  image_uri: Type.Optional(Nullable(Type.String())),
  source_tarball_path: Type.Optional(Nullable(Type.String())),
};

/** Source fields whose change requires a new revision. `repo_commit_sha` only appears in responses. */
export const SourceRevisionConfigSchema = Type.Object(
  { ...sourceRevisionFields, repo_commit_sha: Type.Optional(Nullable(Type.String())) },
  open,
);
export type SourceRevisionConfig = Static<typeof SourceRevisionConfigSchema>;

/**
 * A secret of a deployment. The service may return its value, a masked value, or none (a `null`
 * value is read as none by `readDeployment`).
 */
export const SecretSchema = Type.Object({ name: Type.String(), value: Type.Optional(Type.String()) }, open);
export type Secret = Static<typeof SecretSchema>;

/** A reference to a Kubernetes Secret key (source `external_docker` only). */
export const SecretReferenceSchema = Type.Object(
  { name: Type.String(), secret_name: Type.String(), secret_key: Type.String() },
  open,
);
export type SecretReference = Static<typeof SecretReferenceSchema>;

/**
 * A deployment as the service returns it, as far as the operator relies on it: `id`, `name`,
 * `source` and `status` must be strings (`source` and `status` any string, see
 * {@link OpenEnum}); the containers it compares must have their types. The read-only
 * bookkeeping (`tenant_id`, timestamps) may be missing or null. `readDeployment` (validate.ts)
 * turns a `null` container into an empty one and a missing revision id into `null` first.
 */
export const DeploymentSchema = Type.Object(
  {
    name: Type.String(),
    source: openEnum(DEPLOYMENT_SOURCES),
    source_config: SourceConfigSchema,
    source_revision_config: SourceRevisionConfigSchema,
    secrets: Type.Array(SecretSchema),
    id: Type.String({ minLength: 1 }),
    tenant_id: Opt(Type.String()),
    created_at: Opt(Type.String()),
    updated_at: Opt(Type.String()),
    status: openEnum(DEPLOYMENT_STATUSES),
    latest_revision_id: Nullable(Type.String()),
    active_revision_id: Nullable(Type.String()),
    secret_references: Opt(Type.Array(SecretReferenceSchema)),
    image_version: Opt(Type.String()),
    /** Not in the shared spec: a name shown in the service's UI, set by a PATCH only. */
    display_name: Opt(Type.String()),
  },
  open,
);
export type Deployment = Static<typeof DeploymentSchema>;

/**
 * A page of GET /v2/deployments. `offset` is what to pass to fetch the next page; one missing or
 * `null` (the spec requires it) reads as "the request's offset plus the items answered", as a
 * revision page's does, rather than failing every page already read. Items are read one by one
 * (`readDeployment`), so that one item the operator cannot understand is skipped and reported
 * instead of failing the whole listing.
 */
export const DeploymentPageSchema = Type.Object(
  { resources: Type.Array(Type.Unknown()), offset: Opt(Type.Integer()) },
  open,
);
export type DeploymentPage = Static<typeof DeploymentPageSchema>;

/**
 * A deployment of a listing page that could not be understood (say, it has no `id`): skipped,
 * and reported through the listing's `onUnreadable` callback. `field` is the first field that
 * failed, e.g. `id`; `message` is one line naming it and the deployment.
 */
export interface UnreadableDeployment {
  name?: string;
  id?: string;
  field: string;
  message: string;
}

/** A value of an enum field outside the spec's list, kept raw (reported for the metrics). */
export interface UnknownValue {
  /** e.g. `deployment.status`, `revision.status`. */
  field: string;
  value: string;
}

/**
 * A revision (GET /v2/deployments/{deployment_id}/revisions/{revision_id}). Not in the shared
 * spec: read tolerantly, relying only on `id` and `status` (any string, see {@link OpenEnum}).
 */
export const RevisionSchema = Type.Object(
  {
    id: Type.String({ minLength: 1 }),
    created_at: Opt(Type.String()),
    updated_at: Opt(Type.String()),
    status: openEnum(REVISION_STATUSES),
    source: Opt(Type.String()),
    source_revision_config: Opt(SourceRevisionConfigSchema),
  },
  open,
);
export type Revision = Static<typeof RevisionSchema>;

/**
 * A page of GET /v2/deployments/{deployment_id}/revisions (not in the shared spec): assumed paged
 * like the deployment listing, `{resources, offset}`. Items are read one by one (see
 * `revision-listing.ts`), so one odd item never fails the page; a missing or `null` `offset`
 * reads as "the request's offset plus the items answered".
 */
export const RevisionPageSchema = Type.Object(
  { resources: Type.Array(Type.Unknown()), offset: Opt(Type.Integer({ minimum: 0 })) },
  open,
);

export const ProviderListSchema = Type.Array(OAuthProviderSchema);
export const ForgeRepoListSchema = Type.Array(ForgeRepoSchema);
