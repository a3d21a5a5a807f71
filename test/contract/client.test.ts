/**
 * The client against real HTTP on loopback: what it sends, how it reads answers, how each failure
 * is reported and which ones it retries. Waits run on a manual clock, so no test sleeps.
 */
import { afterEach, describe, expect, it, vi } from "vitest";
import { ServiceClient, type ServiceClientOptions } from "../../src/api/client.ts";
import { RequestValidationError, type ServiceError } from "../../src/api/errors.ts";
import type { DeploymentStatus, DeploymentType } from "../../src/api/wire.ts";
import type { PatchDeploymentBody } from "../../src/api/wire-requests.ts";
import { ManualClock } from "../support/manual-clock.ts";
import { deployment, type FakeService, type Handler, send, startFakeService } from "./client-fake-service.ts";

const ID = "0b6f3c2e-7d2a-4c59-9b8e-3f1a2b4c5d6e";
const INTEGRATION = "5d0c1f6e-2b7a-4e8d-9c3b-1a2b3c4d5e6f";

let service: FakeService | undefined;
afterEach(async () => {
  await service?.close();
  service = undefined;
});

async function serve(handler: Handler, options: Partial<ServiceClientOptions> = {}) {
  service = await startFakeService(handler);
  const clock = new ManualClock({ sleepsInstantly: true });
  const client = new ServiceClient({ baseUrl: service.url, clock, random: () => 0.5, ...options });
  return { service, client, clock };
}

const failure = (promise: Promise<unknown>) =>
  promise.then(
    () => {
      throw new Error("expected a failure");
    },
    (e: unknown) => e as ServiceError,
  );

