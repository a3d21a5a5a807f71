// Every answer of the simulator, route by route, checked against the shared spec's own shapes
// (test/support/spec-answers.ts, written from service-api.md's tables): the four routes of the
// spec strictly; the routes the spec refers to or does not show (create, redeploy), where they
// answer a Deployment, against the spec's Deployment too; the revision routes against the shapes
// docs/internals/simulator.md gives them, built from the spec's parts.
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { loadSeed } from "../../src/simulator/seed.ts";
import { startSimulator } from "../../src/simulator/server.ts";
import { type SPEC_ANSWERS, specViolations } from "../support/spec-answers.ts";
import { type Answer, call, simulatorPerTest } from "./simulator-http.ts";

const example = fileURLToPath(new URL("../../src/simulator/seed.example.yaml", import.meta.url));
const timing = { readyAfterMs: 1000, revisionActiveAfterMs: 6000, deleteAfterMs: 1500 };
const start = simulatorPerTest({ timing });

/** A create's body of a github deployment tracking `main`. */
const GITHUB = {
  name: "gh",
  source: "github",
  source_config: { repo_url: "https://github.com/acme/a" },
  source_revision_config: { repo_ref: "main" },
};

/** `answer` has `status`, and its body conforms to the spec's `schema`. */
function conforms(answer: Answer, status: number, schema: keyof typeof SPEC_ANSWERS, what: string) {
  expect(answer.status, what).toBe(status);
  expect(specViolations(schema, answer.body), what).toEqual([]);
  expect(answer.headers.get("content-type"), what).toBe("application/json");
}

/** Every page of the listing for `query`, each checked; the deployments listed. */
// biome-ignore lint/suspicious/noExplicitAny: the answers are arbitrary JSON, checked above.
async function listAll(url: string, query: string): Promise<any[]> {
  // biome-ignore lint/suspicious/noExplicitAny: as above.
  const all: any[] = [];
  let offset = 0;
  for (;;) {
    const page = await call(url, "GET", `/v2/deployments?limit=2&offset=${offset}${query}`);
    conforms(page, 200, "page", `listing ${query} at ${offset}`);
    all.push(...page.body.resources);
    if (page.body.resources.length === 0) return all;
    expect(page.body.offset).toBe(offset + page.body.resources.length);
    offset = page.body.offset;
  }
}

