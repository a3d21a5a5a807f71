// A release's manifests, as `npm run release:manifests` renders them, applied to the real API
// server (server-side dry run: every object is validated and admitted by the server, nothing
// changes), and the optional components a platform team adds to manifests/default.
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { parse, stringify } from "yaml";
import { parseImage, renderRelease } from "../../scripts/release-manifests.ts";
import { CRDS } from "../../src/crd/render.ts";
import { freshNamespace, kubectl, kubectlOk } from "../support/cluster.ts";
import { LAST_RELEASE } from "../support/release.ts";
import { documents, MANIFESTS } from "./install-support.ts";

const ROOT = join(MANIFESTS, "..");
const DIGEST = `sha256:${"0123456789abcdef".repeat(4)}`;
const IMAGE = `ghcr.io/acme/dms-operator@${DIGEST}`;

type Obj = Record<string, unknown> & { kind: string; metadata: { name: string; namespace?: string } };
const objects = (text: string) => documents(text) as Obj[];
const operatorImage = (objs: Obj[]) => {
  const d = objs.find((o) => o.kind === "Deployment") as
    | { spec: { template: { spec: { containers: { name: string; image: string }[] } } } }
    | undefined;
  return d?.spec.template.spec.containers.find((c) => c.name === "operator")?.image;
};

/** kubectl's stderr without its warnings (objects another test created without apply get one). */
const errorLines = (stderr: string) =>
  stderr.split("\n").filter((l) => l.trim() && !l.startsWith("Warning:"));

async function ensureNamespace(name: string) {
  const got = await kubectl(["get", "namespace", name]);
  if (got.code !== 0) await kubectlOk(["create", "namespace", name]);
}

describe("npm run release:manifests", () => {
  let out: string;
  beforeAll(() => {
    out = mkdtempSync(join(tmpdir(), "dms-release-test-"));
    renderRelease({ version: "9.8.7", image: IMAGE, outDir: out, kubectl: inject("kubectlPath") });
  });
  afterAll(() => rmSync(out, { recursive: true, force: true }));
  const read = (name: string) => readFileSync(join(out, name), "utf8");

  it("install.yaml holds the CRDs, their deletion protection policy, the namespace, RBAC, the FlowSchema of its Leases and the operator, its image pinned by digest", async () => {
    const objs = objects(read("install.yaml"));
    expect(objs.map((o) => o.kind).sort()).toEqual([
      "ClusterRole",
      "ClusterRole",
      "ClusterRole",
      "ClusterRole",
      "ClusterRoleBinding",
      "CustomResourceDefinition",
      "CustomResourceDefinition",
      "CustomResourceDefinition",
      "Deployment",
      // The operator's Lease requests under API Priority and Fairness.
      "FlowSchema",
      "Namespace",
      // Leader election, and the install key's Secret.
      "Role",
      "Role",
      "RoleBinding",
      "RoleBinding",
      "ServiceAccount",
      // Deletion protection, and the policy narrowing the operator's ConfigMap writes.
      "ValidatingAdmissionPolicy",
      "ValidatingAdmissionPolicy",
      "ValidatingAdmissionPolicyBinding",
      "ValidatingAdmissionPolicyBinding",
    ]);
    expect(operatorImage(objs)).toBe(`ghcr.io/acme/dms-operator:9.8.7@${DIGEST}`);
    for (const o of objs)
      expect((o.metadata as { labels?: Record<string, string> }).labels?.["app.kubernetes.io/version"]).toBe(
        "9.8.7",
      );
  });

  it("install.yaml is accepted by the API server (server-side dry run)", async () => {
    // Like `kubectl apply -k manifests/default`, the objects in dms-system need the namespace to
    // exist before a dry run can admit them (a real apply creates it first).
    await ensureNamespace("dms-system");
    const result = await kubectl(["apply", "--dry-run=server", "-f", join(out, "install.yaml")]);
    expect(errorLines(result.stderr)).toEqual([]);
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(
      /deployment\.apps\/dms-operator (created|configured|unchanged) \(server dry run\)/,
    );
  });

  it("install-namespaced.yaml installs into the namespace given with -n, after crds.yaml", async () => {
    const objs = objects(read("install-namespaced.yaml"));
    expect(objs.map((o) => o.kind).sort()).toEqual([
      "Deployment",
      "Role",
      "Role",
      "RoleBinding",
      "RoleBinding",
      "ServiceAccount",
    ]);
    expect(objs.every((o) => o.metadata.namespace === undefined)).toBe(true);
    expect(operatorImage(objs)).toBe(`ghcr.io/acme/dms-operator:9.8.7@${DIGEST}`);
    // The CRDs, and the admission policy behind spec.deletionProtection that comes with them.
    const crds = objects(read("crds.yaml"));
    expect(crds.map((o) => o.kind)).toEqual([
      ...Array(CRDS.length).fill("CustomResourceDefinition"),
      "ValidatingAdmissionPolicy",
      "ValidatingAdmissionPolicyBinding",
    ]);
    expect(
      crds
        .filter((o) => o.kind === "CustomResourceDefinition")
        .map((o) => o.metadata.name)
        .sort(),
    ).toEqual(CRDS.map((crd) => `${crd.plural}.dms.dev`).sort());

    const ns = await freshNamespace("release-ns");
    expect((await kubectl(["apply", "--dry-run=server", "-f", join(out, "crds.yaml")])).code).toBe(0);
    const result = await kubectl([
      "apply",
      "--dry-run=server",
      "-n",
      ns,
      "-f",
      join(out, "install-namespaced.yaml"),
    ]);
    expect(result.stderr).toBe("");
    expect(result.stdout).toContain(
      "rolebinding.rbac.authorization.k8s.io/dms-operator created (server dry run)",
    );
  });

  it("refuses an image that is not pinned by digest, and a version that is not semantic", () => {
    expect(() => parseImage("ghcr.io/acme/dms-operator:0.2.0")).toThrow(
      /--image .* must be an image by digest/,
    );
    expect(parseImage(`ghcr.io/acme/dms-operator:0.2.0@${DIGEST}`)).toEqual({
      newName: "ghcr.io/acme/dms-operator",
      digest: DIGEST,
    });
    expect(() => renderRelease({ version: "latest", image: IMAGE, outDir: out, kubectl: "kubectl" })).toThrow(
      /--version "latest" must be a semantic version/,
    );
  });
});