describe("operations", () => {
  it("lists providers with the documented defaults filled in, sending key and tenant headers", async () => {
    const provider = {
      id: "p1",
      organization_id: "o1",
      provider_id: "github",
      name: "GitHub",
      client_id: "cid",
      auth_url: "https://a",
      token_url: "https://t",
      uses_pkce: true,
      code_challenge_method: "S256",
      created_at: "2025-01-01T00:00:00Z",
      updated_at: "2025-01-01T00:00:00Z",
    };
    const { client, service } = await serve(
      (_req, res) => send(res, 200, [provider, { ...provider, id: "p2", is_dynamic_client: true }]),
      {
        apiKey: "k-1",
        tenantId: "t-1",
      },
    );
    const providers = await client.listProviders();
    expect(providers.map((p) => [p.id, p.token_endpoint_auth_method, p.is_dynamic_client])).toEqual([
      ["p1", "client_secret_post", false],
      ["p2", "client_secret_post", true],
    ]);
    const [req] = service.requests;
    expect(req?.path).toBe("/v2/auth/providers");
    expect(req?.headers["x-api-key"]).toBe("k-1");
    expect(req?.headers["x-tenant-id"]).toBe("t-1");
  });

  it("uses configured header names and keeps a base URL path prefix", async () => {
    const { service } = await serve((_req, res) => send(res, 200, []));
    const client = new ServiceClient({
      baseUrl: `${service.url}/api/`,
      apiKey: "k",
      tenantId: "t",
      apiKeyHeader: "Authorization-Key",
      tenantHeader: "X-Org",
    });
    await client.listProviders();
    const [req] = service.requests;
    expect(req?.path).toBe("/api/v2/auth/providers");
    expect(req?.headers["authorization-key"]).toBe("k");
    expect(req?.headers["x-org"]).toBe("t");
    expect(req?.headers["x-api-key"]).toBeUndefined();
  });

  it("lists the repositories of an integration", async () => {
    const repo = {
      host_integration_id: INTEGRATION,
      id: 42,
      name: "agent",
      owner: "acme",
      url: "https://github.com/acme/agent",
      default_branch: "main",
    };
    const { client, service } = await serve((_req, res) => send(res, 200, [repo]));
    expect(await client.listRepos(INTEGRATION)).toEqual([repo]);
    expect(service.requests[0]?.path).toBe(`/v1/integrations/forge/github/${INTEGRATION}/repos`);
  });

  it("sends every listing filter as the spec names it", async () => {
    const { client, service } = await serve((_req, res) => send(res, 200, { resources: [], offset: 0 }));
    await client.listAllDeployments(
      {
        name_contains: "agent",
        status: "READY",
        remote_reconciled: false,
        tag_value_ids: ["t1", "t2"],
        image_version: "1.2.3",
        deployment_type: "prod",
        deployment_ids: [ID, INTEGRATION],
      },
      { pageSize: 50 },
    );
    expect(Object.fromEntries(service.requests[0]?.query ?? [])).toEqual({
      name_contains: "agent",
      status: "READY",
      remote_reconciled: "false",
      tag_value_ids: "t1,t2",
      image_version: "1.2.3",
      deployment_type: "prod",
      deployment_ids: `${ID},${INTEGRATION}`,
      limit: "50",
      offset: "0",
    });
  });

  it("gets one deployment by id through the listing, or undefined", async () => {
    const target = deployment(7, { id: ID });
    const { client, service } = await serve((req, res) => {
      const ids = req.query.get("deployment_ids")?.split(",") ?? [];
      const page = req.query.get("offset") === "0" ? [target].filter((d) => ids.includes(d.id)) : [];
      send(res, 200, { resources: page, offset: page.length });
    });
    expect((await client.getDeployment(ID))?.name).toBe("agent-7");
    expect(service.requests[0]?.query.get("deployment_ids")).toBe(ID);
    expect(await client.getDeployment(INTEGRATION)).toBeUndefined();
  });

  it("creates with POST and patches with PATCH, returning the service's deployment", async () => {
    const { client, service } = await serve((req, res) =>
      send(res, req.method === "POST" ? 201 : 200, deployment(1, { id: ID })),
    );
    const created = await client.createDeployment({
      name: "agent-1",
      source: "github",
      source_config: { integration_id: INTEGRATION, repo_url: "https://github.com/acme/agent" },
      source_revision_config: { repo_ref: "main" },
    });
    expect(created.id).toBe(ID);
    const patched = await client.patchDeployment(ID, { source_revision_config: { repo_ref: "v2" } });
    expect(patched.id).toBe(ID);
    expect(service.requests.map((r) => [r.method, r.path])).toEqual([
      ["POST", "/v2/deployments"],
      ["PATCH", `/v2/deployments/${ID}`],
    ]);
    expect(JSON.parse(service.requests[1]?.body ?? "")).toEqual({
      source_revision_config: { repo_ref: "v2" },
    });
  });

  it.each([204, 200, 404])("treats DELETE answered %i as done", async (status) => {
    const { client, service } = await serve((_req, res) =>
      send(res, status, status === 204 ? undefined : {}),
    );
    await expect(client.deleteDeployment(ID)).resolves.toBeUndefined();
    expect(service.requests.map((r) => [r.method, r.path])).toEqual([["DELETE", `/v2/deployments/${ID}`]]);
  });

  it("reports each exchange to the metrics hook with the route template", async () => {
    const seen: unknown[] = [];
    const { client } = await serve(
      (_req, res, n) => (n === 1 ? send(res, 503, {}) : send(res, 200, deployment(1))),
      {
        onResponse: ({ method, route, status }) => seen.push({ method, route, status }),
      },
    );
    await client.patchDeployment(ID, {});
    expect(seen).toEqual([
      { method: "PATCH", route: "/v2/deployments/{deployment_id}", status: 503 },
      { method: "PATCH", route: "/v2/deployments/{deployment_id}", status: 200 },
    ]);
  });
});

describe("input checks (no request is made)", () => {
  it.each([
    ["a non-uuid deployment id", (c: ServiceClient) => c.patchDeployment("abc", {}), "id"],
    ["a non-uuid integration id", (c: ServiceClient) => c.listRepos("nope"), "integrationId"],
    ["a non-uuid id to delete", (c: ServiceClient) => c.deleteDeployment("1"), "id"],
    [
      "an empty status",
      (c: ServiceClient) => c.listAllDeployments({ status: "" as unknown as DeploymentStatus }),
      "filters.status",
    ],
    [
      "an unknown deployment type",
      (c: ServiceClient) => c.listAllDeployments({ deployment_type: "staging" as unknown as DeploymentType }),
      "filters.deployment_type",
    ],
    [
      "a non-uuid id filter",
      (c: ServiceClient) => c.listAllDeployments({ deployment_ids: ["x"] }),
      "filters.deployment_ids[0]",
    ],
    [
      "an empty id filter",
      (c: ServiceClient) => c.listAllDeployments({ deployment_ids: [] }),
      "filters.deployment_ids",
    ],
    [
      "name in a PATCH body",
      (c: ServiceClient) => c.patchDeployment(ID, { name: "x" } as unknown as PatchDeploymentBody),
      "body.name",
    ],
    [
      "a non-uuid integration in a create body",
      (c: ServiceClient) =>
        c.createDeployment({ name: "a", source: "github", source_config: { integration_id: "nope" } }),
      "body.source_config.integration_id",
    ],
  ])("rejects %s", async (_what, call, parameter) => {
    const { client, service } = await serve((_req, res) => send(res, 200, {}));
    const error = await failure(call(client));
    expect(error).toBeInstanceOf(RequestValidationError);
    expect((error as unknown as RequestValidationError).parameter).toBe(parameter);
    expect(service.requests).toHaveLength(0);
  });
});