describe("the simulator's answers, against the shared spec's shapes", () => {
  it("the example seed: providers, repositories, every listing filter, the default page", async () => {
    const { sim } = await start({ seed: await loadSeed(example) });
    conforms(await call(sim, "GET", "/v2/auth/providers"), 200, "providers", "providers");
    const repos = await call(
      sim,
      "GET",
      "/v1/integrations/forge/github/6f1c1d2e-0000-4000-8000-000000000001/repos",
    );
    conforms(repos, 200, "repos", "repos");
    expect(repos.body.length).toBeGreaterThan(0);
    const page = await call(sim, "GET", "/v2/deployments");
    conforms(page, 200, "page", "default page");
    expect(page.body.resources.length).toBe(4);
    for (const query of [
      "",
      "&name_contains=AGENT",
      "&status=READY",
      "&status=UNUSED",
      "&remote_reconciled=false",
      "&tag_value_ids=c0ffee00-0000-4000-8000-000000000001",
      "&image_version=0.4.2",
      "&deployment_type=dev",
      "&deployment_ids=9d8c7b6a-5f4e-4d3c-8b2a-1f0e9d8c7b6a,4c5d6e7f-8091-4a2b-9c3d-4e5f6a7b8c9d",
    ]) {
      expect((await listAll(sim.url, query)).length, query).toBeGreaterThan(0);
    }
  });

  it("PATCH answers of every kind, and the listing through a deployment's whole life", async () => {
    const { sim, clock } = await start({ seed: await loadSeed(example) });
    const check = async (what: string) => {
      for (const d of await listAll(sim.url, "")) expect(d.id, what).toBeTypeOf("string");
    };
    const bodies: Record<string, unknown>[] = [
      {},
      { source_config: { build_on_push: false, custom_url: "https://agent.example.com" } },
      { source_config: { resource_spec: { cpu: 0.5, memory_mb: 512, labels: { team: "a" } } } },
      { source_config: { install_command: null, build_command: null, repo_url: null } },
      { source_revision_config: { repo_ref: "release", graph_config_path: null } },
      { revision_source: "github" },
      { secrets: [{ name: "A", value: "1" }] },
      { secrets: null, secret_references: null },
      { display_name: "Support agent" },
    ];
    for (const body of bodies) {
      const res = await call(sim, "PATCH", "/v2/deployments/9d8c7b6a-5f4e-4d3c-8b2a-1f0e9d8c7b6a", body);
      conforms(res, 200, "deployment", `PATCH ${JSON.stringify(body)}`);
    }
    const docker = await call(sim, "PATCH", "/v2/deployments/4c5d6e7f-8091-4a2b-9c3d-4e5f6a7b8c9d", {
      source_revision_config: { image_uri: "registry.example.com/acme/billing-agent:1.9.0" },
      secret_references: [{ name: "B", secret_name: "b", secret_key: "k" }],
    });
    conforms(docker, 200, "deployment", "PATCH external_docker");
    await check("revisions building");
    clock.advance(6000);
    await check("revisions live");
    await call(sim, "DELETE", "/v2/deployments/2b3c4d5e-6f70-4a1b-8c2d-3e4f5a6b7c8d");
    await check("awaiting deletion");
  });

  it("creates of every source, listed as they settle; a redeploy's answer", async () => {
    const { sim, clock } = await start();
    const bodies = [
      GITHUB,
      {
        name: "ext",
        source: "external_docker",
        source_config: {},
        source_revision_config: { image_uri: "r/a:1" },
      },
      {
        name: "int",
        source: "internal_docker",
        source_config: {},
        source_revision_config: { image_uri: "r/b:1" },
      },
      {
        name: "src",
        source: "internal_source",
        source_config: {},
        source_revision_config: { source_tarball_path: "a.tgz" },
      },
      { name: "tpl", source: "internal_template", source_config: {}, source_revision_config: {} },
    ];
    for (const body of bodies) {
      const res = await call(sim, "POST", "/v2/deployments", { secrets: [], ...body });
      conforms(res, 201, "deployment", `create ${body.source}`);
    }
    expect((await listAll(sim.url, "&status=AWAITING_DATABASE")).length).toBe(5);
    clock.advance(6000);
    const ready = await listAll(sim.url, "&status=READY");
    expect(ready.length).toBe(5);
    const [first] = ready;
    const redeploy = await call(
      sim,
      "POST",
      `/v2/deployments/${first.id}/revisions/${first.latest_revision_id}/redeploy`,
    );
    conforms(redeploy, 200, "deployment", "redeploy");
  });

  it("the routes beyond the spec: revisions, their listing and logs, a rebuild, a delete", async () => {
    const { sim, clock } = await start();
    const created = await call(sim, "POST", "/v2/deployments", { ...GITHUB, secrets: [] });
    const path = `/v2/deployments/${created.body.id}`;
    const rebuilt = await call(sim, "POST", `${path}/revisions`, {});
    conforms(rebuilt, 201, "revision", "rebuild");
    for (const at of [0, 1000, 6000]) {
      clock.advance(at);
      const revisions = await call(sim, "GET", `${path}/revisions?limit=1`);
      conforms(revisions, 200, "revisions", `revisions at +${at}`);
      conforms(await call(sim, "GET", `${path}/revisions/${rebuilt.body.id}`), 200, "revision", "revision");
      for (const type of ["build", "deploy"]) {
        const logs = await call(sim, "GET", `${path}/revisions/${rebuilt.body.id}/logs?type=${type}&limit=2`);
        conforms(logs, 200, "logs", `${type} logs at +${at}`);
      }
    }
    const deleted = await call(sim, "DELETE", path);
    expect(deleted.status).toBe(204);
    expect(deleted.body).toBeUndefined();
  });

  it("the endless listing (a hostile fault) still lists deployments of the spec's shape", async () => {
    const { sim } = await start();
    sim.faults.set({ endlessListing: { pageDelayMs: 0 } });
    conforms(await call(sim, "GET", "/v2/deployments?limit=3&offset=7"), 200, "page", "endless page");
  });

  it("the check itself refuses what the spec does not allow", () => {
    const page = { resources: [{ name: "a", id: "a", status: "RUNNING" }], offset: "1" };
    expect(specViolations("page", page)).toEqual(
      expect.arrayContaining([
        "/offset: Expected integer",
        "/resources/0/id: Expected string to match 'uuid' format",
        "/resources/0/tenant_id: Expected required property",
        "/resources/0/status: Expected union value",
      ]),
    );
    const provider = { id: "p", name: "P", uses_pkce: "yes", is_dynamic_client: null };
    expect(specViolations("providers", [provider])).toEqual(
      expect.arrayContaining(["/0/uses_pkce: Expected boolean", "/0/is_dynamic_client: Expected boolean"]),
    );
    expect(specViolations("repos", [{ host_integration_id: "x", id: "1" }])).toEqual(
      expect.arrayContaining(["/0/id: Expected integer", "/0/name: Expected required property"]),
    );
  });
});

