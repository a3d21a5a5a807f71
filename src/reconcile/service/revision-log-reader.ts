/**
 * Reads the tail of a revision's log for the failure evidence (failure-evidence.ts), through one
 * connection. The logs route is not in the shared spec: a service without it (404/405) keeps
 * working as before, with one log line and no further probing; any other failure is logged and
 * ends as "no tail": a log is information, never a reason to fail the reconcile.
 */
import type { Logger } from "pino";
import { isServiceError, loggedError } from "../../api/errors.ts";
import { type LogEntry, LogsRouteMissingError, type LogType } from "../../api/revision-logs.ts";
import { TAIL_LINES, tailOf } from "../failure-evidence.ts";
import type { RevisionLogReads } from "../ports.ts";
import { isUuid } from "../service-types.ts";
import { OptionalRoute } from "./optional-route.ts";

/** What one read of a tail gives. */
export type TailRead =
  /** The last entries, oldest first (possibly none: an empty log). */
  | { kind: "entries"; entries: LogEntry[] }
  /** The service has no logs route (now or since an earlier read): no call was made or will be. */
  | { kind: "missing" }
  /**
   * The read failed, or the service has no such revision; `why` says so (no secret in it).
   * `passing` when it may succeed later (the network, a timeout, a 5xx, a rate limit).
   */
  | { kind: "failed"; why: string; passing: boolean };

/**
 * The tails of revision logs of one connection. Contract of {@link tail}: one call
 * (`order=desc&limit=TAIL_LINES`) while the route is known or presumed present, none after it
 * was found missing; never rejects except with the signal's reason.
 */
export class RevisionLogReader {
  readonly #port: RevisionLogReads;
  readonly #logger: Logger;
  readonly #route: OptionalRoute;

  constructor(port: RevisionLogReads, logger: Logger) {
    this.#port = port;
    this.#logger = logger;
    this.#route = new OptionalRoute(logger);
  }

  /** False once the service answered that it has no logs route. */
  get enabled(): boolean {
    return this.#route.missing === undefined;
  }

  /** The last {@link TAIL_LINES} entries of the `type` log of a revision, oldest first. */
  async tail(
    deploymentId: string,
    revisionId: string,
    type: LogType,
    signal: AbortSignal,
  ): Promise<TailRead> {
    if (!this.enabled) return { kind: "missing" };
    // The ids are the service's answer: one that is no uuid cannot be asked about (the client
    // refuses it, quoting it whole), and is never put in the operator's log.
    if (!isUuid(deploymentId) || !isUuid(revisionId))
      return { kind: "failed", why: "the service's deployment or revision id is not a uuid", passing: false };
    try {
      const page = await this.#port.getRevisionLogs(
        deploymentId,
        revisionId,
        { type, order: "desc", limit: TAIL_LINES },
        signal,
      );
      if (!page) return { kind: "failed", why: "the service has no such revision", passing: false };
      return { kind: "entries", entries: tailOf(page.entries) };
    } catch (error) {
      if (signal.aborted) throw error;
      if (this.#route.turnsOff(error, isMissing, "the service has no revision logs route", NO_TAIL, true))
        return { kind: "missing" };
      this.#logger.warn(
        { err: loggedError(error), revision: revisionId },
        "could not read the revision's log",
      );
      // The kind and status only: the detail is the service's text, which may quote anything.
      if (!isServiceError(error)) return { kind: "failed", why: "it could not be read", passing: false };
      const status = error.status === undefined ? "" : `${error.status} `;
      return {
        kind: "failed",
        why: `it could not be read (${status}${error.kind})`,
        passing: error.retryable,
      };
    }
  }
}

const NO_TAIL = "failed and timed-out revisions are reported without their log tail";
const isMissing = (error: unknown) => error instanceof LogsRouteMissingError;
