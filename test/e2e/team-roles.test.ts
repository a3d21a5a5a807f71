// The roles a cluster admin binds for teams (manifests/rbac/team_roles.yaml): bound in a team's
// namespace, `dms-operator-edit` lets a member manage that namespace's Deployment resources and
// ServiceConnections, and nothing that would let them forge what the operator records (status)
// or reach another team's tenant (ClusterServiceConnections, another namespace); `dms-operator-view`
// lets them read only. Asked of the real API server's RBAC with `kubectl auth can-i --as`. (The
// aggregation into `edit`, `admin` and `view` is done by the controller manager, which this
// control plane does not run: the labels are checked instead.)
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { freshNamespace, kubectl, kubectlOk } from "../support/cluster.ts";
import { documents, MANIFESTS } from "./install-support.ts";

const ROLES = join(MANIFESTS, "rbac", "team_roles.yaml");

/** `kubectl auth can-i` as `user`: true for yes, false for no, an error for a broken question. */
async function userCan(user: string, args: string[]): Promise<boolean> {
  const result = await kubectl(["auth", "can-i", `--as=${user}`, ...args]);
  const answer = result.stdout.trim();
  if (answer !== "yes" && answer !== "no")
    throw new Error(`kubectl auth can-i ${args.join(" ")}: ${result.stderr.trim() || answer}`);
  return answer === "yes";
}

describe("the team roles dms-operator-edit and dms-operator-view", () => {
  let team: string;
  let other: string;
  const editor = `editor-${Math.random().toString(36).slice(2, 8)}`;
  const viewer = `viewer-${Math.random().toString(36).slice(2, 8)}`;

  beforeAll(async () => {
    await kubectlOk(["apply", "-f", ROLES]);
    team = await freshNamespace("team-roles");
    other = await freshNamespace("team-roles-other");
    await kubectlOk([
      "create",
      "rolebinding",
      "editors",
      "--clusterrole=dms-operator-edit",
      `--user=${editor}`,
      "-n",
      team,
    ]);
    await kubectlOk([
      "create",
      "rolebinding",
      "viewers",
      "--clusterrole=dms-operator-view",
      `--user=${viewer}`,
      "-n",
      team,
    ]);
  });

  it("are labelled to aggregate into edit and admin (edit), and view (view)", async () => {
    const roles = documents(await kubectlOk(["get", "-f", ROLES, "-o", "yaml"]));
    const items = (roles[0]?.items ?? []) as {
      metadata: { name: string; labels?: Record<string, string> };
    }[];
    const labels = Object.fromEntries(items.map((r) => [r.metadata.name, r.metadata.labels ?? {}]));
    expect(labels["dms-operator-edit"]).toMatchObject({
      "rbac.authorization.k8s.io/aggregate-to-edit": "true",
      "rbac.authorization.k8s.io/aggregate-to-admin": "true",
    });
    expect(labels["dms-operator-edit"]).not.toHaveProperty(["rbac.authorization.k8s.io/aggregate-to-view"]);
    expect(labels["dms-operator-view"]).toMatchObject({
      "rbac.authorization.k8s.io/aggregate-to-view": "true",
    });
  });

  const editorMay = (ns: () => string) =>
    ["deployments.dms.dev", "serviceconnections.dms.dev"].flatMap((resource) =>
      ["create", "update", "patch", "delete", "get", "list", "watch"].map(
        (verb) => [verb, resource, ns] as const,
      ),
    );

  it("edit: a member manages the namespace's Deployment resources and ServiceConnections", async () => {
    for (const [verb, resource, ns] of editorMay(() => team))
      expect(await userCan(editor, [verb, resource, "-n", ns()]), `${verb} ${resource}`).toBe(true);
  });

  it("edit: never status (a forged status.deploymentId), ClusterServiceConnections, or another namespace", async () => {
    const refused: string[][] = [
      ...["deployments.dms.dev", "serviceconnections.dms.dev"].flatMap((resource) =>
        ["update", "patch"].map((verb) => [verb, resource, "--subresource=status", "-n", team]),
      ),
      ["update", "deployments.dms.dev", "--subresource=finalizers", "-n", team],
      ...["create", "update", "patch", "delete"].map((verb) => [verb, "clusterserviceconnections.dms.dev"]),
      ["create", "deployments.dms.dev", "-n", other],
      ["get", "serviceconnections.dms.dev", "-n", other],
      ["patch", `namespaces/${team}`], // a namespace's labels decide which connections it may use
    ];
    for (const args of refused) expect(await userCan(editor, args), args.join(" ")).toBe(false);
  });

  it("view: a member reads the namespaced kinds and writes nothing", async () => {
    for (const resource of ["deployments.dms.dev", "serviceconnections.dms.dev"]) {
      for (const verb of ["get", "list", "watch"])
        expect(await userCan(viewer, [verb, resource, "-n", team]), `${verb} ${resource}`).toBe(true);
      for (const verb of ["create", "update", "patch", "delete"])
        expect(await userCan(viewer, [verb, resource, "-n", team]), `${verb} ${resource}`).toBe(false);
    }
    expect(await userCan(viewer, ["get", "deployments.dms.dev", "-n", other])).toBe(false);
  });
});
