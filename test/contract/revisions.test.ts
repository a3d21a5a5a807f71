/**
 * Revision history and names used again, over real HTTP: the client's revision listing (pages,
 * odd items, a service without the route, bounds), the `revisions` command against the simulator
 * (by name, and as a Deployment resource read from a cluster through its own connection), and the
 * delete with `delete_tracing_project` as the simulator sees it, with the 409 that follows one
 * without it.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { ServiceClient } from "../../src/api/client.ts";
import { RevisionsRouteMissingError, ServiceError } from "../../src/api/errors.ts";
import type { Deployment } from "../../src/api/wire.ts";
import { registerRevisionsCommand } from "../../src/commands/revisions-command.ts";
import { isTracingProjectConflict } from "../../src/reconcile/service/name-reserved.ts";
import { type RunningSimulator, startSimulator } from "../../src/simulator/server.ts";
import { runCli } from "../support/cli.ts";
import { unsafeCharacters } from "../support/terminal-safe.ts";
import { type FakeService, send, startFakeService } from "./client-fake-service.ts";
import {
  connectedResource,
  deploymentPath,
  type FakeKube,
  serviceConnectionPath,
  startConnectedKube,
} from "./fake-kube.ts";

const DEPLOYMENT_ID = "0b6f3c2e-7d2a-4c59-9b8e-3f1a2b4c5d6e";
const client = (url: string, extra: Partial<ConstructorParameters<typeof ServiceClient>[0]> = {}) =>
  new ServiceClient({ baseUrl: url, retries: 0, qps: 10_000, burst: 1000, ...extra });

/** `n` revisions, oldest first, one minute apart. */
const revisions = (n: number) =>
  Array.from({ length: n }, (_, i) => ({
    id: `00000000-0000-4000-8000-${String(i).padStart(12, "0")}`,
    status: "DEPLOYED",
    created_at: new Date(Date.UTC(2030, 0, 1, 0, i)).toISOString(),
    source: "external_docker",
    source_revision_config: { image_uri: `registry.example.com/agent:${i}` },
  }));

/** A service whose revision listing pages `items` by `limit`/`offset`, as the deployment listing does. */
function pagedRevisions(items: readonly unknown[], cap = Number.POSITIVE_INFINITY) {
  return startFakeService((req, res) => {
    if (req.path !== `/v2/deployments/${DEPLOYMENT_ID}/revisions`)
      return send(res, 404, { detail: "Not Found" });
    const limit = Math.min(Number(req.query.get("limit") ?? 20), cap);
    const offset = Number(req.query.get("offset") ?? 0);
    const resources = items.slice(offset, offset + limit);
    send(res, 200, { resources, offset: offset + resources.length });
  });
}

