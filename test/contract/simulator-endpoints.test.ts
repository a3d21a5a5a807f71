import { Value } from "@sinclair/typebox/value";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  DeploymentPageSchema,
  DeploymentSchema,
  ForgeRepoListSchema,
  ProviderListSchema,
} from "../../src/api/wire.ts";
import type { SeedDeployment } from "../../src/simulator/seed.ts";
import { type RunningSimulator, startSimulator } from "../../src/simulator/server.ts";
import { call } from "./simulator-http.ts";

const INTEGRATION = "6f1c1d2e-0000-4000-8000-000000000001";
const UNKNOWN = "00000000-0000-4000-8000-000000000000";
const id = (i: number) => `00000000-0000-4000-8000-${String(i).padStart(12, "0")}`;

// 25 deployments: enough for a second, shorter page at the default limit of 20.
const deployments: SeedDeployment[] = Array.from({ length: 25 }, (_, i) => ({
  id: id(i + 1),
  name: i === 0 ? "Support-Agent" : `agent-${String(i).padStart(2, "0")}`,
  source: i % 2 === 0 ? "github" : "external_docker",
  image_version: i < 3 ? "0.4.2" : "0.3.0",
  deployment_type: i < 5 ? "prod" : "dev",
  remote_reconciled: i % 5 !== 0,
  tag_value_ids: i < 2 ? ["tag-a"] : i < 4 ? ["tag-b"] : [],
  status: i === 7 ? "UNUSED" : undefined,
  secrets: [{ name: "TOKEN", value: `secret-${i}` }],
}));

let sim: RunningSimulator;
beforeAll(async () => {
  sim = await startSimulator({
    seed: {
      providers: [{ provider_id: "github", name: "GitHub" }],
      integrations: [{ id: INTEGRATION, repos: [{ id: 1, owner: "acme", name: "agent" }] }],
      deployments,
    },
  });
});
afterAll(() => sim.close());

const names = (page: { resources: { name: string }[] }) => page.resources.map((d) => d.name);

describe("catalog endpoints", () => {
  it("lists providers with every documented field, defaults filled in", async () => {
    const res = await call(sim, "GET", "/v2/auth/providers");
    expect(res.status).toBe(200);
    expect(Value.Check(ProviderListSchema, res.body)).toBe(true);
    expect(res.body[0]).toMatchObject({
      provider_id: "github",
      token_endpoint_auth_method: "client_secret_post",
      is_dynamic_client: false,
    });
  });

  it("lists the repositories of an integration, carrying the integration id", async () => {
    const res = await call(sim, "GET", `/v1/integrations/forge/github/${INTEGRATION}/repos`);
    expect(res.status).toBe(200);
    expect(Value.Check(ForgeRepoListSchema, res.body)).toBe(true);
    expect(res.body).toEqual([
      {
        host_integration_id: INTEGRATION,
        id: 1,
        name: "agent",
        owner: "acme",
        url: "https://github.com/acme/agent",
        default_branch: "main",
      },
    ]);
  });

  it("answers 404 with a detail string for an unknown integration and 422 for a non-uuid", async () => {
    const missing = await call(sim, "GET", `/v1/integrations/forge/github/${UNKNOWN}/repos`);
    expect(missing.status).toBe(404);
    expect(typeof missing.body.detail).toBe("string");
    const bad = await call(sim, "GET", "/v1/integrations/forge/github/not-a-uuid/repos");
    expect(bad.status).toBe(422);
    expect(bad.body.detail).toEqual([
      { loc: ["path", "integration_id"], msg: "Input should be a valid UUID", type: "uuid_parsing" },
    ]);
  });
});

