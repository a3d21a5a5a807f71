/**
 * `status` of the Deployment resource (part of the one schema, see `schema.ts`): what the
 * operator last observed of the service's deployment, its conditions, and its own bookkeeping.
 */
import { FormatRegistry, type Static, type TObject, Type } from "@sinclair/typebox";
import { StringEnum } from "./openapi-types.ts";

// Lets TypeBox check `format: date-time` values (timestamps of conditions and bookkeeping).
const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;
if (!FormatRegistry.Has("date-time")) FormatRegistry.Set("date-time", (v) => RFC3339.test(v));

/** A standard `metav1.Condition`. */
export const ConditionSchema = Type.Object(
  {
    type: Type.String({
      maxLength: 316,
      pattern:
        "^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$",
      description: "Type of the condition, e.g. Ready, Synced, Reconciling or Stalled.",
    }),
    status: StringEnum(["True", "False", "Unknown"] as const, { description: "True, False or Unknown." }),
    observedGeneration: Type.Optional(
      Type.Integer({
        minimum: 0,
        format: "int64",
        description: "metadata.generation the condition was set from.",
      }),
    ),
    lastTransitionTime: Type.String({
      format: "date-time",
      description: "When the status of the condition last changed.",
    }),
    reason: Type.String({
      minLength: 1,
      maxLength: 1024,
      pattern: "^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$",
      description: "Machine-readable CamelCase reason.",
    }),
    message: Type.String({ maxLength: 32768, description: "Human-readable detail." }),
  },
  { description: "A condition, shaped like metav1.Condition." },
);
export type Condition = Static<typeof ConditionSchema>;

/** `status.observedGeneration` of a resource the operator writes the status of. */
export const ObservedGenerationSchema = Type.Optional(
  Type.Integer({
    minimum: 0,
    format: "int64",
    description: "metadata.generation this status was written from.",
  }),
);

/** `status.conditions`: a list map keyed by `type`, of at most `maxItems`, naming the conditions set. */
export function conditionsSchema(maxItems: number, description: string) {
  return Type.Optional(
    Type.Array(ConditionSchema, {
      maxItems,
      description,
      "x-kubernetes-list-type": "map",
      "x-kubernetes-list-map-keys": ["type"],
    }),
  );
}

/**
 * The longest id, hash or service word (a status) a status field holds, and the longest other
 * value the service fills in (an image, a ref, a version): a longer one is left out, never cut (a
 * cut id or version would name something else). The service's answers are a tenant's input.
 */
export const STATUS_ID_MAX_LENGTH = 64;
export const STATUS_VALUE_MAX_LENGTH = 1024;

const Str = (description: string, maxLength?: number) =>
  Type.Optional(Type.String(maxLength === undefined ? { description } : { maxLength, description }));

/** The longest `revisionHistory[].redeployReason` kept (a longer reason is cut, ending in "…"). */
export const REDEPLOY_REASON_MAX_LENGTH = 512;

/** Revisions `status.revisionHistory` remembers: the last ones the operator created. */
export const REVISION_HISTORY_LIMIT = 10;

/** What a revision deployed, each field within its bound; `when` qualifies the descriptions. */
const artifactFields = (when: string) => ({
  imageUri: Type.Optional(
    Type.String({
      maxLength: STATUS_VALUE_MAX_LENGTH,
      description: `${when}${when ? "t" : "T"}he image it deployed (docker sources).`,
    }),
  ),
  repoRef: Type.Optional(
    Type.String({
      maxLength: STATUS_VALUE_MAX_LENGTH,
      description: `${when}${when ? "t" : "T"}he repository ref it built (repository sources).`,
    }),
  ),
  repoCommitSha: Type.Optional(
    Type.String({
      maxLength: STATUS_ID_MAX_LENGTH,
      description: `${when}${when ? "t" : "T"}he commit it built (repository sources).`,
    }),
  ),
});

/** `status.activeRevision`: the live revision and what it deployed. */
const ActiveRevisionSchema = Type.Object(
  {
    id: Type.String({
      maxLength: STATUS_ID_MAX_LENGTH,
      description: "The active revision's id (the service's active_revision_id).",
    }),
    ...artifactFields(""),
    deployedAt: Type.String({
      format: "date-time",
      description: "When the operator first saw it active.",
    }),
  },
  {
    description:
      "The live revision and what it deployed, once the service reported it for that revision: what promotion tools compare with the artifact they promoted (docs/guide/promotion.md). Ready=True alone cannot tell, since it may be the previous revision's.",
  },
);

