/**
 * A revision made outside this operator (the service's UI, `langgraph deploy`, another tool), for
 * `status.externalRevision` and the `ExternalRevision` event: whether the service's latest
 * revision is one, and what the status keeps of it. Pure. Entered only when the service shows a
 * latest revision other than the one the status recorded, or the status holds one: the callers
 * (decide.ts, status.ts) ask that first.
 */
import type { DeploymentResourceStatus } from "../crd/schema.ts";
import { artifactOf } from "./live-revision.ts";
import type { Deployment } from "./service-types.ts";

/** `status.externalRevision`. */
export type ExternalRevision = NonNullable<DeploymentResourceStatus["externalRevision"]>;

/** What {@link externalRevisionOf} weighs besides the deployment. */
interface ExternalRevisionInput {
  /** The status as read: the revisions the operator created, and what it saw last. */
  status: Pick<
    DeploymentResourceStatus,
    "deploymentId" | "latestRevisionId" | "revisionHistory" | "externalRevision"
  >;
  /** The spec's `sourceConfig.buildOnPush` and `sourceRevisionConfig.repoRef` (resolved), in wire terms. */
  buildOnPush: boolean;
  repoRef: string | undefined;
  /** The deployment was found by name now (adopted): its revisions predate this resource. */
  adopted: boolean;
  /** RFC 3339: when it was seen. */
  now: string;
  /** The latest revision this process's own last write of the deployment answered, if known. */
  ownLatest?: string | undefined;
}

/**
 * The revision `d` shows as its latest when this operator did not create it and has not said
 * so yet, as `status.externalRevision`; undefined otherwise. A revision is the operator's when
 * `status.revisionHistory` holds it (its creates, PATCHes, redeploys and rebuilds are recorded
 * there); one it cannot tell about is never called external: the latest revision of a deployment
 * adopted now, or of one whose latest revision the status never recorded (the first look), and
 * a build on push of the branch the spec names (`buildOnPush`: the team's intent). What it
 * deployed is read from `d`, whose `source_revision_config` is its latest revision's.
 */
export function externalRevisionOf(
  d: Deployment,
  input: ExternalRevisionInput,
): ExternalRevision | undefined {
  const { status } = input;
  const id = d.latest_revision_id;
  if (!id || id.length > 64 || input.adopted || status.deploymentId !== d.id) return undefined;
  if (status.latestRevisionId === undefined || status.latestRevisionId === id) return undefined;
  if (status.externalRevision?.id === id || input.ownLatest === id) return undefined;
  if (status.revisionHistory?.some((e) => e.id === id)) return undefined;
  const ref = d.source_revision_config.repo_ref ?? undefined;
  if (input.buildOnPush && (input.repoRef === undefined || input.repoRef === ref)) return undefined;
  return { id, seenAt: input.now, ...artifactOf(d.source_revision_config) };
}

/**
 * `status.externalRevision` kept from `previous`: while it is still `d`'s latest revision, what
 * it deployed is read from `d` again (as `status.activeRevision` is), so that a value the status
 * sink leaves unset is named at every write, not only at the first.
 */
export function keptExternalRevision(
  previous: ExternalRevision | undefined,
  d: Deployment | undefined,
): ExternalRevision | undefined {
  if (!previous || !d || previous.id !== d.latest_revision_id) return previous;
  return { id: previous.id, seenAt: previous.seenAt, ...artifactOf(d.source_revision_config) };
}
