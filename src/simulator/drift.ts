/**
 * Drift: a change made to a deployment by "someone else" (the service's UI, another tool, the
 * service itself), through `store.drift()` or `PATCH /_sim/deployments/{id}`. Unlike the public
 * PATCH it may set read-only state (status, image_version) and the listing's filter attributes.
 */
import { type Static, Type } from "@sinclair/typebox";
import { TypeCompiler } from "@sinclair/typebox/compiler";
import { Nullable, RevisionSourceSchema, sourceRevisionFields } from "../api/wire.ts";
import { SourceConfigRequestSchema } from "../api/wire-requests.ts";

import { REVISION_FAILURES } from "./record.ts";

const closed = { additionalProperties: false } as const;

/**
 * Any status string: one of the spec's, or one only the real service uses (e.g.
 * `AWAITING_FINAL_DELETE`), to show how a client copes.
 */
export const AnyStatusSchema = Type.String({ minLength: 1 });

/** `create`, `build` or `deploy`: the phase at which every new revision of the deployment fails. */
export const RevisionFailureSchema = Type.Union(REVISION_FAILURES.map((f) => Type.Literal(f)));

/** How listings show the deployment: see `Quirks` in record.ts. */
export const QuirksSchema = Type.Object(
  {
    /** Top-level fields left out of listings, e.g. `["id"]`. */
    omit: Type.Optional(Type.Array(Type.String({ minLength: 1 }))),
    /** JSON merged into listings: unknown fields, nulls in nested fields. */
    extra: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
  },
  closed,
);

/**
 * `source_revision_config` as a seed or a drift sets it: the spec's fields, `repo_commit_sha`
 * included; any other is refused (it would be answered as a field the spec does not have).
 */
export const SeedRevisionConfigSchema = Type.Object(
  { ...sourceRevisionFields, repo_commit_sha: Type.Optional(Nullable(Type.String())) },
  closed,
);

/** A secret reference as a seed or a drift sets it: the spec's three fields, no other. */
export const SeedSecretReferenceSchema = Type.Object(
  { name: Type.String(), secret_name: Type.String(), secret_key: Type.String() },
  closed,
);

/** What a drift may change. Every field is optional; absent fields stay as they are. */
export const DriftChangeSchema = Type.Object(
  {
    /** Merged like a PATCH: given non-null fields replace, `resource_spec` as a whole. */
    source_config: Type.Optional(SourceConfigRequestSchema),
    /** Merged; a change makes a new revision (as someone else's PATCH would). May set `repo_commit_sha`. */
    source_revision_config: Type.Optional(SeedRevisionConfigSchema),
    /** Replaces the secrets; a change makes a new revision. */
    secrets: Type.Optional(Type.Array(Type.Object({ name: Type.String(), value: Type.String() }, closed))),
    secret_references: Type.Optional(Nullable(Type.Array(SeedSecretReferenceSchema))),
    revision_source: Type.Optional(Nullable(RevisionSourceSchema)),
    /** `true`: make a new revision even though nothing changed (someone redeployed). */
    new_revision: Type.Optional(Type.Boolean()),
    image_version: Type.Optional(Nullable(Type.String())),
    /** Pins the status (any string); `null` returns to the status derived from time. */
    status: Type.Optional(Nullable(AnyStatusSchema)),
    /** Every new revision fails at this phase; `null`: they succeed again. */
    fail_revisions: Type.Optional(Nullable(RevisionFailureSchema)),
    /** How listings show it (replaces the previous quirks); `null` removes them. */
    quirks: Type.Optional(Nullable(QuirksSchema)),
    /** Any type, also one the service's published API does not list (see `KNOWN_DEPLOYMENT_TYPES`). */
    deployment_type: Type.Optional(Type.String({ minLength: 1 })),
    remote_reconciled: Type.Optional(Type.Boolean()),
    tag_value_ids: Type.Optional(Type.Array(Type.String())),
    /** Sets the display name, as the service's UI does; `null` removes it (which a PATCH cannot). */
    display_name: Type.Optional(Nullable(Type.String({ minLength: 1 }))),
  },
  closed,
);
/** See {@link DriftChangeSchema}. */
export type DriftChange = Static<typeof DriftChangeSchema>;
/** Compiled checker of drift bodies. */
export const driftCheck = TypeCompiler.Compile(DriftChangeSchema);
