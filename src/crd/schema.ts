/**
 * The Deployment custom resource (`deployments.dms.dev`), written once: `render.ts` turns these
 * TypeBox schemas into the CRD's OpenAPI schema, and `Static<>` turns them into the types the
 * controller uses. Descriptions are what `kubectl explain deployments.dms.dev.spec` shows; CEL
 * rules (`x-kubernetes-validations`) make the API server refuse bad input before the operator
 * sees it, with messages that name the field and the fix.
 */
import { type Static, Type } from "@sinclair/typebox";
import { DEPLOYMENT_SOURCES, KNOWN_DEPLOYMENT_TYPES, REVISION_SOURCES } from "../api/wire.ts";
import { CONNECTION_KINDS } from "./connection-schema.ts";
import { ObjectMetaSchema } from "./object-meta.ts";
import { StringEnum } from "./openapi-types.ts";
import { ResourceSpecSchema } from "./resource-spec-schema.ts";
import { rolloutWindowsSchema } from "./rollout-windows-schema.ts";
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

/** Values of `spec.managementPolicy`. */
export const MANAGEMENT_POLICIES = ["Manage", "ObserveOnly"] as const;
/** Values of `spec.deletionPolicy`. */
export const DELETION_POLICIES = ["Orphan", "Delete"] as const;

const Uuid = (description: string) => Type.String({ format: "uuid", maxLength: 36, description });

/** Longest name we accept for a deployment: bounded so the CEL immutability rule stays cheap. */
export const MAX_NAME_LENGTH = 253;
/**
 * Most secrets (and secret references) one resource may list: bounds the cost of their CEL rules
 * and, with the other bounds, the size of the resource (see `test/unit/crd-size.test.ts`).
 */
export const MAX_SECRETS = 256;
/** Most Secret references one resource may list (each names a Secret and a key of its own). */
export const MAX_SECRET_REFERENCES = 64;
/** Longest URL (repository, custom URL): what browsers and most proxies accept. */
export const MAX_URL_LENGTH = 2048;
/** Longest install or build command: a longer one belongs in a script of the repository. */
export const MAX_COMMAND_LENGTH = 2048;
/** Longest path of a file in the source (graph configuration, tarball). */
export const MAX_PATH_LENGTH = 1024;
/** Longest image reference: a registry host, a repository path, a tag and a digest. */
export const MAX_IMAGE_LENGTH = 512;
/** Longest git ref: a branch, a tag or a commit (Git's own limit is the file system's, 255). */
export const MAX_REF_LENGTH = 256;
/**
 * Longest secret name: the name the deployment sees, an environment variable's (128, as in a
 * container's `env`).
 */
export const MAX_SECRET_NAME_LENGTH = 128;
/** Longest literal secret value: a longer one belongs in a Kubernetes Secret (valueFrom). */
export const MAX_SECRET_VALUE_LENGTH = 512;

const SourceConfig = Type.Object(
  {
    integrationId: Type.Optional(
      Uuid("GitHub integration id (source github). Set by spec.github when that shorthand is used."),
    ),
    repoUrl: Type.Optional(
      Type.String({
        maxLength: MAX_URL_LENGTH,
        description: "Repository URL (source github). Set by spec.github when that shorthand is used.",
      }),
    ),
    buildOnPush: Type.Optional(
      Type.Boolean({ description: "Build a new revision on every push to repoRef." }),
    ),
    customUrl: Type.Optional(
      Type.String({ maxLength: MAX_URL_LENGTH, description: "Custom URL the deployment is served at." }),
    ),
    listenerId: Type.Optional(Uuid("Id of the listener (self-hosted data plane) that runs the deployment.")),
    listenerConfig: Type.Optional(
      Type.Object(
        {
          k8sNamespace: Type.Optional(
            Type.String({ description: "Kubernetes namespace the listener deploys into.", maxLength: 63 }),
          ),
        },
        { description: "Settings for the listener." },
      ),
    ),
    installCommand: Type.Optional(
      Type.String({ maxLength: MAX_COMMAND_LENGTH, description: "Command that installs dependencies." }),
    ),
    buildCommand: Type.Optional(
      Type.String({ maxLength: MAX_COMMAND_LENGTH, description: "Command that builds the application." }),
    ),
    resourceSpec: Type.Optional(ResourceSpecSchema),
    deploymentType: Type.Optional(
      StringEnum(KNOWN_DEPLOYMENT_TYPES, {
        description:
          "The deployment's type on the service, which decides its tier and price: dev_free, dev, prod, dev_zero or dev_free_zero (only the *_zero types scale to zero). Sent on create; the service's default is prod. Cannot change once set: the service fixes a deployment's type at creation. Left out: whatever type the service's deployment has is accepted.",
        "x-kubernetes-validations": [
          {
            rule: "self == oldSelf",
            message:
              "spec.sourceConfig.deploymentType cannot change: the service fixes a deployment's type at creation, so a new type means a new deployment; restore the previous value, or create a new resource (with another spec.name) of the new type",
            reason: "FieldValueForbidden",
          },
        ],
      }),
    ),
  },
  {
    description:
      "Source settings whose change needs no new revision (or that cannot change after creation). Fields left out are not managed.",
  },
);

const SourceRevisionConfig = Type.Object(
  {
    repoRef: Type.Optional(
      Type.String({
        maxLength: MAX_REF_LENGTH,
        description:
          "Git ref (branch, tag or commit) to deploy. With spec.github, defaults to the default branch.",
      }),
    ),
    graphConfigPath: Type.Optional(
      Type.String({ maxLength: MAX_PATH_LENGTH, description: "Path of the graph configuration file." }),
    ),
    imageUri: Type.Optional(
      Type.String({
        maxLength: MAX_IMAGE_LENGTH,
        description: "Image to deploy (docker sources), at most 512 characters.",
      }),
    ),
    sourceTarballPath: Type.Optional(
      Type.String({ maxLength: MAX_PATH_LENGTH, description: "Path of the uploaded source tarball." }),
    ),
  },
  { description: "Source settings whose change creates a new revision. Fields left out are not managed." },
);