describe("ServiceClient.listRevisions", () => {
  let service: FakeService | undefined;
  afterEach(async () => {
    await service?.close();
    service = undefined;
  });

  it("follows every page and gives the revisions newest first", async () => {
    const all = revisions(250);
    service = await pagedRevisions(all);
    const { rows, truncated } = await client(service.url).listRevisions(DEPLOYMENT_ID);
    expect(truncated).toBe(false);
    expect(rows.map((r) => (r.ok ? r.revision.id : "?"))).toEqual(all.map((r) => r.id).reverse());
    expect(service.requests.map((r) => `${r.query.get("limit")}/${r.query.get("offset")}`)).toEqual([
      "100/0",
      "100/100",
      "100/200",
      "100/250",
    ]);
  });

  it("keeps going when the service caps pages below the limit asked for", async () => {
    service = await pagedRevisions(revisions(12), 5);
    const { rows } = await client(service.url).listRevisions(DEPLOYMENT_ID);
    expect(rows).toHaveLength(12);
  });

  it("keeps an odd item as an unreadable row and the rest of the listing", async () => {
    const [a, b] = revisions(2);
    service = await pagedRevisions([
      a,
      { id: "odd", status: 7, created_at: "2030-01-01T00:00:30Z" },
      "junk",
      b,
    ]);
    const { rows } = await client(service.url).listRevisions(DEPLOYMENT_ID);
    expect(rows.filter((r) => r.ok)).toHaveLength(2);
    const odd = rows.filter((r) => !r.ok).map((r) => (r.ok ? "" : r.unreadable.message));
    expect(odd).toEqual([
      expect.stringContaining("revision odd cannot be read: status"),
      expect.stringContaining("revision (no id) cannot be read"),
    ]);
  });

  it("reads a page without an offset as the request's offset plus its items", async () => {
    const all = revisions(3);
    service = await startFakeService((req, res) => {
      const offset = Number(req.query.get("offset"));
      send(res, 200, { resources: all.slice(offset, offset + 2) });
    });
    const { rows } = await client(service.url).listRevisions(DEPLOYMENT_ID);
    expect(rows).toHaveLength(3);
  });

  it("is bounded: a listing that never ends is cut at maxItems and says so", async () => {
    let next = 0;
    service = await startFakeService((req, res) => {
      const limit = Number(req.query.get("limit"));
      const resources = Array.from({ length: limit }, () => ({
        id: `endless-${next++}`,
        status: "DEPLOYED",
      }));
      send(res, 200, { resources, offset: Number(req.query.get("offset")) + limit });
    });
    const { rows, truncated } = await client(service.url).listRevisions(DEPLOYMENT_ID, { maxItems: 250 });
    expect(truncated).toBe(true);
    expect(rows).toHaveLength(250);
    expect(service.requests.length).toBeLessThanOrEqual(4);
  });

  it.each([
    { reason: "405", status: 405, detail: "Method Not Allowed" },
    { reason: "the generic 404 of an unknown path", status: 404, detail: "Not Found" },
  ])("a service without the route ($reason): RevisionsRouteMissingError", async ({ status, detail }) => {
    service = await startFakeService((_req, res) => send(res, status, { detail }));
    const error = await client(service.url)
      .listRevisions(DEPLOYMENT_ID)
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RevisionsRouteMissingError);
    expect((error as RevisionsRouteMissingError).status).toBe(status);
  });

  it("a 404 naming the deployment is the deployment missing, not the route", async () => {
    service = await startFakeService((_req, res) => send(res, 404, { detail: "Deployment not found" }));
    const error = await client(service.url)
      .listRevisions(DEPLOYMENT_ID)
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ServiceError);
    expect(error).toMatchObject({ kind: "not_found" });
  });
});

