// `kubectl apply -k manifests/default` against a real API server: accepted (dry run and for real,
// and again unchanged, as a GitOps tool re-applies it), the operator pod meets the restricted Pod
// Security Standard its namespace enforces, and the ServiceAccount holds exactly the permissions
// the controller uses. The operator actually running with them is in operator-as-serviceaccount.test.ts.
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { freshNamespace, kubectl, kubectlOk, waitFor } from "../support/cluster.ts";
import { canI, documents, MANIFESTS } from "./install-support.ts";

const DEFAULT = join(MANIFESTS, "default");
const SA = { namespace: "dms-system", name: "dms-operator" };

/** What `kubectl apply -k manifests/default` must create, as kubectl names them. */
const INSTALLED = [
  "namespace/dms-system",
  "customresourcedefinition.apiextensions.k8s.io/deployments.dms.dev",
  "customresourcedefinition.apiextensions.k8s.io/serviceconnections.dms.dev",
  "customresourcedefinition.apiextensions.k8s.io/clusterserviceconnections.dms.dev",
  "validatingadmissionpolicy.admissionregistration.k8s.io/dms-operator-deletion-protection",
  "validatingadmissionpolicybinding.admissionregistration.k8s.io/dms-operator-deletion-protection",
  "serviceaccount/dms-operator",
  "role.rbac.authorization.k8s.io/dms-operator-leader-election",
  "role.rbac.authorization.k8s.io/dms-operator-install-key",
  "clusterrole.rbac.authorization.k8s.io/dms-operator",
  "clusterrole.rbac.authorization.k8s.io/dms-operator-edit",
  "clusterrole.rbac.authorization.k8s.io/dms-operator-view",
  "clusterrole.rbac.authorization.k8s.io/dms-operator-metrics-reader",
  "rolebinding.rbac.authorization.k8s.io/dms-operator-leader-election",
  "rolebinding.rbac.authorization.k8s.io/dms-operator-install-key",
  "clusterrolebinding.rbac.authorization.k8s.io/dms-operator",
  "deployment.apps/dms-operator",
  "flowschema.flowcontrol.apiserver.k8s.io/dms-operator-leader-election",
  "validatingadmissionpolicy.admissionregistration.k8s.io/dms-operator-export-configmaps",
  "validatingadmissionpolicybinding.admissionregistration.k8s.io/dms-operator-export-configmaps",
];

/**
 * kubectl's warnings, except the one this shared control plane causes: its global setup installed
 * the CRD server-side, so client-side `kubectl apply` adopts it (a fresh cluster prints nothing).
 */
const warnings = (stderr: string) =>
  stderr.split("\n").filter((line) => line !== "" && !line.includes("last-applied-configuration annotation"));

describe("kubectl apply -k manifests/default", () => {
  it("is accepted by a server-side dry run, in the order GitOps tools apply: Namespace and CRD first", async () => {
    // A dry run cannot create the namespace its other objects live in; Flux and Argo CD apply
    // Namespaces and CRDs before the rest for this reason, and so does this test.
    const rendered = documents(await kubectlOk(["kustomize", DEFAULT]));
    const definitions = rendered.filter(
      (o) => o.kind === "Namespace" || o.kind === "CustomResourceDefinition",
    );
    expect(definitions.map((o) => o.kind).sort()).toEqual([
      "CustomResourceDefinition",
      "CustomResourceDefinition",
      "CustomResourceDefinition",
      "Namespace",
    ]);
    const input = definitions.map((o) => JSON.stringify(o)).join("\n");
    expect((await kubectl(["apply", "--dry-run=server", "-f", "-"], { input })).code).toBe(0);
    await kubectlOk(["apply", "-f", "-"], { input });

    const result = await kubectl(["apply", "-k", DEFAULT, "--dry-run=server"]);
    expect(warnings(result.stderr)).toEqual([]);
    expect(result.code).toBe(0);
    for (const name of INSTALLED) expect(result.stdout).toContain(name);
  });

  it("installs everything, without Pod Security warnings, and a second apply changes nothing", async () => {
    const first = await kubectl(["apply", "-k", DEFAULT]);
    expect(warnings(first.stderr)).toEqual([]); // e.g. "Warning: would violate PodSecurity"
    expect(first.code).toBe(0);
    const again = await kubectlOk(["apply", "-k", DEFAULT]);
    const lines = again.trim().split("\n");
    expect(lines).toHaveLength(INSTALLED.length);
    for (const line of lines) expect(line).toMatch(/ unchanged$/);
  });
});

