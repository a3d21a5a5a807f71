/**
 * One odd item of a listing the operator reads (the OAuth providers its connection probe counts,
 * a forge integration's repositories `spec.github` is resolved against) is skipped, as the
 * deployment and revision listings skip theirs: it never fails the whole answer, and with it
 * every resource of the connection. Against a scripted service on 127.0.0.1.
 */
import { pino } from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { ServiceClient } from "../../src/api/client.ts";
import { type ServiceConfig, serviceConfigFrom } from "../../src/config.ts";
import { probeConnection } from "../../src/connection/probe.ts";
import { RepoListings } from "../../src/reconcile/repo-listings.ts";
import { RuntimeMetrics } from "../../src/runtime/metrics.ts";
import { serviceConnector } from "../../src/wiring/service-connections.ts";
import { ManualClock } from "../support/manual-clock.ts";
import { type FakeService, send, startFakeService } from "./client-fake-service.ts";

const INTEGRATION = "0b6f3c2e-7d2a-4c59-9b8e-3f1a2b4c5d6e";

const provider = (i: number, overrides: Record<string, unknown> = {}) => ({
  id: `p-${i}`,
  organization_id: "org",
  provider_id: `github-${i}`,
  name: `GitHub ${i}`,
  client_id: `client-${i}`,
  auth_url: "https://github.com/login/oauth/authorize",
  token_url: "https://github.com/login/oauth/access_token",
  uses_pkce: false,
  code_challenge_method: null,
  created_at: "2025-01-01T00:00:00Z",
  updated_at: "2025-01-01T00:00:00Z",
  ...overrides,
});

const repo = (owner: string, name: string, overrides: Record<string, unknown> = {}) => ({
  host_integration_id: INTEGRATION,
  id: 1,
  name,
  owner,
  url: `https://github.com/${owner}/${name}`,
  default_branch: "main",
  ...overrides,
});

let service: FakeService | undefined;
afterEach(async () => {
  await service?.close();
  service = undefined;
});

function config(baseUrl: string): ServiceConfig {
  const parsed = serviceConfigFrom({ baseUrl, apiKey: "k-0123456789", retries: 0 }, {});
  if (!parsed.ok) throw new Error(parsed.problems.join("; "));
  return parsed.config;
}

describe("the connection probe: one odd OAuth provider", () => {
  it("counts the providers it can read and keeps the connection Ready", async () => {
    // A dynamic client not registered yet: no client_id. The probe only counts the providers.
    service = await startFakeService((_req, res) =>
      send(res, 200, [provider(1), provider(2, { client_id: null }), provider(3)]),
    );
    const cfg = config(service.url);
    const connect = serviceConnector(
      pino({ level: "silent" }),
      new RuntimeMetrics({ processMetrics: false }),
    );
    const probed = await probeConnection(
      connect(cfg, "ServiceConnection/team-a/prod"),
      cfg,
      cfg.apiKey ?? "",
      new AbortController().signal,
      {
        clock: new ManualClock(),
        deadlineMs: 10_000,
      },
    );
    expect(probed, JSON.stringify(probed)).toMatchObject({ ok: true, reason: "Connected" });
  });
});

describe("spec.github: one odd repository of the integration", () => {
  it("resolves a well-formed repository beside it", async () => {
    // An empty repository the integration reaches, answered without a default branch.
    service = await startFakeService((_req, res) =>
      send(res, 200, [repo("acme", "empty", { default_branch: null }), repo("acme", "app")]),
    );
    const client = new ServiceClient({ baseUrl: service.url, retries: 0 });
    const repos = new RepoListings(
      { listRepos: (id, signal) => client.listRepos(id, { signal }) },
      new ManualClock(),
      300_000,
    );
    const spec = {
      source: "github" as const,
      github: { integrationId: INTEGRATION, repository: "acme/app" },
    };
    const resolved = await repos.resolve(spec, new AbortController().signal).catch((e: Error) => e.message);
    expect(resolved).toEqual({
      integrationId: INTEGRATION,
      repoUrl: "https://github.com/acme/app",
      defaultBranch: "main",
    });
  });
});
