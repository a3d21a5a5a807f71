/**
 * The client against the simulator over loopback HTTP: every operation and every filter, the
 * simulator's own validation and auth, and its faults seen through the client's retries.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { ServiceClient, type ServiceClientOptions } from "../../src/api/client.ts";
import type { ServiceError } from "../../src/api/errors.ts";
import type { CreateDeploymentBody, DeploymentFilters } from "../../src/api/wire-requests.ts";
import { type RunningSimulator, startSimulator } from "../../src/simulator/server.ts";
import { ManualClock } from "../support/manual-clock.ts";
import { BASE_SEED, INTEGRATION } from "./seed-fixtures.ts";

const KEY = "sim-key-0123456789";
const SEEDED = {
  prod: "a0000000-0000-4000-8000-000000000001",
  dev: "a0000000-0000-4000-8000-000000000002",
  free: "a0000000-0000-4000-8000-000000000003",
};

let sim: RunningSimulator;
let client: ServiceClient;

const clientFor = (options: Partial<ServiceClientOptions> = {}) =>
  new ServiceClient({
    baseUrl: sim.url,
    apiKey: KEY,
    qps: 10_000,
    burst: 1000,
    clock: new ManualClock({ sleepsInstantly: true }),
    ...options,
  });

const body = (name: string, extra: Partial<CreateDeploymentBody> = {}): CreateDeploymentBody => ({
  name,
  source: "github",
  source_config: { integration_id: INTEGRATION, repo_url: `https://github.com/acme/${name}` },
  source_revision_config: { repo_ref: "main" },
  ...extra,
});

beforeAll(async () => {
  sim = await startSimulator({
    apiKey: KEY,
    timing: { readyAfterMs: 0, revisionActiveAfterMs: 0, deleteAfterMs: 0 },
    seed: {
      ...BASE_SEED,
      deployments: [
        {
          id: SEEDED.prod,
          name: "seeded-prod",
          source: "external_docker",
          status: "READY",
          deployment_type: "prod",
          remote_reconciled: false,
          tag_value_ids: ["t-1"],
          image_version: "1.0.0",
        },
        {
          id: SEEDED.dev,
          name: "seeded-dev",
          source: "external_docker",
          status: "UNUSED",
          deployment_type: "dev",
          remote_reconciled: true,
          tag_value_ids: ["t-2"],
          image_version: "2.0.0",
        },
        {
          id: SEEDED.free,
          name: "seeded-free",
          source: "external_docker",
          status: "AWAITING_DATABASE",
          deployment_type: "dev_free",
          remote_reconciled: true,
          tag_value_ids: ["t-1", "t-3"],
        },
      ],
    },
  });
  client = clientFor();
});
afterAll(async () => {
  await sim.close();
});
beforeEach(() => {
  sim.faults.clear();
});

describe("operations against the simulator", () => {
  it("lists providers with defaults and repositories of an integration", async () => {
    const [provider] = await client.listProviders();
    expect(provider).toMatchObject({
      provider_id: "github",
      token_endpoint_auth_method: "client_secret_post",
    });
    const [repo] = await client.listRepos(INTEGRATION);
    expect(repo).toMatchObject({ owner: "acme", name: "support-agent", host_integration_id: INTEGRATION });
  });

  it("answers 404 for an unknown integration", async () => {
    const error = (await client
      .listRepos("00000000-0000-4000-8000-000000000000")
      .catch((e) => e)) as ServiceError;
    expect(error.kind).toBe("not_found");
  });

  it("creates, finds, patches and deletes a deployment", async () => {
    const created = await client.createDeployment(body("crud-agent"));
    expect(created).toMatchObject({ name: "crud-agent", source: "github" });
    expect((await client.getDeployment(created.id))?.name).toBe("crud-agent");

    const patched = await client.patchDeployment(created.id, { source_revision_config: { repo_ref: "v2" } });
    expect(patched.source_revision_config.repo_ref).toBe("v2");
    expect(patched.latest_revision_id).not.toBe(created.latest_revision_id);

    await client.deleteDeployment(created.id);
    // Deleting again is fine: gone is gone.
    await client.deleteDeployment(created.id);
    expect(await client.getDeployment(created.id)).toBeUndefined();
  });

  it.each([
    [{}, ["seeded-dev", "seeded-free", "seeded-prod"]],
    [{ status: "READY" }, ["seeded-prod"]],
    [{ status: "UNUSED" }, ["seeded-dev"]],
    [{ remote_reconciled: true }, ["seeded-dev", "seeded-free"]],
    [{ remote_reconciled: false }, ["seeded-prod"]],
    [{ tag_value_ids: ["t-1"] }, ["seeded-free", "seeded-prod"]],
    [{ tag_value_ids: ["t-2", "t-3"] }, ["seeded-dev", "seeded-free"]],
    [{ image_version: "2.0.0" }, ["seeded-dev"]],
    [{ deployment_type: "dev_free" }, ["seeded-free"]],
    [{ deployment_type: "prod" }, ["seeded-prod"]],
    [{ deployment_ids: [SEEDED.dev] }, ["seeded-dev"]],
    [{ deployment_ids: [SEEDED.prod, SEEDED.free] }, ["seeded-free", "seeded-prod"]],
    [{ name_contains: "SEEDED-P" }, ["seeded-prod"]],
  ] as [DeploymentFilters, string[]][])("filters %j", async (filters, expected) => {
    const listed = await client.listAllDeployments({ name_contains: "seeded-", ...filters });
    expect(listed.map((d) => d.name).sort()).toEqual(expected);
  });

  it("pages through many deployments with any page size, capped or not", async () => {
    const prefix = `page-${Date.now().toString(36)}`;
    for (let i = 0; i < 23; i++)
      await client.createDeployment(body(`${prefix}-${String(i).padStart(2, "0")}`));
    const all = (pageSize: number) =>
      client
        .listAllDeployments({ name_contains: prefix }, { pageSize })
        .then((ds) => ds.map((d) => d.name).sort());
    const expected = Array.from({ length: 23 }, (_, i) => `${prefix}-${String(i).padStart(2, "0")}`);
    expect(await all(1)).toEqual(expected);
    expect(await all(10)).toEqual(expected);
    expect(await all(100)).toEqual(expected);
    sim.faults.set({ pageCap: 4 });
    expect(await all(100)).toEqual(expected);
  });

  it("stops on a simulator that repeats the request's offset", async () => {
    sim.faults.set({ repeatOffset: true });
    const before = sim.counters()["GET /v2/deployments"]?.["200"] ?? 0;
    const listed = await client.listAllDeployments({}, { pageSize: 2 });
    expect(listed.length).toBeLessThanOrEqual(2);
    expect((sim.counters()["GET /v2/deployments"]?.["200"] ?? 0) - before).toBe(1);
  });
});

describe("the simulator's refusals, as the client reports them", () => {
  it("401 without the key", async () => {
    const error = (await clientFor({ apiKey: "wrong" })
      .listProviders()
      .catch((e) => e)) as ServiceError;
    expect(error).toMatchObject({ kind: "unauthorized", status: 401, retryable: false });
  });

  it("422 with a readable detail for a body the simulator rejects", async () => {
    const error = (await client
      .createDeployment(
        body(`refs-${Date.now().toString(36)}`, {
          secret_references: [{ name: "A", secret_name: "s", secret_key: "k" }],
        }),
      )
      .catch((e) => e)) as ServiceError;
    expect(error).toMatchObject({ kind: "invalid", status: 422, retryable: false });
    expect(error.detail).toMatch(/^body\.secret_references: .*external_docker/);
  });

  it("409 for a name already taken", async () => {
    const name = `dup-${Date.now().toString(36)}`;
    await client.createDeployment(body(name));
    const error = (await client.createDeployment(body(name)).catch((e) => e)) as ServiceError;
    expect(error).toMatchObject({ kind: "conflict", status: 409 });
    expect(error.detail).toContain(name);
  });

  it("404 for a PATCH of an unknown deployment", async () => {
    const error = (await client
      .patchDeployment("00000000-0000-4000-8000-00000000abcd", {})
      .catch((e) => e)) as ServiceError;
    expect(error.kind).toBe("not_found");
  });
});

describe("faults", () => {
  it("retries scripted 503s and resets on a read until it succeeds", async () => {
    sim.faults.set({
      script: [
        { route: "GET /v2/auth/providers", count: 2, status: 503 },
        { route: "GET /v2/auth/providers", count: 1, status: "reset" },
      ],
    });
    await expect(client.listProviders()).resolves.toHaveLength(1);
  });

  it("honours the simulator's Retry-After on 429", async () => {
    const clock = new ManualClock({ sleepsInstantly: true });
    const c = clientFor({ clock });
    sim.faults.set({
      script: [{ route: "GET /v2/auth/providers", count: 1, status: 429, retryAfterSeconds: 2 }],
    });
    await c.listProviders();
    expect(clock.sleeps).toEqual([2000]);
  });

  it("does not repeat a PATCH whose connection was reset", async () => {
    const created = await client.createDeployment(body(`reset-${Date.now().toString(36)}`));
    sim.faults.set({
      script: [{ route: "PATCH /v2/deployments/{deployment_id}", count: 1, status: "reset" }],
    });
    const error = (await client.patchDeployment(created.id, {}).catch((e) => e)) as ServiceError;
    expect(error).toMatchObject({ kind: "network", maybeApplied: true });
    // The second PATCH goes through: the script consumed only one reset.
    await expect(client.patchDeployment(created.id, {})).resolves.toMatchObject({ id: created.id });
  });

  it("times out a slow answer", async () => {
    sim.faults.set({ latency: [{ ms: 2000, route: "GET /v2/auth/providers" }] });
    const error = (await clientFor({ timeoutMs: 150, retries: 0 })
      .listProviders()
      .catch((e) => e)) as ServiceError;
    expect(error.kind).toBe("timeout");
  });
});