describe("GET /v2/deployments", () => {
  it("pages by the response offset and signals the end with an empty page", async () => {
    const first = await call(sim, "GET", "/v2/deployments");
    expect(first.status).toBe(200);
    expect(Value.Check(DeploymentPageSchema, first.body)).toBe(true);
    expect(first.body.resources).toHaveLength(20);
    expect(first.body.offset).toBe(20);
    const second = await call(sim, "GET", `/v2/deployments?offset=${first.body.offset}`);
    expect(second.body.resources).toHaveLength(5);
    expect(second.body.offset).toBe(25);
    const end = await call(sim, "GET", "/v2/deployments?offset=25");
    expect(end.body).toEqual({ resources: [], offset: 25 });
    const all = [...names(first.body), ...names(second.body)];
    expect(new Set(all).size).toBe(25);
  });

  it("lists in a stable order: created_at, then id", async () => {
    const res = await call(sim, "GET", "/v2/deployments?limit=100");
    const listed = res.body.resources.map((d: { created_at: string; id: string }) => [d.created_at, d.id]);
    expect(listed).toEqual([...listed].sort((a, b) => (a[0] + a[1] < b[0] + b[1] ? -1 : 1)));
    expect(res.body.resources[0].id).toBe(id(1));
  });

  it.each([
    ["limit=0", "limit", "greater_than_equal"],
    ["limit=101", "limit", "less_than_equal"],
    ["limit=ten", "limit", "int_parsing"],
    ["offset=-1", "offset", "greater_than_equal"],
    ["remote_reconciled=maybe", "remote_reconciled", "bool_parsing"],
    ["deployment_type=staging", "deployment_type", "enum"],
  ])("rejects %s with a 422 naming the parameter", async (query, param, type) => {
    const res = await call(sim, "GET", `/v2/deployments?${query}`);
    expect(res.status).toBe(422);
    expect(res.body.detail).toHaveLength(1);
    expect(res.body.detail[0]).toMatchObject({ loc: ["query", param], type });
    expect(typeof res.body.detail[0].msg).toBe("string");
  });

  it("reports every bad parameter at once", async () => {
    const res = await call(sim, "GET", "/v2/deployments?limit=500&offset=x");
    expect(res.body.detail.map((d: { loc: string[] }) => d.loc[1])).toEqual(["limit", "offset"]);
  });

  it("accepts limit 100 and 1", async () => {
    expect((await call(sim, "GET", "/v2/deployments?limit=100")).body.resources).toHaveLength(25);
    expect((await call(sim, "GET", "/v2/deployments?limit=1")).body).toMatchObject({ offset: 1 });
  });

  it.each([
    ["name_contains=support", ["Support-Agent"]],
    ["name_contains=agent-2", ["agent-20", "agent-21", "agent-22", "agent-23", "agent-24"]],
    ["status=UNUSED", ["agent-07"]],
    ["status=AWAITING_DATABASE", []],
    ["remote_reconciled=false", ["Support-Agent", "agent-05", "agent-10", "agent-15", "agent-20"]],
    ["tag_value_ids=tag-a", ["Support-Agent", "agent-01"]],
    ["tag_value_ids=tag-a,%20tag-b", ["Support-Agent", "agent-01", "agent-02", "agent-03"]],
    ["image_version=0.4.2", ["Support-Agent", "agent-01", "agent-02"]],
    ["deployment_type=prod&image_version=0.3.0", ["agent-03", "agent-04"]],
    [`deployment_ids=${id(3)},%20${id(5).toUpperCase()},${UNKNOWN}`, ["agent-02", "agent-04"]],
    // In the listing's order whatever the order asked, and with the other filters.
    [`deployment_ids=${id(9)},${id(5)},${id(3)}&limit=2`, ["agent-02", "agent-04"]],
    [`deployment_ids=${id(9)},${id(5)},${id(3)}&offset=1`, ["agent-04", "agent-08"]],
    [`deployment_ids=${id(5)},${id(3)}&image_version=0.4.2`, ["agent-02"]],
  ])("filters by %s", async (query, expected) => {
    const res = await call(sim, "GET", `/v2/deployments?limit=100&${query}`);
    expect(res.status).toBe(200);
    expect(names(res.body)).toEqual(expected);
  });

  it("pages within a filter", async () => {
    const res = await call(sim, "GET", "/v2/deployments?name_contains=agent-&limit=10&offset=20");
    expect(names(res.body)).toEqual(["agent-21", "agent-22", "agent-23", "agent-24"]);
    expect(res.body.offset).toBe(24);
  });
});