describe("failures", () => {
  it.each([
    [401, "unauthorized"],
    [403, "unauthorized"],
    [409, "conflict"],
    [405, "rejected"],
  ] as const)("reports %i as %s, not retried", async (status, kind) => {
    const { client, service } = await serve((_req, res) => send(res, status, { detail: "nope" }));
    const error = await failure(client.listProviders());
    expect(error).toMatchObject({ kind, status, retryable: false, detail: "nope" });
    expect(error.message).toBe(`GET /v2/auth/providers: ${status} ${kind}: nope`);
    expect(service.requests).toHaveLength(1);
  });

  it("renders a FastAPI validation detail readably", async () => {
    const { client } = await serve((_req, res) =>
      send(res, 422, {
        detail: [
          { loc: ["body", "source_config", "repo_url"], msg: "field required", type: "missing" },
          { loc: ["body", "secrets", 0, "name"], msg: "str type expected", type: "type_error" },
        ],
      }),
    );
    const error = await failure(client.createDeployment({ name: "a", source: "github" }));
    expect(error.kind).toBe("invalid");
    expect(error.detail).toBe(
      "body.source_config.repo_url: field required; body.secrets.0.name: str type expected",
    );
  });

  it("reports 404 on PATCH as not_found", async () => {
    const { client } = await serve((_req, res) => send(res, 404, { detail: "Deployment not found" }));
    await expect(failure(client.patchDeployment(ID, {}))).resolves.toMatchObject({
      kind: "not_found",
      detail: "Deployment not found",
    });
  });

  it("names the failing field of a malformed page", async () => {
    const { client } = await serve((_req, res) => send(res, 200, { resources: {}, offset: 2 }));
    const error = await failure(client.listAllDeployments());
    expect(error.kind).toBe("bad_response");
    expect(error.detail).toBe("response.resources: expected a value of type array, got an object");
  });

  it("names a missing required field of the deployment a write answered with", async () => {
    const { name: _dropped, ...nameless } = deployment(1);
    const { client } = await serve((_req, res) => send(res, 200, nameless));
    const error = await failure(client.patchDeployment(ID, {}));
    expect(error.kind).toBe("bad_response");
    expect(error.detail).toMatch(/cannot be read: name: required field is missing$/);
  });

  it("names the field deep inside an optional object, not the union around it", async () => {
    const bad = {
      ...deployment(1),
      source_config: { resource_spec: { sidecars: [{ name: "s", env: 5 }] } },
    };
    const { client } = await serve((_req, res) => send(res, 200, bad));
    const error = await failure(client.patchDeployment(ID, {}));
    expect(error.detail).toMatch(
      /cannot be read: source_config\.resource_spec\.sidecars\[0\]\.env: expected a value of type array or null, got 5$/,
    );
  });

  it("reports a body that is not JSON", async () => {
    const { client } = await serve((_req, res) => {
      res.writeHead(200, { "content-type": "text/html" });
      res.end("<html>proxy login</html>");
    });
    await expect(failure(client.listProviders())).resolves.toMatchObject({ kind: "bad_response" });
  });
});

