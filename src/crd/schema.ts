/**
 * The Deployment custom resource (`deployments.dms.dev`), written once: `render.ts` turns these
 * TypeBox schemas into the CRD's OpenAPI schema, and `Static<>` turns them into the types the
 * controller uses. Descriptions are what `kubectl explain deployments.dms.dev.spec` shows; CEL
 * rules (`x-kubernetes-validations`) make the API server refuse bad input before the operator
 * sees it, with messages that name the field and the fix.
 */
import { type Static, Type } from "@sinclair/typebox";
import { DEPLOYMENT_SOURCES, REVISION_SOURCES } from "../api/wire.ts";
import { CONNECTION_KINDS } from "./connection-schema.ts";
import { MAX_NAME_LENGTH, ObjectMetaSchema } from "./object-meta.ts";
import { StringEnum } from "./openapi-types.ts";
import { rolloutWindowsSchema } from "./rollout-windows-schema.ts";
import {
  MAX_SECRET_REFERENCES,
  MAX_SECRETS,
  SpecSecretReferenceSchema,
  SpecSecretSchema,
} from "./secrets-schema.ts";
import { SpecGithubSchema, SpecSourceConfigSchema, SpecSourceRevisionConfigSchema } from "./source-schema.ts";
import {
  DELETION_POLICIES,
  DRIFT_POLICIES,
  MANAGEMENT_POLICIES,
  REVISION_REUSE_POLICIES,
  ROLLOUT_TIMEOUT_PATTERN,
} from "./spec-policies.ts";
import { DeploymentResourceStatusSchema } from "./status-schema.ts";

export type { Condition, DeploymentResourceStatus } from "./status-schema.ts";

/** API group of the resource. */
export const GROUP = "dms.dev";
/** The one served and stored version. */
export const VERSION = "v1alpha1";
/** `apiVersion` of the resource's objects. */
export const API_VERSION = `${GROUP}/${VERSION}`;
/** Kind of the resource. */
export const KIND = "Deployment";
/** Plural resource name (URL path segment). */
export const PLURAL = "deployments";
/** Finalizer present only while the resource needs cleanup on delete (`deletionPolicy: Delete`). */
export const FINALIZER = "dms.dev/finalizer";
/** Annotation: per-resource drift resync period (a duration such as `5m`). */
export const ANNOTATION_RECONCILE_INTERVAL = "dms.dev/reconcile-interval";
/** Annotation: any new value asks for a reconcile now; acknowledged in `status.lastHandledReconcileAt`. */
export const ANNOTATION_RECONCILE_REQUESTED_AT = "dms.dev/reconcile-requested-at";
/** Annotation: `"true"` stops every service call for the resource (deletion still works). */
export const ANNOTATION_PAUSED = "dms.dev/paused";
/**
 * Annotation: any new value lets the change held outside the rollout windows go out now, once;
 * acknowledged in `status.lastHandledRolloutNow`.
 */
export const ANNOTATION_ROLLOUT_NOW = "dms.dev/rollout-now";
/**
 * Annotation: any new value (an RFC 3339 time by convention) asks for one new revision of the
 * deployment's current configuration (a build of a tracked branch's head), through the service's
 * rebuild route; acknowledged in `status.lastHandledRebuildAt`. Held by rollout windows.
 */
export const ANNOTATION_REBUILD_REQUESTED_AT = "dms.dev/rebuild-requested-at";

const ConnectionRef = Type.Object(
  {
    kind: StringEnum(CONNECTION_KINDS, {
      description:
        "ServiceConnection (in this resource's namespace) or ClusterServiceConnection (cluster-scoped).",
    }),
    name: Type.String({ minLength: 1, maxLength: MAX_NAME_LENGTH, description: "Name of the connection." }),
  },
  {
    description:
      "The connection (tenant) this deployment lives on. Left out: the operator's default connection. Cannot change: moving a deployment to another tenant is a delete and a create.",
    "x-kubernetes-validations": [
      {
        rule: "self == oldSelf",
        message:
          "spec.connectionRef is immutable: the deployment lives on that tenant; create a new resource to deploy through another connection",
        reason: "FieldValueForbidden",
      },
    ],
  },
);

