/**
 * The answers of the shared spec (`service-api.md`), as its tables read them, for checking what
 * the simulator answers: every field the spec marks required present, each present field of
 * the spec's type, enums from the spec's lists, `T | null` only where the spec says so, uuids and
 * date-times where it types them. Fields the spec does not name are let through (the spec does
 * not forbid them; the simulator answers a few the real service has, see
 * docs/internals/simulator.md). Unlike src/api/wire.ts, which reads the real service tolerantly,
 * nothing here is loosened.
 */
import { FormatRegistry, type TSchema, Type } from "@sinclair/typebox";
import { type TypeCheck, TypeCompiler } from "@sinclair/typebox/compiler";
import { isUuid, REVISION_STATUSES } from "../../src/api/wire.ts";

const DATE_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;
if (!FormatRegistry.Has("uuid")) FormatRegistry.Set("uuid", isUuid);
if (!FormatRegistry.Has("date-time"))
  FormatRegistry.Set("date-time", (v) => DATE_TIME.test(v) && !Number.isNaN(Date.parse(v)));

const Str = Type.String();
const Uuid = Type.String({ format: "uuid" });
const DateTime = Type.String({ format: "date-time" });
const Obj = Type.Record(Type.String(), Type.Unknown());
const Null = <T extends TSchema>(schema: T) => Type.Union([schema, Type.Null()]);
const Opt = <T extends TSchema>(schema: T) => Type.Optional(schema);
const oneOf = (values: readonly string[]) => Type.Union(values.map((v) => Type.Literal(v)));

/** OAuth provider (element of GET /v2/auth/providers). */
export const SpecOAuthProvider = Type.Object({
  id: Str,
  organization_id: Str,
  provider_id: Str,
  name: Str,
  client_id: Str,
  auth_url: Str,
  token_url: Str,
  uses_pkce: Type.Boolean(),
  code_challenge_method: Null(Str),
  created_at: DateTime,
  updated_at: DateTime,
  provider_type: Opt(Null(Str)),
  mcp_server_url: Opt(Null(Str)),
  token_endpoint_auth_method: Opt(Str),
  is_dynamic_client: Opt(Type.Boolean()),
});

/** Forge GitHub repository (element of GET /v1/integrations/forge/github/{integration_id}/repos). */
export const SpecForgeRepo = Type.Object({
  host_integration_id: Uuid,
  id: Type.Integer(),
  name: Str,
  owner: Str,
  url: Str,
  default_branch: Str,
});

const VolumeMount = Type.Object({
  name: Opt(Str),
  mountPath: Opt(Str),
  subPath: Opt(Str),
  mountPropagation: Opt(Str),
  subPathExpr: Opt(Str),
  readOnly: Opt(Type.Boolean()),
});
/** The volume sources the spec's `ResourceSpec.volumes[]` names (the CRD keeps each as given). */
export const VOLUME_KINDS = [
  "configMap",
  "secret",
  "emptyDir",
  "persistentVolumeClaim",
  "nfs",
  "projected",
  "downwardAPI",
  "csi",
] as const;
const Volume = Type.Object({
  name: Opt(Str),
  ...Object.fromEntries(VOLUME_KINDS.map((k) => [k, Opt(Obj)])),
});
const Container = Type.Object({
  name: Opt(Str),
  image: Opt(Str),
  imagePullPolicy: Opt(Str),
  workingDir: Opt(Str),
  restartPolicy: Opt(Str),
  command: Opt(Type.Array(Str)),
  args: Opt(Type.Array(Str)),
  env: Opt(Type.Array(Type.Object({ name: Opt(Str), value: Opt(Str), valueFrom: Opt(Obj) }))),
  envFrom: Opt(Type.Array(Obj)),
  resources: Opt(Type.Object({ limits: Opt(Obj), requests: Opt(Obj) })),
  volumeMounts: Opt(Type.Array(VolumeMount)),
  securityContext: Opt(Obj),
});
const NUMBERS = [
  ...["min_scale", "max_scale", "cpu", "cpu_limit", "memory_mb", "memory_limit_mb"],
  ...["queue_min_scale", "queue_max_scale", "queue_cpu", "queue_cpu_limit", "queue_memory_mb"],
  ...["queue_memory_limit_mb", "orchestrator_cpu", "orchestrator_cpu_limit", "orchestrator_memory_mb"],
  ...["orchestrator_memory_limit_mb", "orchestrator_min_scale", "orchestrator_max_scale"],
  ...["executor_cpu", "executor_cpu_limit", "executor_memory_mb", "executor_memory_limit_mb"],
  ...["redis_cpu", "redis_cpu_limit", "redis_memory_mb", "redis_memory_limit_mb"],
  ...["db_cpu", "db_cpu_limit", "db_memory_mb", "db_memory_limit_mb", "db_storage_gi", "db_max_connections"],
];
const ResourceSpec = Type.Object({
  ...Object.fromEntries(NUMBERS.map((f) => [f, Opt(Type.Number())])),
  labels: Opt(Obj),
  annotations: Opt(Obj),
  service_account_name: Opt(Str),
  image_pull_secrets: Opt(Type.Array(Type.Object({ name: Opt(Str) }))),
  volumes: Opt(Type.Array(Volume)),
  volume_mounts: Opt(Type.Array(VolumeMount)),
  init_containers: Opt(Type.Array(Container)),
  sidecars: Opt(Type.Array(Container)),
});