const SecretEntry = Type.Object(
  {
    name: Type.String({
      minLength: 1,
      maxLength: MAX_SECRET_NAME_LENGTH,
      description: "Name of the secret (case kept), at most 128 characters.",
    }),
    value: Type.Optional(
      Type.String({
        maxLength: MAX_SECRET_VALUE_LENGTH,
        description:
          "Literal value, at most 512 characters. Prefer valueFrom: this one is stored in the resource.",
      }),
    ),
    valueFrom: Type.Optional(
      Type.Object(
        {
          secretKeyRef: Type.Object(
            {
              name: Type.String({
                minLength: 1,
                maxLength: MAX_NAME_LENGTH,
                description: "Name of a Secret in the resource's own namespace.",
              }),
              key: Type.String({
                minLength: 1,
                maxLength: MAX_NAME_LENGTH,
                pattern: "^[-._a-zA-Z0-9]+$",
                description: "Key in that Secret's data.",
              }),
            },
            { description: "A key of a Kubernetes Secret in the resource's own namespace (never another)." },
          ),
        },
        { description: "Where the value comes from." },
      ),
    ),
  },
  {
    description: "A secret of the deployment: a name and exactly one of value or valueFrom.",
    "x-kubernetes-validations": [
      {
        rule: "has(self.value) != has(self.valueFrom)",
        message: "spec.secrets[]: set exactly one of value or valueFrom.secretKeyRef",
        reason: "FieldValueInvalid",
      },
    ],
  },
);

const SecretReference = Type.Object(
  {
    name: Type.String({
      minLength: 1,
      maxLength: MAX_SECRET_NAME_LENGTH,
      description: "Name the deployment sees, at most 128 characters.",
    }),
    secretName: Type.String({
      minLength: 1,
      maxLength: MAX_NAME_LENGTH,
      description: "Kubernetes Secret name.",
    }),
    secretKey: Type.String({ minLength: 1, maxLength: MAX_NAME_LENGTH, description: "Key in that Secret." }),
  },
  { description: "A Kubernetes Secret the deployment's runtime reads itself (source external_docker only)." },
);

const Github = Type.Object(
  {
    integrationId: Uuid("GitHub integration whose repository listing resolves the repository."),
    repository: Type.String({
      maxLength: 201,
      pattern: "^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$",
      description: "Repository as owner/name.",
    }),
  },
  {
    description:
      "Shorthand for a GitHub repository: the operator resolves sourceConfig.repoUrl and sourceConfig.integrationId, and sourceRevisionConfig.repoRef (the default branch) when unset.",
  },
);

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

/**
 * `spec.rolloutTimeout`: `0`, or a Go duration of whole or decimal hours, minutes, seconds and
 * milliseconds (`30m`, `1h30m`, `1.5h`, `90s`); what `parseDuration` reads.
 */
export const ROLLOUT_TIMEOUT_PATTERN = "^(0|([0-9]+(\\.[0-9]+)?(ms|s|m|h))+)$";

/** `spec.rolloutTimeout` when the spec does not set it. */
export const DEFAULT_ROLLOUT_TIMEOUT = "30m";

/**
 * `spec.revisionReuse`: when a change that would build a new revision may redeploy an earlier
 * one instead (revision-reuse.ts). `Pinned`: only a reference that cannot move (an image by
 * digest, a full commit sha); `SameReference`: also the same tag or branch name; `Never`.
 */
export const REVISION_REUSE_POLICIES = ["Pinned", "SameReference", "Never"] as const;
export type RevisionReusePolicy = (typeof REVISION_REUSE_POLICIES)[number];

/**
 * `spec.revisionReuse` when the spec does not set it. Applied by the operator, not by a CRD
 * default, so that existing objects are not rewritten by the API server.
 */
export const DEFAULT_REVISION_REUSE: RevisionReusePolicy = "Pinned";

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
/**
 * `spec.driftPolicy`: what the operator does about a change made to the service's deployment
 * outside this resource (a field that differs from a spec already applied). `Correct`: put it
 * back (a PATCH, or a redeploy of the operator's own revision when `spec.revisionReuse` allows);
 * `Report`: record it and write nothing, the team decides.
 */
export const DRIFT_POLICIES = ["Correct", "Report"] as const;
export type DriftPolicy = (typeof DRIFT_POLICIES)[number];

/** `spec.driftPolicy` when the spec does not set it (applied by the operator, not a CRD default). */
export const DEFAULT_DRIFT_POLICY: DriftPolicy = "Correct";

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
    sourceConfig: Type.Optional(SourceConfig),
    sourceRevisionConfig: Type.Optional(SourceRevisionConfig),
    revisionSource: Type.Optional(
      StringEnum(REVISION_SOURCES, {
        description: "Source of new revisions when it differs from spec.source; sent with each new revision.",
      }),
    ),
    secrets: Type.Optional(
      Type.Array(SecretEntry, {
        maxItems: MAX_SECRETS,
        description:
          "Secrets of the deployment. Left out: not managed. An empty list is sent once to clear them; a service that keeps them (it reads an empty list on an update as unchanged) is reported (CannotClearSecrets) and not sent the list again.",
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["name"],
      }),
    ),
    secretReferences: Type.Optional(
      Type.Array(SecretReference, {
        maxItems: MAX_SECRET_REFERENCES,
        description: "Kubernetes Secret references, only with source external_docker.",
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["name"],
      }),
    ),
    github: Type.Optional(Github),
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