describe("manifests/default", () => {
  it("sets the image through kustomize images: (name, tag = the last release, digest slot)", async () => {
    // The image a release published: between releases the package carries the next version.
    const kustomization = parse(readFileSync(join(MANIFESTS, "default", "kustomization.yaml"), "utf8"));
    expect(kustomization.images).toEqual([
      { name: "dms-operator", newName: "ghcr.io/dms-dev/dms-operator", newTag: LAST_RELEASE },
    ]);
    const rendered = objects(await kubectlOk(["kustomize", join(MANIFESTS, "default")]));
    expect(operatorImage(rendered)).toBe(`ghcr.io/dms-dev/dms-operator:${LAST_RELEASE}`);
  });

  it("with every optional component: metrics Service + ServiceMonitor, NetworkPolicy, PDB, all admitted", async () => {
    const work = mkdtempSync(join(tmpdir(), "dms-components-"));
    try {
      cpSync(MANIFESTS, join(work, "manifests"), { recursive: true });
      cpSync(join(ROOT, "crds"), join(work, "crds"), { recursive: true });
      // What a user does: uncomment the components in manifests/default.
      const file = join(work, "manifests", "default", "kustomization.yaml");
      const k = parse(readFileSync(file, "utf8"));
      k.components = ["../components/metrics", "../components/network-policy", "../components/pdb"];
      writeFileSync(file, stringify(k));
      const objs = objects(await kubectlOk(["kustomize", join(work, "manifests", "default")]));
      const one = (kind: string) => {
        const found = objs.filter((o) => o.kind === kind);
        expect(found, kind).toHaveLength(1);
        return found[0] as Obj & { spec: Record<string, never> };
      };
      const deployment = one("Deployment") as unknown as {
        spec: {
          replicas: number;
          template: {
            metadata: { labels: Record<string, string> };
            spec: { containers: { ports: { name: string; containerPort: number }[] }[] };
          };
        };
      };
      const podLabels = deployment.spec.template.metadata.labels;
      const matches = (selector: Record<string, string>, labels: Record<string, string>) =>
        Object.entries(selector).every(([key, value]) => labels[key] === value);
      const ports = deployment.spec.template.spec.containers[0]?.ports ?? [];

      const service = one("Service") as unknown as {
        metadata: { labels: Record<string, string>; namespace: string };
        spec: { selector: Record<string, string>; ports: { name: string; targetPort: string }[] };
      };
      expect(service.metadata.namespace).toBe("dms-system");
      expect(matches(service.spec.selector, podLabels)).toBe(true);
      expect(ports.map((p) => p.name)).toContain(service.spec.ports[0]?.targetPort);

      const monitor = one("ServiceMonitor") as unknown as {
        metadata: { namespace: string };
        spec: {
          selector: { matchLabels: Record<string, string> };
          endpoints: {
            port: string;
            scheme: string;
            authorization: { type: string; credentials: { name: string; key: string } };
          }[];
        };
      };
      expect(monitor.metadata.namespace).toBe("dms-system");
      expect(matches(monitor.spec.selector.matchLabels, service.metadata.labels)).toBe(true);
      expect(service.spec.ports.map((p) => p.name)).toContain(monitor.spec.endpoints[0]?.port);
      // HTTPS, on the container port the operator's --metrics-bind-address opens.
      expect(monitor.spec.endpoints[0]?.scheme).toBe("https");
      const metricsPort = ports.find((p) => p.name === service.spec.ports[0]?.targetPort)?.containerPort;
      expect(metricsPort).toBe(8443);
      // The token Prometheus sends is a ServiceAccount's bound to the metrics reader, and no other role.
      const credentials = monitor.spec.endpoints[0]?.authorization.credentials;
      const secret = objs.find((o) => o.kind === "Secret" && o.metadata.name === credentials?.name) as
        | (Obj & { type: string; metadata: { annotations: Record<string, string>; namespace: string } })
        | undefined;
      expect(secret?.type).toBe("kubernetes.io/service-account-token");
      expect(secret?.metadata.namespace).toBe(monitor.metadata.namespace);
      expect(credentials?.key).toBe("token");
      const scraper = secret?.metadata.annotations["kubernetes.io/service-account.name"];
      const bindings = objs.filter(
        (o) =>
          (o.kind === "ClusterRoleBinding" || o.kind === "RoleBinding") &&
          (o as unknown as { subjects: { name: string }[] }).subjects.some((s) => s.name === scraper),
      ) as unknown as { roleRef: { name: string }; subjects: { namespace: string }[] }[];
      expect(bindings.map((b) => b.roleRef.name)).toEqual(["dms-operator-metrics-reader"]);
      expect(bindings[0]?.subjects[0]?.namespace).toBe("dms-system");

      const policy = one("NetworkPolicy") as unknown as {
        spec: {
          podSelector: { matchLabels: Record<string, string> };
          ingress: { ports: { port: string }[] }[];
        };
      };
      expect(matches(policy.spec.podSelector.matchLabels, podLabels)).toBe(true);
      expect(policy.spec.ingress.flatMap((r) => r.ports.map((p) => p.port))).toEqual(["metrics"]);

      const pdb = one("PodDisruptionBudget") as unknown as {
        spec: { maxUnavailable: number; selector: { matchLabels: Record<string, string> } };
      };
      expect(matches(pdb.spec.selector.matchLabels, podLabels)).toBe(true);
      expect(pdb.spec.maxUnavailable).toBeLessThan(deployment.spec.replicas);

      // The control plane has no prometheus-operator: a minimal CRD stands in for its
      // ServiceMonitor so the server admits the kind (the fields are checked above).
      await kubectlOk(["apply", "-f", "-"], { input: SERVICE_MONITOR_CRD });
      await kubectlOk(["wait", "--for=condition=Established", "crd/servicemonitors.monitoring.coreos.com"]);
      await ensureNamespace("dms-system");
      const rendered = join(work, "all.yaml");
      writeFileSync(rendered, objs.map((o) => stringify(o)).join("---\n"));
      const result = await kubectl(["apply", "--dry-run=server", "-f", rendered]);
      expect(errorLines(result.stderr)).toEqual([]);
      expect(result.code).toBe(0);
    } finally {
      rmSync(work, { recursive: true, force: true });
    }
  });
});

const SERVICE_MONITOR_CRD = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: servicemonitors.monitoring.coreos.com
spec:
  group: monitoring.coreos.com
  names: { kind: ServiceMonitor, plural: servicemonitors, singular: servicemonitor, listKind: ServiceMonitorList }
  scope: Namespaced
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema: { type: object, x-kubernetes-preserve-unknown-fields: true }
`;
