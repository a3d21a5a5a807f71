/**
 * Renders the CustomResourceDefinition of `deployments.dms.dev` from the TypeBox schema in
 * `schema.ts`. Pure: `generate.ts` writes the result to `crds/`, and a unit test compares that
 * file with `renderCrd()` so the checked-in CRD cannot drift from the schema.
 */
import type { TSchema } from "@sinclair/typebox";
import { stringify } from "yaml";
import { DeploymentResourceSchema, GROUP, KIND, PLURAL, SINGULAR, VERSION } from "./schema.ts";

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
  "minLength",
  "maxLength",
  "pattern",
  "minItems",
  "maxItems",
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

/**
 * `kubectl get dmsd` columns. By default what a user scans for: is it in line with the spec
 * (Synced, and the reason when it is not), what the service says (Remote), is it Ready. Under
 * `-o wide` (priority 1) the revision ids, shortened, and the latest revision's status.
 */
const printerColumns: JsonObject[] = [
  {
    name: "Synced",
    type: "string",
    description: "Whether the service's deployment matches the spec.",
    jsonPath: '.status.conditions[?(@.type=="Synced")].status',
  },
  {
    name: "Reason",
    type: "string",
    description:
      "Reason of the Synced condition (e.g. ReconcileSuccess, NameConflict, SecretNotFound, Paused).",
    jsonPath: '.status.conditions[?(@.type=="Synced")].reason',
  },
  {
    name: "Remote",
    type: "string",
    description: "Status reported by the service.",
    jsonPath: ".status.remoteStatus",
  },
  {
    name: "Ready",
    type: "string",
    description: "Whether the service's deployment is ready with its latest revision active.",
    jsonPath: '.status.conditions[?(@.type=="Ready")].status',
  },
  {
    name: "Age",
    type: "date",
    description: "Time since the resource was created.",
    jsonPath: ".metadata.creationTimestamp",
  },
  {
    name: "Revisions",
    type: "string",
    description: "Latest/active revision ids, shortened to 8 characters (equal when the latest is deployed).",
    jsonPath: ".status.shortRevisions",
    priority: 1,
  },
  {
    name: "Revision-Status",
    type: "string",
    description: "Status of the latest revision, as the service reports it.",
    jsonPath: ".status.latestRevisionStatus",
    priority: 1,
  },
];

/** The CustomResourceDefinition object of `deployments.dms.dev`. */
export function crdObject(): JsonObject {
  return {
    apiVersion: "apiextensions.k8s.io/v1",
    kind: "CustomResourceDefinition",
    metadata: { name: `${PLURAL}.${GROUP}` },
    spec: {
      group: GROUP,
      names: {
        kind: KIND,
        listKind: `${KIND}List`,
        plural: PLURAL,
        singular: SINGULAR,
        shortNames: ["dmsd"],
        categories: ["dms"],
      },
      scope: "Namespaced",
      versions: [
        {
          name: VERSION,
          served: true,
          storage: true,
          subresources: { status: {} },
          additionalPrinterColumns: printerColumns,
          schema: { openAPIV3Schema: openApiSchema() },
        },
      ],
    },
  };
}

/** The CRD as the YAML text checked in at `crds/dms.dev_deployments.yaml`. Deterministic. */
export function renderCrd(): string {
  const header = "# Generated by `npm run generate` from src/crd/schema.ts. Do not edit.\n";
  return header + stringify(crdObject(), { lineWidth: 0 });
}

/** Path of the generated CRD, relative to the repository root. */
export const CRD_FILE = "crds/dms.dev_deployments.yaml";
