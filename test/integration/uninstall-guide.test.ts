// The install guide's Uninstall (docs/guide/install.md), its `sh` blocks run as written in bash
// against the real control plane, the operator in-process: step 1, while the operator runs,
// deletes every resource and connection (the protected one cleared first), each as its policy
// says; and what the operator left once it stopped (each resource under Delete and each
// connection waiting on its finalizer, as the CRDs' deletion leaves them) goes with the guide's
// finalizer removal, the service's deployments left in place. The API server is shared with the
// other test files, so the `kubectl` these commands find on PATH scopes them to this test's
// objects: `--all-namespaces` becomes its namespace, and a ClusterServiceConnection command its
// own connection. Its CRDs are not deleted (the other files use them): each object is deleted as
// the CRD's deletion deletes it.
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, inject, it } from "vitest";
import { parseAllDocuments } from "yaml";
import type { DeploymentSpec } from "../../src/crd/schema.ts";
import { runCaptured } from "../controlplane/kubectl.ts";
import { type PolicyManifest, policyForNamespace } from "../support/admission-policy.ts";
import { kubectl, kubectlOk, testKubeconfigPath, waitFor } from "../support/cluster.ts";
import { TEST_API_KEY } from "../support/operator.ts";
import { type Scenario, useScenarios } from "../support/scenario.ts";

const ROOT = join(import.meta.dirname, "..", "..");
const INSTALL = readFileSync(join(ROOT, "docs", "guide", "install.md"), "utf8");

/** The `sh` blocks of the guide's Uninstall section, as written. */
function uninstallBlocks(): string[] {
  const start = INSTALL.indexOf("## Uninstall");
  const section = INSTALL.slice(start, INSTALL.indexOf("\n## ", start + 1));
  return [...section.matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => m[1] ?? "");
}

/**
 * Runs `script` in bash, the `kubectl` on its PATH scoped to `namespace` and to the
 * ClusterServiceConnection `clusterName`; resolves with the exit code and both outputs.
 */
function runScoped(script: string, namespace: string, clusterName: string) {
  const dir = mkdtempSync(join(tmpdir(), "uninstall-guide-"));
  writeFileSync(
    join(dir, "kubectl"),
    [
      "#!/bin/bash",
      "args=()",
      'cluster=; case " $* " in *" get dmscconn "* | *" delete dmscconn --all "*) cluster=1;; esac',
      'for a in "$@"; do',
      `  if [ "$a" = --all-namespaces ]; then args+=(-n ${namespace})`,
      `  elif [ -n "$cluster" ] && [ "$a" = --all ]; then :`,
      '  else args+=("$a"); fi',
      "done",
      `[ -n "$cluster" ] && args+=(--field-selector=metadata.name=${clusterName})`,
      `exec ${inject("kubectlPath")} --kubeconfig=${testKubeconfigPath()} --cache-dir=${inject("kubectlCacheDir")} "\${args[@]}"`,
      "",
    ].join("\n"),
  );
  chmodSync(join(dir, "kubectl"), 0o755);
  const env = { ...process.env, PATH: `${dir}:${process.env.PATH ?? ""}` };
  return runCaptured("bash", ["-eo", "pipefail", "-c", script], {
    env,
    input: "",
    timeoutMs: 120_000,
  }).finally(() => rmSync(dir, { recursive: true, force: true }));
}

const spec = (extra: Partial<DeploymentSpec>): DeploymentSpec => ({
  source: "internal_docker",
  sourceRevisionConfig: { imageUri: "registry.example.com/agent:1" },
  ...extra,
});

