/**
 * `dms-operator revisions` marks the revision a Deployment resource's spec would redeploy instead
 * of building (`spec.revisionReuse`): the resource and its status read from a fake API server on
 * loopback, its deployment's revisions from the simulator. Only with the resource read from a
 * cluster, and only for a revision its history vouches for.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { registerRevisionsCommand } from "../../src/commands/revisions-command.ts";
import { hashSecrets } from "../../src/reconcile/secret-hash.ts";
import type { RunningSimulator } from "../../src/simulator/server.ts";
import { runCli } from "../support/cli.ts";
import { connectedResource, deploymentPath, type FakeKube, startConnectedKube } from "./fake-kube.ts";
import { BAD, GOOD, NO_SECRETS, revertedSimulator } from "./redeploy-fixture.ts";

const KEY = "revisions-reuse-key-19c4";
const NS = "team-a";

let sim: RunningSimulator;
let kube: FakeKube;
let id: string;
let good: string;
let bad: string;

beforeAll(async () => {
  ({ sim, id, good, bad } = await revertedSimulator(KEY));
  kube = await startConnectedKube(NS, sim.url, KEY);
});
afterAll(async () => {
  await sim.close();
  await kube.close();
});

function putResource(image: string, history: object[]) {
  kube.put(
    deploymentPath(NS, "agent"),
    connectedResource(
      NS,
      "agent",
      { source: "external_docker", sourceRevisionConfig: { imageUri: image } },
      { deploymentId: id, revisionHistory: history },
      { resourceVersion: "3", generation: 2 },
    ),
  );
}

const revisions = (args: string[]) =>
  runCli(["revisions", "agent", "-n", NS, "--kubeconfig", kube.kubeconfig, ...args], {
    commands: [registerRevisionsCommand],
    env: {},
  });

const HISTORY = () => [
  { id: bad, secretsHash: NO_SECRETS, deployed: true },
  { id: good, secretsHash: NO_SECRETS, deployed: true },
];

describe("revisions marks the revision the spec would redeploy", () => {
  it("the spec back at GOOD: its revision is marked reuse, in the table and in -o json", async () => {
    putResource(GOOD, HISTORY());
    const table = await revisions(["-o", "wide"]);
    expect(table.stderr).toBe("");
    const rows = table.stdout
      .trimEnd()
      .split("\n")
      .slice(1)
      .map((l) => l.split(/\s+/).slice(0, 2));
    expect(rows).toEqual([
      [bad, "active,latest"],
      [good, "reuse"],
    ]);
    const json = JSON.parse((await revisions(["-o", "json"])).stdout) as Array<{
      id: string;
      reuse?: boolean;
    }>;
    expect(json.map((r) => [r.id, r.reuse])).toEqual([
      [bad, undefined],
      [good, true],
    ]);
  });

  it("nothing is marked when the spec asks for nothing new, or the history cannot vouch for the revision", async () => {
    putResource(BAD, HISTORY());
    expect((await revisions(["-o", "json"])).stdout).not.toContain('"reuse"');
    putResource(GOOD, [{ id: good, secretsHash: hashSecrets([{ name: "A", value: "1" }]), deployed: true }]);
    expect((await revisions(["-o", "json"])).stdout).not.toContain('"reuse"');
    putResource(GOOD, []);
    expect((await revisions(["-o", "json"])).stdout).not.toContain('"reuse"');
  });
});
