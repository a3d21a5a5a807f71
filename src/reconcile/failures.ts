/**
 * What a failed reconcile means for the resource and for the retry: one table from error to
 * condition reason, stall, and retry behaviour, so every failure is reported the same way.
 *
 * - The service rejected the request (400/422), the spec or a Secret is wrong, or the secret
 *   values are over `--max-secret-bytes`: Stalled, no retry until something changes (a spec edit
 *   or the Secret's watch brings the resource back).
 * - The service's deployment cannot be read: Stalled (`UnreadableDeployment`), never a create;
 *   the next resync or spec change looks again.
 * - Credentials (401/403): a clear condition, retried with backoff (the fix is elsewhere).
 * - 429: retried no sooner than the service's Retry-After.
 * - 5xx, timeouts, lost connections: retried with backoff and jitter.
 * - A 401/403, 409/404, 429 or 5xx: the condition names the call and its status, and what to do;
 *   the service's answer, which may differ at every attempt (a gateway's or a WAF's request id or
 *   time, a countdown), is the Warning event's (and the log's), so a retry failing the same way
 *   writes no status.
 * - An answer larger than the operator accepts (`too_large`): `ResponseTooLarge`, retried with
 *   backoff (the server may mend, and a larger `--max-response-bytes` needs a restart anyway).
 * - 409 on create because a tracing project of that name remains (`NameReserved`, see
 *   name-reserved.ts): Stalled; the next resync (or a requested reconcile) tries again.
 * - A call whose rate-limit token comes later than the reconcile could end
 *   (`TokenWaitTooLongError`): `WaitingForConnectionShare`, not an error; the controller has the
 *   key come again when the token is due (`DeferredError`), no backoff, no worker held meanwhile.
 * - 409/404 (the service's state moved: a name taken meanwhile, a deployment deleted): reported
 *   like any other failure and retried with backoff, so a persistent one is visible on the
 *   resource instead of retrying silently forever.
 * - What the plan cannot do (`outcomeFromProblems`: an immutable field, a secrets list the service
 *   will not clear): Stalled, nothing retried until the spec changes.
 * - The connection's last listing missed its deadline (`listingMissed`, which `listingGuard` in
 *   observe.ts reports): `ListingDeadlineExceeded`, no call until a listing ends in time.
 */

import { isServiceError, RequestValidationError, type ServiceError } from "../api/errors.ts";
import { redactAndTruncate } from "../api/redact.ts";
import { TokenWaitTooLongError } from "../api/reserved-tokens.ts";
import { connectionOf, describeConnection, MAX_MESSAGE_LENGTH } from "../crd/conventions.ts";
import { InvalidSpecError, SecretNotFoundError } from "../crd/errors.ts";
import { flagDuration } from "../duration.ts";
import { DeferredError } from "../runtime/clock.ts";
import { TerminalError } from "../runtime/reconcile-errors.ts";
import type { PlanProblem } from "./plan.ts";
import type { StoredResource } from "./ports.ts";
import { REASON, type SyncOutcome } from "./reasons.ts";
import { SecretsTooLargeError } from "./secret-budget.ts";
import { AmbiguousNameError, UnreadableDeploymentError } from "./service/lookup-errors.ts";
import { NameReservedError } from "./service/name-reserved.ts";
import type { ListingFailure } from "./service/snapshot-store.ts";

/** A failure, as the reconciler acts on it. */
export interface Failure {
  outcome: Extract<SyncOutcome, { kind: "failed" }>;
  /** Throw this to the controller (it decides the backoff); absent: wait for a change. */
  rethrow?: Error;
  /** A create was refused before it could take effect: the recorded intent no longer holds. */
  createRefused?: boolean;
  /**
   * The Warning event's text when it says more than the condition: the service's answer, which
   * may differ at every attempt (a gateway's request id or time), quoted where a tenant who
   * cannot read the operator's log still sees it, and kept out of the condition so that a retry
   * failing the same way writes no status.
   */
  note?: string;
}

/** A failure's outcome; its message redacted already (`clean`), unless it is the operator's own words. */
const failed = (reason: string, message: string, stalled = false, redacted = true): Failure["outcome"] => ({
  kind: "failed",
  reason,
  message,
  stalled,
  ...(redacted ? { redacted: true as const } : {}),
});

/**
 * Maps `error` to its {@link Failure}; every message is scrubbed of `secretValues`, then cut to
 * {@link MAX_MESSAGE_LENGTH} (in that order: a value cut in two would escape redaction).
 */
export function failureOf(error: unknown, secretValues: readonly string[]): Failure {
  const clean = (text: string) => redactAndTruncate(text, secretValues, MAX_MESSAGE_LENGTH);
  if (error instanceof SecretNotFoundError)
    return { outcome: failed(REASON.SecretNotFound, error.message, true, false) };
  // Over the secret budget: nothing was sent; a change of the spec or of a Secret brings it back.
  if (error instanceof SecretsTooLargeError)
    return { outcome: failed(REASON.SecretsTooLarge, error.message, true, false) };
  // A tracing project holds the name: no retry mends it (the next resync tries again, once).
  if (error instanceof NameReservedError)
    return { outcome: failed(REASON.NameReserved, clean(error.message), true), createRefused: true };
  if (error instanceof UnreadableDeploymentError)
    return { outcome: failed(REASON.UnreadableDeployment, clean(error.message), true) };
  if (
    error instanceof InvalidSpecError ||
    error instanceof AmbiguousNameError ||
    error instanceof RequestValidationError
  )
    return { outcome: failed(REASON.InvalidSpec, clean(error.message), true) };
  if (error instanceof TokenWaitTooLongError) {
    const message = `waiting for the connection's share: ${clean(error.message)}; looking again when a token is due`;
    return {
      outcome: failed(REASON.WaitingForConnectionShare, message),
      rethrow: new DeferredError(message, error.afterMs),
    };
  }
  if (isServiceError(error)) {
    const refused = error.method === "POST" && !error.maybeApplied;
    const failure = serviceFailure(error, clean);
    return refused ? { ...failure, createRefused: true } : failure;
  }
  const message = clean(error instanceof Error ? error.message : String(error));
  // A pause the API server asked for (a 429's Retry-After: API Priority and Fairness had no seat
  // for the write) goes with the error the controller retries, which waits at least that long.
  const asked = pauseAskedOf(error);
  const rethrow =
    asked === undefined ? new Error(message) : Object.assign(new Error(message), { retryAfterMs: asked });
  return { outcome: failed(REASON.ReconcileError, message), rethrow };
}

