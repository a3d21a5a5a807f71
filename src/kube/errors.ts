/**
 * Typed failures of calls to the Kubernetes API server, so callers branch on a class (a 409 means
 * "requeue quietly", a 404 often means "already gone") instead of parsing messages; and which
 * bare 422 of a JSON Patch is a race read as a 409, which a refusal ({@link raceAsConflict}).
 */

/**
 * A request the API server answered with a non-2xx status.
 *
 * Contract: `status` is the HTTP status; `reason` is the `Status.reason` of the body when the
 * server sent one (e.g. `Conflict`, `NotFound`, `Expired`), otherwise `""`. The message names the
 * method and path and the server's message; never a request body (it may hold secret values).
 */
export class KubeApiError extends Error {
  override readonly name: string = "KubeApiError";
  readonly status: number;
  readonly reason: string;
  /**
   * Whether the `Status` named the object or a cause (`details.name`, `details.kind` or
   * `details.causes`): a validation, CEL rule or admission policy refusing the object does; a
   * JSON Patch that does not apply to the stored object is a bare 422 without them.
   */
  readonly detailed: boolean;
  /**
   * The pause the server asked for (`Retry-After`, in ms, at most {@link MAX_RETRY_AFTER_MS}):
   * API Priority and Fairness rejects a request it has no seat for with a 429 and `Retry-After`.
   * A reflector waits at least this long before it asks again; the controller retries a
   * reconcile that failed with it no sooner.
   */
  readonly retryAfterMs: number | undefined;
  constructor(
    status: number,
    reason: string,
    message: string,
    options?: ErrorOptions & { detailed?: boolean; retryAfterMs?: number },
  ) {
    super(message, options);
    this.status = status;
    this.reason = reason;
    this.detailed = options?.detailed ?? false;
    this.retryAfterMs = options?.retryAfterMs;
  }
}

/**
 * The longest `Retry-After` honoured: the API server asks for a second or a few; a longer pause
 * (a proxy's, or a date far ahead) would leave a cache stale long after the server recovered.
 */
export const MAX_RETRY_AFTER_MS = 60_000;

/** A `Retry-After` header in ms (delay-seconds, as the API server sends it), bounded; `undefined` when absent or not a number. */
export function retryAfterHeader(value: string | string[] | undefined): number | undefined {
  const text = (Array.isArray(value) ? value[0] : value)?.trim();
  if (!text || !/^\d+$/.test(text)) return undefined;
  return Math.min(Number(text) * 1000, MAX_RETRY_AFTER_MS);
}

/**
 * The write lost an optimistic-concurrency race: HTTP 409 (Conflict, or AlreadyExists on create).
 * Controllers treat it as "re-read and requeue quietly": it is not a failure worth a warning.
 */
export class ConflictError extends KubeApiError {
  override readonly name: string = "ConflictError";
}

/** The object (or its namespace) does not exist: HTTP 404. */
export class NotFoundError extends KubeApiError {
  override readonly name: string = "NotFoundError";
}

/**
 * A name no object can have, refused before any request (`itemPath`, object.ts): a
 * {@link NotFoundError}, since no object of that name exists, so every caller that reads a 404 as
 * "missing" reads this one so too (a reference to a Secret named `.` is a missing Secret).
 */
export class UnnamableObjectError extends NotFoundError {
  override readonly name: string = "UnnamableObjectError";
  constructor(type: { plural: string }, objectName: string) {
    super(
      404,
      "NotFound",
      `no ${type.plural} can be named ${JSON.stringify(objectName)}: an object's name is not empty, not . or .., and holds no / or %`,
    );
  }
}

/**
 * The requested resourceVersion is too old (compacted away): HTTP 410 Gone, or a watch ERROR
 * event with code 410. A reflector answers it with a fresh list.
 */
export class GoneError extends KubeApiError {
  override readonly name: string = "GoneError";
}

/** The parts of a `meta.k8s.io/v1` Status object this adapter reads. */
interface StatusBody {
  code?: unknown;
  reason?: unknown;
  message?: unknown;
  details?: { name?: unknown; kind?: unknown; causes?: unknown; retryAfterSeconds?: unknown };
}

/**
 * Builds the typed error for a failed request from its HTTP status and `Status` body (if any),
 * and the pause its `Retry-After` asked for (ms).
 */