const SPEC_RULES = [
  {
    // Adding or removing the reference would re-home the deployment just as changing it would.
    rule: "has(self.connectionRef) == has(oldSelf.connectionRef)",
    message:
      "spec.connectionRef cannot be added or removed: the deployment lives on the tenant it was created on; create a new resource to deploy through another connection",
    fieldPath: ".connectionRef",
    reason: "FieldValueForbidden",
  },
  {
    rule: "!has(self.secretReferences) || self.source == 'external_docker'",
    message:
      "spec.secretReferences is allowed only with spec.source external_docker: remove it or use spec.secrets",
    fieldPath: ".secretReferences",
    reason: "FieldValueForbidden",
  },
  {
    rule: "!has(self.github) || self.source == 'github' || (has(self.revisionSource) && self.revisionSource == 'github')",
    message: "spec.github is allowed only with spec.source github (or spec.revisionSource github): remove it",
    fieldPath: ".github",
    reason: "FieldValueForbidden",
  },
  {
    // The service refuses such a create; refused at apply instead, naming both ways to give the
    // repository. An ObserveOnly resource never creates: it only reads the deployment of its name.
    rule: "self.source != 'github' || (has(self.managementPolicy) && self.managementPolicy == 'ObserveOnly') || has(self.github) || (has(self.sourceConfig) && has(self.sourceConfig.repoUrl) && has(self.sourceConfig.integrationId))",
    message:
      "spec.source github needs its repository: set spec.github (repository owner/name and integrationId), or sourceConfig.repoUrl and sourceConfig.integrationId",
    fieldPath: ".source",
    reason: "FieldValueRequired",
  },
  {
    rule: "!has(self.github) || !has(self.sourceConfig) || (!has(self.sourceConfig.repoUrl) && !has(self.sourceConfig.integrationId))",
    message:
      "spec.github sets sourceConfig.repoUrl and sourceConfig.integrationId: remove those two or remove spec.github",
    fieldPath: ".github",
    reason: "FieldValueForbidden",
  },
];

/** A DNS subdomain (RFC 1123), what Kubernetes accepts as a ConfigMap's name. */
export const DNS_SUBDOMAIN_PATTERN = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$";

const Export = Type.Object(
  {
    configMapName: Type.String({
      minLength: 1,
      maxLength: MAX_NAME_LENGTH,
      pattern: DNS_SUBDOMAIN_PATTERN,
      description:
        "Name of a ConfigMap in this resource's namespace (never another) that the operator keeps up to date with the keys url (the deployment's custom URL, when it has one), deploymentId, activeRevisionId, and imageUri or repoCommitSha (what the active revision deployed, once the service reported it). The ConfigMap is owned by this resource (a controller ownerReference: removed with it by the garbage collector). An existing ConfigMap of that name the operator does not own is never overwritten: the condition Exported says ExportConflict. Changing the name or removing spec.export deletes the ConfigMap the operator wrote.",
    }),
  },
  {
    description:
      "What the applications in the cluster read of the deployment: its URL and live revision, in a ConfigMap the operator writes when they change.",
  },
);

/** Longest `spec.displayName`: the name the service's UI shows. */
export const MAX_DISPLAY_NAME_LENGTH = 256;