describe("what the simulator is started with or told cannot make it answer outside the spec", () => {
  it("a tenant id that is no uuid (the spec types tenant_id so) is refused at the start, naming it", async () => {
    await expect(startSimulator({ tenantId: "acme" })).rejects.toThrow(
      "tenantId: must be a uuid (each deployment's tenant_id), got 'acme'",
    );
    const { sim } = await start({ tenantId: "6F1C1D2E-0000-4000-8000-0000000000AA" });
    const created = await call(sim, "POST", "/v2/deployments", {
      name: "a",
      source: "internal_docker",
      source_config: {},
      source_revision_config: { image_uri: "r/a:1" },
      secrets: [],
    });
    conforms(created, 201, "deployment", "create");
  });

  it("a drift (someone else's change) cannot give a revision config or a secret reference a field the spec does not have", async () => {
    const { sim } = await start({ seed: await loadSeed(example) });
    const path = "/_sim/deployments/4c5d6e7f-8091-4a2b-9c3d-4e5f6a7b8c9d";
    const config = await call(sim, "PATCH", path, { source_revision_config: { image: "r/a:2" } });
    expect(config.status).toBe(422);
    expect(config.body.detail[0]).toMatchObject({
      loc: ["body", "source_revision_config", "image"],
      type: "extra_forbidden",
    });
    const ref = { name: "A", secret_name: "s", secret_key: "k", optional: true };
    const refs = await call(sim, "PATCH", path, { secret_references: [ref] });
    expect(refs.status).toBe(422);
    expect(refs.body.detail[0].loc).toEqual(["body", "secret_references", 0, "optional"]);
    const page = await call(sim, "GET", "/v2/deployments");
    conforms(page, 200, "page", "after the drifts refused");
  });
});

describe("what null means in a PATCH", () => {
  it("leaves a field as it is, but clears secret_references, which the spec's Deployment has nullable", async () => {
    const { sim } = await start({ seed: await loadSeed(example) });
    const path = "/v2/deployments/4c5d6e7f-8091-4a2b-9c3d-4e5f6a7b8c9d";
    const before = await call(sim, "PATCH", path, { secrets: [{ name: "A", value: "1" }] });
    expect(before.body.secret_references).toHaveLength(1);
    const res = await call(sim, "PATCH", path, {
      source_config: { listener_config: null, resource_spec: null },
      source_revision_config: { image_uri: null },
      secrets: null,
      secret_references: null,
    });
    conforms(res, 200, "deployment", "PATCH of nulls");
    expect(res.body.source_config).toEqual(before.body.source_config);
    expect(res.body.source_revision_config).toEqual(before.body.source_revision_config);
    expect(res.body.secrets).toEqual(before.body.secrets);
    expect(res.body.secret_references).toBeNull();
    expect(res.body.latest_revision_id).toBe(before.body.latest_revision_id);
  });
});
