/**
 * Redeploying an earlier revision through one connection: the one read that finds the candidate
 * (the first page of the revision listing; when to read it is execute.ts's `chooseRedeploy`)
 * and the redeploy. Neither route is in the shared spec: a service without the redeploy route or the
 * revision listing (404/405) is remembered for the connection, with one log line, and every
 * later change goes as the PATCH it always was, without asking again.
 */
import type { Logger } from "pino";
import { isServiceError, loggedError, RevisionsRouteMissingError } from "../../api/errors.ts";
import { RedeployRouteMissingError } from "../../api/redeploy.ts";
import type { RevisionRedeploys } from "../ports.ts";
import type { Deployment, Revision } from "../service-types.ts";
import { OptionalRoute } from "./optional-route.ts";

/** What a read of the revisions gave: the first page, or why there is none to weigh. */
export type RevisionsRead = { kind: "read"; revisions: Revision[] } | { kind: "unavailable"; reason: string };

/** What a redeploy came to. */
export type RedeployOutcome =
  /** The service took it: the deployment it answered. */
  | { kind: "redeployed"; deployment: Deployment }
  /** The service has no redeploy route (now, or since an earlier call): send the PATCH. */
  | { kind: "missing" }
  /** The service says it has no such deployment or revision any more: send the PATCH. */
  | { kind: "unknown" };

/**
 * The redeploys of one connection. Contract: {@link revisions} and {@link redeploy} make one call
 * each, none once either route was found missing. Neither rejects but with the signal's reason
 * or, for `redeploy`, the service's failure (as a PATCH would).
 */
export class RevisionRedeployer {
  readonly #port: RevisionRedeploys;
  readonly #logger: Logger;
  readonly #routes: OptionalRoute;

  constructor(port: RevisionRedeploys, logger: Logger) {
    this.#port = port;
    this.#logger = logger;
    this.#routes = new OptionalRoute(logger);
  }

  /** Why redeploys are off for this connection (a route the service lacks), or undefined. */
  get missing(): string | undefined {
    return this.#routes.missing;
  }

  /**
   * The first page of the deployment's revisions, newest first (one call), or why there is none
   * to weigh: the service has no listing (remembered: never asked again) or the read failed.
   */
  async revisions(deploymentId: string, signal: AbortSignal): Promise<RevisionsRead> {
    const off = this.#routes.missing;
    if (off !== undefined) return { kind: "unavailable", reason: off };
    try {
      return { kind: "read", revisions: await this.#port.recentRevisions(deploymentId, signal) };
    } catch (error) {
      if (signal.aborted) throw error;
      if (this.#routes.turnsOff(error, isRevisionsMissing, "the service has no revision listing", BUILT))
        return { kind: "unavailable", reason: "the service has no revision listing" };
      const what = isServiceError(error) ? `${error.status ?? ""} ${error.kind}`.trim() : "an error";
      this.#logger.warn(
        { err: loggedError(error) },
        "could not read the revisions to redeploy one; building instead",
      );
      return { kind: "unavailable", reason: `the revisions could not be read (${what})` };
    }
  }

  /** Redeploys `revisionId`, or says why not (the caller then sends the PATCH). */
  async redeploy(deploymentId: string, revisionId: string, signal: AbortSignal): Promise<RedeployOutcome> {
    if (this.#routes.missing !== undefined) return { kind: "missing" };
    try {
      const deployment = await this.#port.redeploy(deploymentId, revisionId, signal);
      return deployment === undefined ? { kind: "unknown" } : { kind: "redeployed", deployment };
    } catch (error) {
      if (this.#routes.turnsOff(error, isRedeployMissing, "the service has no redeploy route", BUILT))
        return { kind: "missing" };
      throw error;
    }
  }
}

/** What a connection without either route does instead, said once. */
const BUILT = "changes are built as before (PATCH), and it is not asked again";
const isRevisionsMissing = (error: unknown) => error instanceof RevisionsRouteMissingError;
const isRedeployMissing = (error: unknown) => error instanceof RedeployRouteMissingError;
