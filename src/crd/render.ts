/**
 * Renders the CustomResourceDefinitions of the operator's kinds (`deployments.dms.dev`,
 * `serviceconnections.dms.dev`, `clusterserviceconnections.dms.dev`) from their TypeBox schemas in
 * `schema.ts` and `connection-schema.ts`. Pure: `generate.ts` writes the results to `crds/`, and a
 * unit test compares each file with `renderCrd()` so no checked-in CRD can drift from its schema.
 */
import type { TSchema } from "@sinclair/typebox";
import { stringify } from "yaml";
import {
  CLUSTER_SERVICE_CONNECTION_KIND,
  CLUSTER_SERVICE_CONNECTION_PLURAL,
  ClusterServiceConnectionSchema,
  SERVICE_CONNECTION_KIND,
  SERVICE_CONNECTION_PLURAL,
  ServiceConnectionSchema,
} from "./connection-schema.ts";
import { DeploymentResourceSchema, GROUP, KIND, PLURAL, VERSION } from "./schema.ts";

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
type JsonObject = { [key: string]: Json };

/** Keywords a structural schema of apiextensions.k8s.io/v1 may carry, in the order we print them. */
const ALLOWED_KEYWORDS = [
  "type",
  "format",
  "description",
  "default",
  "enum",
  "minimum",
  "maximum",
  "multipleOf",
  "minLength",
  "maxLength",
  "pattern",
  "minItems",
  "maxItems",
  "maxProperties",
  "required",
  "properties",
  "additionalProperties",
  "items",
  "x-kubernetes-preserve-unknown-fields",
  "x-kubernetes-list-type",
  "x-kubernetes-list-map-keys",
  "x-kubernetes-validations",
] as const;

const isObject = (value: Json | undefined): value is JsonObject =>
  typeof value === "object" && value !== null && !Array.isArray(value);

/**
 * Converts one TypeBox (JSON Schema) node into an OpenAPI v3 structural schema node: literal
 * unions become `enum`, string-keyed records become `additionalProperties` (or nothing when the
 * node preserves unknown fields), and any keyword Kubernetes would refuse is an error here rather
 * than at `kubectl apply` time.
 */
function toStructural(node: JsonObject, path: string): JsonObject {
  const out: JsonObject = { ...node };
  const anyOf = out.anyOf;
  if (Array.isArray(anyOf)) {
    const values = anyOf.map((member) => (isObject(member) ? member.const : undefined));
    if (!values.every((v): v is string => typeof v === "string")) {
      throw new Error(`${path}: only unions of string literals can be rendered (as an enum)`);
    }
    delete out.anyOf;
    out.type = "string";
    out.enum = values;
  }
  const patternProperties = out.patternProperties;
  if (isObject(patternProperties)) {
    delete out.patternProperties;
    const [valueSchema, ...others] = Object.values(patternProperties);
    if (others.length > 0 || !isObject(valueSchema))
      throw new Error(`${path}: one record value schema expected`);
    if (out["x-kubernetes-preserve-unknown-fields"] !== true) {
      out.additionalProperties = toStructural(valueSchema, `${path}.*`);
    }
  }
  if (isObject(out.properties)) {
    const properties: JsonObject = {};
    for (const [key, child] of Object.entries(out.properties)) {
      if (!isObject(child)) throw new Error(`${path}.${key}: schema object expected`);
      properties[key] = toStructural(child, `${path}.${key}`);
    }
    out.properties = properties;
  }
  if (isObject(out.items)) out.items = toStructural(out.items, `${path}[]`);

  const ordered: JsonObject = {};
  for (const keyword of ALLOWED_KEYWORDS) {
    const value = out[keyword];
    if (value !== undefined) ordered[keyword] = value;
  }
  const unknown = Object.keys(out).filter((k) => !(ALLOWED_KEYWORDS as readonly string[]).includes(k));
  if (unknown.length > 0)
    throw new Error(`${path}: keywords not allowed in a CRD schema: ${unknown.join(", ")}`);
  return ordered;
}

