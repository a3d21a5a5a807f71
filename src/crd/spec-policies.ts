/**
 * The Deployment resource's policies (part of `schema.ts`): the values each of its policy fields
 * takes, and the defaults the operator applies when the spec leaves one out.
 */

/** Values of `spec.managementPolicy`. */
export const MANAGEMENT_POLICIES = ["Manage", "ObserveOnly"] as const;
/** Values of `spec.deletionPolicy`. */
export const DELETION_POLICIES = ["Orphan", "Delete"] as const;

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
