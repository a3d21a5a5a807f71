/**
 * The rebuild route (POST /v2/deployments/{deployment_id}/revisions, from the service's public
 * documentation, not the shared spec) through the client against the simulator over loopback:
 * a new revision of the current configuration, an unknown deployment, a bad id refused before any
 * request, and a service without the route (404 and 405), told apart from a missing deployment.
 */
import { describe, expect, it } from "vitest";
import { RebuildRouteMissingError, ServiceClient } from "../../src/api/client.ts";
import { RequestValidationError, RouteMissingError } from "../../src/api/errors.ts";
import type { SimulatorOptions } from "../../src/simulator/server.ts";
import { simulatorPerTest } from "./simulator-http.ts";

const UNKNOWN = "d0000000-0000-4000-8000-000000000009";
const startSimulator = simulatorPerTest({
  timing: { readyAfterMs: 0, revisionActiveAfterMs: 6000, deleteAfterMs: 0 },
});

async function start(options: SimulatorOptions = {}) {
  const { sim, clock } = await startSimulator(options);
  const client = new ServiceClient({ baseUrl: sim.url, qps: 10_000, burst: 1000, retries: 0 });
  const created = await client.createDeployment({
    name: "agent",
    source: "github",
    source_config: { repo_url: "https://github.com/acme/agent" },
    source_revision_config: { repo_ref: "main" },
  });
  clock.advance(6000);
  return { sim, clock, client, created };
}

describe("ServiceClient.createRevision", () => {
  it("sends {} and answers the new Revision, which becomes the deployment's latest", async () => {
    const { sim, clock, client, created } = await start();
    const revision = await client.createRevision(created.id);
    expect(revision).toMatchObject({ status: "CREATING", source_revision_config: { repo_ref: "main" } });
    expect(revision?.id).not.toBe(created.latest_revision_id);
    expect(sim.requests({ method: "POST" }).map((r) => [r.route, r.status])).toEqual([
      ["POST /v2/deployments", "201"],
      ["POST /v2/deployments/{deployment_id}/revisions", "201"],
    ]);
    clock.advance(6000);
    const [deployment] = await client.listAllDeployments({ deployment_ids: [created.id] });
    expect(deployment?.latest_revision_id).toBe(revision?.id);
    expect(deployment?.active_revision_id).toBe(revision?.id);
  });

  it("answers undefined for a deployment the service does not know", async () => {
    const { client } = await start();
    expect(await client.createRevision(UNKNOWN)).toBeUndefined();
  });

  it("refuses a deployment id that is not a uuid before sending anything", async () => {
    const { sim, client } = await start();
    sim.resetCounters();
    await expect(client.createRevision("not-a-uuid")).rejects.toBeInstanceOf(RequestValidationError);
    expect(sim.requests()).toEqual([]);
  });

  it.each(["missing", "method-not-allowed"] as const)(
    "throws RebuildRouteMissingError when the service has no such route (%s)",
    async (mode) => {
      const { sim, client, created } = await start({ rebuildRoute: mode });
      const error = await client.createRevision(created.id).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(RebuildRouteMissingError);
      expect(error).toBeInstanceOf(RouteMissingError);
      expect((error as Error).message).toBe(
        `the service has no rebuild route (POST /v2/deployments/{deployment_id}/revisions answered ${mode === "missing" ? 404 : 405})`,
      );
      expect(sim.store.revisions(created.id)).toHaveLength(1);
    },
  );
});
