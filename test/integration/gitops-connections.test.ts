// `import` and `plan` through connections on a real control plane (the CRDs of crds/): import
// reads a ServiceConnection and its Secret and writes resources the API server accepts as they
// are; plan reads each resource's connection and finds only adoptions, never touching the default
// service; the CRD's own rule and plan agree that spec.connectionRef cannot be removed.
import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { RunningSimulator } from "../../src/simulator/server.ts";
import { cli, manifestDir } from "../contract/gitops-fixture.ts";
import { freshNamespace, kubectl, kubectlOk, testKubeconfigPath } from "../support/cluster.ts";
import { startTestSimulator } from "../support/operator.ts";
import { ClusterUser } from "../support/resources.ts";

const KEY = "tenant-key-1c9e4b";
// Name claims are read cluster-wide: names of this run only.
const RUN = randomBytes(3).toString("hex");
const SHARED = `shared-${RUN}`;
const NAMES = [`api-${RUN}`, `worker-${RUN}`];

let sim: RunningSimulator;
let namespace: string;
let imported: string;
// Nothing listens there: a call to the default connection fails the run.
const UNUSED_DEFAULT = "http://127.0.0.1:9";
const run = (args: string[]) => cli(UNUSED_DEFAULT, [...args, "--kubeconfig", testKubeconfigPath()]);

interface JsonPlan {
  exitCode: number;
  resources: Array<{ name: string; action: string; connection: string; error?: string }>;
}

beforeAll(async () => {
  sim = await startTestSimulator({
    apiKey: KEY,
    seed: {
      deployments: NAMES.map((name) => ({
        name,
        source: "internal_docker",
        source_config: {},
        source_revision_config: { image_uri: `${name}:1` },
      })),
    },
  });
  namespace = await freshNamespace("gitops-conn");
  await new ClusterUser().putSecret(namespace, "dms-key", { "api-key": KEY });
  const connections = [
    {
      apiVersion: "dms.dev/v1alpha1",
      kind: "ServiceConnection",
      metadata: { name: "prod", namespace },
      spec: { baseUrl: sim.url, apiKeySecretRef: { name: "dms-key", key: "api-key" } },
    },
    {
      apiVersion: "dms.dev/v1alpha1",
      kind: "ClusterServiceConnection",
      metadata: { name: SHARED },
      spec: { baseUrl: sim.url, apiKeySecretRef: { name: "dms-key", key: "api-key", namespace } },
    },
  ];
  await kubectlOk(["apply", "-f", "-"], {
    input: JSON.stringify({ apiVersion: "v1", kind: "List", items: connections }),
  });
});
afterAll(async () => {
  await kubectl(["delete", "clusterserviceconnection", SHARED, "--wait=false"]);
  await sim?.close();
});

describe("import and plan through a connection, on a real API server", () => {
  it("import --connection writes resources with spec.connectionRef that the API server accepts", async () => {
    const result = await run(["import", "--connection", "dmsconn/prod", "--namespace", namespace]);
    expect(result.stderr).toBe(
      `imported 2 deployment(s) through ServiceConnection ${namespace}/prod, skipped 0\n`,
    );
    expect(result.code).toBe(0);
    imported = result.stdout;
    const applied = await kubectlOk(["apply", "-f", "-"], { input: imported });
    for (const name of NAMES) expect(applied).toContain(`deployment.dms.dev/${name} created`);
    const live = await new ClusterUser().get(namespace, NAMES[0] ?? "");
    expect(live?.spec.connectionRef).toEqual({ kind: "ServiceConnection", name: "prod" });
  });

  it("plan reads each resource's connection and finds only adoptions; --connection of another finds none", async () => {
    const dir = await manifestDir({ "all.yaml": imported });
    const own = await run(["plan", "-o", "json", "-f", dir]);
    expect(own.stderr).toBe("");
    const doc = JSON.parse(own.stdout) as JsonPlan;
    expect(doc.resources.map((r) => [r.name, r.action, r.connection])).toEqual(
      NAMES.map((name) => [name, "adopt", "ServiceConnection/prod"]),
    );
    expect(own.code).toBe(0);

    const other = await run(["plan", "-f", dir, "--connection", `ClusterServiceConnection/${SHARED}`]);
    expect(other.stderr).toMatch(
      /^error: no resource of the files uses --connection ClusterServiceConnection\//,
    );
    expect(other.code).toBe(1);
  });

  it("removing spec.connectionRef: plan says apply would be refused, and the API server refuses it", async () => {
    const without = imported.replace(/^ {2}connectionRef:\n(?: {4}.*\n)+/gm, "");
    expect(without).not.toContain("connectionRef");
    const dir = await manifestDir({ "all.yaml": without });
    const planned = await run(["plan", "-o", "json", "-f", dir, "--base-url", sim.url, "--api-key", KEY]);
    const doc = JSON.parse(planned.stdout) as JsonPlan;
    expect(doc.resources[0]?.error).toMatch(
      /^kubectl apply would be refused: spec\.connectionRef is immutable/,
    );
    expect(planned.code).toBe(1);
    const applied = await kubectl(["apply", "-f", "-"], { input: without });
    expect(applied.code).not.toBe(0);
    expect(applied.stderr).toContain("spec.connectionRef cannot be added or removed");
  });
});
