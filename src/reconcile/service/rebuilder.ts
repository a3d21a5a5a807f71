/**
 * Rebuilds on demand through one connection (`dms.dev/rebuild-requested-at`): one call to the
 * service's rebuild route (POST /v2/deployments/{deployment_id}/revisions, body `{}`), outside
 * the shared spec, never repeated when its answer was lost (`unconfirmed`: it may have built; a
 * call cut off by its signal rejects, and the intent `performRebuild` (rebuild.ts) wrote before it stands). A
 * service without the route (404/405) is remembered for the connection, with
 * one log line: every later request is refused without asking again (`decideRebuild`, rebuild.ts, says so).
 */
import type { Logger } from "pino";
import { RebuildRouteMissingError } from "../../api/client.ts";
import { isServiceError, loggedError } from "../../api/errors.ts";
import type { RevisionRebuilds } from "../ports.ts";
import type { Revision } from "../service-types.ts";
import { OptionalRoute } from "./optional-route.ts";

/** What a rebuild came to. */
export type RebuildOutcome =
  /** The service created the revision. */
  | { kind: "rebuilt"; revision: Revision }
  /** The service has no rebuild route (now, or since an earlier call): nothing was created. */
  | { kind: "missing"; why: string }
  /** The service says it has no such deployment: nothing was created. */
  | { kind: "unknown" }
  /**
   * The answer was lost (a timeout, a dropped connection): the revision may have been created.
   * Not asked again (a repeat could build twice); `error` says what happened.
   */
  | { kind: "unconfirmed"; error: string };

/** Why a connection's rebuilds are off: the sentence conditions and events say it with. */
export const NO_REBUILD_ROUTE =
  "the service has no rebuild route (POST /v2/deployments/{deployment_id}/revisions)";

/**
 * The rebuilds of one connection. Contract: {@link rebuild} makes one call, none once the route
 * was found missing; it rejects only with the signal's reason or the service's failure.
 */
export class Rebuilder {
  readonly #port: RevisionRebuilds;
  readonly #route: OptionalRoute;

  constructor(port: RevisionRebuilds, logger: Logger) {
    this.#port = port;
    this.#route = new OptionalRoute(logger);
  }

  /** Why rebuilds are off for this connection (the service lacks the route), or undefined. */
  get missing(): string | undefined {
    return this.#route.missing;
  }

  /** Creates one revision of `deploymentId`'s current configuration (see {@link RebuildOutcome}). */
  async rebuild(deploymentId: string, signal: AbortSignal): Promise<RebuildOutcome> {
    const off = this.#route.missing;
    if (off !== undefined) return { kind: "missing", why: off };
    try {
      const revision = await this.#port.createRevision(deploymentId, signal);
      return revision === undefined ? { kind: "unknown" } : { kind: "rebuilt", revision };
    } catch (error) {
      if (this.#route.turnsOff(error, isRebuildMissing, NO_REBUILD_ROUTE, REFUSED))
        return { kind: "missing", why: NO_REBUILD_ROUTE };
      if (!signal.aborted && isServiceError(error) && error.maybeApplied)
        // Shown in a Warning: the call, its status and kind, never the service's own text,
        // which may quote a secret value (failures.ts redacts it where it has the values).
        return { kind: "unconfirmed", error: loggedError(error) };
      throw error;
    }
  }
}

/** What a connection without the route does instead, said once. */
const REFUSED = "requests of dms.dev/rebuild-requested-at are refused, and it is not asked again";
const isRebuildMissing = (error: unknown) => error instanceof RebuildRouteMissingError;
