/**
 * The treatment each string field of a status declares, for the status sink (`status-sink.ts`,
 * whose module comment says what each treatment does), and who gives what the field holds, which
 * the note of a value left unset names. The Deployment resource's fields by their path in the
 * schema ({@link STATUS_STRINGS}), the conditions' as every kind writes them
 * ({@link CONDITION_STRINGS}, which the connections' table takes too: `connection/status.ts`).
 * test/unit/status-sink.test.ts fails while a string of the schema has no declared treatment.
 */

/** How a status string is written (see `status-sink.ts`). */
export type Treatment = "text" | "value" | "operator";

/** A field's treatment, and who gives what it holds (the note names them). */
export interface Declared {
  treatment: Treatment;
  from: string;
}

const SERVICE = "the service";
const OPERATOR = "the operator";
const value = (from: string): Declared => ({ treatment: "value", from });
/** A field of text for people, filled by `from`. */
export const text = (from: string): Declared => ({ treatment: "text", from });
/** A field the operator alone fills. */
export const operator: Declared = { treatment: "operator", from: OPERATOR };
const served = value(SERVICE);

/**
 * The strings of `conditions[]`, as every kind writes them: the operator's type, status, time and
 * reason; a message quoting what the service answered and what the spec holds.
 */
export const CONDITION_STRINGS: Readonly<Record<string, Declared>> = {
  "conditions[].type": operator,
  "conditions[].status": operator,
  "conditions[].lastTransitionTime": operator,
  "conditions[].reason": operator,
  // The service's answers and the tenant's spec are quoted in it.
  "conditions[].message": text("the service and the spec"),
};

/**
 * Every string field of the status, by its path in the schema (`a.b`, `list[].field`), with its
 * treatment. docs/tenant-inputs.md lists the ones a tenant or a service fills.
 */
export const STATUS_STRINGS: Readonly<Record<string, Declared>> = {
  connection: value("spec.connectionRef"),
  deploymentId: served,
  tenantId: served,
  remoteStatus: served,
  latestRevisionId: served,
  latestRevisionStatus: served,
  activeRevisionId: served,
  imageVersion: served,
  repoCommitSha: served,
  shortRevisions: served,
  liveRevision: served,
  "activeRevision.id": served,
  "activeRevision.imageUri": served,
  "activeRevision.repoRef": served,
  "activeRevision.repoCommitSha": served,
  "activeRevision.deployedAt": operator,
  "externalRevision.id": served,
  "externalRevision.seenAt": operator,
  "externalRevision.imageUri": served,
  "externalRevision.repoRef": served,
  "externalRevision.repoCommitSha": served,
  "revisionHistory[].id": served,
  "revisionHistory[].secretsHash": operator,
  "revisionHistory[].configHash": operator,
  "revisionHistory[].imageUri": served,
  "revisionHistory[].repoRef": served,
  "revisionHistory[].repoCommitSha": served,
  "revisionHistory[].redeployedAt": operator,
  "revisionHistory[].redeployedFrom": served,
  // Names the service's revision and what it deployed.
  "revisionHistory[].redeployReason": text(SERVICE),
  ...CONDITION_STRINGS,
  appliedSecretsHash: operator,
  appliedSecretVersions: operator,
  lastHandledReconcileAt: value("the dms.dev/reconcile-requested-at annotation"),
  lastHandledRolloutNow: value("the dms.dev/rollout-now annotation"),
  lastHandledRebuildAt: value("the dms.dev/rebuild-requested-at annotation"),
  "unconfirmedRebuild.requestedAt": value("the dms.dev/rebuild-requested-at annotation"),
  "unconfirmedRebuild.afterRevisionId": served,
  "unconfirmedRebuild.configHash": operator,
  createRequestedAt: operator,
  createdAt: operator,
  rolloutStartedAt: operator,
  "failedRevisionLog.revisionId": served,
  "failedRevisionLog.reason": operator,
  "failedRevisionLog.type": operator,
  "failedRevisionLog.excerpt": text("the service's build or deploy log"),
  "failedRevisionLog.failedReadAt": operator,
  resolvedRepoUrl: value("GitHub (spec.github)"),
  resolvedRepoRef: value("GitHub (spec.github)"),
  exportedConfigMap: value("spec.export.configMapName"),
};
