/**
 * Redeploying an earlier revision through one connection: the one read that finds the candidate
 * (the first page of the revision listing, only when a change that would create a revision is
 * about to be sent and the history holds a candidate at all), the rule (revision-reuse.ts), and
 * the redeploy. Neither route is in the shared spec: a service without the redeploy route or the
 * revision listing (404/405) is remembered for the connection, with one log line, and every
 * later change goes as the PATCH it always was, without asking again.
 */
import type { Logger } from "pino";
import { isServiceError, RevisionsRouteMissingError } from "../api/errors.ts";
import { RedeployRouteMissingError } from "../api/redeploy.ts";
import type { RevisionRedeploys } from "./ports.ts";
import { chooseRevision, type ReuseDecision, type ReuseInput, revisionConfigHash } from "./revision-reuse.ts";
import type { Deployment } from "./service-types.ts";

/** What a redeploy came to. */
export type RedeployOutcome =
  /** The service took it: the deployment it answered. */
  | { kind: "redeployed"; deployment: Deployment }
  /** The service has no redeploy route (now, or since an earlier call): send the PATCH. */
  | { kind: "missing" }
  /** The service says it has no such deployment or revision any more: send the PATCH. */
  | { kind: "unknown" };

/**
 * The redeploys of one connection. Contract: {@link choose} makes at most one call (the first page
 * of the listing), and none when the policy is Never, when no recorded revision could match the
 * secrets and the config (their digests), or once either route was found missing; {@link redeploy} makes one call, none once the
 * route was found missing. Neither rejects but with the signal's reason or, for `redeploy`, the
 * service's failure (as a PATCH would).
 */
export class RevisionRedeployer {
  readonly #port: RevisionRedeploys;
  readonly #logger: Logger;
  #missing: string | undefined;

  constructor(port: RevisionRedeploys, logger: Logger) {
    this.#port = port;
    this.#logger = logger;
  }

  /** Why redeploys are off for this connection (a route the service lacks), or undefined. */
  get missing(): string | undefined {
    return this.#missing;
  }

  /** The revision to redeploy instead of building `input.desired`, or why none (see `chooseRevision`). */
  async choose(
    deploymentId: string,
    input: Omit<ReuseInput, "revisions">,
    signal: AbortSignal,
  ): Promise<ReuseDecision> {
    if (input.policy === "Never") return chooseRevision({ ...input, revisions: [] });
    if (this.#missing !== undefined) return { kind: "build", reason: this.#missing };
    // Only a revision this operator created with the same secrets can be reused: without one in
    // the history, the listing cannot change the answer and is not read.
    const wanted = input.desired.secretsHash;
    const config = revisionConfigHash(input.desired.config, input.desired.source);
    const candidate = (e: ReuseInput["history"][number]) =>
      e.secretsHash === wanted && (e.configHash === undefined || e.configHash === config);
    if (wanted === undefined || !input.history.some(candidate))
      return chooseRevision({ ...input, revisions: [] });
    let revisions: Awaited<ReturnType<RevisionRedeploys["recentRevisions"]>>;
    try {
      revisions = await this.#port.recentRevisions(deploymentId, signal);
    } catch (error) {
      if (signal.aborted) throw error;
      if (error instanceof RevisionsRouteMissingError) {
        this.#remember("the service has no revision listing");
        return { kind: "build", reason: "the service has no revision listing" };
      }
      const what = isServiceError(error) ? `${error.status ?? ""} ${error.kind}`.trim() : "an error";
      this.#logger.warn(
        { err: String(error) },
        "could not read the revisions to redeploy one; building instead",
      );
      return { kind: "build", reason: `the revisions could not be read (${what})` };
    }
    return chooseRevision({ ...input, revisions });
  }

  /** Redeploys `revisionId`, or says why not (the caller then sends the PATCH). */
  async redeploy(deploymentId: string, revisionId: string, signal: AbortSignal): Promise<RedeployOutcome> {
    if (this.#missing !== undefined) return { kind: "missing" };
    try {
      const deployment = await this.#port.redeploy(deploymentId, revisionId, signal);
      return deployment === undefined ? { kind: "unknown" } : { kind: "redeployed", deployment };
    } catch (error) {
      if (error instanceof RedeployRouteMissingError) {
        this.#remember("the service has no redeploy route");
        return { kind: "missing" };
      }
      throw error;
    }
  }

  #remember(why: string): void {
    this.#missing = why;
    this.#logger.info(`${why}: changes are built as before (PATCH), and it is not asked again`);
  }
}