describe("the install guide's Uninstall, run as written", () => {
  const scenarios = useScenarios();
  const cleanup: string[][] = [];
  afterAll(async () => {
    for (const args of cleanup.reverse()) await kubectl(args);
  });

  /** A scenario with a ServiceConnection `tenant` and a ClusterServiceConnection, both to its simulator. */
  async function withConnections(prefix: string): Promise<{ s: Scenario; clusterName: string }> {
    const s = await scenarios.start(prefix, { op: { clusterConnections: true } });
    const clusterName = `${prefix}-${s.namespace.split("-").at(-1) ?? "x"}`;
    await s.user.createTenantConnection(s.namespace, s.sim.url, TEST_API_KEY);
    await kubectlOk(["apply", "-f", "-"], {
      input: JSON.stringify({
        apiVersion: "dms.dev/v1alpha1",
        kind: "ClusterServiceConnection",
        metadata: { name: clusterName },
        spec: {
          baseUrl: s.sim.url,
          apiKeySecretRef: { name: "tenant", key: "api-key", namespace: s.namespace },
          namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": s.namespace } },
        },
      }),
    });
    cleanup.push([
      "patch",
      "dmscconn",
      clusterName,
      "--type",
      "merge",
      "-p",
      '{"metadata":{"finalizers":null}}',
    ]);
    cleanup.push(["delete", "dmscconn", clusterName, "--ignore-not-found", "--wait=false"]);
    for (const [kind, name, namespace] of [
      ["ServiceConnection", "tenant", s.namespace],
      ["ClusterServiceConnection", clusterName, undefined],
    ] as const)
      await s.user.waitForConnection(
        kind,
        name,
        namespace,
        (c) => (c?.metadata.finalizers ?? []).includes("dms.dev/connection-in-use"),
        "its finalizer",
      );
    return { s, clusterName };
  }

  const tenant = { connectionRef: { kind: "ServiceConnection", name: "tenant" } } as const;

  it("step 1, while the operator runs: every resource and connection goes, each as its policy says", async () => {
    const { s, clusterName } = await withConnections("uninstall");
    const rendered = parseAllDocuments(await kubectlOk(["kustomize", join(ROOT, "manifests", "crd")]))
      .map((d) => d.toJS() as PolicyManifest)
      .filter((o) => o.kind === "ValidatingAdmissionPolicy" || o.kind === "ValidatingAdmissionPolicyBinding")
      .filter((o) => o.metadata.name === "dms-operator-deletion-protection");
    const [policy, binding] = rendered;
    if (!policy || !binding)
      throw new Error("kubectl kustomize manifests/crd rendered no deletion protection policy");
    const name = `uninstall-${s.namespace.split("-").at(-1) ?? "x"}`;
    await kubectlOk(["apply", "-f", "-"], {
      input: JSON.stringify({
        apiVersion: "v1",
        kind: "List",
        items: policyForNamespace(policy, binding, name, s.namespace),
      }),
    });
    cleanup.push(["delete", "validatingadmissionpolicybinding", name, "--ignore-not-found"]);
    cleanup.push(["delete", "validatingadmissionpolicy", name, "--ignore-not-found"]);

    const ids: Record<string, string> = {};
    for (const [resource, extra] of [
      ["kept", tenant],
      ["deleted", { ...tenant, deletionPolicy: "Delete" }],
      ["protected", { ...tenant, deletionPolicy: "Delete", deletionProtection: true }],
      [
        "cluster-wide",
        { connectionRef: { kind: "ClusterServiceConnection", name: clusterName }, deletionPolicy: "Delete" },
      ],
    ] as const) {
      await s.user.create(s.namespace, resource, spec(extra));
      ids[resource] = (await s.user.waitReady(s.namespace, resource)).status?.deploymentId ?? "";
    }
    // The policy is in effect once the API server refuses the protected one's delete.
    await waitFor(
      async () =>
        (await kubectl(["delete", "dmsd", "protected", "-n", s.namespace, "--dry-run=server"])).code !== 0,
      { description: "the deletion protection policy in effect", timeoutMs: 30_000, intervalMs: 300 },
    );

    const [block = ""] = uninstallBlocks();
    const step1 = block.slice(0, block.indexOf("# 2."));
    expect(step1).toContain("kubectl delete dmsd --all --all-namespaces");
    const ran = await runScoped(step1, s.namespace, clusterName);
    expect(ran.code, `${ran.stdout}${ran.stderr}`).toBe(0);

    for (const kind of ["dmsd", "dmsconn"])
      expect(await kubectlOk(["get", kind, "-n", s.namespace, "-o", "name"]), kind).toBe("");
    expect((await kubectl(["get", "dmscconn", clusterName])).code).not.toBe(0);
    // Orphan leaves its deployment; Delete deleted theirs, the protected one's once cleared.
    expect(s.sim.store.get(ids.kept ?? "")?.status).toBe("READY");
    for (const resource of ["deleted", "protected", "cluster-wide"])
      expect(s.sim.store.get(ids[resource] ?? ""), resource).toBeUndefined();
  });

  it("once the operator has stopped: the finalizers it left go by hand, the deployments stay", async () => {
    const { s, clusterName } = await withConnections("uninstall-late");
    await s.user.create(s.namespace, "late", spec({ ...tenant, deletionPolicy: "Delete" }));
    const id = (await s.user.waitReady(s.namespace, "late")).status?.deploymentId ?? "";
    await s.op.stop();

    // What deleting the CRDs does to each object: marked deleted, each held by its finalizer.
    for (const args of [
      ["delete", "dmsd", "late", "-n", s.namespace],
      ["delete", "dmsconn", "tenant", "-n", s.namespace],
      ["delete", "dmscconn", clusterName],
    ])
      await kubectlOk([...args, "--wait=false"]);
    const late = await s.user.get(s.namespace, "late");
    expect(late?.metadata.deletionTimestamp).toBeDefined();
    expect(late?.metadata.finalizers).toEqual(["dms.dev/finalizer"]);

    const removal = uninstallBlocks()[1] ?? "";
    expect(removal, "the guide's finalizer removal").toContain("finalizers");
    const ran = await runScoped(removal, s.namespace, clusterName);
    expect(ran.code, `${ran.stdout}${ran.stderr}`).toBe(0);

    for (const kind of ["dmsd", "dmsconn"])
      expect(await kubectlOk(["get", kind, "-n", s.namespace, "-o", "name"]), kind).toBe("");
    expect((await kubectl(["get", "dmscconn", clusterName])).code).not.toBe(0);
    expect(s.sim.store.get(id)?.status).toBe("READY");
  });
});