/** `spec` of the Deployment resource: what the service's deployment must look like. */
export const DeploymentSpecSchema = Type.Object(
  {
    name: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: MAX_NAME_LENGTH,
        description:
          "Name of the deployment on the service. Defaults to metadata.name. Cannot change once set: the service cannot rename a deployment.",
      }),
    ),
    source: StringEnum(DEPLOYMENT_SOURCES, {
      description: "Where the deployment comes from. Cannot change after creation.",
      "x-kubernetes-validations": [
        {
          rule: "self == oldSelf",
          message: "spec.source is immutable: create a new resource to deploy from another source",
          reason: "FieldValueForbidden",
        },
      ],
    }),
    sourceConfig: Type.Optional(SpecSourceConfigSchema),
    sourceRevisionConfig: Type.Optional(SpecSourceRevisionConfigSchema),
    revisionSource: Type.Optional(
      StringEnum(REVISION_SOURCES, {
        description: "Source of new revisions when it differs from spec.source; sent with each new revision.",
      }),
    ),
    secrets: Type.Optional(
      Type.Array(SpecSecretSchema, {
        maxItems: MAX_SECRETS,
        description:
          "Secrets of the deployment. Left out: not managed. An empty list is sent once to clear them; a service that keeps them (it reads an empty list on an update as unchanged) is reported (CannotClearSecrets) and not sent the list again.",
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["name"],
      }),
    ),
    secretReferences: Type.Optional(
      Type.Array(SpecSecretReferenceSchema, {
        maxItems: MAX_SECRET_REFERENCES,
        description: "Kubernetes Secret references, only with source external_docker.",
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["name"],
      }),
    ),
    github: Type.Optional(SpecGithubSchema),
    connectionRef: Type.Optional(ConnectionRef),
    managementPolicy: Type.Optional(
      StringEnum(MANAGEMENT_POLICIES, {
        default: "Manage",
        description:
          "Manage: create and update the service's deployment. ObserveOnly: never write to the service.",
      }),
    ),
    deletionPolicy: Type.Optional(
      StringEnum(DELETION_POLICIES, {
        default: "Orphan",
        description: "On delete of this resource, Orphan leaves the service's deployment; Delete deletes it.",
      }),
    ),
    deleteTracingProject: Type.Optional(
      Type.Boolean({
        // No CRD default: absent means false, and the API server writes nothing into every object.
        description:
          "With deletionPolicy Delete: delete the tracing project the service created with the deployment too, so that the same name can be created again (previews). Absent or false (the default), the tracing project (and its traces) stays, and a new deployment of this name is refused (reason NameReserved).",
      }),
    ),
    deletionProtection: Type.Optional(
      Type.Boolean({
        // No CRD default: absent means false, and the API server writes nothing into every object.
        description:
          'true: the resource cannot be deleted: the ValidatingAdmissionPolicy dms-operator-deletion-protection, shipped with the CRDs, refuses its DELETE (a namespace holding it stays Terminating), so that a pruned file or a stray kubectl delete cannot remove it and, with deletionPolicy Delete, its deployment on the service. To delete it, set it to false first: kubectl patch dmsd <name> --type merge -p \'{"spec":{"deletionProtection":false}}\'. Deleted while true all the same (its CRD deleted, or the policy not installed), its deployment on the service is left in place, whatever deletionPolicy says. Absent or false (the default): no protection.',
      }),
    ),
    rolloutTimeout: Type.Optional(
      Type.String({
        maxLength: 32,
        pattern: ROLLOUT_TIMEOUT_PATTERN,
        description:
          "How long a new revision may take to go live (a Go duration such as 30m, 1h30m, 90s) before the resource is Stalled with reason RolloutTimeout and the revision's log tail; 0 disables. Default 30m. Nothing is sent again because of it: the rollout recovers when the revision goes live or fails.",
      }),
    ),
    revisionReuse: Type.Optional(
      StringEnum(REVISION_REUSE_POLICIES, {
        // No CRD default: the operator applies Pinned, and existing objects are not rewritten.
        description:
          "When a change would build a new revision and an earlier revision this operator created deployed exactly the same (sourceRevisionConfig, revisionSource and secret values), redeploy that revision instead (no build). Pinned (the default): only when the reference cannot move, an image by digest (@sha256:) or a repoRef that is the full commit sha the revision built; SameReference: also the same tag or branch name (the team asserts its references do not move); Never: always build.",
      }),
    ),
    export: Type.Optional(Export),
    driftPolicy: Type.Optional(
      StringEnum(DRIFT_POLICIES, {
        // No CRD default: the operator applies Correct, and existing objects are not rewritten.
        description:
          "What the operator does when the service's deployment differs from a spec it already applied (a change made outside Git: the service's UI, langgraph deploy, another tool). Correct (the default): put it back, by a PATCH, or by a redeploy of a revision this operator created when spec.revisionReuse allows (never a rebuild then), with a DriftCorrected event naming the fields (never the values) that differed. Report: write nothing; Synced=False with reason Drifted names the fields and says the policy is Report, and the team decides (a change of the spec applies the whole spec, the drifted fields included). Either way a revision this operator did not create is recorded in status.externalRevision with an ExternalRevision event; a build on push (sourceConfig.buildOnPush true, on the branch sourceRevisionConfig.repoRef names) is not one.",
      }),
    ),
    displayName: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: MAX_DISPLAY_NAME_LENGTH,
        description:
          "The name the service's UI shows for the deployment (its display_name), at most 256 characters. Sent by a PATCH (a create does not take it: it follows the create at once). It cannot be cleared on the service: removing it from the spec stops managing it and leaves the service's value as it is.",
      }),
    ),
    rolloutWindows: Type.Optional(
      rolloutWindowsSchema(
        "When a change that makes a new revision (sourceRevisionConfig, secrets, revisionSource) may roll out: outside them it is held (Synced=False, reason OutsideRolloutWindow) until a window opens, or until the annotation dms.dev/rollout-now gets a new value; other changes (sourceConfig) go at once. Left out: the connection's spec.rolloutWindows. An empty list: no windows, roll out any time.",
      ),
    ),
  },
  {
    description:
      "The desired deployment on the Deployment Management Service. Only the fields set here are managed.",
    "x-kubernetes-validations": SPEC_RULES,
  },
);
export type DeploymentSpec = Static<typeof DeploymentSpecSchema>;