/** `status.externalRevision`: the last revision the operator saw that it did not create. */
const ExternalRevisionSchema = Type.Object(
  {
    id: Type.String({
      maxLength: STATUS_ID_MAX_LENGTH,
      description: "The revision's id: the service's latest revision when the operator saw it.",
    }),
    seenAt: Type.String({
      format: "date-time",
      description: "When the operator first saw it.",
    }),
    ...artifactFields(""),
  },
  {
    description:
      "The last revision of the service's deployment that this operator did not create (the service's UI, langgraph deploy, another tool): not in revisionHistory, not the answer to a create, a PATCH, a redeploy or a rebuild of this resource (nor the revision of a rebuild whose answer was lost, see unconfirmedRebuild), and not a build on push of the branch the spec names (sourceConfig.buildOnPush true). Kept once the spec's revision replaced it, as the record of what happened; an ExternalRevision event says it once.",
  },
);

/**
 * `status.unconfirmedRebuild`: a rebuild whose answer was lost, until the next new revision of the
 * deployment says what it came to.
 */
const UnconfirmedRebuildSchema = Type.Object(
  {
    requestedAt: Type.Optional(
      Type.String({
        maxLength: STATUS_ID_MAX_LENGTH,
        description:
          "The dms.dev/rebuild-requested-at value it was sent for, once its answer was lost (left out while the call is out, or was cut off, and when longer than 64 characters).",
      }),
    ),
    afterRevisionId: Type.String({
      maxLength: STATUS_ID_MAX_LENGTH,
      description:
        "The deployment's latest revision when it was sent: the revision it made, if it made one, is a later one.",
    }),
    configHash: Type.String({
      pattern: "^[0-9a-f]{64}$",
      description:
        "sha256 of the revision-defining fields it would have built (the deployment's configuration when it was sent), as revisionHistory[].configHash.",
    }),
  },
  {
    description:
      "A rebuild (dms.dev/rebuild-requested-at) whose answer was lost (RebuildUnconfirmed): the first new latest revision seen after it with the configuration it would have built is recorded as its revision (in revisionHistory, a Rebuilt event, never an ExternalRevision; a spec changed since, a Git revert, is then applied again over it as an edit, never as a drift); any other new revision, or a later write of this operator that made one, clears it. One at most.",
  },
);

/** An element of `status.revisionHistory`. */
const RevisionHistoryEntrySchema = Type.Object(
  {
    id: Type.String({
      maxLength: STATUS_ID_MAX_LENGTH,
      description: "A revision this operator created (by a create, a PATCH or a redeploy).",
    }),
    secretsHash: Type.Optional(
      Type.String({
        pattern: "^(hmac-sha256:)?[0-9a-f]{64}$",
        description:
          "Digest of the secret names and values it was created with (never a value): HMAC-SHA256 keyed with the install key, hmac-sha256:<hex> (plain sha256 hex when recorded before the key); absent when the operator cannot vouch for them: such a revision is never redeployed.",
      }),
    ),
    configHash: Type.Optional(
      Type.String({
        pattern: "^[0-9a-f]{64}$",
        description:
          "sha256 of the revision-defining fields it was created with (sourceRevisionConfig and the revision source): a change matching none of the history costs no read of the revisions.",
      }),
    ),
    deployed: Type.Optional(
      Type.Boolean({ description: "True once the operator saw it DEPLOYED (active)." }),
    ),
    ...artifactFields("With redeployedAt: "),
    redeployedAt: Type.Optional(
      Type.String({
        format: "date-time",
        description:
          "When the operator last redeployed it instead of building a new revision: while it is the newest entry, it is what the spec asks to be live.",
      }),
    ),
    redeployedFrom: Type.Optional(
      Type.String({
        maxLength: STATUS_ID_MAX_LENGTH,
        description:
          "The earlier revision redeployed (no build) to make this one live: its own id when the service switched the active revision back to it, else the revision the service copied.",
      }),
    ),
    redeployReason: Type.Optional(
      Type.String({
        maxLength: REDEPLOY_REASON_MAX_LENGTH,
        description: `Why that revision was redeployed rather than a new one built (cut at ${REDEPLOY_REASON_MAX_LENGTH} characters).`,
      }),
    ),
  },
  { description: "A revision this operator created, with what it needs to redeploy it safely." },
);