describe("deployments: create, get, patch, delete", () => {
  it("creates with server-assigned id, tenant and timestamps; a taken name is 409", async () => {
    const body = {
      name: "created-one",
      source: "github",
      source_config: { integration_id: INTEGRATION, repo_url: "https://github.com/acme/agent" },
      source_revision_config: { repo_ref: "main" },
      secrets: [{ name: "KEY", value: "v" }],
    };
    const res = await call(sim, "POST", "/v2/deployments", body);
    expect(res.status).toBe(201);
    expect(Value.Check(DeploymentSchema, res.body)).toBe(true);
    expect(res.body).toMatchObject({
      name: "created-one",
      tenant_id: sim.store.tenantId,
      status: "AWAITING_DATABASE",
    });
    expect(res.body.id).toMatch(/^[0-9a-f-]{36}$/);
    expect(Date.parse(res.body.created_at)).not.toBeNaN();
    expect(res.body.latest_revision_id).toMatch(/^[0-9a-f-]{36}$/);

    const again = await call(sim, "POST", "/v2/deployments", body);
    expect(again.status).toBe(409);
    expect(typeof again.body.detail).toBe("string");
    const listed = await call(sim, "GET", `/v2/deployments?deployment_ids=${res.body.id}`);
    expect(listed.body.resources).toEqual([res.body]);
  });

  it.each([
    [{ source: "github" }, ["body", "name"], "missing"],
    [{ name: "x", source: "ftp" }, ["body", "source"], "literal_error"],
    [{ name: "x", source: "github", colour: "red" }, ["body", "colour"], "extra_forbidden"],
    [
      { name: "x", source: "github", source_config: { integration_id: "nope" } },
      ["body", "source_config", "integration_id"],
      "uuid_parsing",
    ],
    [
      {
        name: "x",
        source: "github",
        source_config: {},
        source_revision_config: {},
        secrets: [],
        secret_references: [{ name: "a", secret_name: "s", secret_key: "k" }],
      },
      ["body", "secret_references"],
      "value_error",
    ],
    [
      { name: "x", source: "github", source_revision_config: {}, secrets: [] },
      ["body", "source_config"],
      "missing",
    ],
  ])("rejects a bad create body %j with a 422 at the field", async (body, loc, type) => {
    const res = await call(sim, "POST", "/v2/deployments", body);
    expect(res.status).toBe(422);
    expect(res.body.detail).toContainEqual(expect.objectContaining({ loc, type }));
  });

  it("accepts secret references for external_docker", async () => {
    const refs = [{ name: "DB", secret_name: "db", secret_key: "url" }];
    const res = await call(sim, "POST", "/v2/deployments", {
      name: "ext",
      source: "external_docker",
      source_config: {},
      source_revision_config: {},
      secrets: [],
      secret_references: refs,
    });
    expect(res.status).toBe(201);
    expect(res.body.secret_references).toEqual(refs);
  });

  it("patches and answers the updated deployment", async () => {
    const res = await call(sim, "PATCH", `/v2/deployments/${id(2)}`, {
      source_config: { build_command: "make" },
    });
    expect(res.status).toBe(200);
    expect(Value.Check(DeploymentSchema, res.body)).toBe(true);
    expect(res.body.source_config.build_command).toBe("make");
    expect(sim.store.get(id(2))?.source_config.build_command).toBe("make");
  });

  it.each([
    [{ name: "renamed" }, ["body", "name"], "extra_forbidden"],
    [{ source: "github" }, ["body", "source"], "extra_forbidden"],
    [{ source_config: { repo_url: 5 } }, ["body", "source_config", "repo_url"], "string_type"],
    [
      { source_config: { resource_spec: { cpu: "lots" } } },
      ["body", "source_config", "resource_spec", "cpu"],
      "float_type",
    ],
    [{ secrets: [{ name: "A" }] }, ["body", "secrets", 0, "value"], "missing"],
    [{ revision_source: "external_docker" }, ["body", "revision_source"], "literal_error"],
    [
      { source_revision_config: { repo_commit_sha: "abc" } },
      ["body", "source_revision_config", "repo_commit_sha"],
      "extra_forbidden",
    ],
    [[], ["body"], "model_attributes_type"],
  ])("rejects the PATCH body %j with a 422 at the field", async (body, loc, type) => {
    const res = await call(sim, "PATCH", `/v2/deployments/${id(2)}`, body);
    expect(res.status).toBe(422);
    expect(res.body.detail).toContainEqual(expect.objectContaining({ loc, type }));
  });

  it("rejects secret references in a PATCH of a deployment whose source is not external_docker", async () => {
    const refs = [{ name: "DB", secret_name: "db", secret_key: "url" }];
    const res = await call(sim, "PATCH", `/v2/deployments/${id(1)}`, { secret_references: refs });
    expect(res.status).toBe(422);
    expect((await call(sim, "PATCH", `/v2/deployments/${id(2)}`, { secret_references: refs })).status).toBe(
      200,
    );
  });

  it("answers 422 for malformed JSON, a missing body and a non-uuid id; 404 for an unknown id", async () => {
    const json = await call(sim, "PATCH", `/v2/deployments/${id(2)}`, "{not json");
    expect(json.status).toBe(422);
    expect(json.body.detail[0]).toMatchObject({ type: "json_invalid", loc: ["body", expect.any(Number)] });
    const empty = await call(sim, "PATCH", `/v2/deployments/${id(2)}`);
    expect(empty.body.detail).toEqual([{ loc: ["body"], msg: "Field required", type: "missing" }]);
    const bad = await call(sim, "PATCH", "/v2/deployments/xyz", {});
    expect(bad.body.detail).toEqual([
      { loc: ["path", "deployment_id"], msg: "Input should be a valid UUID", type: "uuid_parsing" },
    ]);
    for (const method of ["PATCH", "DELETE"]) {
      const res = await call(sim, method, `/v2/deployments/${UNKNOWN}`, method === "PATCH" ? {} : undefined);
      expect(res.status, method).toBe(404);
      expect(res.body).toEqual({ detail: "Deployment not found" });
    }
  });

  it("deletes with 204; the deployment then awaits deletion", async () => {
    const created = await call(sim, "POST", "/v2/deployments", {
      name: "doomed",
      source: "internal_source",
      source_config: {},
      source_revision_config: {},
      secrets: [],
    });
    const res = await call(sim, "DELETE", `/v2/deployments/${created.body.id}`);
    expect(res.status).toBe(204);
    expect(res.body).toBeUndefined();
    expect(sim.store.get(created.body.id)?.status).toBe("AWAITING_DELETE");
    expect((await call(sim, "DELETE", "/v2/deployments/nope")).status).toBe(422);
  });
});

