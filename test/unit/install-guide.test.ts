// The install guide's quickstart (docs/guide/install.md) works as written: every file and
// kustomization its commands name exists, the release files it downloads are ones a release attaches (the last release's), the
// Secret it creates is the one the manifests read, the resource it waits for is the one it
// applied, and the minimum Kubernetes version it states is the one the CRD's CEL features need.
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import type { TSchema } from "@sinclair/typebox";
import { Value } from "@sinclair/typebox/value";
import { describe, expect, it } from "vitest";
import { parse, parseAllDocuments } from "yaml";
import { RELEASE_FILES } from "../../scripts/release-manifests.ts";
import {
  ClusterServiceConnectionSchema,
  type ConnectionSpec,
  ServiceConnectionSchema,
} from "../../src/crd/connection-schema.ts";
import { CRDS, crdFile } from "../../src/crd/render.ts";
import { DeploymentResourceSchema } from "../../src/crd/schema.ts";
import { LAST_RELEASE } from "../support/release.ts";
import { shBlockCommands } from "../support/sh-blocks.ts";

const ROOT = join(import.meta.dirname, "..", "..");
const README = readFileSync(join(ROOT, "README.md"), "utf8");
const INSTALL = readFileSync(join(ROOT, "docs", "guide", "install.md"), "utf8");
const CONNECTIONS = readFileSync(join(ROOT, "docs", "guide", "connections.md"), "utf8");

/** The `sh` block of a guide section, its commands joined across `\` continuations, comments dropped. */
function commands(section: string): string[][] {
  return shBlockCommands(INSTALL, section, "docs/guide/install.md");
}

const flag = (cmd: string[], name: string) => {
  const i = cmd.indexOf(name);
  return i >= 0 ? cmd[i + 1] : undefined;
};

const manager = parse(readFileSync(join(ROOT, "manifests", "manager", "manager.yaml"), "utf8"));
const defaultNamespace = parse(readFileSync(join(ROOT, "manifests", "default", "kustomization.yaml"), "utf8"))
  .namespace as string;

describe("the install guide's quickstart", () => {
  const quickstart = commands("Quickstart on a real cluster");
  const kubectl = quickstart.filter((c) => c[0] === "kubectl");

  it("names only files that exist, and release files the last release attaches", () => {
    const applied = kubectl.filter((c) => c[1] === "apply");
    expect(applied.length).toBeGreaterThan(1);
    for (const cmd of applied) {
      const file = flag(cmd, "-f");
      const dir = flag(cmd, "-k");
      if (dir) expect(existsSync(join(ROOT, dir, "kustomization.yaml")), dir).toBe(true);
      else if (file?.startsWith("https://")) {
        const m = /\/releases\/download\/v([^/]+)\/([^/]+)$/.exec(file);
        expect(m?.[1], `${file} names the last release`).toBe(LAST_RELEASE);
        expect(RELEASE_FILES as readonly string[]).toContain(m?.[2]);
      } else expect(file && existsSync(join(ROOT, file)), file).toBe(true);
    }
    // The image comes from the manifests (kustomize images:), never an imperative change.
    expect(kubectl.filter((c) => c.includes("set") && c.includes("image"))).toEqual([]);
  });

  it("creates the credentials the operator reads, in the namespace it is installed in", () => {
    const create = kubectl.find((c) => c.includes("secret") && c.includes("create"));
    expect(create).toBeDefined();
    const cmd = create ?? [];
    expect(flag(cmd, "-n")).toBe(defaultNamespace);
    expect(kubectl.some((c) => c.join(" ") === `kubectl create namespace ${defaultNamespace}`)).toBe(true);
    const name = cmd[cmd.indexOf("generic") + 1];
    const keys = cmd.filter((a) => a.startsWith("--from-literal=")).map((a) => a.slice(15).split("=")[0]);
    const container = manager.spec.template.spec.containers[0];
    const refs = (
      container.env as { valueFrom?: { secretKeyRef?: { name: string; key: string; optional?: boolean } } }[]
    ).flatMap((e) => (e.valueFrom?.secretKeyRef ? [e.valueFrom.secretKeyRef] : []));
    const volume = (
      manager.spec.template.spec.volumes as { secret?: { secretName: string; items: { key: string }[] } }[]
    ).flatMap((v) => (v.secret ? [v.secret] : []));
    const read = [
      ...refs.map((r) => ({ name: r.name, key: r.key })),
      ...volume.flatMap((v) => v.items.map((i) => ({ name: v.secretName, key: i.key }))),
    ];
    for (const r of read) {
      expect(r.name).toBe(name);
      expect(keys).toContain(r.key);
    }
  });

  it("waits for the operator's Deployment, and for the resource it applied", () => {
    const rollout = kubectl.find((c) => c[2] === "rollout" || c[1] === "rollout" || c.includes("rollout"));
    expect(rollout?.join(" ")).toBe(
      `kubectl -n ${defaultNamespace} rollout status deployment/${manager.metadata.name} --timeout=5m`,
    );
    const appliedNames = kubectl
      .filter((c) => c[1] === "apply" && flag(c, "-f") && !flag(c, "-f")?.startsWith("https://"))
      .flatMap((c) =>
        parseAllDocuments(readFileSync(join(ROOT, flag(c, "-f") ?? ""), "utf8"))
          .map((d) => d.toJS() as { kind?: string; apiVersion?: string; metadata?: { name?: string } })
          .filter((o) => o.kind === "Deployment" && o.apiVersion?.startsWith("dms.dev/"))
          .map((o) => o.metadata?.name),
      );
    const waits = kubectl.filter((c) => c[1] === "wait");
    expect(waits).toHaveLength(1);
    const target = waits[0]?.find((a) => a.startsWith("dmsd/"))?.slice(5);
    expect(appliedNames).toContain(target);
  });
});

