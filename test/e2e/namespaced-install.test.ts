// The namespace-scoped install (manifests/namespaced) into a namespace of the team's choosing, as
// its comment tells users to do it: an overlay setting `namespace:`. The operator runs with the
// overlay's own arguments (`--namespaces=$(POD_NAMESPACE)`) and its ServiceAccount's token, so
// its Role alone must be enough; resources elsewhere stay untouched.
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadSeed } from "../../src/simulator/seed.ts";
import { type RunningSimulator, startSimulator } from "../../src/simulator/server.ts";
import { freshNamespace, kubectl, kubectlOk } from "../support/cluster.ts";
import { simulatorSample } from "../support/samples.ts";
import {
  canI,
  containerArgs,
  forbiddenLines,
  MANIFESTS,
  type StartedOperator,
  serviceAccountKubeconfig,
  startOperatorAs,
} from "./install-support.ts";

const API_KEY = "e2e-namespaced-key-0123456789";

describe("the namespace-scoped install", () => {
  let ns: string;
  let elsewhere: string;
  let work: string;
  let overlay: string;
  let simulator: RunningSimulator;
  let operator: StartedOperator | undefined;

  beforeAll(async () => {
    ns = await freshNamespace("e2e-team");
    elsewhere = await freshNamespace("e2e-other-team");
    work = await mkdtemp(join(tmpdir(), "dms-e2e-namespaced-"));
    overlay = join(work, "overlay");
    await mkdir(overlay);
    // kustomize wants a relative path to a base.
    const base = relative(overlay, join(MANIFESTS, "namespaced"));
    await writeFile(
      join(overlay, "kustomization.yaml"),
      `apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: ${ns}\nresources:\n  - ${base}\n`,
    );
    simulator = await startSimulator({
      apiKey: API_KEY,
      seed: await loadSeed(join(import.meta.dirname, "..", "..", "src", "simulator", "seed.example.yaml")),
      timing: { readyAfterMs: 300, revisionActiveAfterMs: 300, deleteAfterMs: 300 },
    });
  });

  afterAll(async () => {
    // Leave no resources behind: other files read the cluster as a whole (name claims, plan).
    for (const namespace of [ns, elsewhere])
      if (namespace) await kubectl(["delete", "dmsd", "--all", "-n", namespace, "--timeout=30s"]);
    await operator?.process.stop(10_000);
    await simulator?.close();
    if (work) await rm(work, { recursive: true, force: true });
  });

  it("is accepted by a server-side dry run, then applied, into the team's namespace", async () => {
    const dryRun = await kubectl(["apply", "-k", overlay, "--dry-run=server"]);
    expect(dryRun.stderr).toBe("");
    expect(dryRun.code).toBe(0);
    const applied = await kubectlOk(["apply", "-k", overlay]);
    expect(applied).toContain("role.rbac.authorization.k8s.io/dms-operator created");
    const subject = await kubectlOk([
      "get",
      "rolebinding",
      "dms-operator",
      "-n",
      ns,
      "-o",
      "jsonpath={.subjects[0]}",
    ]);
    expect(JSON.parse(subject)).toMatchObject({
      kind: "ServiceAccount",
      name: "dms-operator",
      namespace: ns,
    });
  });

  it("grants its ServiceAccount nothing outside its namespace", async () => {
    const sa = { namespace: ns, name: "dms-operator" };
    expect(await canI(sa, ["watch", "deployments.dms.dev", "-n", ns])).toBe(true);
    expect(await canI(sa, ["watch", "serviceconnections.dms.dev", "-n", ns])).toBe(true);
    expect(await canI(sa, ["patch", "serviceconnections.dms.dev", "--subresource=status", "-n", ns])).toBe(
      true,
    );
    expect(
      await canI(sa, ["update", "serviceconnections.dms.dev", "--subresource=finalizers", "-n", ns]),
    ).toBe(true);
    expect(await canI(sa, ["create", "serviceconnections.dms.dev", "-n", ns])).toBe(false);
    expect(await canI(sa, ["list", "serviceconnections.dms.dev", "-n", elsewhere])).toBe(false);
    // Cluster-scoped: a Role cannot grant it; that takes the cluster-wide install.
    expect(await canI(sa, ["list", "clusterserviceconnections.dms.dev"])).toBe(false);
    expect(await canI(sa, ["get", "secrets", "-n", ns])).toBe(true);
    expect(await canI(sa, ["update", "leases.coordination.k8s.io", "-n", ns])).toBe(true);
    expect(await canI(sa, ["list", "deployments.dms.dev", "-A"])).toBe(false);
    expect(await canI(sa, ["list", "deployments.dms.dev", "-n", elsewhere])).toBe(false);
    expect(await canI(sa, ["get", "secrets", "-n", elsewhere])).toBe(false);
    // The install key is created in its own namespace (create cannot be narrowed by name), nowhere else.
    expect(await canI(sa, ["create", "secrets", "-n", ns])).toBe(true);
    expect(await canI(sa, ["create", "secrets", "-n", elsewhere])).toBe(false);
    expect(await canI(sa, ["update", "secrets", "-n", ns])).toBe(false);
    expect(await canI(sa, ["delete", "secrets", "-n", ns])).toBe(false);
    expect(await canI(sa, ["get", "leases.coordination.k8s.io", "-n", "dms-system"])).toBe(false);
    // spec.export's ConfigMaps, in its own namespace only.
    expect(await canI(sa, ["watch", "configmaps", "-n", ns])).toBe(true);
    expect(await canI(sa, ["update", "configmaps", "-n", ns])).toBe(true);
    expect(await canI(sa, ["update", "configmaps", "-n", elsewhere])).toBe(false);
  });

  it("runs with --namespaces=$(POD_NAMESPACE) and its Role: resources there become Ready, others are left alone", async () => {
    const [command, ...args] = await containerArgs(overlay, { POD_NAMESPACE: ns });
    expect(command).toBe("run");
    expect(args).toContain(`--namespaces=${ns}`);
    operator = await startOperatorAs({
      args,
      kubeconfig: await serviceAccountKubeconfig(ns, "dms-operator", work),
      serviceUrl: simulator.url,
      apiKey: API_KEY,
      podNamespace: ns,
      podName: "dms-operator-team-0",
      dir: work,
    });
    const sample = simulatorSample("secret-by-reference.yaml");
    await kubectlOk(["apply", "-n", elsewhere, "-f", "-"], { input: sample });
    await kubectlOk(["apply", "-n", ns, "-f", "-"], { input: sample });

    const waited = await kubectl(
      ["wait", "--for=condition=Ready", "dmsd/triage-bot", "-n", ns, "--timeout=45s"],
      {
        timeoutMs: 50_000,
      },
    );
    expect(waited.stderr).toBe("");
    expect(waited.code).toBe(0);
    // The Lease lives in the team's namespace, where the Role allows it.
    const holder = await kubectlOk([
      "get",
      "lease",
      "dms-operator-leader",
      "-n",
      ns,
      "-o",
      "jsonpath={.spec.holderIdentity}",
    ]);
    expect(holder).toMatch(/^dms-operator-team-0_/);
    // Left alone: the status stays the CRD's empty default.
    expect(await kubectlOk(["get", "dmsd", "triage-bot", "-n", elsewhere, "-o", "jsonpath={.status}"])).toBe(
      "{}",
    );
    expect(simulator.store.list().filter((d) => d.name === "triage-bot")).toHaveLength(1);
    operator.process.assertRunning();
    expect(forbiddenLines(operator.logText())).toEqual([]);
  });

  it("refuses to start with --default-connection-namespace-selector and no read on namespaces, naming the permission", async () => {
    const [, ...args] = await containerArgs(overlay, { POD_NAMESPACE: ns });
    const refused = await startOperatorAs({
      args: [...args, "--default-connection-namespace-selector=team=a", "--no-leader-elect"],
      kubeconfig: await serviceAccountKubeconfig(ns, "dms-operator", work),
      serviceUrl: simulator.url,
      apiKey: API_KEY,
      podNamespace: ns,
      podName: "dms-operator-team-1",
      dir: work,
    });
    try {
      const exit = await Promise.race([
        refused.process.exited,
        new Promise<undefined>((resolve) => setTimeout(resolve, 30_000, undefined)),
      ]);
      expect(exit, "the operator to exit by itself").toBeDefined();
      expect(exit?.code).not.toBe(0);
      expect(refused.logText()).toContain("the operator may not list and watch namespaces");
      expect(refused.logText()).toContain("grant list and watch on namespaces cluster-wide");
    } finally {
      await refused.process.stop(5_000);
    }
  });
});