describe("HTTP surface", () => {
  it("answers 404 for an unknown path and 405 for a known path with another method", async () => {
    expect(await call(sim, "GET", "/v3/nothing")).toMatchObject({
      status: 404,
      body: { detail: "Not Found" },
    });
    const res = await call(sim, "PUT", "/v2/deployments", {});
    expect(res.status).toBe(405);
    expect(res.headers.get("allow")).toBe("GET, POST");
    // The spec shows no GET of a single deployment; the simulator offers none either.
    const single = await call(sim, "GET", `/v2/deployments/${id(1)}`);
    expect(single.status).toBe(405);
    expect(single.headers.get("allow")).toBe("PATCH, DELETE");
  });

  it("counts answers per route template and status", async () => {
    sim.resetCounters();
    await call(sim, "GET", "/v2/deployments");
    await call(sim, "GET", "/v2/deployments?limit=0");
    await call(sim, "PATCH", `/v2/deployments/${UNKNOWN}`, {});
    expect(sim.counters()).toEqual({
      "GET /v2/deployments": { "200": 1, "422": 1 },
      "PATCH /v2/deployments/{deployment_id}": { "404": 1 },
    });
    expect((await call(sim, "GET", "/_sim/counters")).body).toEqual(sim.counters());
    expect((await call(sim, "POST", "/_sim/counters/reset")).status).toBe(204);
    expect(sim.counters()).toEqual({});
  });

  it("records each request: when it came and was answered, its route and URL, its User-Agent and the status answered", async () => {
    sim.resetCounters();
    const before = Date.now();
    await call(sim, "GET", "/v2/deployments?limit=0");
    await call(sim, "PATCH", `/v2/deployments/${UNKNOWN}`, {});
    await call(sim, "GET", "/nowhere");
    const seen = sim.requests();
    // Whoever sent it (fetch here): a sharded operator's requests say which replica.
    expect(new Set(seen.map((r) => r.userAgent))).toEqual(new Set(["node"]));
    expect(seen.map(({ at: _, answeredAt: __, userAgent: ___, ...r }) => r)).toEqual([
      { method: "GET", route: "GET /v2/deployments", url: "/v2/deployments?limit=0", status: "422" },
      {
        method: "PATCH",
        route: "PATCH /v2/deployments/{deployment_id}",
        url: `/v2/deployments/${UNKNOWN}`,
        status: "404",
      },
      { method: "GET", route: "GET (unmatched)", url: "/nowhere", status: "404" },
    ]);
    for (const r of seen) {
      expect(r.at).toBeGreaterThanOrEqual(before);
      expect(r.answeredAt).toBeGreaterThanOrEqual(r.at);
    }
    // The record and the counters tell the same story; filters narrow it.
    expect(sim.counters()).toEqual({
      "GET /v2/deployments": { "422": 1 },
      "PATCH /v2/deployments/{deployment_id}": { "404": 1 },
      "GET (unmatched)": { "404": 1 },
    });
    expect(sim.requests({ method: "PATCH" }).map((r) => r.status)).toEqual(["404"]);
    expect(sim.requests({ since: Date.now() + 60_000 })).toEqual([]);
    expect((await call(sim, "GET", "/_sim/requests")).body).toEqual(seen);
    expect((await call(sim, "POST", "/_sim/counters/reset")).status).toBe(204);
    expect(sim.requests()).toEqual([]);
  });
});