describe("the PodDisruptionBudget of components/pdb and components/sharding, applied again", () => {
  const PDB = join(MANIFESTS, "components", "pdb", "pdb.yaml");
  const version = async () =>
    (
      await kubectlOk([
        "get",
        "pdb",
        "dms-operator",
        "-n",
        "dms-system",
        "-o",
        "jsonpath={.metadata.resourceVersion}",
      ])
    ).trim();

  it("changes nothing, though client-side kubectl apply prints configured each time", async () => {
    await kubectlOk(["apply", "-k", DEFAULT]);
    await kubectlOk(["apply", "-n", "dms-system", "-f", PDB]);
    const before = await version();
    // Its selector is replaced whole by a strategic merge patch: kubectl's patch is never empty.
    expect(await kubectlOk(["apply", "-n", "dms-system", "-f", PDB])).toBe(
      "poddisruptionbudget.policy/dms-operator configured\n",
    );
    expect(await version()).toBe(before);
    expect((await kubectl(["diff", "-n", "dms-system", "-f", PDB])).stdout).toBe("");
    await kubectlOk(["apply", "--server-side", "-n", "dms-system", "-f", PDB]);
    const applied = await version();
    await kubectlOk(["apply", "--server-side", "-n", "dms-system", "-f", PDB]);
    expect(await version()).toBe(applied);
  });
});

describe("the operator pod", () => {
  // A Pod from the Deployment's template, created (dry run) in the namespace enforcing `restricted`.
  const podFrom = async (edit: (spec: Record<string, unknown>) => void = () => {}) => {
    const rendered = documents(await kubectlOk(["kustomize", DEFAULT]));
    const deployment = rendered.find((o) => o.kind === "Deployment") as {
      spec: { template: { spec: Record<string, unknown> } };
    };
    const spec = structuredClone(deployment.spec.template.spec);
    edit(spec);
    const pod = {
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name: "psa-check", namespace: "dms-system" },
      spec,
    };
    return kubectl(["create", "--dry-run=server", "-o", "name", "-f", "-"], { input: JSON.stringify(pod) });
  };

  beforeAll(async () => {
    await kubectlOk(["apply", "-k", DEFAULT]);
  });

  it("is admitted under the restricted Pod Security Standard of dms-system", async () => {
    const result = await podFrom();
    expect(result.stderr).toBe("");
    expect(result.stdout.trim()).toBe("pod/psa-check");
  });

  it("would be refused without its security context (so the check above can fail)", async () => {
    const result = await podFrom((spec) => {
      delete spec.securityContext;
    });
    expect(result.code).not.toBe(0);
    expect(result.stderr).toContain('violates PodSecurity "restricted');
  });
});

