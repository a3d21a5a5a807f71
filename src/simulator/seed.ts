/**
 * The simulator's initial state: a tenant, OAuth providers, forge integrations with their
 * repositories, and deployments. Loaded from YAML or JSON and validated; every error names the
 * field (`deployments[2].source: Input should be 'github', ...`).
 */
import { readFile } from "node:fs/promises";
import { FormatRegistry, type Static, Type } from "@sinclair/typebox";
import { TypeCompiler } from "@sinclair/typebox/compiler";
import { parse as parseYaml } from "yaml";
import { DeploymentSourceSchema, Nullable } from "../api/wire.ts";
import { SourceConfigRequestSchema } from "../api/wire-requests.ts";
import {
  AnyStatusSchema,
  QuirksSchema,
  RevisionFailureSchema,
  SeedRevisionConfigSchema,
  SeedSecretReferenceSchema,
} from "./drift.ts";
import { renderIssues, type ValidationIssue } from "./errors.ts";
import { issuesOf } from "./validation.ts";

const closed = { additionalProperties: false } as const;
const Uuid = Type.String({ format: "uuid" });

/** A provider of the seed: `name` and `provider_id` are required, the rest gets plausible defaults. */
export const SeedProviderSchema = Type.Object(
  {
    id: Type.Optional(Type.String()),
    organization_id: Type.Optional(Type.String()),
    provider_id: Type.String(),
    name: Type.String(),
    client_id: Type.Optional(Type.String()),
    auth_url: Type.Optional(Type.String()),
    token_url: Type.Optional(Type.String()),
    uses_pkce: Type.Optional(Type.Boolean()),
    code_challenge_method: Type.Optional(Nullable(Type.String())),
    provider_type: Type.Optional(Nullable(Type.String())),
    mcp_server_url: Type.Optional(Nullable(Type.String())),
    token_endpoint_auth_method: Type.Optional(Type.String()),
    is_dynamic_client: Type.Optional(Type.Boolean()),
    /** ISO date-time, as the spec types them; default: the simulator's start. */
    created_at: Type.Optional(Type.String({ format: "date-time" })),
    updated_at: Type.Optional(Type.String({ format: "date-time" })),
  },
  closed,
);

/** A repository of a seeded integration; `url` and `default_branch` default from owner/name. */
export const SeedRepoSchema = Type.Object(
  {
    id: Type.Integer(),
    name: Type.String({ minLength: 1 }),
    owner: Type.String({ minLength: 1 }),
    url: Type.Optional(Type.String()),
    default_branch: Type.Optional(Type.String()),
  },
  closed,
);

/**
 * A seeded deployment: the POST body's fields plus what only the service sets (`id`, `status`,
 * `created_at`, `image_version`, `repo_commit_sha`) and the listing's filter attributes, which
 * the spec's Deployment does not show (`deployment_type`, an older spelling of
 * `source_config.deployment_type`, which wins; `remote_reconciled`, `tag_value_ids`).
 * A seeded deployment starts settled: its one revision is already active.
 */
export const SeedDeploymentSchema = Type.Object(
  {
    id: Type.Optional(Uuid),
    name: Type.String({ minLength: 1 }),
    source: DeploymentSourceSchema,
    source_config: Type.Optional(SourceConfigRequestSchema),
    source_revision_config: Type.Optional(SeedRevisionConfigSchema),
    secrets: Type.Optional(Type.Array(Type.Object({ name: Type.String(), value: Type.String() }, closed))),
    secret_references: Type.Optional(Nullable(Type.Array(SeedSecretReferenceSchema))),
    image_version: Type.Optional(Nullable(Type.String())),
    /** Default: READY. Any string: also a value only the real service uses. */
    status: Type.Optional(AnyStatusSchema),
    /** Every revision made after the start fails at this phase (`create`, `build`, `deploy`). */
    fail_revisions: Type.Optional(RevisionFailureSchema),
    /** How listings show it: fields left out (`omit`), JSON merged in (`extra`). */
    quirks: Type.Optional(QuirksSchema),
    /** ISO date-time; default: the simulator's start. */
    created_at: Type.Optional(Type.String({ format: "date-time" })),
    /** Any type, also one the service's published API does not list (see `KNOWN_DEPLOYMENT_TYPES`). */
    deployment_type: Type.Optional(Type.String({ minLength: 1 })),
    remote_reconciled: Type.Optional(Type.Boolean()),
    tag_value_ids: Type.Optional(Type.Array(Type.String())),
  },
  closed,
);