describe("against the simulator", () => {
  const KEY = "revisions-test-key-4d1a";
  let sim: RunningSimulator;
  let kube: FakeKube;
  let agent: Deployment;
  const NS = "team-a";
  /** The Deployment resource `billing`, of the deployment `agent`, with `status`. */
  const billing = (status: Record<string, unknown>, resourceVersion = "1") =>
    connectedResource(NS, "billing", { name: "agent", source: "external_docker" }, status, {
      resourceVersion,
    });

  beforeAll(async () => {
    sim = await startSimulator({
      apiKey: KEY,
      timing: { readyAfterMs: 0, revisionActiveAfterMs: 0, deleteAfterMs: 0 },
    });
    const c = client(sim.url, { apiKey: KEY });
    agent = await c.createDeployment({
      name: "agent",
      source: "external_docker",
      source_revision_config: { image_uri: "registry.example.com/agent:1" },
    });
    await c.patchDeployment(agent.id, {
      source_revision_config: { image_uri: "registry.example.com/agent:2" },
    });
    // The third revision fails to deploy: the latest, never the active one.
    sim.store.drift(agent.id, { fail_revisions: "deploy" });
    await c.patchDeployment(agent.id, {
      source_revision_config: { image_uri: "registry.example.com/agent:3" },
    });
    agent = (await c.getDeployment(agent.id)) as Deployment;

    kube = await startConnectedKube(NS, sim.url, KEY);
    kube.put(deploymentPath(NS, "billing"), billing({ deploymentId: agent.id }));
  });
  afterAll(async () => {
    await sim.close();
    await kube.close();
  });

  const revisionsCli = (args: string[], env: Record<string, string> = {}) =>
    // The service's deployment by name (--service), but where a cluster is given.
    runCli(["revisions", ...(args.includes("--kubeconfig") ? [] : ["--service"]), ...args], {
      commands: [registerRevisionsCommand],
      env,
    });
  const byFlags = { DMS_BASE_URL: "", DMS_API_KEY: KEY };

  it("the simulator pages its listing newest first", async () => {
    const first = await fetch(`${sim.url}/v2/deployments/${agent.id}/revisions?limit=2`, {
      headers: { "x-api-key": KEY },
    });
    const page = (await first.json()) as { resources: { id: string }[]; offset: number };
    expect(page.offset).toBe(2);
    expect(page.resources.map((r) => r.id)).toEqual(
      sim.store
        .revisions(agent.id)
        ?.map((r) => r.id)
        .reverse()
        .slice(0, 2),
    );
  });

  it("by name: a table of short ids and ages, newest first", async () => {
    const run = await revisionsCli(["agent", "-o", "table"], { ...byFlags, DMS_BASE_URL: sim.url });
    expect(run.code).toBe(0);
    const lines = run.stdout.trimEnd().split("\n");
    expect(lines[0]).toMatch(/^ID\s+MARK\s+STATUS\s+AGE\s+SOURCE\s+DEPLOYED$/);
    expect(lines[1]).toMatch(
      new RegExp(`^${agent.latest_revision_id?.slice(0, 8)}\\s+latest\\s+DEPLOY_FAILED\\s+\\d+[smhdy]`),
    );
    const bare = await revisionsCli(["agent", "-o", "table", "--no-headers"], {
      ...byFlags,
      DMS_BASE_URL: sim.url,
    });
    // The same cells but the age (it moves on); widths are measured without the header.
    const cells = (line: string) => line.split(/\s{2,}/).filter((_, i) => i !== 3);
    expect(bare.stdout.trimEnd().split("\n").map(cells)).toEqual(lines.slice(1).map(cells));
  });

  it("-o name: one revision/<id> per line", async () => {
    const run = await revisionsCli(["agent", "-o", "name"], { ...byFlags, DMS_BASE_URL: sim.url });
    expect(run.code).toBe(0);
    expect(run.stdout.split("\n")[0]).toBe(`revision/${agent.latest_revision_id}`);
  });

  it("by name: -o wide, the failed latest and the active one marked, ids and times whole", async () => {
    const run = await revisionsCli(["agent", "-o", "wide"], { ...byFlags, DMS_BASE_URL: sim.url });
    expect(run.stderr).toBe("");
    expect(run.code).toBe(0);
    const lines = run.stdout.trimEnd().split("\n");
    expect(lines[0]).toMatch(/^ID\s+MARK\s+STATUS\s+CREATED\s+SOURCE\s+DEPLOYED$/);
    expect(
      lines.slice(1).map((l) => l.split(/\s+/).filter((c) => !c.includes("T") || !c.includes(":"))),
    ).toEqual([
      [
        agent.latest_revision_id,
        "latest",
        "DEPLOY_FAILED",
        "external_docker",
        "registry.example.com/agent:3",
      ],
      [agent.active_revision_id, "active", "DEPLOYED", "external_docker", "registry.example.com/agent:2"],
      [expect.any(String), "-", "DEPLOYED", "external_docker", "registry.example.com/agent:1"],
    ]);
  });

  it("-o json: the revisions as the service answered them, with active and latest", async () => {
    const run = await revisionsCli(["agent", "-o", "json"], { ...byFlags, DMS_BASE_URL: sim.url });
    expect(run.code).toBe(0);
    const rows = JSON.parse(run.stdout) as Array<Record<string, unknown>>;
    expect(rows.map((r) => [r.id, r.status, r.active, r.latest])).toEqual([
      [agent.latest_revision_id, "DEPLOY_FAILED", false, true],
      [agent.active_revision_id, "DEPLOYED", true, false],
      [expect.any(String), "DEPLOYED", false, false],
    ]);
    expect(rows[0]?.source_revision_config).toEqual({ image_uri: "registry.example.com/agent:3" });
  });

  it("the service's text reaches the terminal with its controls escaped, and -o json with them as JSON escapes", async () => {
    // OSC 52 writes the clipboard, CSI 2J clears the screen, U+202E reverses what follows.
    const hostile = "registry.example.com/a\x1b]52;c;SGVsbG8=\x07\x1b[2J\x9b2J\u202egpj.exe";
    const c = client(sim.url, { apiKey: KEY });
    await c.createDeployment({
      name: "hostile",
      source: "external_docker",
      source_revision_config: { image_uri: hostile },
    });
    const table = await revisionsCli(["hostile", "-o", "table"], { ...byFlags, DMS_BASE_URL: sim.url });
    expect(table.code).toBe(0);
    expect(unsafeCharacters(table.stdout)).toEqual([]);
    expect(table.stdout).toContain(
      "registry.example.com/a\\x1b]52;c;SGVsbG8=\\x07\\x1b[2J\\x9b2J\\u202egpj.exe",
    );
    const json = await revisionsCli(["hostile", "-o", "json"], { ...byFlags, DMS_BASE_URL: sim.url });
    expect(json.code).toBe(0);
    expect(unsafeCharacters(json.stdout)).toEqual([]);
    expect(json.stdout).toContain("\\u001b]52;c;SGVsbG8=\\u0007\\u001b[2J\\u009b2J\\u202egpj.exe");
    const rows = JSON.parse(json.stdout) as Array<{ source_revision_config?: { image_uri?: string } }>;
    expect(rows[0]?.source_revision_config?.image_uri).toBe(hostile);
  });

  it("a Deployment resource, through its own connection read from the cluster", async () => {
    const run = await revisionsCli(["billing", "-n", NS, "--kubeconfig", kube.kubeconfig, "-o", "json"]);
    expect(run.stderr).toBe("");
    expect(run.code).toBe(0);
    expect((JSON.parse(run.stdout) as unknown[]).length).toBe(3);
    expect(kube.requests).toContain(`GET ${deploymentPath(NS, "billing")}`);
    expect(kube.requests).toContain(`GET ${serviceConnectionPath(NS, "prod")}`);
  });

  it.each([
    ["another team's deployment", "victim"],
    ["no uuid", "../../v2/deployments"],
  ] as const)(
    "a Deployment resource whose status.deploymentId names %s (forged): its own deployment's revisions",
    async (_what, forged) => {
      const victim = await client(sim.url, { apiKey: KEY }).createDeployment({
        name: `payroll-${forged.length}`,
        source: "external_docker",
        source_revision_config: { image_uri: "registry.example.com/payroll:1" },
      });
      kube.put(
        deploymentPath(NS, "billing"),
        billing({ deploymentId: forged === "victim" ? victim.id : forged }, "2"),
      );
      try {
        const run = await revisionsCli(["billing", "-n", NS, "--kubeconfig", kube.kubeconfig, "-o", "json"]);
        expect(run.stderr).toBe("");
        expect(run.code).toBe(0);
        const ids = (JSON.parse(run.stdout) as { id: string }[]).map((r) => r.id);
        expect(ids).toEqual(
          sim.store
            .revisions(agent.id)
            ?.map((r) => r.id)
            .reverse(),
        );
        expect(ids).not.toContain(victim.latest_revision_id);
      } finally {
        kube.put(deploymentPath(NS, "billing"), billing({ deploymentId: agent.id }, "2"));
      }
    },
  );

  it("a Deployment resource that does not exist: an error naming it", async () => {
    const run = await revisionsCli(["nope", "--kubeconfig", kube.kubeconfig]);
    expect(run.code).toBe(1);
    expect(run.stderr).toBe(
      `error: Deployment resource ${NS}/nope not found: check with kubectl get dmsd -n ${NS} (or give -n)\n`,
    );
  });

  it.each([
    { mode: "missing", status: 404 },
    { mode: "method-not-allowed", status: 405 },
  ] as const)("a service without the listing ($mode): a clear error and exit 1", async ({ mode, status }) => {
    sim.revisionListing.mode = mode;
    try {
      const run = await revisionsCli(["agent"], { ...byFlags, DMS_BASE_URL: sim.url });
      expect(run.code).toBe(1);
      expect(run.stdout).toBe("");
      expect(run.stderr).toContain(
        `error: the service at ${sim.url} has no revision listing (GET /v2/deployments/{deployment_id}/revisions answered ${status})`,
      );
    } finally {
      sim.revisionListing.mode = "present";
    }
  });

  it("an unknown name: an error naming it", async () => {
    const run = await revisionsCli(["nobody"], { ...byFlags, DMS_BASE_URL: sim.url });
    expect(run.code).toBe(1);
    expect(run.stderr).toBe(`error: the service at ${sim.url} has no deployment named "nobody"\n`);
  });
});

