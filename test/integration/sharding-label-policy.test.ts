// The sharding component's admission policy on the real API server, as `kubectl kustomize`
// renders it for an overlay that moves the operator to another namespace (this test's) and
// prefixes its names: someone who may edit a Deployment resource (here the admin, who is not the
// operator) can neither set, change nor remove the shard labels; the operator's ServiceAccount
// in that namespace can, the same name in another namespace cannot; other labels are untouched.
// The policy is bound to this test's namespace only. Then a `--sharded` replica's start: it
// exits naming the fix while the policy it requires is missing, and joins the ring once it exists.
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { policyForNamespace } from "../support/admission-policy.ts";
import { freshNamespace, kubectl, kubectlOk, waitFor } from "../support/cluster.ts";
import { renderOverlay } from "../support/overlay.ts";
import { startSmallRing } from "../support/sharded-replicas.ts";

/** The fields of the rendered objects this test reads, renames and narrows. */
interface Manifest {
  kind: string;
  metadata: { name: string; namespace?: string };
  spec?: { policyName?: string; matchResources?: unknown; paramRef?: { name: string; namespace: string } };
  subjects?: { name: string; namespace?: string }[];
  rules?: { resourceNames?: string[] }[];
}

describe("sharding: the shard label policy", () => {
  const cleanup: string[][] = [];
  let work = "";
  afterAll(async () => {
    for (const args of cleanup.reverse()) await kubectl(args);
    if (work) await rm(work, { recursive: true, force: true });
  });

  // Its own timeout: longer than its waits together, so a wait that times out names what it missed.
  it("lets only the operator write shard.dms.dev/owner and shard.dms.dev/drain, in the namespace an overlay gives it, and a sharded replica starts only once it exists", {
    timeout: 240_000,
  }, async () => {
    const namespace = await freshNamespace("shard-policy");
    const suffix = namespace.split("-").at(-1) ?? "x";
    work = await mkdtemp(join(tmpdir(), "shard-policy-"));
    const { find } = await renderOverlay<Manifest>(work, {
      namespace,
      namePrefix: "team-",
      components: ["sharding"],
    });
    const policy = find("ValidatingAdmissionPolicy", "team-dms-operator-shard-labels");
    const binding = find("ValidatingAdmissionPolicyBinding", "team-dms-operator-shard-labels");
    const account = find("ServiceAccount", "team-dms-operator");
    // The overlay's namespace and prefix reach every reference to the operator and the policy.
    expect(binding.spec?.paramRef).toEqual({
      name: "team-dms-operator",
      namespace,
      parameterNotFoundAction: "Deny",
    });
    expect(binding.spec?.policyName).toBe(policy.metadata.name);
    expect(account.metadata.namespace).toBe(namespace);
    expect(find("ClusterRoleBinding", "team-dms-operator-sharding").subjects).toEqual([
      { kind: "ServiceAccount", name: "team-dms-operator", namespace },
    ]);
    expect(find("ClusterRole", "team-dms-operator-sharding").rules?.[0]?.resourceNames).toEqual([
      policy.metadata.name,
    ]);
    const operator = `system:serviceaccount:${namespace}:team-dms-operator`;

    // Named for this test alone, bound to its namespace alone: the API server is shared.
    const name = `${policy.metadata.name}-${suffix}`;
    const objects = [{ ...account }, ...policyForNamespace(policy, binding, name, namespace)];
    await kubectlOk(["apply", "-f", "-"], {
      input: JSON.stringify({ apiVersion: "v1", kind: "List", items: objects }),
    });
    cleanup.push(["delete", "validatingadmissionpolicybinding", name, "--ignore-not-found"]);
    cleanup.push(["delete", "validatingadmissionpolicy", name, "--ignore-not-found"]);

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
    // The same ServiceAccount name in another namespace is not the operator.
    const elsewhere = await label(
      ["shard.dms.dev/owner=replica-a"],
      "system:serviceaccount:dms-system:team-dms-operator",
    );
    expect(elsewhere.code).not.toBe(0);
    expect(elsewhere.stderr).toContain("written by the operator only");
    expect((await label(["shard.dms.dev/owner=replica-a"], operator)).code).toBe(0);
    expect((await label(["shard.dms.dev/owner=replica-b", "--overwrite"], operator)).code).toBe(0);
    // Nobody else changes or removes them once set.
    for (const args of [["shard.dms.dev/owner=replica-c", "--overwrite"], ["shard.dms.dev/owner-"]]) {
      const r = await label(args);
      expect(r.code, args.join(" ")).not.toBe(0);
    }
    expect((await label(["shard.dms.dev/owner-"], operator)).code).toBe(0);
    const labels = JSON.parse(
      await kubectlOk(["-n", namespace, "get", "deployments.dms.dev", "app", "-o", "json"]),
    ) as {
      metadata: { labels: Record<string, string> };
    };
    expect(labels.metadata.labels).toEqual({ team: "b" });

    // A sharded replica requiring a policy that does not exist exits, naming the fix.
    const { ring, close } = await startSmallRing({
      namespace,
      ring: "dms-shard-policy",
      prefix: "policy",
      work,
    });
    try {
      const refused = ring.start([
        "--shard-label-policy=required",
        `--shard-label-policy-name=${name}-missing`,
      ]);
      await waitFor(() => (refused.process.running ? undefined : true), {
        timeoutMs: 60_000,
        intervalMs: 200,
        description: "the replica without its policy exiting",
      });
      expect(refused.process.logTail(50)).toMatch(/must exist.*--shard-label-policy=unenforced/);
      const leases = async () =>
        JSON.parse(
          await kubectlOk([
            "-n",
            namespace,
            "get",
            "leases",
            "-l",
            "sharding.dms.dev/ring=dms-shard-policy",
            "-o",
            "json",
          ]),
        ) as { items: { metadata: { name: string } }[] };
      expect((await leases()).items).toEqual([]);
      // A binding that narrows the policy to some objects, or whose paramRef lets a missing
      // ServiceAccount through, is refused as well, naming what is wrong.
      const variants = [
        {
          suffix: "narrow",
          spec: {
            matchResources: {
              namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": namespace } },
              objectSelector: { matchLabels: { audited: "true" } },
            },
          },
          refusal: /matchResources\.objectSelector must select every object/,
        },
        {
          suffix: "lenient",
          spec: { paramRef: { ...binding.spec?.paramRef, parameterNotFoundAction: "Allow" } },
          refusal: /paramRef\.parameterNotFoundAction must be Deny/,
        },
      ];
      for (const variant of variants) {
        const other = `${name}-${variant.suffix}`;
        await kubectlOk(["apply", "-f", "-"], {
          input: JSON.stringify({
            apiVersion: "v1",
            kind: "List",
            items: [
              { ...policy, metadata: { name: other } },
              {
                ...binding,
                metadata: { name: other },
                spec: { ...objects[2]?.spec, policyName: other, ...variant.spec },
              },
            ],
          }),
        });
        cleanup.push(["delete", "validatingadmissionpolicybinding", other, "--ignore-not-found"]);
        cleanup.push(["delete", "validatingadmissionpolicy", other, "--ignore-not-found"]);
        const narrowed = ring.start(["--shard-label-policy=required", `--shard-label-policy-name=${other}`]);
        await waitFor(() => (narrowed.process.running ? undefined : true), {
          timeoutMs: 60_000,
          intervalMs: 200,
          description: `the replica refusing the ${variant.suffix} binding exiting`,
        });
        expect(narrowed.process.logTail(50)).toMatch(variant.refusal);
        expect((await leases()).items).toEqual([]);
      }
      // With the policy in place it joins the ring (its Lease).
      const joined = ring.start(["--shard-label-policy=required", `--shard-label-policy-name=${name}`]);
      await waitFor(
        async () => ((await leases()).items.some((l) => l.metadata.name === joined.name) ? true : undefined),
        { timeoutMs: 60_000, intervalMs: 500, description: "the replica's Lease once its policy exists" },
      );
      expect(joined.process.running).toBe(true);
    } finally {
      await close();
    }
  });
});
