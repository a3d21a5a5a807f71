/**
 * Successful answers the client cannot read, through the client over loopback: a write the
 * service answered with a success was applied, whatever its body says (`maybeApplied`: read
 * before repeating it, never repeat it blindly), and a page without its `offset`, or with
 * `null`, is read as the request's offset plus the items answered, not failed whole.
 */
import { pino } from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { ServiceClient } from "../../src/api/client.ts";
import { failureOf } from "../../src/reconcile/failures.ts";
import { Rebuilder } from "../../src/reconcile/service/rebuilder.ts";
import {
  deployment,
  type FakeService,
  type Handler,
  rejection,
  send,
  startFakeService,
} from "./client-fake-service.ts";

const DEPLOYMENT_ID = "0b6f3c2e-7d2a-4c59-9b8e-3f1a2b4c5d6e";
const signal = new AbortController().signal;

let service: FakeService | undefined;
afterEach(async () => {
  await service?.close();
  service = undefined;
});

async function clientOf(handler: Handler): Promise<ServiceClient> {
  service = await startFakeService(handler);
  return new ServiceClient({ baseUrl: service.url, retries: 0, qps: 10_000, burst: 1000 });
}

describe("a write answered with a success the client cannot read", () => {
  it("is a rebuild that may have built, not a failure to retry (202 without a body; a revision with a null status)", async () => {
    const answers: Handler[] = [
      (_req, res) => {
        res.writeHead(202);
        res.end();
      },
      (_req, res) => send(res, 201, { id: "11111111-2222-4333-8444-555555555555", status: null }),
    ];
    let built = 0;
    const client = await clientOf((req, res, n) => {
      expect(`${req.method} ${req.path}`).toBe(`POST /v2/deployments/${DEPLOYMENT_ID}/revisions`);
      return answers[built++]?.(req, res, n);
    });
    const rebuilder = new Rebuilder(
      { createRevision: (id, s) => client.createRevision(id, { signal: s }) },
      pino({ level: "silent" }),
    );
    for (const status of [202, 201]) {
      const outcome = await rebuilder.rebuild(DEPLOYMENT_ID, signal);
      expect(outcome).toEqual({
        kind: "unconfirmed",
        error: `POST /v2/deployments/{deployment_id}/revisions: ${status} bad_response`,
      });
    }
    expect(built).toBe(2);
  });

  it("is a create and a PATCH that were applied: a create's intent is kept (no second create before a lookup)", async () => {
    const client = await clientOf((req, res) => send(res, req.method === "POST" ? 201 : 200, { id: 7 }));
    const created = await rejection(client.createDeployment({ name: "agent", source: "internal_docker" }));
    expect(created).toMatchObject({ kind: "bad_response", status: 201, maybeApplied: true });
    expect(failureOf(created, []).createRefused).toBeUndefined();
    const patched = await rejection(
      client.patchDeployment(DEPLOYMENT_ID, { source_config: { build_on_push: false } }),
    );
    expect(patched).toMatchObject({ kind: "bad_response", status: 200, maybeApplied: true });
  });

  it("is not said of a read: a GET answered unreadably changed nothing", async () => {
    const client = await clientOf((_req, res) => send(res, 200, { resources: "none" }));
    const listed = await rejection(client.listAllDeployments());
    expect(listed).toMatchObject({ kind: "bad_response", maybeApplied: false });
  });
});

describe("a page without its offset", () => {
  it("reads a deployment listing whose pages answer offset null, or none, to its end", async () => {
    const all = Array.from({ length: 5 }, (_, i) => deployment(i + 1));
    const client = await clientOf((req, res, n) => {
      const offset = Number(req.query.get("offset") ?? 0);
      const resources = all.slice(offset, offset + 2);
      send(res, 200, n % 2 === 0 ? { resources, offset: null } : { resources });
    });
    const listed = await client.listAllDeployments({}, { pageSize: 2 });
    expect(listed.map((d) => d.name)).toEqual(all.map((d) => d.name));
  });

  it("reads a revision listing whose pages answer offset null, and its first page", async () => {
    const revisions = Array.from({ length: 3 }, (_, i) => ({
      id: `00000000-0000-4000-8000-${String(i).padStart(12, "0")}`,
      status: "DEPLOYED",
      created_at: new Date(Date.UTC(2030, 0, 1, 0, i)).toISOString(),
    }));
    const client = await clientOf((req, res) => {
      const offset = Number(req.query.get("offset") ?? 0);
      send(res, 200, { resources: revisions.slice(offset, offset + 2), offset: null });
    });
    const listing = await client.listRevisions(DEPLOYMENT_ID);
    // Newest first, every row read.
    const ids = listing.rows.map((row) => (row.ok ? row.revision.id : undefined));
    expect(ids).toEqual(revisions.map((r) => r.id).reverse());
    expect(await client.firstRevisionPage(DEPLOYMENT_ID)).toHaveLength(2);
  });
});

describe("a revision read on its own (the tracker's look, the logs command's wait)", () => {
  const REVISION_ID = "22222222-2222-4222-8222-222222222222";
  it.each([
    ["created_at a number", { created_at: 1_767_225_600 }],
    ["source not a string", { source: 3 }],
    ["source_revision_config not an object", { source_revision_config: "repo/a:2" }],
    ["an image_uri that is not a string", { source_revision_config: { image_uri: 7 } }],
  ])("is read for its id and status, a field it is not read for odd (%s)", async (_what, odd) => {
    const client = await clientOf((_req, res) =>
      send(res, 200, { id: REVISION_ID, status: "BUILD_FAILED", ...odd }),
    );
    const revision = await client.getRevision(DEPLOYMENT_ID, REVISION_ID, { signal });
    expect(revision).toMatchObject({ id: REVISION_ID, status: "BUILD_FAILED" });
  });

  it("still fails without a string id and status", async () => {
    for (const body of [{ id: REVISION_ID, status: 3 }, { status: "BUILD_FAILED" }, ["x"]]) {
      const client = await clientOf((_req, res) => send(res, 200, body));
      expect(await rejection(client.getRevision(DEPLOYMENT_ID, REVISION_ID, { signal }))).toMatchObject({
        kind: "bad_response",
        maybeApplied: false,
      });
      await service?.close();
      service = undefined;
    }
  });
});

describe("a forge integration's repositories", () => {
  it("keeps a repository whose id is not an integer (the operator never uses it), and skips one whose integration id it could not send", async () => {
    const INTEGRATION = "6f1c1d2e-0000-4000-8000-000000000001";
    const repo = (name: string, fields: Record<string, unknown>) => ({
      host_integration_id: INTEGRATION,
      id: 1,
      name,
      owner: "acme",
      url: `https://github.com/acme/${name}`,
      default_branch: "main",
      ...fields,
    });
    const client = await clientOf((_req, res) =>
      send(res, 200, [
        repo("numeric-string", { id: "812345678901234567" }),
        repo("no-id", { id: undefined }),
        repo("legacy", { host_integration_id: "legacy-integration-7" }),
        repo("plain", {}),
      ]),
    );
    const repos = await client.listRepos(INTEGRATION);
    expect(repos.map((r) => r.name)).toEqual(["numeric-string", "no-id", "plain"]);
    expect(repos[0]?.id).toBe("812345678901234567");
  });
});