describe("delete_tracing_project and the name used again", () => {
  let sim: RunningSimulator;
  beforeAll(async () => {
    sim = await startSimulator({
      keepTracingProjects: true,
      timing: { readyAfterMs: 0, revisionActiveAfterMs: 0, deleteAfterMs: 0 },
    });
  });
  afterAll(() => sim.close());

  const body = (name: string) =>
    ({ name, source: "external_docker", source_revision_config: { image_uri: "r/a:1" } }) as const;
  const deleteUrls = () => sim.requests({ method: "DELETE" }).map((r) => new URL(r.url, sim.url).search);

  it("without the flag: no parameter, the tracing project stays, and a create of the name answers 409 naming it", async () => {
    const c = client(sim.url);
    const first = await c.createDeployment(body("pr-1"));
    await c.deleteDeployment(first.id);
    expect(deleteUrls().at(-1)).toBe("");
    const error = await c.createDeployment(body("pr-1")).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ServiceError);
    expect((error as ServiceError).status).toBe(409);
    expect((error as ServiceError).detail).toContain("tracing project named 'pr-1'");
    expect(isTracingProjectConflict(error)).toBe(true);

    // Deleted as a person would in the service's UI: the name is free again.
    const removed = await fetch(`${sim.url}/_sim/tracing-projects/pr-1`, { method: "DELETE" });
    expect(removed.status).toBe(204);
    expect((await c.createDeployment(body("pr-1"))).name).toBe("pr-1");
  });

  it("with the flag: the simulator sees delete_tracing_project=true, and the name is created again", async () => {
    const c = client(sim.url);
    const first = await c.createDeployment(body("pr-2"));
    await c.deleteDeployment(first.id, { deleteTracingProject: true });
    expect(deleteUrls().at(-1)).toBe("?delete_tracing_project=true");
    expect((await c.createDeployment(body("pr-2"))).name).toBe("pr-2");
  });

  it("a name a deployment holds keeps its own 409, which is no tracing project conflict", async () => {
    const c = client(sim.url);
    await c.createDeployment(body("pr-3"));
    const error = await c.createDeployment(body("pr-3")).catch((e: unknown) => e);
    expect((error as ServiceError).status).toBe(409);
    expect(isTracingProjectConflict(error)).toBe(false);
  });

  it("the switch and the names are controls of /_sim/", async () => {
    const off = await fetch(`${sim.url}/_sim/tracing-projects`, { method: "PUT", body: '{"keep":false}' });
    expect(await off.json()).toEqual({ keep: false, names: [] });
    const c = client(sim.url);
    const first = await c.createDeployment(body("pr-4"));
    await c.deleteDeployment(first.id);
    expect((await c.createDeployment(body("pr-4"))).name).toBe("pr-4");
    const bad = await fetch(`${sim.url}/_sim/tracing-projects`, { method: "PUT", body: '{"keep":"yes"}' });
    expect(bad.status).toBe(422);
    const state = (await (await fetch(`${sim.url}/_sim/state`)).json()) as Record<string, unknown>;
    expect(state.tracing_projects).toEqual({ keep: false, names: [] });
    expect(state.revision_listing_route).toBe("present");
  });

  it("a bad delete_tracing_project is a 422 naming the parameter", async () => {
    const c = client(sim.url);
    const d = await c.createDeployment(body("pr-5"));
    const answer = await fetch(`${sim.url}/v2/deployments/${d.id}?delete_tracing_project=maybe`, {
      method: "DELETE",
    });
    expect(answer.status).toBe(422);
    expect(await answer.json()).toMatchObject({ detail: [{ loc: ["query", "delete_tracing_project"] }] });
  });
});

