/**
 * Revision tracking: "is my revision live, and if not, why". While a deployment's latest revision
 * is not its active one, the reconcile reads that revision (one call per rolling resource per
 * poll; none in steady state) so that a build or deploy that failed ends the rollout as
 * `RevisionFailed` instead of `RolloutInProgress` forever.
 *
 * The revisions route is not in the shared spec: a service without it (404/405) keeps working as
 * before, with one log line and no further probing.
 */
import type { Logger } from "pino";
import { loggedError, RevisionsRouteMissingError } from "../../api/errors.ts";
import type { DeploymentResourceStatus } from "../../crd/schema.ts";
import { evidenceHeadline } from "../failure-evidence.ts";
import {
  isDoneRevision,
  isFailedRevision,
  lookedWithoutCall,
  type RevisionObservation,
} from "../live-revision.ts";
import type { EventNote, RevisionReads } from "../ports.ts";
import { REASON } from "../reasons.ts";
import { switchingBack } from "../revision-reuse.ts";
import { type Deployment, isUuid } from "../service-types.ts";
import { OptionalRoute } from "./optional-route.ts";

/** What one look at the latest revision gives the reconcile. */
export interface RevisionLook {
  /** The latest revision's status, when known; pass it to `statusFrom`. */
  revision?: RevisionObservation;
  /** The Warning event to record: set once, when a revision is first seen failed. */
  event?: EventNote;
}

/**
 * Reads latest revisions for the reconciler.
 *
 * Contract of {@link look}: no call when the latest revision is the active one (it is
 * `DEPLOYED`), when tracking is off, when the revision is new to the resource's status (it is
 * read from the next poll on), or when the status already holds a final verdict
 * (failed, `DEPLOYED`, `SKIPPED`) for that same revision and no reconcile was requested by
 * annotation; otherwise one `getRevision` (and one of the revision a switch back waits for, while
 * it is not live). A route-missing answer turns tracking off for good
 * (one log line); any other failure is logged and the previous knowledge kept: a revision's
 * status is information, never a reason to fail the reconcile.
 */
export class RevisionTracker {
  readonly #port: RevisionReads;
  readonly #logger: Logger;
  readonly #route: OptionalRoute;

  constructor(port: RevisionReads, logger: Logger, enabled = true) {
    this.#port = port;
    this.#logger = logger;
    this.#route = new OptionalRoute(
      logger,
      enabled ? undefined : "revision tracking is off by configuration",
    );
  }

  /** False once tracking is off (by configuration, or because the service has no route). */
  get enabled(): boolean {
    return this.#route.missing === undefined;
  }

  /**
   * The latest revision of `deployment` as far as it matters to the status. While a switch of the
   * active revision back is not live ({@link switchingBack}), the revision switched back to is
   * read first: it reached DEPLOYED once, so only its failure is news (RevisionFailed, its Warning
   * said once, as `status.failedRevisionLog` records); otherwise the latest, as ever.
   * @param previous the resource's status before this reconcile.
   * @param requested true when a reconcile was requested by annotation: look again, even at a
   *   revision already known to have failed.
   */
  async look(
    deployment: Deployment,
    previous: DeploymentResourceStatus | undefined,
    requested: boolean,
    signal: AbortSignal,
  ): Promise<RevisionLook> {
    const switching = switchingBack(deployment, previous?.revisionHistory);
    if (switching !== undefined) {
      const read = await this.#read(deployment.id, switching, signal);
      if (typeof read === "string" && isFailedRevision(read)) {
        const said = previous?.failedRevisionLog;
        const revision = { id: switching, status: read };
        if (said?.revisionId === switching && said.reason === REASON.RevisionFailed) return { revision };
        return { revision, event: failedEvent(deployment.id, revision) };
      }
    }
    const settled = lookedWithoutCall(deployment, previous, requested);
    if (settled) return settled;
    const latest = deployment.latest_revision_id ?? "";
    const known =
      previous?.latestRevisionId === latest && previous.latestRevisionStatus !== undefined
        ? { id: latest, status: previous.latestRevisionStatus }
        : undefined;
    if (!this.enabled) return {};
    if (!isUuid(deployment.id) || !isUuid(latest)) return known ? { revision: known } : {};
    if (known && !requested && (isFailedRevision(known.status) || isDoneRevision(known.status)))
      return { revision: known };
    const read = await this.#read(deployment.id, latest, signal);
    if (read === OFF) return {};
    if (read === undefined) return known ? { revision: known } : {};
    const revision = { id: latest, status: read };
    const newlyFailed = isFailedRevision(read) && !(known && known.status === read);
    return newlyFailed ? { revision, event: failedEvent(deployment.id, revision) } : { revision };
  }

  /**
   * The status of `revisionId` of `deploymentId` as the service reports it (one call); undefined
   * when it is not known (an id that is no uuid, no such revision, a read that failed: logged), or
   * {@link OFF} when tracking is off (found now: the service has no route).
   */
  async #read(
    deploymentId: string,
    revisionId: string,
    signal: AbortSignal,
  ): Promise<string | undefined | typeof OFF> {
    if (!this.enabled) return OFF;
    // The ids are the service's answer: one that is no uuid cannot be asked about (the client
    // refuses it, quoting it whole), and is never put in the operator's log.
    if (!isUuid(deploymentId) || !isUuid(revisionId)) return undefined;
    try {
      return (await this.#port.getRevision(deploymentId, revisionId, signal))?.status;
    } catch (error) {
      if (signal.aborted) throw error;
      if (this.#route.turnsOff(error, isMissing, "the service has no revisions route", TRACKING_OFF, true))
        return OFF;
      this.#logger.warn(
        { err: loggedError(error), revision: revisionId },
        "could not read the latest revision",
      );
      return undefined;
    }
  }
}

/** What {@link RevisionTracker}'s read says of a service found now to have no revisions route. */
const OFF: unique symbol = Symbol("tracking off");

/** The Warning of `revision` of `deploymentId` seen failed for the first time. */
const failedEvent = (deploymentId: string, revision: RevisionObservation): EventNote => ({
  type: "Warning",
  reason: REASON.RevisionFailed,
  action: "Rollout",
  note: evidenceHeadline(REASON.RevisionFailed, revision.id, deploymentId, revision.status),
});

const TRACKING_OFF = "revision tracking is off (rollouts end when the revision is active)";
const isMissing = (error: unknown) => error instanceof RevisionsRouteMissingError;
