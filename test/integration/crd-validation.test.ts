// The Deployment CRD on a real kube-apiserver: the samples are accepted, and each invalid example
// is refused at `kubectl apply` time with a message that names the field, before any operator
// sees it. Every rule listed in docs/crd-validation.md has a case here.
import { readdirSync } from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { freshNamespace, kubectl, kubectlOk } from "../support/cluster.ts";

const ROOT = join(import.meta.dirname, "..", "..");
const RESOURCE = "deployments.dms.dev";
const UUID = "6f1c1d2e-0000-4000-8000-000000000001";

type Spec = Record<string, unknown>;
const resource = (name: string, spec: Spec) => ({
  apiVersion: "dms.dev/v1alpha1",
  kind: "Deployment",
  metadata: { name },
  spec,
});

let namespace: string;
let counter = 0;
const uniqueName = () => `d${++counter}`;

/** `kubectl <verb> -f -` of one object; resolves with kubectl's result. */
const submit = (verb: "create" | "replace" | "apply", object: object) =>
  kubectl([verb, "-n", namespace, "-f", "-"], { input: JSON.stringify(object) });

const getSpec = async (name: string): Promise<Spec> =>
  JSON.parse(await kubectlOk(["get", RESOURCE, name, "-n", namespace, "-o", "json"])).spec;

beforeAll(async () => {
  namespace = await freshNamespace("crd-validation");
});

describe("Deployment CRD: accepted input", () => {
  const samples = readdirSync(join(ROOT, "manifests", "samples")).filter((f) => f !== "kustomization.yaml");

  it.each(samples)("accepts the sample %s", async (file) => {
    const path = join(ROOT, "manifests", "samples", file);
    const result = await kubectl(["apply", "-n", namespace, "-f", path]);
    expect(result.stderr).toBe("");
    expect(result.code).toBe(0);
    // The samples' service names are claimed cluster-wide: leaving them would make every later
    // test that applies the samples lose a name conflict to these.
    await kubectlOk(["delete", "-n", namespace, "-f", path, "--wait=false"]);
  });

  it("fills the policy defaults", async () => {
    const name = uniqueName();
    await kubectlOk(["create", "-n", namespace, "-f", "-"], {
      input: JSON.stringify(resource(name, { source: "github" })),
    });
    expect(await getSpec(name)).toEqual({
      source: "github",
      managementPolicy: "Manage",
      deletionPolicy: "Orphan",
    });
  });

  const sidecar = {
    name: "s",
    resources: { limits: { cpu: "100m", "nvidia.com/gpu": 1 } },
    securityContext: { runAsNonRoot: true, capabilities: { drop: ["ALL"] } },
    env: [{ name: "X", valueFrom: { fieldRef: { fieldPath: "metadata.name" } } }],
  };
  const withUnknown = {
    source: "external_docker",
    bogus: "dropped",
    sourceConfig: {
      alsoBogus: 1,
      resourceSpec: {
        volumes: [{ name: "v", emptyDir: { sizeLimit: "1Gi", medium: "Memory" } }],
        sidecars: [{ ...sidecar, unknownContainerField: true }],
      },
    },
  };

  it("refuses unknown fields by name under kubectl's default strict validation (a typo is caught)", async () => {
    const result = await submit("create", resource(uniqueName(), withUnknown));
    expect(result.code).not.toBe(0);
    expect(result.stderr).toContain('unknown field "spec.bogus"');
    expect(result.stderr).toContain(
      'unknown field "spec.sourceConfig.resourceSpec.sidecars[0].unknownContainerField"',
    );
    expect(result.stderr).not.toContain("emptyDir");
  });

  it("prunes unknown fields when validation is relaxed, keeping Kubernetes-shaped nested objects as given", async () => {
    const name = uniqueName();
    const input = JSON.stringify(resource(name, withUnknown));
    await kubectlOk(["create", "--validate=ignore", "-n", namespace, "-f", "-"], { input });
    const stored = await getSpec(name);
    expect(stored).not.toHaveProperty("bogus");
    expect(stored.sourceConfig).toEqual({
      resourceSpec: {
        volumes: [{ name: "v", emptyDir: { sizeLimit: "1Gi", medium: "Memory" } }],
        sidecars: [sidecar],
      },
    });
  });

  it("teaches the resource through kubectl explain", async () => {
    const out = await kubectlOk(["explain", `${RESOURCE}.spec.sourceConfig.resourceSpec.cpuLimit`]);
    expect(out).toContain("CPU limit of the main service");
    const spec = await kubectlOk(["explain", `${RESOURCE}.spec`]);
    expect(spec).toMatch(/managementPolicy.*\n.*\n?.*Manage: create and update/);
  });
});