describe("retries", () => {
  it("retries a read through 502, 503 and 504, backing off exponentially", async () => {
    const statuses = [502, 503, 504];
    const { client, service, clock } = await serve(
      (_req, res, n) => (n <= 3 ? send(res, statuses[n - 1] ?? 500, {}) : send(res, 200, [])),
      { retryBaseDelayMs: 100 },
    );
    await expect(client.listProviders()).resolves.toEqual([]);
    expect(service.requests).toHaveLength(4);
    // random() = 0.5 puts each wait at 3/4 of the exponential step.
    expect(clock.sleeps).toEqual([75, 150, 300]);
  });

  it("gives up after the configured retries with the last failure", async () => {
    const { client, service } = await serve((_req, res) => send(res, 503, { detail: "maintenance" }), {
      retries: 2,
    });
    const error = await failure(client.listProviders());
    expect(error).toMatchObject({ kind: "unavailable", status: 503, retryable: true, detail: "maintenance" });
    expect(service.requests).toHaveLength(3);
  });

  it("waits out Retry-After in seconds", async () => {
    const { client, service, clock } = await serve((_req, res, n) =>
      n === 1 ? send(res, 429, { detail: "slow down" }, { "retry-after": "7" }) : send(res, 200, []),
    );
    await client.listProviders();
    expect(service.requests).toHaveLength(2);
    expect(clock.sleeps).toEqual([7000]);
  });

  it("waits out Retry-After given as an HTTP date", async () => {
    // The date is read against the wall clock: one that stands still here, so that the time the
    // test takes (a loaded machine) does not shorten the wait it expects.
    vi.useFakeTimers({ toFake: ["Date"], now: Date.parse("2026-11-24T12:00:00Z") });
    try {
      const when = new Date(Date.now() + 30_000).toUTCString();
      const { client, clock } = await serve((_req, res, n) =>
        n === 1 ? send(res, 503, {}, { "retry-after": when }) : send(res, 200, []),
      );
      await client.listProviders();
      expect(clock.sleeps).toEqual([30_000]);
    } finally {
      vi.useRealTimers();
    }
  });

  it("throws rate_limited at once when Retry-After is longer than it will wait", async () => {
    const { client, service } = await serve((_req, res) => send(res, 429, {}, { "retry-after": "3600" }));
    const error = await failure(client.listProviders());
    expect(error).toMatchObject({ kind: "rate_limited", retryAfterSeconds: 3600, retryable: true });
    expect(service.requests).toHaveLength(1);
  });

  it("retries a write refused with 429 or 503 (the service did not act)", async () => {
    const { client, service } = await serve((_req, res, n) =>
      n === 1 ? send(res, 429, {}) : n === 2 ? send(res, 503, {}) : send(res, 200, deployment(1)),
    );
    await client.patchDeployment(ID, {});
    expect(service.requests).toHaveLength(3);
  });

  it.each([500, 502, 504])(
    "does not repeat a write answered %i, flagging it maybe applied",
    async (status) => {
      const { client, service } = await serve((_req, res) => send(res, status, {}));
      const error = await failure(client.createDeployment({ name: "a", source: "github" }));
      expect(error).toMatchObject({ kind: "unavailable", status, retryable: true, maybeApplied: true });
      expect(service.requests).toHaveLength(1);
    },
  );

  it("retries a read whose connection was reset", async () => {
    const { client, service } = await serve((_req, res, n) => {
      if (n === 1) res.socket?.destroy();
      else send(res, 200, []);
    });
    await expect(client.listProviders()).resolves.toEqual([]);
    expect(service.requests).toHaveLength(2);
  });

  it("does not repeat a write whose connection was reset, flagging it maybe applied", async () => {
    const { client, service } = await serve((_req, res) => {
      res.socket?.destroy();
    });
    const error = await failure(client.patchDeployment(ID, {}));
    expect(error).toMatchObject({ kind: "network", retryable: true, maybeApplied: true });
    expect(error.message).toMatch(/may have been applied/);
    expect(service.requests).toHaveLength(1);
  });

  it("retries a write that never left (connection refused)", async () => {
    const { service } = await serve((_req, res) => send(res, 200, {}));
    const url = service.url;
    await service.close();
    const clock = new ManualClock({ sleepsInstantly: true });
    const client = new ServiceClient({ baseUrl: url, clock, retries: 2 });
    const error = await failure(client.createDeployment({ name: "a", source: "github" }));
    expect(error).toMatchObject({ kind: "network", maybeApplied: false, retryable: true });
    expect(clock.sleeps).toHaveLength(2);
  });
});
