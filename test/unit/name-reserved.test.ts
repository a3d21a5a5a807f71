// Which 409 answers of a create mean "a tracing project holds the name" (NameReserved) rather
// than "a deployment holds it": the error body's shape is not in the spec, so it is read from the
// message, tolerantly, and anything else keeps the behaviour of any 409.
import { describe, expect, it } from "vitest";
import { renderDetail, ServiceError } from "../../src/api/errors.ts";
import { isTracingProjectConflict, nameReservedMessage } from "../../src/reconcile/service/name-reserved.ts";
import { tracingProjectConflict } from "../../src/simulator/tracing-projects.ts";

/** The client's error for a `status` answer with `body`, as its transport builds it. */
const answered = (status: number, body: string, kind: "conflict" | "invalid" = "conflict") =>
  new ServiceError({
    kind,
    method: "POST",
    route: "/v2/deployments",
    status,
    detail: renderDetail(body, `HTTP ${status}`),
    retryable: false,
  });

describe("isTracingProjectConflict", () => {
  it.each([
    {
      reason: "the simulator's answer",
      body: JSON.stringify({ detail: tracingProjectConflict("pr-7") }),
      yes: true,
    },
    {
      reason: "a plain 'tracing project' message",
      body: '{"detail":"Tracing project myapp-pr-12 already exists"}',
      yes: true,
    },
    {
      reason: "snake_case in a FastAPI issue list",
      body: '{"detail":[{"loc":["body","name"],"msg":"tracing_project with this name exists","type":"value_error"}]}',
      yes: true,
    },
    {
      reason: "the older word, tracer session",
      body: '{"detail":"Tracer session with name myapp already exists"}',
      yes: true,
    },
    {
      reason: "a project that already exists",
      body: '{"detail":"Project \'myapp\' already exists"}',
      yes: true,
    },
    {
      reason: "a session that already exists, as plain text",
      body: "session myapp already exist",
      yes: true,
    },
    {
      reason: "a deployment that holds the name",
      body: '{"detail":"A deployment named \'myapp\' already exists"}',
      yes: false,
    },
    {
      reason: "a deployment being deleted",
      body: '{"detail":"Deployment is being deleted and cannot be changed"}',
      yes: false,
    },
    { reason: "no body at all", body: "", yes: false },
    { reason: "a body that is not JSON", body: "<html>Conflict</html>", yes: false },
    {
      reason: "a project mentioned without a conflict",
      body: '{"detail":"conflict in project settings"}',
      yes: false,
    },
  ])("$reason: $yes", ({ body, yes }) => {
    expect(isTracingProjectConflict(answered(409, body))).toBe(yes);
  });

  it("is only ever a 409: the same words in a 422 are a rejected request", () => {
    expect(
      isTracingProjectConflict(answered(422, '{"detail":"tracing project name invalid"}', "invalid")),
    ).toBe(false);
    expect(isTracingProjectConflict(new Error("tracing project already exists"))).toBe(false);
  });

  it("says what holds the name and every way out", () => {
    const message = nameReservedMessage("myapp-pr-12");
    expect(message).toContain('"myapp-pr-12"');
    expect(message).toMatch(/Delete the tracing project "myapp-pr-12" in the service's UI/);
    expect(message).toContain("spec.deleteTracingProject: true");
    expect(message).toContain("another spec.name");
    expect(message).toContain("dms.dev/reconcile-requested-at");
  });
});
