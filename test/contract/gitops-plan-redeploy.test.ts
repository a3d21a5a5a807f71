/**
 * `plan` says "redeploy revision <id> (no build)" where the operator would redeploy an earlier
 * revision instead of building the same one again: the spec goes back to an image by digest that
 * a revision the operator created deployed (its live status's `revisionHistory`, read through a
 * fake API server on loopback), against the simulator. A tag under the default `Pinned`, other
 * secrets, or `revisionReuse: Never` still say NEW REVISION; without the cluster's status the
 * revisions are not read at all.
 */
import { rm } from "node:fs/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ROUTES } from "../../src/api/wire.ts";
import { hashSecrets } from "../../src/reconcile/secret-hash.ts";
import type { RunningSimulator } from "../../src/simulator/server.ts";
import { deploymentPath, type FakeKube, startFakeKube } from "./fake-kube.ts";
import { cli, KEY, manifestDir, resourceYaml } from "./gitops-fixture.ts";
import { BAD, GOOD, NO_SECRETS, revertedSimulator } from "./redeploy-fixture.ts";

const NS = "team-a";

let sim: RunningSimulator;
let kube: FakeKube;
let good: string;
let bad: string;
let deploymentId: string;
const dirs: string[] = [];

beforeAll(async () => {
  ({ sim, id: deploymentId, good, bad } = await revertedSimulator(KEY));
  kube = await startFakeKube({ namespace: NS });
});
afterAll(async () => {
  await sim.close();
  await kube.close();
  for (const dir of dirs) await rm(dir, { recursive: true, force: true });
});

/** The live resource with the status the operator wrote: both revisions created by it, live once. */
function putLive(
  history: object[] = [
    { id: bad, secretsHash: NO_SECRETS, deployed: true },
    { id: good, secretsHash: NO_SECRETS, deployed: true },
  ],
) {
  kube.put(deploymentPath(NS, "agent"), {
    apiVersion: "dms.dev/v1alpha1",
    kind: "Deployment",
    metadata: {
      name: "agent",
      namespace: NS,
      resourceVersion: "7",
      creationTimestamp: "2030-01-01T00:00:00Z",
    },
    spec: { source: "external_docker", sourceRevisionConfig: { imageUri: BAD } },
    status: { deploymentId, revisionHistory: history },
  });
}

async function plan(spec: object, kubeconfig = true) {
  const dir = await manifestDir({ "agent.yaml": resourceYaml("agent", spec, { namespace: NS }) });
  dirs.push(dir);
  sim.resetCounters();
  return cli(sim.url, ["plan", "-f", dir, ...(kubeconfig ? ["--kubeconfig", kube.kubeconfig] : [])]);
}

const listings = () => sim.counters()[`GET ${ROUTES.REVISIONS}`]?.["200"] ?? 0;

describe("plan and spec.revisionReuse", () => {
  it("the spec back at an image digest a revision it created deployed: redeploy revision <id> (no build)", async () => {
    putLive();
    const run = await plan({ source: "external_docker", sourceRevisionConfig: { imageUri: GOOD } });
    expect(run.stdout).toContain(`patch ${deploymentId}, redeploy revision ${good} (no build)`);
    expect(run.stdout).not.toContain("NEW REVISION");
    expect(listings()).toBe(1);
  });

  it("a tag under the default Pinned, and revisionReuse Never: a new revision", async () => {
    putLive();
    const never = await plan({
      source: "external_docker",
      sourceRevisionConfig: { imageUri: GOOD },
      revisionReuse: "Never",
    });
    expect(never.stdout).toContain("NEW REVISION");
    const tag = await plan({
      source: "external_docker",
      sourceRevisionConfig: { imageUri: "registry.example.com/agent:1" },
    });
    expect(tag.stdout).toContain("NEW REVISION");
  });

  it("a revision created with other secrets, or one the operator did not create: a new revision", async () => {
    putLive([{ id: good, secretsHash: hashSecrets([{ name: "A", value: "1" }]), deployed: true }]);
    expect(
      (await plan({ source: "external_docker", sourceRevisionConfig: { imageUri: GOOD } })).stdout,
    ).toContain("NEW REVISION");
    putLive([{ id: bad, secretsHash: NO_SECRETS, deployed: true }]);
    expect(
      (await plan({ source: "external_docker", sourceRevisionConfig: { imageUri: GOOD } })).stdout,
    ).toContain("NEW REVISION");
  });

  it("without the cluster's status, the revisions are not read", async () => {
    const run = await plan({ source: "external_docker", sourceRevisionConfig: { imageUri: GOOD } }, false);
    expect(run.stdout).toContain("NEW REVISION");
    expect(listings()).toBe(0);
  });

  it("-o json carries the revision and the reason", async () => {
    putLive();
    const dir = await manifestDir({
      "agent.yaml": resourceYaml(
        "agent",
        { source: "external_docker", sourceRevisionConfig: { imageUri: GOOD } },
        { namespace: NS },
      ),
    });
    dirs.push(dir);
    const run = await cli(sim.url, ["plan", "-f", dir, "--kubeconfig", kube.kubeconfig, "-o", "json"]);
    const entry = JSON.parse(run.stdout).resources[0];
    expect(entry).toMatchObject({ action: "patch", newRevision: false, redeploy: { revisionId: good } });
    expect(entry.redeploy.reason).toBe(
      `revision ${good} deployed image ${GOOD} with the same secrets (a pinned reference)`,
    );
  });
});