/** The resource's `openAPIV3Schema`: structural, with `metadata` left to the API server. */
export function openApiSchema(schema: TSchema = DeploymentResourceSchema): JsonObject {
  const plain = JSON.parse(JSON.stringify(schema)) as JsonObject;
  const root = toStructural(plain, "");
  // Kubernetes validates metadata itself and refuses a CRD that describes it further.
  if (isObject(root.properties) && isObject(root.properties.metadata)) {
    root.properties.metadata = { type: "object" };
  }
  return root;
}

/** A printer column; `wide` ones (priority 1) show under `kubectl get -o wide` only. */
const column = (name: string, type: string, jsonPath: string, description: string, wide = false) => ({
  name,
  type,
  description,
  jsonPath,
  ...(wide ? { priority: 1 } : {}),
});
/** A column showing one field of the condition `type`. */
const conditionColumn = (name: string, type: string, field: "status" | "reason", description: string) =>
  column(name, "string", `.status.conditions[?(@.type=="${type}")].${field}`, description);
const AGE = column("Age", "date", ".metadata.creationTimestamp", "Time since the resource was created.");

/**
 * `kubectl get dmsd` columns. By default what a user scans for: is it in line with the spec
 * (Synced, and the reason when it is not), what the service says (Remote), is it Ready. Under
 * `-o wide` (priority 1) the revision ids, shortened, the latest revision's status, and what is
 * live: the active revision with its commit or image version ("is my change live?").
 */
const deploymentColumns: JsonObject[] = [
  conditionColumn("Synced", "Synced", "status", "Whether the service's deployment matches the spec."),
  conditionColumn(
    "Reason",
    "Synced",
    "reason",
    "Reason of the Synced condition (e.g. ReconcileSuccess, NameConflict, SecretNotFound, Paused).",
  ),
  column("Remote", "string", ".status.remoteStatus", "Status reported by the service."),
  conditionColumn(
    "Ready",
    "Ready",
    "status",
    "Whether the service's deployment is ready with its latest revision active.",
  ),
  AGE,
  column(
    "Revisions",
    "string",
    ".status.shortRevisions",
    "Latest/active revision ids, shortened to 8 characters (equal when the latest is deployed).",
    true,
  ),
  column(
    "Revision-Status",
    "string",
    ".status.latestRevisionStatus",
    "Status of the latest revision, as the service reports it.",
    true,
  ),
  column(
    "Live",
    "string",
    ".status.liveRevision",
    "The active revision (8 characters) and what it deployed: <id>@<commit> or <id>@<image version>.",
    true,
  ),
  column(
    "Type",
    "string",
    ".spec.sourceConfig.deploymentType",
    "The deployment type the spec sets (spec.sourceConfig.deploymentType; empty when left to the service).",
    true,
  ),
  column(
    "Owner",
    "string",
    ".metadata.labels.shard\\.dms\\.dev/owner",
    "The operator replica that reconciles it (`run --sharded`; empty otherwise).",
    true,
  ),
];

/**
 * `kubectl get dmsconn` / `dmscconn` columns: can the operator reach the service with it (Ready,
 * and why not), where, and what the credential probe found. Under `-o wide`, the tenant it acts
 * as, how many Deployment resources use it and how many its namespace selector refused.
 */
const connectionColumns: JsonObject[] = [
  conditionColumn("Ready", "Ready", "status", "Whether the last credential probe succeeded."),
  conditionColumn(
    "Reason",
    "Ready",
    "reason",
    "Reason of the Ready condition (Connected, Unauthorized, Unreachable, SecretMissing, SecretUnreadable).",
  ),
  column("Base URL", "string", ".spec.baseUrl", "Base URL of the service."),
  column(
    "Providers",
    "integer",
    ".status.providers",
    "How many OAuth providers the service listed at the last probe.",
  ),
  AGE,
  column("Tenant", "string", ".spec.tenantId", "Tenant it acts as (empty: the API key's own).", true),
  column(
    "Deployments",
    "integer",
    ".status.deployments",
    "How many Deployment resources use this connection.",
    true,
  ),
  column(
    "Refused",
    "integer",
    ".status.refused",
    "How many Deployment resources its spec.namespaceSelector refused (reason ConnectionNotAllowed).",
    true,
  ),
];