/** A whole Deployment resource object. */
export const DeploymentResourceSchema = Type.Object(
  {
    apiVersion: Type.Optional(Type.String({ description: "dms.dev/v1alpha1." })),
    kind: Type.Optional(Type.String({ description: "Deployment." })),
    metadata: Type.Optional(ObjectMetaSchema),
    spec: DeploymentSpecSchema,
    // Defaulted to {} so that a resource not reconciled yet has a status to read: Flux's
    // healthCheckExprs (docs/gitops-health.md) then say InProgress where a missing status would
    // make every expression fail with "no such attribute".
    status: Type.Optional({
      ...DeploymentResourceStatusSchema,
      default: {},
    } as typeof DeploymentResourceStatusSchema),
  },
  {
    description:
      "A deployment of the Deployment Management Service, kept in line with this resource by dms-operator. Not the built-in apps/v1 Deployment: `kubectl get deployment <name>` reads that kind; this one is `kubectl get dmsd <name>` (short name dmsd, full name deployments.dms.dev).",
    "x-kubernetes-validations": [
      {
        // The effective name (spec.name, else metadata.name) is what the service knows the
        // deployment by; changing it would orphan that deployment and create a second one.
        rule: "(has(oldSelf.spec.name) ? oldSelf.spec.name : oldSelf.metadata.name) == (has(self.spec.name) ? self.spec.name : self.metadata.name)",
        message:
          "spec.name is immutable: the service cannot rename a deployment; keep the previous name (metadata.name when spec.name was unset) or create a new resource",
        fieldPath: ".spec.name",
        reason: "FieldValueForbidden",
      },
    ],
  },
);
export type DeploymentResource = Static<typeof DeploymentResourceSchema>;