describe("revisions -o json|yaml: secret values a revision carries", () => {
  const SECRET = "sk-live-9f8e7d6c5b4a39281706";
  let service: FakeService;
  beforeAll(async () => {
    const [revision] = revisions(1);
    const deployment = {
      id: DEPLOYMENT_ID,
      name: "agent",
      source: "external_docker",
      source_config: {},
      source_revision_config: { image_uri: "registry.example.com/agent:0" },
      secrets: [{ name: "API_KEY", value: SECRET }],
      status: "READY",
      latest_revision_id: revision?.id,
      active_revision_id: revision?.id,
    };
    // A service whose revisions carry the secrets they were made with, values and all.
    service = await startFakeService((req, res) => {
      if (req.path === "/v2/deployments") return send(res, 200, { resources: [deployment], offset: 1 });
      if (req.path === `/v2/deployments/${DEPLOYMENT_ID}/revisions`)
        return send(res, 200, { resources: [{ ...revision, secrets: deployment.secrets }], offset: 1 });
      send(res, 404, { detail: "Not Found" });
    });
  });
  afterAll(() => service.close());

  it.each(["json", "yaml"])(
    "-o %s hides them, as deployments list does, and keeps their names",
    async (format) => {
      const run = await runCli(["revisions", "--service", DEPLOYMENT_ID, "-o", format], {
        commands: [registerRevisionsCommand],
        env: { DMS_BASE_URL: service.url, DMS_API_KEY: "k" },
      });
      expect(run.stderr).toBe("");
      expect(run.code).toBe(0);
      expect(run.stdout).not.toContain(SECRET);
      expect(run.stdout).toContain("API_KEY");
      expect(run.stdout).toContain("(hidden)");
    },
  );
});
