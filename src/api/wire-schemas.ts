/**
 * The wire schemas by name: those an answer or a request body is checked against, answers from
 * wire.ts and requests from wire-requests.ts, as the client names them.
 */
import { type Static, Type } from "@sinclair/typebox";
import {
  DeploymentPageSchema,
  DeploymentSchema,
  ForgeRepoSchema,
  OAuthProviderSchema,
  RevisionPageSchema,
  RevisionSchema,
} from "./wire.ts";
import { CreateDeploymentBodySchema, PatchDeploymentBodySchema } from "./wire-requests.ts";

/**
 * The schemas a request or an answer is checked against, by the name the client gives them: an
 * answer with the compiled check of wire-checks.ts (validate.ts), a failure explained and a
 * request body checked with TypeBox (wire-errors.ts).
 */
export const WIRE_SCHEMAS = {
  /** Any JSON: the caller reads it. */
  Any: Type.Unknown(),
  DeploymentPage: DeploymentPageSchema,
  Deployment: DeploymentSchema,
  RevisionPage: RevisionPageSchema,
  Revision: RevisionSchema,
  /** A listing read item by item: each item checked on its own (`readableItems`, validate.ts). */
  ItemList: Type.Array(Type.Unknown()),
  OAuthProvider: OAuthProviderSchema,
  ForgeRepo: ForgeRepoSchema,
  CreateDeploymentBody: CreateDeploymentBodySchema,
  PatchDeploymentBody: PatchDeploymentBodySchema,
} as const;
export type WireSchemaName = keyof typeof WIRE_SCHEMAS;
/** The value a schema of {@link WIRE_SCHEMAS} admits. */
export type WireBody<N extends WireSchemaName> = Static<(typeof WIRE_SCHEMAS)[N]>;