const secretRef = { secretKeyRef: { name: "s", key: "k" } };
const invalid: Array<{ reason: string; spec: Spec; message: RegExp }> = [
  { reason: "source is required", spec: {}, message: /spec\.source: Required value/ },
  {
    reason: "source outside the enum",
    spec: { source: "ftp" },
    message: /spec\.source: Unsupported value: "ftp"/,
  },
  {
    reason: "revisionSource outside the enum",
    spec: { source: "github", revisionSource: "external_docker" },
    message: /spec\.revisionSource: Unsupported value/,
  },
  {
    reason: "managementPolicy outside the enum",
    spec: { source: "github", managementPolicy: "Sometimes" },
    message: /spec\.managementPolicy: Unsupported value/,
  },
  {
    reason: "deletionPolicy outside the enum",
    spec: { source: "github", deletionPolicy: "Keep" },
    message: /spec\.deletionPolicy: Unsupported value/,
  },
  {
    reason: "a secret with both value and valueFrom",
    spec: { source: "github", secrets: [{ name: "A", value: "v", valueFrom: secretRef }] },
    message: /spec\.secrets\[0\].*set exactly one of value or valueFrom/,
  },
  {
    reason: "a secret with neither value nor valueFrom",
    spec: { source: "github", secrets: [{ name: "A" }] },
    message: /spec\.secrets\[0\].*set exactly one of value or valueFrom/,
  },
  {
    reason: "two secrets of the same name",
    spec: {
      source: "github",
      secrets: [
        { name: "A", value: "1" },
        { name: "A", value: "2" },
      ],
    },
    message: /spec\.secrets\[1\]: Duplicate value/,
  },
  {
    reason: "a secretKeyRef key that no Secret can hold",
    spec: {
      source: "github",
      secrets: [{ name: "A", valueFrom: { secretKeyRef: { name: "s", key: "a/b" } } }],
    },
    message: /spec\.secrets\[0\]\.valueFrom\.secretKeyRef\.key: Invalid value/,
  },
  {
    reason: "secretReferences with a source other than external_docker",
    spec: { source: "github", secretReferences: [{ name: "A", secretName: "s", secretKey: "k" }] },
    message:
      /spec\.secretReferences: Forbidden: spec\.secretReferences is allowed only with spec\.source external_docker/,
  },
  {
    reason: "a negative number",
    spec: { source: "github", sourceConfig: { resourceSpec: { memoryMb: -1 } } },
    message: /spec\.sourceConfig\.resourceSpec\.memoryMb: Invalid value: -1: .*greater than or equal to 0/,
  },
  {
    reason: "cpu above cpuLimit",
    spec: { source: "github", sourceConfig: { resourceSpec: { cpu: 2, cpuLimit: 1 } } },
    message:
      /spec\.sourceConfig\.resourceSpec\.cpu: Invalid value: .*must not exceed spec\.sourceConfig\.resourceSpec\.cpuLimit/,
  },
  {
    reason: "memoryMb above memoryLimitMb",
    spec: { source: "github", sourceConfig: { resourceSpec: { memoryMb: 2048, memoryLimitMb: 1024.5 } } },
    message: /spec\.sourceConfig\.resourceSpec\.memoryMb: .*must not exceed .*memoryLimitMb/,
  },
  {
    reason: "a database request above its limit",
    spec: { source: "github", sourceConfig: { resourceSpec: { dbCpu: 1.5, dbCpuLimit: 1 } } },
    message: /spec\.sourceConfig\.resourceSpec\.dbCpu: .*must not exceed .*dbCpuLimit/,
  },
  {
    reason: "minScale above maxScale",
    spec: { source: "github", sourceConfig: { resourceSpec: { minScale: 3, maxScale: 1 } } },
    message: /spec\.sourceConfig\.resourceSpec\.minScale: .*must not exceed .*maxScale/,
  },
  {
    reason: "queueMinScale above queueMaxScale",
    spec: { source: "github", sourceConfig: { resourceSpec: { queueMinScale: 3, queueMaxScale: 1 } } },
    message: /spec\.sourceConfig\.resourceSpec\.queueMinScale: .*must not exceed .*queueMaxScale/,
  },
  {
    reason: "orchestratorMinScale above orchestratorMaxScale",
    spec: {
      source: "github",
      sourceConfig: { resourceSpec: { orchestratorMinScale: 2, orchestratorMaxScale: 1 } },
    },
    message:
      /spec\.sourceConfig\.resourceSpec\.orchestratorMinScale: .*must not exceed .*orchestratorMaxScale/,
  },
  {
    reason: "an integration id that is not a uuid",
    spec: { source: "github", sourceConfig: { integrationId: "not-a-uuid" } },
    message: /spec\.sourceConfig\.integrationId: Invalid value: "not-a-uuid"/,
  },
  {
    reason: "the github shorthand with another source",
    spec: { source: "external_docker", github: { integrationId: UUID, repository: "acme/a" } },
    message: /spec\.github: Forbidden: spec\.github is allowed only with spec\.source github/,
  },
  {
    reason: "the github shorthand together with repoUrl",
    spec: {
      source: "github",
      github: { integrationId: UUID, repository: "acme/a" },
      sourceConfig: { repoUrl: "x" },
    },
    message: /spec\.github: Forbidden: spec\.github sets sourceConfig\.repoUrl/,
  },
  {
    reason: "a github repository that is not owner/name",
    spec: { source: "github", github: { integrationId: UUID, repository: "just-a-name" } },
    message: /spec\.github\.repository: Invalid value: "just-a-name"/,
  },
];