// Each row is one question to the authorizer, independent of the others: asked a few at a time.
describe.concurrent("the ServiceAccount dms-system/dms-operator", () => {
  beforeAll(async () => {
    await kubectlOk(["apply", "-k", DEFAULT]);
  });

  // Each line: the `kubectl auth can-i` arguments. -A asks about every namespace at once.
  const granted = [
    ["get", "deployments.dms.dev", "-A"],
    ["list", "deployments.dms.dev", "-A"],
    ["watch", "deployments.dms.dev", "-A"],
    ["patch", "deployments.dms.dev", "-A"], // finalizers (JSON patch) and the reconcile annotation
    ["patch", "deployments.dms.dev", "--subresource=status", "-A"], // server-side apply of status
    ["update", "deployments.dms.dev", "--subresource=finalizers", "-A"],
    // Connections, the same way: watched, finalizer patched, status applied.
    ...["serviceconnections.dms.dev", "clusterserviceconnections.dms.dev"].flatMap((resource) => [
      ["get", resource, "-A"],
      ["list", resource, "-A"],
      ["watch", resource, "-A"],
      ["patch", resource, "-A"],
      ["patch", resource, "--subresource=status", "-A"],
      ["update", resource, "--subresource=finalizers", "-A"],
    ]),
    ["get", "secrets", "-A"], // values named by spec.secrets[].valueFrom
    ["list", "secrets", "-A"], // the metadata-only Secret watch
    ["watch", "secrets", "-A"],
    // Namespace labels, for namespace selectors (a metadata-only list and watch).
    ["list", "namespaces"],
    ["watch", "namespaces"],
    ["create", "events.events.k8s.io", "-n", "some-team"],
    ["patch", "events.events.k8s.io", "-n", "some-team"], // event series
    ["get", "leases.coordination.k8s.io", "-n", "dms-system"],
    ["create", "leases.coordination.k8s.io", "-n", "dms-system"],
    ["update", "leases.coordination.k8s.io", "-n", "dms-system"],
    // The install key: read, and created at the first start (create cannot be narrowed by name).
    ["get", "secrets/dms-operator-install-key", "-n", "dms-system"],
    ["create", "secrets", "-n", "dms-system"],
    // The reviews of each /metrics scrape: its bearer token, then its access to /metrics.
    ["create", "tokenreviews.authentication.k8s.io"],
    ["create", "subjectaccessreviews.authorization.k8s.io"],
    // spec.export's ConfigMaps: the label-selected watch, a read, a create, a replace, a delete.
    ...["get", "list", "watch", "create", "update", "delete"].map((verb) => [verb, "configmaps", "-A"]),
  ];
  const refused = [
    ["create", "deployments.dms.dev", "-n", "some-team"], // users create resources, never the operator
    ["update", "deployments.dms.dev", "-n", "some-team"],
    ["delete", "deployments.dms.dev", "-n", "some-team"],
    ["deletecollection", "deployments.dms.dev", "-n", "some-team"],
    ["get", "deployments.dms.dev", "--subresource=status", "-n", "some-team"], // status is applied, never read
    ["update", "deployments.dms.dev", "--subresource=status", "-n", "some-team"],
    ...["serviceconnections.dms.dev", "clusterserviceconnections.dms.dev"].flatMap((resource) => [
      ["create", resource, "-A"], // users create connections, never the operator
      ["update", resource, "-A"],
      ["delete", resource, "-A"],
      ["get", resource, "--subresource=status", "-A"],
      ["update", resource, "--subresource=status", "-A"],
    ]),
    ["create", "secrets", "-n", "some-team"], // Secrets are read-only
    ["update", "secrets", "-n", "some-team"],
    ["patch", "secrets", "-n", "some-team"],
    ["delete", "secrets", "-n", "some-team"],
    ["update", "secrets/dms-operator-install-key", "-n", "dms-system"], // the key is never rewritten
    ["delete", "secrets/dms-operator-install-key", "-n", "dms-system"],
    ["get", "leases.coordination.k8s.io", "-n", "kube-system"], // Leases only in its own namespace
    ["update", "leases.coordination.k8s.io", "-n", "some-team"],
    ["create", "leases.coordination.k8s.io", "-n", "default"],
    ["delete", "leases.coordination.k8s.io", "-n", "dms-system"],
    ["list", "leases.coordination.k8s.io", "-n", "dms-system"],
    ["create", "events", "-n", "some-team"], // core/v1 Events: it writes events.k8s.io only
    ["delete", "events.events.k8s.io", "-n", "some-team"],
    ["patch", "configmaps", "-n", "some-team"], // replaced at the version read, never patched
    ["deletecollection", "configmaps", "-n", "some-team"],
    ["list", "pods", "-A"],
    ["get", "deployments.apps", "-n", "dms-system"],
    ["get", "namespaces"], // listed and watched, never read alone
    ["patch", "namespaces"], // labelling a namespace is what decides access: never the operator's
    ["update", "namespaces"],
    ["create", "namespaces"],
    ["delete", "namespaces"],
    ["create", "customresourcedefinitions.apiextensions.k8s.io"],
    ["create", "clusterrolebindings.rbac.authorization.k8s.io"],
    ["escalate", "clusterroles.rbac.authorization.k8s.io"],
    ["impersonate", "serviceaccounts", "-A"],
    ["create", "serviceaccounts", "--subresource=token", "-A"], // it reviews tokens, never mints them
    ["get", "/metrics"], // reading the metrics takes dms-operator-metrics-reader
    ["*", "*", "-A"],
  ];

  const named = (rows: string[][]) => rows.map((args) => [args.join(" "), args] as const);

  it.for(named(granted))("may %s", async ([, args], { expect }) => {
    expect(await canI(SA, [...args])).toBe(true);
  });

  it.for(named(refused))("may not %s", async ([, args], { expect }) => {
    expect(await canI(SA, [...args])).toBe(false);
  });
});