/** `status` of the Deployment resource, written by the operator only. */
export const DeploymentResourceStatusSchema = Type.Object(
  {
    connection: Str(
      "The connection used: ServiceConnection/<name>, ClusterServiceConnection/<name>, or default (the operator's own settings).",
    ),
    deploymentId: Str("Id of the service's deployment.", STATUS_ID_MAX_LENGTH),
    tenantId: Str("Tenant owning the service's deployment.", STATUS_ID_MAX_LENGTH),
    remoteStatus: Str(
      "Status reported by the service, as it reports it: AWAITING_DATABASE, READY, UNUSED, AWAITING_DELETE, UNKNOWN, or a value the spec does not list.",
      STATUS_ID_MAX_LENGTH,
    ),
    latestRevisionId: Str("Latest revision of the service's deployment.", STATUS_ID_MAX_LENGTH),
    latestRevisionStatus: Str(
      "Status of the latest revision as the service reports it (CREATING … DEPLOYING, DEPLOYED, SKIPPED, CREATE_FAILED, BUILD_FAILED, DEPLOY_FAILED, INTERRUPTED, UNKNOWN, or another value); DEPLOYED once it is the active revision.",
      STATUS_ID_MAX_LENGTH,
    ),
    activeRevisionId: Str("Revision currently deployed.", STATUS_ID_MAX_LENGTH),
    imageVersion: Str("Image version reported by the service.", STATUS_VALUE_MAX_LENGTH),
    repoCommitSha: Str("Commit of the latest revision (repository sources).", STATUS_ID_MAX_LENGTH),
    shortRevisions: Str(
      "Latest and active revision ids shortened to 8 characters, as `<latest>/<active>`.",
      STATUS_ID_MAX_LENGTH,
    ),
    liveRevision: Str(
      "The active revision's id shortened to 8 characters, with what it deployed once the service reported it for that revision: `<id>@<commit, 7 characters>` (repository sources) or `<id>@<image version>`.",
      // `<id>@` and a value within its bound.
      9 + STATUS_VALUE_MAX_LENGTH,
    ),
    activeRevision: Type.Optional(ActiveRevisionSchema),
    revisionHistory: Type.Optional(
      Type.Array(RevisionHistoryEntrySchema, {
        maxItems: REVISION_HISTORY_LIMIT,
        description:
          "The last 10 revisions this operator created, newest first, with the digest of the secrets each was created with and whether it reached DEPLOYED: the candidates spec.revisionReuse may redeploy.",
      }),
    ),
    externalRevision: Type.Optional(ExternalRevisionSchema),
    observedGeneration: ObservedGenerationSchema,
    appliedGeneration: Type.Optional(
      Type.Integer({
        minimum: 0,
        format: "int64",
        description:
          "metadata.generation whose spec the operator last applied in full (sent, or found in line): a difference found at that generation was made outside this resource (drift, see spec.driftPolicy); one found at a newer generation is an edit to apply.",
      }),
    ),
    conditions: conditionsSchema(
      16,
      "Ready, Synced, and Reconciling or Stalled when they apply (kstatus conventions).",
    ),
    appliedSecretsHash: Type.Optional(
      Type.String({
        pattern: "^(hmac-sha256:)?[0-9a-f]{64}$",
        description:
          "Digest of the secret names and values last applied to the service (never a value): HMAC-SHA256 keyed with the install key, hmac-sha256:<hex>, so that it cannot be checked against a guess without the key (plain sha256 hex when recorded before the key, until the next write).",
      }),
    ),
    appliedSecretVersions: Type.Optional(
      Type.String({
        pattern: "^[0-9a-f]{64}$",
        description:
          "sha256 of the names and resourceVersions of the Secrets the secrets were read from when appliedSecretsHash was last confirmed: while they match and the spec is unchanged, a reconcile does not read the Secrets again.",
      }),
    ),
    lastHandledReconcileAt: Str(
      "Last value of the dms.dev/reconcile-requested-at annotation that was acted on.",
    ),
    lastHandledRolloutNow: Str(
      "Last value of the dms.dev/rollout-now annotation that was acted on: the same value lets no later change through.",
    ),
    lastHandledRebuildAt: Str(
      "Last value of the dms.dev/rebuild-requested-at annotation that was acted on: the revision it asked for was created (or a change that made one was sent), or the call's answer was lost (see unconfirmedRebuild): never sent twice.",
    ),
    unconfirmedRebuild: Type.Optional(UnconfirmedRebuildSchema),
    createRequestedAt: Type.Optional(
      Type.String({
        format: "date-time",
        description:
          "When the operator decided to create the service's deployment (recorded before creating it; cleared once the create answered).",
      }),
    ),
    createdAt: Type.Optional(
      Type.String({
        format: "date-time",
        description:
          "When the operator decided to create the service's deployment whose id status.deploymentId records (its createRequestedAt, kept once the create answered): while younger than the create grace, a lookup that does not find it is blamed on a lagging listing.",
      }),
    ),
    rolloutStartedAt: Type.Optional(
      Type.String({
        format: "date-time",
        description:
          "When the operator first saw latestRevisionId as a revision not yet active: spec.rolloutTimeout counts from here.",
      }),
    ),
    failedRevisionLog: Type.Optional(
      Type.Object(
        {
          revisionId: Type.String({
            maxLength: STATUS_ID_MAX_LENGTH,
            description: "The revision whose log was read.",
          }),
          reason: Type.String({
            maxLength: STATUS_ID_MAX_LENGTH,
            description: "Why it was read: RevisionFailed or RolloutTimeout.",
          }),
          type: Type.Optional(
            StringEnum(["build", "deploy"] as const, { description: "Which of its logs was read." }),
          ),
          excerpt: Type.Optional(
            Type.String({
              maxLength: 512,
              description:
                "Its last lines, redacted of the resource's secret values and cut (the Warning event holds more).",
            }),
          ),
          failedReads: Type.Optional(
            Type.Integer({
              minimum: 1,
              description:
                "Reads of the log that failed for a reason that may pass (the network, a timeout, a 5xx, a rate limit): it is read again on a later reconcile, a minute apart, three reads at most. Absent once a read got an answer.",
            }),
          ),
          failedReadAt: Type.Optional(
            Type.String({
              format: "date-time",
              description: "When the last of those failed reads was made.",
            }),
          ),
        },
        {
          description:
            "The log tail the operator read once for a revision that failed or did not finish in time: read once per revision and reason (a read that failed for a passing reason again, a few times at most), never on every poll or after a restart.",
        },
      ),
    ),
    exportedConfigMap: Str(
      "The ConfigMap of spec.export.configMapName the operator wrote and owns; removed (and the ConfigMap deleted) when spec.export goes or names another.",
    ),
    resolvedRepoUrl: Str("Repository URL resolved from spec.github.", STATUS_VALUE_MAX_LENGTH),
    resolvedRepoRef: Str(
      "Default branch resolved from spec.github when sourceRevisionConfig.repoRef is unset.",
      STATUS_VALUE_MAX_LENGTH,
    ),
  },
  { description: "What the operator last observed of the service's deployment and did about it." },
);
export type DeploymentResourceStatus = Static<typeof DeploymentResourceStatusSchema>;

/**
 * The top-level status fields this version knows of a kind whose status `schema` describes. A
 * status read may hold others: a newer release's, valid under its CRD, which stays installed when
 * the operator is rolled back with its CRDs managed apart. A status write keeps them as they are
 * (`unknownFieldsOf` in `conventions.ts`, `statusResidue` in `kube/custom-resources.ts`), so that
 * the newer release finds them again.
 */
export const statusFieldsOf = (schema: TObject): ReadonlySet<string> =>
  new Set(Object.keys(schema.properties));

/** The Deployment resource's top-level status fields (see {@link statusFieldsOf}). */
export const STATUS_FIELDS = statusFieldsOf(DeploymentResourceStatusSchema);
