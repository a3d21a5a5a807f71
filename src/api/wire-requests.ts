/**
 * The service's wire model, the requests: the bodies of a deployment's create (POST) and change
 * (PATCH), and the listing's query filters, as TypeBox schemas with their static types. Request
 * schemas are what we send and what the simulator accepts: they reject unknown fields at the top,
 * as the service's own request models do. The answers are in wire.ts.
 */
import { type Static, Type } from "@sinclair/typebox";
import {
  DeploymentSourceSchema,
  type DeploymentStatus,
  type DeploymentType,
  Nullable,
  type OpenEnum,
  RevisionSourceSchema,
  sourceConfigFields,
  sourceRevisionFields,
} from "./wire.ts";

const closed = { additionalProperties: false } as const;

const RequestSecretSchema = Type.Object({ name: Type.String(), value: Type.String() }, closed);
const RequestSecretReferenceSchema = Type.Object(
  { name: Type.String(), secret_name: Type.String(), secret_key: Type.String() },
  closed,
);

/** `source_config` of a PATCH or POST body: every field nullable, validated by source. */
export const SourceConfigRequestSchema = Type.Object(
  {
    ...sourceConfigFields,
    integration_id: Type.Optional(Nullable(Type.String({ format: "uuid" }))),
    listener_id: Type.Optional(Nullable(Type.String({ format: "uuid" }))),
    listener_config: Type.Optional(
      Nullable(Type.Object({ k8s_namespace: Type.Optional(Type.String()) }, closed)),
    ),
  },
  closed,
);
export type SourceConfigRequest = Static<typeof SourceConfigRequestSchema>;

/** `source_revision_config` of a PATCH or POST body. Any change here makes a new revision. */
export const SourceRevisionConfigRequestSchema = Type.Object(sourceRevisionFields, closed);
export type SourceRevisionConfigRequest = Static<typeof SourceRevisionConfigRequestSchema>;

/** What a PATCH and a POST body may both set. */
const changeableFields = {
  source_config: Type.Optional(SourceConfigRequestSchema),
  source_revision_config: Type.Optional(SourceRevisionConfigRequestSchema),
  secrets: Type.Optional(Nullable(Type.Array(RequestSecretSchema))),
  secret_references: Type.Optional(Nullable(Type.Array(RequestSecretReferenceSchema))),
};

/** Body of PATCH /v2/deployments/{id}. It never carries `name` or `source`. */
export const PatchDeploymentBodySchema = Type.Object(
  {
    revision_source: Type.Optional(Nullable(RevisionSourceSchema)),
    ...changeableFields,
    /**
     * Not in the shared spec (the service's provider knows it): the name shown in the service's
     * UI. PATCH only (a create does not take it); it cannot be cleared, so never empty, and
     * `null` leaves it as it is.
     */
    display_name: Type.Optional(Nullable(Type.String({ minLength: 1 }))),
  },
  closed,
);
export type PatchDeploymentBody = Static<typeof PatchDeploymentBodySchema>;

/**
 * Body of POST /v2/deployments. The spec does not show this operation's request; this shape
 * (what a PATCH changes, plus `name` and `source`) is our assumption, kept here alone so that it
 * is corrected in one place. The service requires `source_config`, `source_revision_config` and
 * `secrets` to be present: the client sends them empty when the caller leaves them out (see
 * the client's `withCreateDefaults`).
 */
export const CreateDeploymentBodySchema = Type.Object(
  {
    name: Type.String({ minLength: 1 }),
    source: DeploymentSourceSchema,
    ...changeableFields,
  },
  closed,
);
export type CreateDeploymentBody = Static<typeof CreateDeploymentBodySchema>;

/** Query filters of GET /v2/deployments (pagination is the client's business). */
export interface DeploymentFilters {
  name_contains?: string;
  /** Any status string: the service has values beyond the spec's list. */
  status?: OpenEnum<DeploymentStatus>;
  remote_reconciled?: boolean;
  /** Tag value ids; sent comma-separated. */
  tag_value_ids?: readonly string[];
  image_version?: string;
  deployment_type?: DeploymentType;
  /** Deployment ids; sent comma-separated. */
  deployment_ids?: readonly string[];
}
