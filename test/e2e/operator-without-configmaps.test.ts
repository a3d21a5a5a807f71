// The operator with the ClusterRole of manifests/rbac minus its configmaps rule (an install that
// leaves spec.export out): it starts, /readyz answers 200, Deployment resources become Ready, and
// only spec.export fails, with its own condition naming the permissions, after one log line.
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { stringify } from "yaml";
import { CONFIG_MAPS_FORBIDDEN } from "../../src/kube/config-maps.ts";
import { loadSeed } from "../../src/simulator/seed.ts";
import type { RunningSimulator } from "../../src/simulator/server.ts";
import { startSimulator } from "../../src/simulator/server.ts";
import { freshNamespace, kubectl, kubectlOk, waitFor } from "../support/cluster.ts";
import { simulatorSampleObjects } from "../support/samples.ts";
import {
  containerArgs,
  MANIFESTS,
  type StartedOperator,
  serviceAccountKubeconfig,
  startOperatorAs,
} from "./install-support.ts";

const SEED = join(import.meta.dirname, "..", "..", "src", "simulator", "seed.example.yaml");
const API_KEY = "e2e-key-0123456789abcdef";
const SA = "dms-operator-no-configmaps";
const NAME = "no-configmaps-agent";

interface Rule {
  resources?: string[];
}

describe("the operator without ConfigMap permissions", () => {
  let simulator: RunningSimulator;
  let operator: StartedOperator;
  let ns: string;
  let work: string;

  beforeAll(async () => {
    await kubectlOk(["apply", "-k", join(MANIFESTS, "default")]);
    const role = JSON.parse(await kubectlOk(["get", "clusterrole", "dms-operator", "-o", "json"])) as {
      rules: Rule[];
    };
    const rules = role.rules.filter((r) => !r.resources?.includes("configmaps"));
    expect(rules.length).toBe(role.rules.length - 1);
    const subject = { kind: "ServiceAccount", name: SA, namespace: "dms-system" };
    const objects = [
      { apiVersion: "v1", kind: "ServiceAccount", metadata: { name: SA, namespace: "dms-system" } },
      { apiVersion: "rbac.authorization.k8s.io/v1", kind: "ClusterRole", metadata: { name: SA }, rules },
      {
        apiVersion: "rbac.authorization.k8s.io/v1",
        kind: "ClusterRoleBinding",
        metadata: { name: SA },
        roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: SA },
        subjects: [subject],
      },
      {
        apiVersion: "rbac.authorization.k8s.io/v1",
        kind: "RoleBinding",
        metadata: { name: SA, namespace: "dms-system" },
        roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "Role", name: "dms-operator-install-key" },
        subjects: [subject],
      },
    ];
    await kubectlOk(["apply", "-f", "-"], { input: objects.map((o) => JSON.stringify(o)).join("\n") });
    work = await mkdtemp(join(tmpdir(), "dms-e2e-no-configmaps-"));
    simulator = await startSimulator({
      apiKey: API_KEY,
      seed: await loadSeed(SEED),
      timing: { readyAfterMs: 300, revisionActiveAfterMs: 300, deleteAfterMs: 300 },
    });
    const [, ...args] = await containerArgs(join(MANIFESTS, "default"), { POD_NAMESPACE: "dms-system" });
    operator = await startOperatorAs({
      // One replica, no Lease: another file's operator holds dms-operator-leader.
      args: [...args.filter((a) => a !== "--leader-elect"), "--no-leader-elect"],
      kubeconfig: await serviceAccountKubeconfig("dms-system", SA, work),
      serviceUrl: simulator.url,
      apiKey: API_KEY,
      podNamespace: "dms-system",
      podName: "dms-operator-no-configmaps-0",
      dir: work,
    });
    ns = await freshNamespace("e2e-no-configmaps");
  });

  afterAll(async () => {
    if (ns) await kubectl(["delete", "dmsd", "--all", "-n", ns, "--timeout=30s"]);
    await operator?.process.stop(10_000);
    await simulator?.close();
    if (work) await rm(work, { recursive: true, force: true });
    await kubectl(["delete", "clusterrolebinding,clusterrole", SA, "--ignore-not-found"]);
    await kubectl(["delete", "rolebinding,serviceaccount", SA, "-n", "dms-system", "--ignore-not-found"]);
  });

  it("is ready, reconciles a Deployment resource, and fails only its export, naming the permissions", async () => {
    await operator.whileRunning(
      waitFor(async () => (await fetch(`${operator.probesUrl}/readyz`)).status === 200, {
        timeoutMs: 30_000,
        intervalMs: 300,
        description: "/readyz to answer 200",
      }),
    );
    const manifest = simulatorSampleObjects("internal-docker.yaml")
      .map((doc) => {
        (doc.metadata as { name: string }).name = NAME;
        (doc.spec as Record<string, unknown>).export = { configMapName: `${NAME}-endpoint` };
        return stringify(doc);
      })
      .join("---\n");
    await kubectlOk(["apply", "-n", ns, "-f", "-"], { input: manifest });
    const waited = await kubectl(
      ["wait", "--for=condition=Ready", `dmsd/${NAME}`, "-n", ns, "--timeout=45s"],
      {
        timeoutMs: 50_000,
      },
    );
    const status = await kubectl(["get", "dmsd", NAME, "-n", ns, "-o", "jsonpath={.status}"]);
    expect(waited.code, `${status.stdout}\n${operator.logText().slice(-3000)}`).toBe(0);
    const exported = (path: string) =>
      kubectlOk([
        "get",
        "dmsd",
        NAME,
        "-n",
        ns,
        "-o",
        `jsonpath={.status.conditions[?(@.type=="Exported")]${path}}`,
      ]);
    await waitFor(async () => (await exported(".reason")) === "ExportFailed", {
      timeoutMs: 30_000,
      intervalMs: 300,
      description: "Exported=False, ExportFailed",
    });
    expect(await exported(".status")).toBe("False");
    expect(await exported(".message")).toContain("get, list, watch, create, update and delete on configmaps");
    expect(operator.logText().split(CONFIG_MAPS_FORBIDDEN).length - 1).toBe(1);
  });
});
