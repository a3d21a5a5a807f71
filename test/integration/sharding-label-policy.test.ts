// The sharding component's admission policy on the real API server: someone who may edit a
// Deployment resource (here the admin, who is not the operator) can neither set, change nor
// remove the shard labels; the operator's ServiceAccount can; other labels are untouched. The
// policy is applied as the component ships it, bound to this test's namespace only.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { parseAllDocuments } from "yaml";
import { freshNamespace, kubectl, kubectlOk, waitFor } from "../support/cluster.ts";

const POLICY = join(
  import.meta.dirname,
  "..",
  "..",
  "manifests",
  "components",
  "sharding",
  "shard-label-policy.yaml",
);
const OPERATOR = "system:serviceaccount:dms-system:dms-operator";

/** The fields of the policy and its binding this test renames and narrows. */
interface Manifest {
  metadata: { name: string };
  spec: { policyName?: string; matchResources?: unknown };
}

describe("sharding: the shard label policy", () => {
  const cleanup: string[][] = [];
  afterAll(async () => {
    for (const args of cleanup.reverse()) await kubectl(args);
  });

  it("lets only the operator write shard.dms.dev/owner and shard.dms.dev/drain", async () => {
    const namespace = await freshNamespace("shard-policy");
    const suffix = namespace.split("-").at(-1) ?? "x";
    const [policy, binding] = parseAllDocuments(readFileSync(POLICY, "utf8")).map(
      (d) => d.toJS() as Manifest,
    );
    if (!policy || !binding) throw new Error(`${POLICY}: a policy and its binding`);
    policy.metadata.name = `${policy.metadata.name}-${suffix}`;
    binding.metadata.name = `${binding.metadata.name}-${suffix}`;
    binding.spec.policyName = policy.metadata.name;
    binding.spec.matchResources = {
      namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": namespace } },
    };
    await kubectlOk(["apply", "-f", "-"], {
      input: JSON.stringify({ apiVersion: "v1", kind: "List", items: [policy, binding] }),
    });
    cleanup.push(["delete", "validatingadmissionpolicybinding", binding.metadata.name, "--ignore-not-found"]);
    cleanup.push(["delete", "validatingadmissionpolicy", policy.metadata.name, "--ignore-not-found"]);

    const resource = (name: string, labels: Record<string, string>) =>
      JSON.stringify({
        apiVersion: "dms.dev/v1alpha1",
        kind: "Deployment",
        metadata: { name, namespace, labels },
        spec: { source: "internal_docker", sourceRevisionConfig: { imageUri: "registry.example.com/a:1" } },
      });
    // The policy takes effect once the API server has loaded it.
    await waitFor(
      async () => {
        const r = await kubectl(["create", "-f", "-"], {
          input: resource("probe", { "shard.dms.dev/owner": "replica-a" }),
        });
        if (r.code === 0)
          await kubectl(["-n", namespace, "delete", "deployments.dms.dev", "probe", "--wait=false"]);
        return r.code !== 0 && /written by the operator only/.test(r.stderr) ? true : undefined;
      },
      {
        timeoutMs: 30_000,
        intervalMs: 500,
        description: "the policy refusing a create with the owner label",
      },
    );
    // Without the labels, a tenant's create and its other labels go through.
    await kubectlOk(["create", "-f", "-"], { input: resource("app", { team: "a" }) });
    const label = (args: string[], as?: string) =>
      kubectl([
        "-n",
        namespace,
        "label",
        "deployments.dms.dev",
        "app",
        ...args,
        ...(as ? [`--as=${as}`, "--as-group=system:masters"] : []),
      ]);
    for (const args of [["shard.dms.dev/owner=replica-a"], ["shard.dms.dev/drain=true"]]) {
      const r = await label(args);
      expect(r.code, args.join(" ")).not.toBe(0);
      expect(r.stderr).toContain("written by the operator only");
    }
    expect((await label(["team=b", "--overwrite"])).code).toBe(0);
    // The operator sets, changes and removes them.
    expect((await label(["shard.dms.dev/owner=replica-a"], OPERATOR)).code).toBe(0);
    expect((await label(["shard.dms.dev/owner=replica-b", "--overwrite"], OPERATOR)).code).toBe(0);
    // Nobody else changes or removes them once set.
    for (const args of [["shard.dms.dev/owner=replica-c", "--overwrite"], ["shard.dms.dev/owner-"]]) {
      const r = await label(args);
      expect(r.code, args.join(" ")).not.toBe(0);
    }
    expect((await label(["shard.dms.dev/owner-"], OPERATOR)).code).toBe(0);
    const labels = JSON.parse(
      await kubectlOk(["-n", namespace, "get", "deployments.dms.dev", "app", "-o", "json"]),
    ) as {
      metadata: { labels: Record<string, string> };
    };
    expect(labels.metadata.labels).toEqual({ team: "b" });
  });
});