/** The `retryAfterMs` an error carries (the Kubernetes client's of a 429), when it is a pause. */
function pauseAskedOf(error: unknown): number | undefined {
  const asked = error instanceof Error ? (error as { retryAfterMs?: unknown }).retryAfterMs : undefined;
  return typeof asked === "number" && Number.isFinite(asked) && asked > 0 ? asked : undefined;
}

function serviceFailure(error: ServiceError, clean: (text: string) => string): Failure {
  // The status code is what a user searches the service's documentation for.
  const answered = error.status === undefined ? "" : ` answered ${error.status}`;
  const call = `${error.method} ${error.route}${answered}`;
  const message = clean(`${call}: ${error.detail}`);
  // The condition says `head`, names the call and its status, then `tail`: the same while the
  // failure lasts, so a retry (or the connection's next listing) failing the same way writes no
  // status. The answer, which may differ at every attempt (a gateway's or a WAF's request id or
  // time, a countdown), is the Warning event's.
  const quoting = (reason: string, head: string, tail: string): Failure => ({
    outcome: failed(reason, clean(`${head}: ${call} (the Warning event quotes its answer); ${tail}`)),
    rethrow: new Error(message),
    note: `${head}: ${message}`,
  });
  switch (error.kind) {
    case "invalid":
    case "rejected":
      return {
        outcome: failed(REASON.InvalidSpec, `the service rejected the request: ${message}`, true),
        rethrow: new TerminalError(message),
      };
    case "unauthorized":
      return quoting(
        REASON.Unauthorized,
        "the service refused the operator's credentials (check the API key and tenant)",
        "tried again until it accepts them",
      );
    case "rate_limited": {
      const limited = quoting(
        REASON.RateLimited,
        "the service is rate limiting",
        "retried no sooner than its Retry-After",
      );
      const retryAfterMs = (error.retryAfterSeconds ?? 1) * 1000;
      return { ...limited, rethrow: Object.assign(new Error(message), { retryAfterMs }) };
    }
    case "too_large":
      return {
        outcome: failed(REASON.ResponseTooLarge, `the service's answer was refused: ${message}`),
        rethrow: new Error(message),
      };
    case "conflict":
    case "not_found":
      // The service's state moved (a name taken meanwhile, a deployment deleted): the retry looks
      // again; reporting it keeps a conflict that persists from hiding behind silent retries.
      return quoting(REASON.ReconcileError, "the service's state changed", "looking again");
    case "unavailable": {
      // Not sent at all (a closed client, a shard Lease not current): the operator's own words,
      // which say why and are the same at every attempt, are the condition's.
      if (error.status === undefined)
        return { outcome: failed(REASON.ServiceUnavailable, message), rethrow: new Error(message) };
      // As `quoting`'s, with no head: the call and its status, then what failed.
      const unavailable = clean(
        `${call}: the service, or a gateway in front of it, failed (the Warning event quotes its answer); retried until it answers`,
      );
      return {
        outcome: failed(REASON.ServiceUnavailable, unavailable),
        rethrow: new Error(message),
        note: message,
      };
    }
    default:
      return { outcome: failed(REASON.ServiceUnavailable, message), rethrow: new Error(message) };
  }
}

/** The sync outcome for plan problems (immutable fields stall; an un-clearable list only fails). */
export function outcomeFromProblems(problems: readonly PlanProblem[]): SyncOutcome | undefined {
  const [first] = problems;
  if (!first) return undefined;
  // What cannot change (the name, the source, the deployment type) is named before the rest.
  const fixed = problems.find((p) => p.reason === "Immutable" || p.reason === "DeploymentTypeMismatch");
  const reason = fixed ? REASON[fixed.reason] : REASON.CannotClearSecrets;
  return { kind: "failed", reason, message: problems.map((p) => p.message).join("; "), stalled: true };
}

/**
 * The outcome of a resource whose connection's last listing missed its deadline: no call is made
 * for it until a listing ends in time (the connection's pass tries again within a minute).
 */
export function listingMissed(
  obj: StoredResource,
  failure: ListingFailure,
): SyncOutcome & { kind: "failed" } {
  const id = connectionOf(obj.metadata.namespace ?? "", obj.spec.connectionRef);
  const connection = id ? describeConnection(id) : "the default connection (the operator's own settings)";
  return {
    kind: "failed",
    reason: REASON.ListingDeadlineExceeded,
    message: `the periodic listing of the service's deployments (GET /v2/deployments) through ${connection} did not end within the listing deadline of ${flagDuration(failure.deadlineMs)} (--listing-deadline); no call is made for this resource until a listing through that connection ends in time (it is tried again within a minute): fix the service, or raise --listing-deadline if it is only slow`,
    stalled: false,
  };
}