/** The Kubernetes version each CEL feature of a CRD needs, with how to find it in the CRD's YAML. */
const CEL_FEATURES: { needs: [number, number]; what: string; found: (crd: string) => boolean }[] = [
  {
    needs: [1, 29],
    what: "x-kubernetes-validations (GA)",
    found: (crd) => crd.includes("x-kubernetes-validations"),
  },
  { needs: [1, 28], what: "rule reason/fieldPath", found: (crd) => /^\s+(reason|fieldPath): /m.test(crd) },
  { needs: [1, 30], what: "optionalOldSelf", found: (crd) => crd.includes("optionalOldSelf") },
  {
    needs: [1, 31],
    what: "CEL format/ip/cidr libraries",
    found: (crd) => /\b(format\.\w+\(|ip\(|cidr\()/.test(crd),
  },
  {
    needs: [1, 30],
    what: "ValidatingAdmissionPolicy (admissionregistration.k8s.io/v1), shipped with the CRDs",
    found: (crd) =>
      /^apiVersion: admissionregistration\.k8s\.io\/v1\nkind: ValidatingAdmissionPolicy$/m.test(crd),
  },
];

describe("the stated requirements", () => {
  it("states the minimum Kubernetes version the CRDs' CEL features and the policy shipped with them need", () => {
    // What manifests/crd installs: the CRDs, and the deletion protection policy.
    const crd = [...CRDS.map((c) => crdFile(c)), "manifests/crd/deletion-protection-policy.yaml"]
      .map((file) => readFileSync(join(ROOT, file), "utf8"))
      .join("\n");
    const used = CEL_FEATURES.filter((f) => f.found(crd));
    expect(used.map((f) => f.what)).toContain("x-kubernetes-validations (GA)");
    const [major, minor] = used
      .map((f) => f.needs)
      .reduce((a, b) => (b[0] > a[0] || (b[0] === a[0] && b[1] > a[1]) ? b : a));
    const min = `${major}.${minor}`;
    expect(README).toContain(`Kubernetes **${min} or later**`);
    expect(INSTALL).toContain(`Kubernetes **${min} or later**`);
    expect(INSTALL).toContain(`**Kubernetes ≥ ${min}.**`);
  });
});

describe("kubectl get dmsd -o wide", () => {
  it("is described in the README and the install guide with every column it adds", () => {
    const crd = parse(readFileSync(join(ROOT, crdFile(CRDS[0] as (typeof CRDS)[number])), "utf8")) as {
      spec: { versions: { additionalPrinterColumns: { name: string; priority?: number }[] }[] };
    };
    const wide = (crd.spec.versions[0]?.additionalPrinterColumns ?? [])
      .filter((c) => c.priority === 1)
      .map((c) => c.name.toUpperCase());
    expect(wide.length).toBeGreaterThanOrEqual(5);
    const sentence = (text: string) => {
      const at = text.indexOf("-o wide` adds");
      return text.slice(at, text.indexOf(":\n", at));
    };
    const readme =
      README.split("\n").find((line) => line.includes("kubectl get dmsd -o wide     # adds")) ?? "";
    expect(wide.filter((column) => !readme.includes(column))).toEqual([]);
    expect(wide.filter((column) => !sentence(INSTALL).includes(`\`${column}\``))).toEqual([]);
  });
});

describe("the connections guide: Several tenants", () => {
  const start = CONNECTIONS.indexOf("## Several tenants");
  const block = /```yaml\n([\s\S]*?)```/.exec(CONNECTIONS.slice(start))?.[1] ?? "";
  const objects = parseAllDocuments(block).map((d) => d.toJS() as { kind: string; spec?: unknown });
  const schemas: Record<string, TSchema> = {
    Deployment: DeploymentResourceSchema,
    ServiceConnection: ServiceConnectionSchema,
    ClusterServiceConnection: ClusterServiceConnectionSchema,
  };

  it("shows one connection of each kind, a Deployment using each, and their Secrets", () => {
    expect(objects.map((o) => o.kind).sort()).toEqual([
      "ClusterServiceConnection",
      "Deployment",
      "Deployment",
      "Secret",
      "Secret",
      "ServiceConnection",
    ]);
  });

  it.each(["Deployment", "ServiceConnection", "ClusterServiceConnection"])(
    "its %s objects match the schema",
    (kind) => {
      for (const object of objects.filter((o) => o.kind === kind)) {
        const schema = schemas[kind] as TSchema;
        expect([...Value.Errors(schema, object)].map((e) => `${e.path}: ${e.message}`)).toEqual([]);
      }
    },
  );

  it("each connection's Secret is one the example creates, in the namespace the connection reads", () => {
    type Obj = { kind: string; metadata: { name: string; namespace?: string }; spec: ConnectionSpec };
    const all = objects as unknown as Obj[];
    const secrets = all
      .filter((o) => o.kind === "Secret")
      .map((o) => `${o.metadata.namespace}/${o.metadata.name}`);
    for (const c of all.filter((o) => o.kind.endsWith("ServiceConnection"))) {
      const ref = c.spec.apiKeySecretRef;
      expect(secrets).toContain(`${ref.namespace ?? c.metadata.namespace}/${ref.name}`);
    }
  });
});

describe("the install guide's uninstall", () => {
  const uninstall = commands("Uninstall");
  const line = (cmd: string[]) => cmd.join(" ");
  const deleteResources = uninstall.findIndex((c) => line(c).startsWith("kubectl delete dmsd --all"));

  it("deletes the resources while the operator runs, before the install", () => {
    const deleteInstall = uninstall.findIndex((c) => line(c).startsWith("kubectl delete -f"));
    expect(deleteResources).toBeGreaterThanOrEqual(0);
    expect(deleteInstall).toBeGreaterThan(deleteResources);
  });

  it("first clears spec.deletionProtection, which the API server's policy refuses the delete of", () => {
    // The policy shipped with the CRDs refuses a protected resource's DELETE until the field is
    // false: `kubectl delete dmsd --all` alone exits 1 and leaves each protected one (with its
    // finalizer, which then holds the CRD's deletion).
    const policy = readFileSync(join(ROOT, "manifests", "crd", "deletion-protection-policy.yaml"), "utf8");
    expect(policy).toContain("oldObject.spec.deletionProtection != true");
    const before = uninstall.slice(0, Math.max(deleteResources, 0)).map(line);
    expect(
      before.some(
        (c) => c.includes("kubectl get dmsd --all-namespaces") && c.includes("deletionProtection==true"),
      ),
      "lists the protected resources of every namespace",
    ).toBe(true);
    expect(
      before.some((c) =>
        c.includes(
          `kubectl patch dmsd "$name" -n "$ns" --type merge -p '{"spec":{"deletionProtection":false}}'`,
        ),
      ),
      "clears the field of each",
    ).toBe(true);
  });
});
