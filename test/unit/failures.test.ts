import { describe, expect, it } from "vitest";
import { renderDetail, ServiceError } from "../../src/api/errors.ts";
import { redactionSearches } from "../../src/api/redact.ts";
import { TokenWaitTooLongError } from "../../src/api/reserved-tokens.ts";
import { MAX_MESSAGE_LENGTH } from "../../src/crd/conventions.ts";
import { failureOf } from "../../src/reconcile/failures.ts";
import { REASON } from "../../src/reconcile/reasons.ts";
import { statusFrom } from "../../src/reconcile/status.ts";
import { DeferredError } from "../../src/runtime/clock.ts";
import { TerminalError } from "../../src/runtime/reconcile-errors.ts";

const SECRET = "s3cr3t-value-that-must-never-show";

/** A 422 whose body quotes `quoted` at character `at` of its detail. */
const rejected = (quoted: string, at: number) =>
  new ServiceError({
    kind: "invalid",
    method: "PATCH",
    route: "/v2/deployments/{deployment_id}",
    status: 422,
    detail: renderDetail(JSON.stringify({ detail: `${"x".repeat(at)}${quoted} rest` }), "HTTP 422"),
    retryable: false,
  });

describe("failureOf", () => {
  it("a token later than the reconcile could end: WaitingForConnectionShare, deferred to the token, not stalled", () => {
    const error = new TokenWaitTooLongError(
      "GET /v2/deployments: the connection's rate limit (0.001 requests/s) admits this call later than its reconcile could end",
      950_000,
    );
    const failure = failureOf(error, []);
    expect(failure.outcome).toMatchObject({ reason: REASON.WaitingForConnectionShare, stalled: false });
    expect(failure.outcome.message).toContain("0.001 requests/s");
    // A stable message (no countdown): the status is written once, not at every deferral.
    expect(failure.outcome.message).not.toMatch(/\d+ s\b/);
    expect(failure.rethrow).toBeInstanceOf(DeferredError);
    expect((failure.rethrow as DeferredError).afterMs).toBe(950_000);
  });

  it("an answer past the bound: ResponseTooLarge, retried with backoff, never stalled", () => {
    const error = new ServiceError({
      kind: "too_large",
      method: "GET",
      route: "/v2/deployments",
      detail: "the answer was larger than 8388608 bytes (--max-response-bytes / DMS_MAX_RESPONSE_BYTES)",
      retryable: false,
    });
    const failure = failureOf(error, []);
    expect(failure.outcome).toMatchObject({ reason: REASON.ResponseTooLarge, stalled: false });
    expect(failure.outcome.message).toContain("larger than 8388608 bytes (--max-response-bytes");
    expect(failure.rethrow).toBeInstanceOf(Error);
    expect(failure.rethrow).not.toBeInstanceOf(TerminalError);
  });

  it("a write the operator held back unsent (a shard Lease not current): ServiceUnavailable says why, never that the service failed", () => {
    const held = "this replica's shard Lease is not current (--sharded): the write was held back";
    const error = new ServiceError({
      kind: "unavailable",
      method: "POST",
      route: "/v2/deployments",
      detail: held,
      retryable: true,
    });
    const failure = failureOf(error, []);
    expect(failure.outcome.reason).toBe(REASON.ServiceUnavailable);
    expect(failure.outcome.message).toContain(held);
    expect(failure.outcome.message).not.toContain("gateway");
    expect(failure.rethrow).toBeInstanceOf(Error);
  });

  it.each([490, 500, MAX_MESSAGE_LENGTH - 80, MAX_MESSAGE_LENGTH - 60, 20_000])(
    "a secret value the service quotes at character %i never shows, not even its first half",
    (at) => {
      const { message } = failureOf(rejected(SECRET, at), [SECRET]).outcome;
      // Cut to the status's length, give or take the words around the service's answer.
      expect(message.length).toBeLessThan(MAX_MESSAGE_LENGTH + 100);
      expect(message).not.toContain(SECRET.slice(0, 8));
    },
  );

  it("a secret value the service quotes JSON-escaped in a detail it did not decode never shows", () => {
    const value = 'pa"ss\\word\nline-é';
    const error = new ServiceError({
      kind: "invalid",
      method: "POST",
      route: "/v2/deployments",
      status: 422,
      // A detail that is an object is shown as JSON: the value appears escaped.
      detail: renderDetail(JSON.stringify({ detail: { secrets: [{ value }] } }), "HTTP 422"),
      retryable: false,
    });
    const { message } = failureOf(error, [value]).outcome;
    expect(message).toContain("***");
    expect(message).not.toContain('pa\\"ss');
    expect(message).not.toContain("word");
  });
});

describe("a failure's message, redacted once", () => {
  it("is searched once for a reconcile's values, not again where Synced and Stalled show it", () => {
    // Each search has a budget of its own: three in a row held the shared event loop three budgets.
    const values = [SECRET];
    const error = new ServiceError({
      kind: "invalid",
      method: "POST",
      route: "/v2/deployments",
      status: 422,
      detail: `source_config.custom_url: not a URL: ${SECRET}`,
      retryable: false,
    });
    const searched = (run: () => void) => {
      const before = redactionSearches.count;
      run();
      return redactionSearches.count - before;
    };
    let failure = failureOf(error, []);
    expect(searched(() => (failure = failureOf(error, values)))).toBe(1);
    const { outcome } = failure;
    expect(outcome).toMatchObject({ redacted: true });
    expect(outcome.message).not.toContain(SECRET);
    // The same values in a new array each time, as a new reconcile reads them: nothing remembered.
    const statusOf = (sync: typeof outcome) =>
      statusFrom({ generation: 1, observed: undefined, sync, now: new Date(0), secretValues: [...values] });
    const { redacted: _, ...unmarked } = outcome;
    const marked = searched(() => statusOf(outcome));
    // Unmarked, its message is searched (once for both conditions: remembered for the array);
    // marked, not at all. (Ready's own sentence is searched in both.)
    expect(searched(() => statusOf(unmarked)) - marked).toBe(1);
    const conditions = statusOf(outcome).conditions ?? [];
    expect(
      conditions
        .filter((c) => c.message === outcome.message)
        .map((c) => c.type)
        .sort(),
    ).toEqual(["Stalled", "Synced"]);
  });
});