/** The whole seed. Top-level keys are camelCase; resources use the service's snake_case fields. */
export const SimulatorSeedSchema = Type.Object(
  {
    tenantId: Type.Optional(Uuid),
    providers: Type.Optional(Type.Array(SeedProviderSchema)),
    integrations: Type.Optional(
      Type.Array(Type.Object({ id: Uuid, repos: Type.Array(SeedRepoSchema) }, closed)),
    ),
    deployments: Type.Optional(Type.Array(SeedDeploymentSchema)),
    /**
     * Tracing projects as the real service keeps them (see tracing-projects.ts): `keep` makes a
     * delete without `delete_tracing_project=true` leave one behind; `names` are left over already.
     */
    tracingProjects: Type.Optional(
      Type.Object(
        {
          keep: Type.Optional(Type.Boolean()),
          names: Type.Optional(Type.Array(Type.String({ minLength: 1 }))),
        },
        closed,
      ),
    ),
  },
  closed,
);
/** See {@link SimulatorSeedSchema}. */
export type SimulatorSeed = Static<typeof SimulatorSeedSchema>;
/** One deployment of a seed. */
export type SeedDeployment = Static<typeof SeedDeploymentSchema>;
const seedCheck = TypeCompiler.Compile(SimulatorSeedSchema);

const DATE_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;
if (!FormatRegistry.Has("date-time")) {
  FormatRegistry.Set("date-time", (v) => DATE_TIME.test(v) && !Number.isNaN(Date.parse(v)));
}

/**
 * Checks `value` as a seed. Throws an Error whose message starts with `origin` and names every
 * bad field (`seed.yaml: deployments[1].name: Field required`), including duplicates that
 * would make the state ambiguous (deployment names and ids, integration ids).
 */
export function validateSeed(value: unknown, origin = "seed"): SimulatorSeed {
  // An empty YAML document is null: an empty seed.
  const seed = value ?? {};
  if (!seedCheck.Check(seed)) throw new Error(`${origin}: ${renderIssues(issuesOf(seedCheck, seed, []))}`);
  const issues = duplicates(seed);
  if (issues.length > 0) throw new Error(`${origin}: ${renderIssues(issues)}`);
  return seed;
}

/** Reads and validates a seed file (YAML, or JSON, which is YAML too). Errors name the file and field. */
export async function loadSeed(path: string): Promise<SimulatorSeed> {
  let text: string;
  try {
    text = await readFile(path, "utf8");
  } catch (cause) {
    throw new Error(`${path}: cannot read the seed file`, { cause });
  }
  let value: unknown;
  try {
    value = parseYaml(text);
  } catch (cause) {
    const reason = cause instanceof Error ? cause.message.split("\n")[0] : String(cause);
    throw new Error(`${path}: not valid YAML or JSON: ${reason}`, { cause });
  }
  return validateSeed(value, path);
}

function duplicates(seed: SimulatorSeed): ValidationIssue[] {
  const issues: ValidationIssue[] = [];
  const check = (kind: string, field: string, values: readonly (string | undefined)[]) => {
    const seen = new Set<string>();
    values.forEach((v, i) => {
      if (v === undefined) return;
      if (seen.has(v))
        issues.push({ loc: [kind, i, field], msg: `duplicate ${field} '${v}'`, type: "value_error" });
      seen.add(v);
    });
  };
  check(
    "deployments",
    "name",
    (seed.deployments ?? []).map((d) => d.name),
  );
  check(
    "deployments",
    "id",
    (seed.deployments ?? []).map((d) => d.id),
  );
  check(
    "integrations",
    "id",
    (seed.integrations ?? []).map((i) => i.id),
  );
  return issues;
}
