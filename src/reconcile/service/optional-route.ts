/**
 * A route of the service that is not in the shared spec (revisions, revision logs, redeploy,
 * rebuild), as one connection knows it: presumed present until the service answers that it has
 * none (404/405, which the client turns into a `…RouteMissingError`); then the feature it serves
 * is off for this connection, said once in the log, and the route is not asked again. One helper
 * for its four users (`revisions.ts`, `revision-log-reader.ts`, `redeployer.ts`, `rebuilder.ts`).
 */
import type { Logger } from "pino";

/** One optional route of one connection (see the module comment). */
export class OptionalRoute {
  readonly #logger: Logger;
  /**
   * Why the feature is off for this connection (a route the service lacks), or undefined. A
   * field, read on every reconcile that may use the route; set by {@link turnsOff} alone.
   */
  missing: string | undefined;

  /** `off`: why the feature is off from the start (by configuration), if it is. */
  constructor(logger: Logger, off?: string) {
    this.#logger = logger;
    this.missing = off;
  }

  /**
   * When `error` says the route is missing (`isMissing`), turns the feature off, says so once
   * (`why: consequence`, with the service's answer when `withError`), and returns true.
   */
  turnsOff(
    error: unknown,
    isMissing: (error: unknown) => boolean,
    why: string,
    consequence: string,
    withError = false,
  ): boolean {
    if (!isMissing(error)) return false;
    if (this.missing === undefined) {
      const line = `${why}: ${consequence}`;
      if (withError) this.#logger.info({ err: error instanceof Error ? error.message : String(error) }, line);
      else this.#logger.info(line);
    }
    this.missing = why;
    return true;
  }
}