describe("Deployment CRD: refused input names the field", () => {
  it.each(invalid)("refuses $reason", async ({ spec, message }) => {
    const result = await submit("create", resource(uniqueName(), spec));
    expect(result.code).not.toBe(0);
    expect(result.stderr).toMatch(message);
  });
});

describe("Deployment CRD: immutability", () => {
  const update = async (name: string, before: Spec, after: Spec) => {
    await kubectlOk(["create", "-n", namespace, "-f", "-"], {
      input: JSON.stringify(resource(name, before)),
    });
    return submit("replace", resource(name, after));
  };

  it("refuses a change of source", async () => {
    const result = await update(uniqueName(), { source: "github" }, { source: "internal_source" });
    expect(result.stderr).toMatch(/spec\.source: Forbidden: spec\.source is immutable/);
  });

  it("refuses a change of spec.name", async () => {
    const result = await update(
      uniqueName(),
      { source: "github", name: "a" },
      { source: "github", name: "b" },
    );
    expect(result.stderr).toMatch(/spec\.name: Forbidden: spec\.name is immutable/);
  });

  it("refuses setting spec.name to something else than the metadata.name it defaulted to", async () => {
    const result = await update(uniqueName(), { source: "github" }, { source: "github", name: "other" });
    expect(result.stderr).toMatch(/spec\.name: Forbidden: spec\.name is immutable/);
  });

  it("refuses removing a spec.name that differs from metadata.name", async () => {
    const result = await update(uniqueName(), { source: "github", name: "other" }, { source: "github" });
    expect(result.stderr).toMatch(/spec\.name: Forbidden: spec\.name is immutable/);
  });

  it("allows spelling out the default name, and changing what is mutable", async () => {
    const name = uniqueName();
    const result = await update(
      name,
      { source: "github" },
      { source: "github", name, sourceConfig: { buildOnPush: true } },
    );
    expect(result.stderr).toBe("");
    expect(result.code).toBe(0);
  });
});