describe("the export ConfigMap policy: the operator writes only the ConfigMaps of spec.export", () => {
  const asOperator = ["--as", `system:serviceaccount:${SA.namespace}:${SA.name}`];
  /** A ConfigMap manifest: labelled for the export or not, controlled by `owner` or by nothing. */
  const configMap = (namespace: string, name: string, labelled: boolean, owner?: { apiVersion: string }) =>
    JSON.stringify({
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: {
        name,
        namespace,
        ...(labelled ? { labels: { "dms.dev/export": "true" } } : {}),
        ...(owner
          ? {
              ownerReferences: [
                {
                  ...owner,
                  kind: "Deployment",
                  name: "agent",
                  uid: "0d6c1a8e-5b1f-4f7e-9c1a-2b3c4d5e6f70",
                  controller: true,
                },
              ],
            }
          : {}),
      },
      data: { url: "https://agent.example" },
    });
  const DMS = { apiVersion: "dms.dev/v1alpha1" };

  it("refuses the operator's ServiceAccount an unlabelled or foreign ConfigMap, allows the export's own", async () => {
    await kubectlOk(["apply", "-k", DEFAULT]);
    const namespace = await freshNamespace("export-policy");
    const create = (manifest: string) => kubectl(["create", "-f", "-", ...asOperator], { input: manifest });
    // The API server loads a new policy within a moment: wait for the refusal itself.
    const refused = await waitFor(
      async () => {
        const result = await create(configMap(namespace, "plain", false));
        return result.code !== 0 && result.stderr.includes("dms-operator-export-configmaps")
          ? result
          : undefined;
      },
      { description: "the policy refusing an unlabelled ConfigMap" },
    );
    expect(refused.stderr).toContain("the operator writes only the ConfigMaps of spec.export");
    // Labelled, but controlled by an apps/v1 Deployment, or by nothing: refused as well.
    expect((await create(configMap(namespace, "apps", true, { apiVersion: "apps/v1" }))).code).not.toBe(0);
    expect((await create(configMap(namespace, "orphan", true))).code).not.toBe(0);
    // A ConfigMap someone else owns (unlabelled): the operator may neither update nor delete it.
    await kubectlOk(["create", "-f", "-"], { input: configMap(namespace, "theirs", false) });
    const deleted = await kubectl(["delete", "configmap", "theirs", "-n", namespace, ...asOperator]);
    expect(deleted.code).not.toBe(0);
    expect(deleted.stderr).toContain("updates or deletes only ConfigMaps labelled");
    // The export's own: created and deleted.
    await kubectlOk(["create", "-f", "-", ...asOperator], {
      input: configMap(namespace, "endpoint", true, DMS),
    });
    await kubectlOk(["delete", "configmap", "endpoint", "-n", namespace, ...asOperator]);
    // Everyone else is not matched: the admin writes an unlabelled ConfigMap freely.
    await kubectlOk(["delete", "configmap", "theirs", "-n", namespace]);
  });
});

describe("kubectl apply -k manifests/namespaced", () => {
  it("is accepted by a server-side dry run into the namespace it names", async () => {
    // The overlay installs into an existing namespace (dms-apps); a team creates it, not the overlay.
    const exists = await kubectl(["get", "namespace", "dms-apps", "-o", "name"]);
    if (exists.code !== 0) await kubectlOk(["create", "namespace", "dms-apps"]);
    const result = await kubectl(["apply", "-k", join(MANIFESTS, "namespaced"), "--dry-run=server"]);
    expect(result.stderr).toBe("");
    expect(result.code).toBe(0);
    for (const name of [
      "serviceaccount/dms-operator",
      "role.rbac.authorization.k8s.io/dms-operator",
      "rolebinding.rbac.authorization.k8s.io/dms-operator",
      "deployment.apps/dms-operator",
    ])
      expect(result.stdout).toContain(name);
    expect(result.stdout).not.toMatch(/clusterrole|customresourcedefinition|namespace\//);
  });
});