export function apiErrorFrom(
  status: number,
  body: unknown,
  what: string,
  retryAfterMs?: number,
): KubeApiError {
  const parsed: StatusBody = typeof body === "object" && body !== null ? (body as StatusBody) : {};
  const reason = typeof parsed.reason === "string" ? parsed.reason : "";
  const serverMessage = typeof parsed.message === "string" ? parsed.message : "";
  const message = `${what}: HTTP ${status}${reason ? ` ${reason}` : ""}${serverMessage ? `: ${serverMessage}` : ""}`;
  if (status === 409) return new ConflictError(status, reason, message);
  if (status === 404) return new NotFoundError(status, reason, message);
  if (status === 410) return new GoneError(status, reason, message);
  const details = typeof parsed.details === "object" && parsed.details !== null ? parsed.details : {};
  const causes = Array.isArray(details.causes) ? details.causes.length : 0;
  const detailed = Boolean(details.name || details.kind || causes);
  // The header, else the Status's own field (a watch's ERROR event has no header).
  const asked =
    typeof details.retryAfterSeconds === "number"
      ? retryAfterHeader(String(details.retryAfterSeconds))
      : undefined;
  retryAfterMs ??= asked;
  return new KubeApiError(status, reason, message, {
    detailed,
    ...(retryAfterMs === undefined ? {} : { retryAfterMs }),
  });
}

/** True when `err` is a 404 from the API server. */
export const isNotFound = (err: unknown): err is NotFoundError => err instanceof NotFoundError;

/**
 * A JSON Patch's 422 under a resourceVersion precondition: the API server applies the patch before
 * it checks the resourceVersion, so a path another writer removed since the object was read (a
 * status field, a condition, the finalizer list or its entry) fails there rather than as a 409.
 * That 422 is bare (its Status names neither the object nor a cause); a 422 that does (a CRD
 * schema or CEL rule, a ValidatingAdmissionPolicy refusing the write) is a refusal, not a race,
 * and stays the error it is, reported like any failure rather than retried quietly.
 */
const removalRaced = (err: unknown): err is KubeApiError =>
  err instanceof KubeApiError && err.status === 422 && !err.detailed;

/**
 * Bare 422s in a row on one object's writes after which they are a refusal, not a race: with the
 * retry's backoff (1 s doubling, full jitter), said within some 15 s of the first.
 */
export const REFUSALS_IN_A_ROW = 5;

/** Objects whose run of bare 422s is kept at most: one dropped only delays its report. */
const MAX_REFUSALS_KEPT = 10_000;

/**
 * Rethrows a JSON Patch's {@link removalRaced} 422 on the object `key` as the race it is, a
 * {@link ConflictError} (re-read and retried quietly), unless its writes met it
 * {@link REFUSALS_IN_A_ROW} times in a row (counted in `refusals`, by object, until a write of it
 * is answered): a race does not repeat once the object is read again, a validating admission
 * webhook denying the write with a bare 422 does, and retried quietly it would never be said.
 * From then on it is the refusal it is, naming what the API server answered (reported, and
 * retried with the failure's backoff).
 */
export function raceAsConflict(refusals: Map<string, number>, key: string): (err: unknown) => never {
  return (err) => {
    if (!removalRaced(err)) throw err;
    const refused = (refusals.get(key) ?? 0) + 1;
    refusals.delete(key);
    if (refusals.size >= MAX_REFUSALS_KEPT) refusals.delete(refusals.keys().next().value ?? "");
    refusals.set(key, refused);
    if (refused < REFUSALS_IN_A_ROW) throw new ConflictError(409, "Conflict", err.message, { cause: err });
    throw new KubeApiError(
      422,
      err.reason,
      `${err.message} (answered ${refused} times in a row, after a fresh read each time: not a race with another writer; a validating admission webhook, or another admission check, denies the write without naming a cause: its configuration or log says why)`,
      { cause: err, detailed: true },
    );
  };
}

/** An answer longer than its request's `maxBytes`. */
export class AnswerTooLargeError extends Error {
  readonly maxBytes: number;
  constructor(what: string, maxBytes: number) {
    super(`${what}: the answer is larger than ${maxBytes} bytes`);
    this.name = "AnswerTooLargeError";
    this.maxBytes = maxBytes;
  }
}

/** A stream that went its request's `idleMs` without a byte, its answer's headers included. */
export class StreamIdleError extends Error {
  override readonly name = "StreamIdleError";
}