describe("API key", () => {
  let keyed: RunningSimulator;
  beforeAll(async () => {
    keyed = await startSimulator({ apiKey: "k-123", apiKeyHeader: "X-Dms-Key" });
  });
  afterAll(() => keyed.close());

  it("answers 401 with a detail string without the key or with a wrong one", async () => {
    const attempts: Record<string, string>[] = [{}, { "x-dms-key": "wrong" }, { "x-api-key": "k-123" }];
    for (const headers of attempts) {
      const res = await call(keyed, "GET", "/v2/deployments", undefined, headers);
      expect(res.status).toBe(401);
      expect(typeof res.body.detail).toBe("string");
      expect(JSON.stringify(res.body)).not.toContain("k-123");
    }
  });

  it("serves with the key in the configured header; /_sim/ never asks for it", async () => {
    expect((await call(keyed, "GET", "/v2/deployments", undefined, { "X-Dms-Key": "k-123" })).status).toBe(
      200,
    );
    expect((await call(keyed, "GET", "/_sim/state")).status).toBe(200);
  });
});

describe("secrets in responses", () => {
  const seed = {
    deployments: [{ name: "s", source: "github" as const, secrets: [{ name: "K", value: "hush" }] }],
  };

  it.each([
    ["masked", [{ name: "K", value: "********" }]],
    ["values", [{ name: "K", value: "hush" }]],
    ["none", [{ name: "K" }]],
  ] as const)("renders them %s", async (mode, expected) => {
    const s = await startSimulator({ seed, secretsInResponses: mode });
    try {
      const res = await call(s, "GET", "/v2/deployments");
      expect(res.body.resources[0].secrets).toEqual(expected);
    } finally {
      await s.close();
    }
  });

  it("masks by default", async () => {
    const page = (await call(sim, "GET", "/v2/deployments?limit=1")).body;
    expect(page.resources[0].secrets).toEqual([{ name: "TOKEN", value: "********" }]);
  });
});
