// spec.deletionProtection on the real API server, through the ValidatingAdmissionPolicy shipped
// with the CRDs (manifests/crd, as `kubectl kustomize` renders it): the DELETE of a resource with
// `deletionProtection: true` is refused with a message naming the field and the command that
// clears it; a resource without the field, and one whose field was cleared with that very command,
// are deleted. The deletes of `kubectl apply --force` (a refused change, recreated) and of a
// namespace's deletion (the collection's) are refused alike. The policy is named for this test
// and bound to its namespace alone: the API server is shared with the other test files.
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { parseAllDocuments } from "yaml";
import { type PolicyManifest, policyForNamespace } from "../support/admission-policy.ts";
import { freshNamespace, kubectl, kubectlOk, waitFor } from "../support/cluster.ts";

const MANIFESTS = join(import.meta.dirname, "..", "..", "manifests");

describe("spec.deletionProtection: the deletion protection policy", () => {
  const cleanup: string[][] = [];
  afterAll(async () => {
    for (const args of cleanup.reverse()) await kubectl(args);
  });

  it("refuses the delete of a protected resource naming the field to clear, and lets an unprotected or cleared one go", async () => {
    const namespace = await freshNamespace("deletion-protection");
    const rendered = parseAllDocuments(await kubectlOk(["kustomize", join(MANIFESTS, "crd")]))
      .map((d) => d.toJS() as PolicyManifest)
      .filter((o) => o.kind.startsWith("ValidatingAdmissionPolicy"));
    expect(rendered.map((o) => [o.kind, o.metadata.name])).toEqual([
      ["ValidatingAdmissionPolicy", "dms-operator-deletion-protection"],
      ["ValidatingAdmissionPolicyBinding", "dms-operator-deletion-protection"],
    ]);
    const [policy, binding] = rendered;
    if (!policy || !binding) throw new Error("kubectl kustomize manifests/crd rendered no policy");
    expect(binding.spec).toEqual({ policyName: policy.metadata.name, validationActions: ["Deny"] });
    const name = `${policy.metadata.name}-${namespace.split("-").at(-1) ?? "x"}`;
    const objects = policyForNamespace(policy, binding, name, namespace);
    await kubectlOk(["apply", "-f", "-"], {
      input: JSON.stringify({ apiVersion: "v1", kind: "List", items: objects }),
    });
    cleanup.push(["delete", "validatingadmissionpolicybinding", name, "--ignore-not-found"]);
    cleanup.push(["delete", "validatingadmissionpolicy", name, "--ignore-not-found"]);

    const create = (resource: string, spec: Record<string, unknown>) =>
      kubectl(["create", "-n", namespace, "-f", "-"], {
        input: JSON.stringify({
          apiVersion: "dms.dev/v1alpha1",
          kind: "Deployment",
          metadata: { name: resource },
          spec: { source: "internal_docker", ...spec },
        }),
      });
    const remove = (resource: string) =>
      kubectl(["delete", "dmsd", resource, "-n", namespace, "--wait=false"]);
    const exists = async (resource: string) =>
      (await kubectl(["get", "dmsd", resource, "-n", namespace, "-o", "name"])).code === 0;
    const clear = (resource: string) =>
      kubectlOk([
        "patch",
        "dmsd",
        resource,
        "-n",
        namespace,
        "--type",
        "merge",
        "-p",
        '{"spec":{"deletionProtection":false}}',
      ]);
    cleanup.push(["delete", "dmsd", "--all", "-n", namespace, "--wait=false"]);

    // The policy takes effect once the API server has loaded it: until then a protected probe is
    // deleted (and made again).
    const refusal = await waitFor(
      async () => {
        await create("probe", { deletionProtection: true });
        const result = await remove("probe");
        return result.code !== 0 ? result.stderr : undefined;
      },
      {
        timeoutMs: 30_000,
        intervalMs: 500,
        description: "the policy refusing the delete of a protected probe",
      },
    );
    // This test's copy, or a copy another file's install left cluster-wide (the API server is
    // shared, and policies are cluster-scoped: `kubectl apply -k`'s, a Helm release's prefixed
    // with its name): each refuses with the same rule and message.
    expect(refusal).toMatch(
      new RegExp(`ValidatingAdmissionPolicy '[a-z0-9.-]*${policy.metadata.name}[a-z0-9-]*'`),
    );
    expect(refusal).toContain("has spec.deletionProtection: true; set it to false first");
    await clear("probe");

    for (const [resource, spec] of [
      ["protected", { deletionProtection: true }],
      ["unprotected", {}],
      ["explicit-false", { deletionProtection: false }],
      ["cleared", { deletionProtection: true }],
    ] as const)
      expect((await create(resource, spec)).code, resource).toBe(0);

    const refused = await remove("protected");
    expect(refused.code).not.toBe(0);
    // The message names the resource, the field and the command that clears it, with the namespace.
    expect(refused.stderr).toContain(
      `deployments.dms.dev protected has spec.deletionProtection: true; set it to false first, then delete: kubectl patch dmsd protected -n ${namespace} --type merge -p '{"spec":{"deletionProtection":false}}'`,
    );
    expect(await exists("protected")).toBe(true);

    for (const resource of ["unprotected", "explicit-false", "probe"]) {
      expect((await remove(resource)).code, resource).toBe(0);
      expect(await exists(resource), resource).toBe(false);
    }

    // Cleared with the command the message gives, it is deleted.
    expect((await remove("cleared")).code).not.toBe(0);
    await clear("cleared");
    expect((await remove("cleared")).code).toBe(0);
    expect(await exists("cleared")).toBe(false);

    // A change the CRD refuses (spec.source) applied with --force (as Flux's force: true, or
    // Argo CD's Replace=true,Force=true): a delete and a create, which under deletionPolicy Delete
    // would delete the service's deployment. The policy refuses the delete of a protected one.
    const forced = (resource: string) =>
      kubectl(["apply", "--force", "-n", namespace, "-f", "-"], {
        input: JSON.stringify({
          apiVersion: "dms.dev/v1alpha1",
          kind: "Deployment",
          metadata: { name: resource },
          spec: { source: "external_docker", deletionProtection: resource === "forced-protected" },
        }),
      });
    const uid = async (resource: string) =>
      kubectlOk(["get", "dmsd", resource, "-n", namespace, "-o", "jsonpath={.metadata.uid}"]);
    expect((await create("forced-protected", { deletionProtection: true })).code).toBe(0);
    expect((await create("forced-unprotected", {})).code).toBe(0);
    const before = { protected: await uid("forced-protected"), unprotected: await uid("forced-unprotected") };
    const refusedForce = await forced("forced-protected");
    expect(refusedForce.code).not.toBe(0);
    expect(refusedForce.stderr).toContain("has spec.deletionProtection: true; set it to false first");
    expect(await uid("forced-protected")).toBe(before.protected);
    expect((await forced("forced-unprotected")).code).toBe(0);
    expect(await uid("forced-unprotected")).not.toBe(before.unprotected);
    await clear("forced-protected");
    for (const resource of ["forced-protected", "forced-unprotected"])
      expect((await remove(resource)).code, resource).toBe(0);

    // A namespace's deletion: the namespace controller deletes each resource type's collection
    // (DELETE on the collection) and puts the error it gets in the namespace's condition
    // NamespaceDeletionContentFailure, retrying until it succeeds. The policy refuses the
    // protected resources there too, with the same message; once they are cleared, it goes through.
    for (const [resource, spec] of [
      ["also-protected", { deletionProtection: true }],
      ["unprotected-in-collection", {}],
    ] as const)
      expect((await create(resource, spec)).code, resource).toBe(0);
    const collection = `/apis/dms.dev/v1alpha1/namespaces/${namespace}/deployments`;
    const refusedCollection = await kubectl(["delete", "--raw", collection]);
    expect(refusedCollection.code).not.toBe(0);
    expect(refusedCollection.stderr).toMatch(
      new RegExp(
        `deployments\\.dms\\.dev (also-)?protected has spec\\.deletionProtection: true; set it to false first, then delete: kubectl patch dmsd (also-)?protected -n ${namespace} `,
      ),
    );
    expect(await exists("protected")).toBe(true);
    expect(await exists("also-protected")).toBe(true);
    await clear("also-protected");
    await clear("protected");
    // An update is not a delete: the protected resource could still change, and be cleared.
    expect((await kubectl(["delete", "--raw", collection])).code).toBe(0);
    for (const resource of ["protected", "also-protected", "unprotected-in-collection"])
      expect(await exists(resource), resource).toBe(false);
  });
});