/** What makes one CRD of the operator: its names, scope, schema and columns. */
export interface CrdDefinition {
  kind: string;
  plural: string;
  scope: "Namespaced" | "Cluster";
  shortNames: string[];
  schema: TSchema;
  printerColumns: JsonObject[];
  /** The schema's source file, named in the generated file's header. */
  source: string;
}

/** `deployments.dms.dev`. */
export const DEPLOYMENT_CRD: CrdDefinition = {
  kind: KIND,
  plural: PLURAL,
  scope: "Namespaced",
  shortNames: ["dmsd"],
  schema: DeploymentResourceSchema,
  printerColumns: deploymentColumns,
  source: "src/crd/schema.ts",
};

/** `serviceconnections.dms.dev`: a connection for the Deployment resources of its namespace. */
export const SERVICE_CONNECTION_CRD: CrdDefinition = {
  kind: SERVICE_CONNECTION_KIND,
  plural: SERVICE_CONNECTION_PLURAL,
  scope: "Namespaced",
  shortNames: ["dmsconn"],
  schema: ServiceConnectionSchema,
  printerColumns: connectionColumns,
  source: "src/crd/connection-schema.ts",
};

/** `clusterserviceconnections.dms.dev`: a connection for the Deployment resources of every namespace. */
export const CLUSTER_SERVICE_CONNECTION_CRD: CrdDefinition = {
  kind: CLUSTER_SERVICE_CONNECTION_KIND,
  plural: CLUSTER_SERVICE_CONNECTION_PLURAL,
  scope: "Cluster",
  shortNames: ["dmscconn"],
  schema: ClusterServiceConnectionSchema,
  printerColumns: connectionColumns,
  source: "src/crd/connection-schema.ts",
};

/** Every CRD `npm run generate` writes, in the order `crds/kustomization.yaml` lists them. */
export const CRDS: readonly CrdDefinition[] = [
  DEPLOYMENT_CRD,
  SERVICE_CONNECTION_CRD,
  CLUSTER_SERVICE_CONNECTION_CRD,
];

/** The CustomResourceDefinition object of one kind (by default `deployments.dms.dev`). */
export function crdObject(crd: CrdDefinition = DEPLOYMENT_CRD): JsonObject {
  return {
    apiVersion: "apiextensions.k8s.io/v1",
    kind: "CustomResourceDefinition",
    metadata: { name: `${crd.plural}.${GROUP}` },
    spec: {
      group: GROUP,
      names: {
        kind: crd.kind,
        listKind: `${crd.kind}List`,
        plural: crd.plural,
        singular: crd.kind.toLowerCase(),
        shortNames: crd.shortNames,
        categories: ["dms"],
      },
      scope: crd.scope,
      versions: [
        {
          name: VERSION,
          served: true,
          storage: true,
          subresources: { status: {} },
          // A fresh copy per CRD: a node shared by two objects would print as a YAML alias.
          additionalPrinterColumns: structuredClone(crd.printerColumns),
          schema: { openAPIV3Schema: openApiSchema(crd.schema) },
        },
      ],
    },
  };
}

/** The CRD as the YAML text checked in at {@link crdFile}. Deterministic. */
export function renderCrd(crd: CrdDefinition = DEPLOYMENT_CRD): string {
  const header = `# Generated by \`npm run generate\` from ${crd.source}. Do not edit.\n`;
  return header + stringify(crdObject(crd), { lineWidth: 0 });
}

/** Path of a generated CRD, relative to the repository root: `crds/dms.dev_<plural>.yaml`. */
export const crdFile = (crd: CrdDefinition): string => `crds/${GROUP}_${crd.plural}.yaml`;
