import { describe, expect, it } from "vitest";
import {
  isRouteMissing,
  kindOfStatus,
  parseRetryAfter,
  RevisionsRouteMissingError,
  RouteMissingError,
  renderDetail,
  ServiceError,
  truncate,
  withDetailCut,
} from "../../src/api/errors.ts";
import { RedeployRouteMissingError } from "../../src/api/redeploy.ts";
import { LogsRouteMissingError } from "../../src/api/revision-logs.ts";

describe("renderDetail", () => {
  it.each([
    { reason: "string detail as is", body: '{"detail":"Deployment not found"}', out: "Deployment not found" },
    {
      reason: "FastAPI list as loc: msg pairs",
      body: JSON.stringify({
        detail: [
          { loc: ["body", "source_config", "repo_url"], msg: "field required", type: "missing" },
          {
            loc: ["query", "limit"],
            msg: "Input should be less than or equal to 100",
            type: "less_than_equal",
          },
        ],
      }),
      out: "body.source_config.repo_url: field required; query.limit: Input should be less than or equal to 100",
    },
    { reason: "issue without loc keeps its message", body: '{"detail":[{"msg":"bad"}]}', out: "bad" },
    { reason: "plain text body", body: "upstream connect error", out: "upstream connect error" },
    { reason: "empty body falls back", body: "", out: "HTTP 502" },
    { reason: "null detail falls back", body: '{"detail":null}', out: "HTTP 502" },
    { reason: "other JSON is shown", body: '{"error":"quota"}', out: '{"error":"quota"}' },
  ])("$reason", ({ body, out }) => {
    expect(renderDetail(body, "HTTP 502")).toBe(out);
  });

  it("keeps a long detail whole, for the caller to redact before cutting, and the message short", () => {
    const detail = renderDetail(JSON.stringify({ detail: `${"x".repeat(9_990)}secret-value` }), "-");
    expect(detail.endsWith("secret-value")).toBe(true);
    const error = new ServiceError({
      kind: "invalid",
      method: "POST",
      route: "/r",
      detail,
      retryable: false,
    });
    expect(error.message.length).toBeLessThan(600);
    expect(error.message.endsWith("…")).toBe(true);
  });
});

describe("truncate", () => {
  it("cuts to at most max characters, marking the cut, never inside a surrogate pair", () => {
    expect(truncate("abcdef", 6)).toBe("abcdef");
    expect(truncate("abcdef", 4)).toBe("abc…");
    expect(truncate("ab😀cd", 4)).toBe("ab…");
  });
});

describe("parseRetryAfter", () => {
  const now = Date.parse("2025-06-01T12:00:00Z");
  it.each([
    { value: "120", out: 120 },
    { value: " 0 ", out: 0 },
    { value: "1.5", out: 1.5 },
    { value: "Sun, 01 Jun 2025 12:00:30 GMT", out: 30 },
    { value: "Sun, 01 Jun 2025 11:00:00 GMT", out: 0 },
    // A pause of years, or a date far ahead, is read as the longest taken: an hour.
    { value: "3600", out: 3_600 },
    { value: "3000000", out: 3_600 },
    { value: "1e400", out: undefined },
    { value: "99999999999999999999999", out: 3_600 },
    { value: "Fri, 01 Jun 2125 12:00:00 GMT", out: 3_600 },
    { value: "soon", out: undefined },
    { value: undefined, out: undefined },
  ])("$value → $out", ({ value, out }) => {
    expect(parseRetryAfter(value, now)).toBe(out);
  });
});

describe("ServiceError", () => {
  it.each([
    [401, "unauthorized"],
    [403, "unauthorized"],
    [400, "invalid"],
    [422, "invalid"],
    [404, "not_found"],
    [409, "conflict"],
    [429, "rate_limited"],
    [500, "unavailable"],
    [503, "unavailable"],
    [405, "rejected"],
    [302, "rejected"],
  ] as const)("status %i is %s", (status, kind) => {
    expect(kindOfStatus(status)).toBe(kind);
  });

  it("has a one-line message even when the detail spans lines", () => {
    const error = new ServiceError({
      kind: "unavailable",
      method: "GET",
      route: "/v2/deployments",
      status: 502,
      detail: "bad gateway\n  upstream reset",
      retryable: true,
    });
    expect(error.message).toBe("GET /v2/deployments: 502 unavailable: bad gateway upstream reset");
    expect(error.maybeApplied).toBe(false);
  });
});

describe("withDetailCut", () => {
  const error = (detail: string) =>
    new ServiceError({
      kind: "unavailable",
      method: "GET",
      route: "/v2/deployments",
      status: 503,
      detail,
      retryable: true,
    });

  it("keeps the start of a service's detail of MiBs, and everything else of the error", () => {
    const kept = withDetailCut(error("d".repeat(8 * 1024 * 1024)), 16_384);
    expect(kept).toBeInstanceOf(ServiceError);
    expect((kept as ServiceError).detail).toHaveLength(16_384);
    expect((kept as ServiceError).detail.endsWith("…")).toBe(true);
    expect(kept).toMatchObject({
      kind: "unavailable",
      status: 503,
      retryable: true,
      route: "/v2/deployments",
    });
  });

  it("cuts a detail between characters, never inside a surrogate pair", () => {
    const kept = withDetailCut(error("🚀".repeat(100)), 9) as ServiceError;
    expect(kept.detail).toBe(`${"🚀".repeat(4)}…`);
  });

  it("returns a short detail's error, and any other error, as it is", () => {
    const short = error("gateway down");
    expect(withDetailCut(short, 16_384)).toBe(short);
    const other = new Error("x".repeat(100_000));
    expect(withDetailCut(other, 16_384)).toBe(other);
  });
});

describe("a route the service does not have", () => {
  const failure = (status: number, detail: string) =>
    new ServiceError({
      kind: kindOfStatus(status),
      method: "POST",
      route: "/v2/deployments/{deployment_id}/revisions/{revision_id}/redeploy",
      status,
      detail,
      retryable: false,
    });

  it.each([
    { status: 405, detail: "Method Not Allowed", missing: true },
    { status: 404, detail: "Not Found", missing: true },
    { status: 404, detail: " not found\n", missing: true },
    { status: 404, detail: "HTTP 404", missing: true },
    { status: 404, detail: "Revision not found", missing: false },
    { status: 400, detail: "bad", missing: false },
    { status: 503, detail: "Not Found", missing: false },
  ])("$status $detail: missing $missing", ({ status, detail, missing }) => {
    expect(isRouteMissing(failure(status, detail))).toBe(missing);
  });

  it("is not said of an error other than the service's", () => {
    expect(isRouteMissing(new Error("Not Found"))).toBe(false);
  });

  it.each([
    [RevisionsRouteMissingError, "RevisionsRouteMissingError", "revisions"],
    [LogsRouteMissingError, "LogsRouteMissingError", "revision logs"],
    [RedeployRouteMissingError, "RedeployRouteMissingError", "redeploy"],
  ] as const)("%o: one shared class, its own name, the route named in the message", (Missing, name, what) => {
    const cause = failure(405, "Method Not Allowed");
    const error = new Missing(cause);
    expect(error).toBeInstanceOf(RouteMissingError);
    expect(error.name).toBe(name);
    expect(error.status).toBe(405);
    expect(error.cause).toBe(cause);
    expect(error.message).toBe(
      `the service has no ${what} route (POST /v2/deployments/{deployment_id}/revisions/{revision_id}/redeploy answered 405)`,
    );
  });
});