/** Deployment, as GET /v2/deployments lists it and PATCH answers it. */
export const SpecDeployment = Type.Object({
  name: Str,
  source: oneOf(["github", "external_docker", "internal_docker", "internal_source", "internal_template"]),
  source_config: Type.Object({
    integration_id: Opt(Uuid),
    repo_url: Opt(Str),
    build_on_push: Opt(Type.Boolean()),
    custom_url: Opt(Str),
    resource_spec: Opt(ResourceSpec),
    listener_id: Opt(Uuid),
    listener_config: Opt(Type.Object({ k8s_namespace: Opt(Str) })),
    install_command: Opt(Str),
    build_command: Opt(Str),
  }),
  source_revision_config: Type.Object({
    repo_ref: Opt(Str),
    graph_config_path: Opt(Str),
    image_uri: Opt(Str),
    source_tarball_path: Opt(Str),
    repo_commit_sha: Opt(Str),
  }),
  secrets: Type.Array(Type.Object({ name: Str, value: Str })),
  id: Uuid,
  tenant_id: Uuid,
  created_at: DateTime,
  updated_at: DateTime,
  status: oneOf(["AWAITING_DATABASE", "READY", "UNUSED", "AWAITING_DELETE", "UNKNOWN"]),
  latest_revision_id: Null(Uuid),
  active_revision_id: Null(Uuid),
  secret_references: Opt(Null(Type.Array(Type.Object({ name: Str, secret_name: Str, secret_key: Str })))),
  image_version: Opt(Null(Str)),
});

/** Deployment page (GET /v2/deployments). */
export const SpecDeploymentPage = Type.Object({
  resources: Type.Array(SpecDeployment),
  offset: Type.Integer({ minimum: 0 }),
});

/**
 * Beyond the spec: a revision (the revision routes, the rebuild's answer), as
 * docs/internals/simulator.md describes it, built from the spec's own parts (its sources, its
 * SourceRevisionConfig) and the revision statuses the service answers.
 */
export const SimRevision = Type.Object({
  id: Uuid,
  created_at: DateTime,
  updated_at: DateTime,
  status: oneOf(REVISION_STATUSES),
  source: SpecDeployment.properties.source,
  source_revision_config: SpecDeployment.properties.source_revision_config,
});

/** Beyond the spec: a page of revisions, paged as the deployment listing. */
export const SimRevisionPage = Type.Object({
  resources: Type.Array(SimRevision),
  offset: Type.Integer({ minimum: 0 }),
});

/** Beyond the spec: a page of a revision's log, as the service's public documentation has it. */
export const SimLogPage = Type.Object({
  logs: Type.Array(
    Type.Object({ timestamp: DateTime, level: oneOf(["INFO", "WARNING", "ERROR"]), message: Str }),
  ),
  next_offset: Null(Str),
});

export const SPEC_ANSWERS = {
  providers: Type.Array(SpecOAuthProvider),
  repos: Type.Array(SpecForgeRepo),
  page: SpecDeploymentPage,
  deployment: SpecDeployment,
  revision: SimRevision,
  revisions: SimRevisionPage,
  logs: SimLogPage,
} as const;

const checks = new Map<string, TypeCheck<TSchema>>(
  Object.entries(SPEC_ANSWERS).map(([name, schema]) => [name, TypeCompiler.Compile<TSchema>(schema)]),
);

/**
 * Where `value` departs from the spec's `name` answer: one line per problem (`/resources/0/id:
 * Expected string to match 'uuid' format`), none when it conforms.
 */
export function specViolations(name: keyof typeof SPEC_ANSWERS, value: unknown): string[] {
  const check = checks.get(name);
  if (check === undefined) throw new Error(`no spec answer named ${name}`);
  return [...check.Errors(value)].map((e) => `${e.path || "/"}: ${e.message}`);
}
