// The CRDs (Deployment, ServiceConnection, ClusterServiceConnection) on a real kube-apiserver: the
// samples are accepted, and each invalid example is refused at `kubectl apply` time with a message
// that names the field, before any operator sees it. Every rule listed in docs/crd-validation.md
// has a case here; so do the connections' printer columns, short names and category.
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseManifests } from "../../src/gitops/manifests.ts";
import { RULES_NOT_CHECKED, validateResource } from "../../src/gitops/validate.ts";
import { freshNamespace, kubectl, kubectlOk } from "../support/cluster.ts";
import { REFUSED_DEPLOYMENT_SPECS, rolloutWindowCases } from "../support/refused-deployments.ts";

const ROOT = join(import.meta.dirname, "..", "..");
const RESOURCE = "deployments.dms.dev";
/** Label on the cluster-scoped objects this file creates, valued with its namespace. */
const OWNER_LABEL = "crd-validation.dms.dev/namespace";
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

/** `kubectl create -f -` of one object, which must succeed. */
const created = (object: object) =>
  kubectlOk(["create", "-n", namespace, "-f", "-"], { input: JSON.stringify(object) });

const getSpec = async (name: string): Promise<Spec> =>
  JSON.parse(await kubectlOk(["get", RESOURCE, name, "-n", namespace, "-o", "json"])).spec;

beforeAll(async () => {
  namespace = await freshNamespace("crd-validation");
});

afterAll(async () => {
  // Cluster-scoped connections outlive the namespace: remove the ones this file created.
  if (namespace) await kubectl(["delete", "dmscconn", "-l", `${OWNER_LABEL}=${namespace}`, "--wait=false"]);
});

describe("Deployment CRD: accepted input", () => {
  const samples = readdirSync(join(ROOT, "manifests", "samples")).filter((f) => f !== "kustomization.yaml");

  it.each(samples)("accepts the sample %s", async (file) => {
    const path = join(ROOT, "manifests", "samples", file);
    const result = await kubectl(["apply", "-n", namespace, "-f", path]);
    expect(result.stderr).toBe("");
    expect(result.code).toBe(0);
    // plan's verdict is the API server's: accepted.
    expect(parseManifests(readFileSync(path, "utf8"), path).problems).toEqual([]);
    // The samples' service names are claimed cluster-wide: leaving them would make every later
    // test that applies the samples lose a name conflict to these.
    await kubectlOk(["delete", "-n", namespace, "-f", path, "--wait=false"]);
  });

  it("accepts source github with its repository given either way, or none under ObserveOnly", async () => {
    const integrationId = "0b6f3c2e-7d2a-4c59-9b8e-3f1a2b4c5d6e";
    for (const spec of [
      { source: "github", github: { integrationId, repository: "acme/agent" } },
      { source: "github", sourceConfig: { repoUrl: "https://github.com/acme/agent", integrationId } },
      { source: "github", managementPolicy: "ObserveOnly" },
    ]) {
      const object = resource(uniqueName(), spec);
      const result = await submit("create", object);
      expect(result.stderr, JSON.stringify(spec)).toBe("");
      expect(validateResource(object), JSON.stringify(spec)).toEqual([]);
    }
  });

  it("fills the policy defaults", async () => {
    const name = uniqueName();
    await created(resource(name, { source: "internal_template" }));
    expect(await getSpec(name)).toEqual({
      source: "internal_template",
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

const invalid = REFUSED_DEPLOYMENT_SPECS;

// Each case is an object of its own name, independent of the others: submitted a few at a time.
describe.concurrent("Deployment CRD: refused input names the field", () => {
  it.for(invalid)("refuses $reason, and so does plan", async ({ spec, message }, { expect }) => {
    const object = resource(uniqueName(), spec);
    const result = await submit("create", object);
    expect(result.code).not.toBe(0);
    expect(result.stderr).toMatch(message);
    const violations = validateResource(object);
    expect(violations).not.toEqual([]);
    // plan runs the CEL rules where the API server does: after no blocking error.
    expect(violations.some((v) => v.message === RULES_NOT_CHECKED)).toBe(
      result.stderr.includes(RULES_NOT_CHECKED),
    );
  });
});

/** A Deployment at the bounds that dominate its size: every large list full, every string long. */
function atTheBounds(): Spec {
  const text = (n: number, c = "a") => c.repeat(n);
  const qualified = (i: number) => `${text(240, "p")}.example/${String(i).padStart(3, "0")}${text(60, "n")}`;
  const container = (i: number) => ({
    name: `c${i}`,
    image: `registry.example/${text(480)}:1`,
    command: Array.from({ length: 4 }, () => text(256)),
    args: Array.from({ length: 16 }, () => text(256)),
    env: Array.from({ length: 16 }, (_, j) => ({ name: `E${j}${text(120, "E")}`, value: text(256) })),
    volumeMounts: Array.from({ length: 4 }, (_, j) => ({ name: `v${j}`, mountPath: `/${text(255)}` })),
  });
  return {
    source: "external_docker",
    sourceRevisionConfig: { imageUri: `registry.example/${text(480)}:1` },
    sourceConfig: {
      resourceSpec: {
        labels: Object.fromEntries(Array.from({ length: 32 }, (_, i) => [qualified(i), text(63)])),
        annotations: Object.fromEntries(Array.from({ length: 16 }, (_, i) => [qualified(i), text(512)])),
        volumes: Array.from({ length: 16 }, (_, i) => ({ name: `v${i}`, emptyDir: {} })),
        initContainers: [0, 1].map(container),
        sidecars: [2, 3, 4, 5].map(container),
      },
    },
    secrets: Array.from({ length: 64 }, (_, i) => ({ name: `S${i}${text(120, "S")}`, value: text(512) })),
    secretReferences: Array.from({ length: 32 }, (_, i) => ({
      name: `R${i}${text(120, "R")}`,
      secretName: text(253),
      secretKey: text(253),
    })),
  };
}

describe("Deployment CRD: bounds", () => {
  it("accepts a resource at its bounds: its CEL rules stay within the API server's runtime cost", async () => {
    const spec = atTheBounds();
    expect(JSON.stringify(spec).length).toBeGreaterThan(160_000);
    const object = resource(uniqueName(), spec);
    const result = await submit("create", object);
    expect(result.stderr).toBe("");
    expect(result.code).toBe(0);
    expect(validateResource(object)).toEqual([]);
  });

  it("teaches the bounds through kubectl explain", async () => {
    const out = await kubectlOk(["explain", `${RESOURCE}.spec.sourceRevisionConfig.imageUri`]);
    expect(out).toContain("at most 512 characters");
  });

  it("accepts spec.driftPolicy Correct or Report and a spec.displayName of 1 to 256 characters, refusing the rest by name", async () => {
    const base = { source: "internal_template" as const };
    for (const driftPolicy of ["Correct", "Report"] as const) {
      const result = await submit("create", resource(uniqueName(), { ...base, driftPolicy }));
      expect(result.stderr, driftPolicy).toBe("");
    }
    const named = await submit("create", resource(uniqueName(), { ...base, displayName: "x".repeat(256) }));
    expect(named.stderr).toBe("");
    const policy = await submit(
      "create",
      resource(uniqueName(), { ...base, driftPolicy: "Ignore" as unknown as "Report" }),
    );
    expect(policy.stderr).toMatch(/spec\.driftPolicy: Unsupported value: "Ignore"/);
    const long = await submit("create", resource(uniqueName(), { ...base, displayName: "x".repeat(257) }));
    expect(long.stderr).toMatch(/spec\.displayName: Too long/);
    const empty = await submit("create", resource(uniqueName(), { ...base, displayName: "" }));
    expect(empty.stderr).toMatch(/spec\.displayName: Invalid value/);
  });
});

describe("Deployment CRD: immutability", () => {
  // A github source names its repository: the API server refuses one without.
  const repo = {
    repoUrl: "https://github.com/acme/agent",
    integrationId: "0b6f3c2e-7d2a-4c59-9b8e-3f1a2b4c5d6e",
  };
  const update = async (name: string, before: Spec, after: Spec) => {
    await created(resource(name, before));
    return submit("replace", resource(name, after));
  };

  it("refuses a change of source", async () => {
    const result = await update(uniqueName(), { source: "internal_template" }, { source: "internal_source" });
    expect(result.stderr).toMatch(/spec\.source: Forbidden: spec\.source is immutable/);
  });

  it("refuses a change of spec.name", async () => {
    const result = await update(
      uniqueName(),
      { source: "internal_template", name: "a" },
      { source: "internal_template", name: "b" },
    );
    expect(result.stderr).toMatch(/spec\.name: Forbidden: spec\.name is immutable/);
  });

  it("refuses setting spec.name to something else than the metadata.name it defaulted to", async () => {
    const result = await update(
      uniqueName(),
      { source: "internal_template" },
      { source: "internal_template", name: "other" },
    );
    expect(result.stderr).toMatch(/spec\.name: Forbidden: spec\.name is immutable/);
  });

  it("refuses removing a spec.name that differs from metadata.name", async () => {
    const result = await update(
      uniqueName(),
      { source: "internal_template", name: "other" },
      { source: "internal_template" },
    );
    expect(result.stderr).toMatch(/spec\.name: Forbidden: spec\.name is immutable/);
  });

  it("refuses a change of spec.sourceConfig.deploymentType, naming the field and saying a new type means a new deployment", async () => {
    const result = await update(
      uniqueName(),
      { source: "github", sourceConfig: { ...repo, deploymentType: "dev" } },
      { source: "github", sourceConfig: { ...repo, deploymentType: "prod" } },
    );
    expect(result.stderr).toMatch(
      /spec\.sourceConfig\.deploymentType: Forbidden: spec\.sourceConfig\.deploymentType cannot change: .* a new type means a new deployment/,
    );
  });

  it("accepts each deployment type, refuses another, and lets an unset type be set or a set one be left out", async () => {
    for (const deploymentType of ["dev_free", "dev", "prod", "dev_zero", "dev_free_zero"]) {
      const result = await submit(
        "create",
        resource(uniqueName(), { source: "github", sourceConfig: { ...repo, deploymentType } }),
      );
      expect(result.stderr, deploymentType).toBe("");
    }
    const typo = await submit(
      "create",
      resource(uniqueName(), { source: "github", sourceConfig: { ...repo, deploymentType: "prd" } }),
    );
    expect(typo.stderr).toMatch(/spec\.sourceConfig\.deploymentType: Unsupported value: "prd"/);
    // Setting one later is compared with the service's type by the operator, not refused here;
    // leaving it out again accepts whatever type the service has.
    const name = uniqueName();
    const set = await update(
      name,
      { source: "github", sourceConfig: repo },
      { source: "github", sourceConfig: { ...repo, deploymentType: "dev" } },
    );
    expect(set.stderr).toBe("");
    const unset = await submit("replace", resource(name, { source: "github", sourceConfig: repo }));
    expect(unset.stderr).toBe("");
  });

  it("allows spelling out the default name, and changing what is mutable", async () => {
    const name = uniqueName();
    const result = await update(
      name,
      { source: "internal_template" },
      { source: "internal_template", name, sourceConfig: { buildOnPush: true } },
    );
    expect(result.stderr).toBe("");
    expect(result.code).toBe(0);
  });
});

describe("Deployment CRD: spec.connectionRef", () => {
  const onConnection = (kind: string, name: string): Spec => ({
    source: "internal_docker",
    connectionRef: { kind, name },
  });
  const applied = (name: string, spec: Spec) => submit("apply", resource(name, spec));

  it("accepts a reference to either kind", async () => {
    for (const kind of ["ServiceConnection", "ClusterServiceConnection"]) {
      const result = await submit("create", resource(uniqueName(), onConnection(kind, "prod")));
      expect(result.stderr).toBe("");
      expect(result.code).toBe(0);
    }
  });

  it("refuses an unknown kind, and a reference without a name", async () => {
    const unknown = await submit("create", resource(uniqueName(), onConnection("Connection", "prod")));
    expect(unknown.stderr).toMatch(/spec\.connectionRef\.kind: Unsupported value: "Connection"/);
    const nameless = await submit(
      "create",
      resource(uniqueName(), { source: "internal_docker", connectionRef: { kind: "ServiceConnection" } }),
    );
    expect(nameless.stderr).toMatch(/spec\.connectionRef\.name: Required value/);
  });

  const IMMUTABLE = /spec\.connectionRef: Forbidden: spec\.connectionRef is immutable/;
  const NOT_ADDED = /spec\.connectionRef: Forbidden: spec\.connectionRef cannot be added or removed/;
  const plain: Spec = { source: "internal_docker" };

  // Each on a resource of its own name: run at once.
  it.concurrent.for([
    [
      "a change of name",
      onConnection("ServiceConnection", "a"),
      onConnection("ServiceConnection", "b"),
      IMMUTABLE,
    ],
    [
      "a change of kind",
      onConnection("ServiceConnection", "a"),
      onConnection("ClusterServiceConnection", "a"),
      IMMUTABLE,
    ],
    ["adding it", plain, onConnection("ServiceConnection", "a"), NOT_ADDED],
    ["removing it", onConnection("ServiceConnection", "a"), plain, NOT_ADDED],
  ] as const)(
    "refuses %s, by kubectl apply and by kubectl replace",
    async ([, before, after, message], { expect }) => {
      const name = uniqueName();
      expect((await applied(name, before)).code).toBe(0);
      const apply = await applied(name, after);
      expect(apply.code).not.toBe(0);
      expect(apply.stderr).toMatch(message);
      const replace = await submit("replace", resource(name, after));
      expect(replace.code).not.toBe(0);
      expect(replace.stderr).toMatch(message);
      expect((await getSpec(name)).connectionRef).toEqual(before.connectionRef);
    },
  );

  it("allows changing the rest of a resource on a connection", async () => {
    const name = uniqueName();
    const before = onConnection("ClusterServiceConnection", "shared");
    expect((await applied(name, before)).code).toBe(0);
    const result = await applied(name, { ...before, sourceRevisionConfig: { imageUri: "a:2" } });
    expect(result.stderr).toBe("");
    expect(result.code).toBe(0);
  });
});

const KEY_REF = { name: "dms-key", key: "api-key" };
const CONNECTION_SPEC: Spec = { baseUrl: "https://api.example.com", apiKeySecretRef: KEY_REF };
const CLUSTER_SPEC: Spec = { ...CONNECTION_SPEC, apiKeySecretRef: { ...KEY_REF, namespace: "dms-system" } };
const KINDS = {
  ServiceConnection: { plural: "serviceconnections.dms.dev", spec: CONNECTION_SPEC },
  ClusterServiceConnection: { plural: "clusterserviceconnections.dms.dev", spec: CLUSTER_SPEC },
} as const;
type ConnectionKind = keyof typeof KINDS;

/** A connection object; a cluster-scoped one is labelled for cleanup. */
const connection = (kind: ConnectionKind, name: string, spec: Spec) => ({
  apiVersion: "dms.dev/v1alpha1",
  kind,
  metadata: { name, labels: { [OWNER_LABEL]: namespace } },
  spec,
});
/** A name unique in the cluster, for the cluster-scoped kind. */
const connectionName = () => `${namespace}-c${++counter}`;

describe("connection CRDs: accepted input", () => {
  it.each(Object.keys(KINDS) as ConnectionKind[])(
    "%s: fills insecureSkipTLSVerify: false and rolloutWindowsPolicy: Advisory",
    async (kind) => {
      const name = connectionName();
      await created(connection(kind, name, KINDS[kind].spec));
      const stored = JSON.parse(
        await kubectlOk(["get", KINDS[kind].plural, name, "-n", namespace, "-o", "json"]),
      ).spec;
      expect(stored).toEqual({
        ...KINDS[kind].spec,
        insecureSkipTLSVerify: false,
        rolloutWindowsPolicy: "Advisory",
      });
    },
  );

  it("accepts every optional field, and a baseUrl with a port and a path", async () => {
    const spec = {
      ...CLUSTER_SPEC,
      baseUrl: "http://10.96.0.10:8080/api",
      tenantId: UUID,
      apiKeyHeader: "Authorization",
      tenantIdHeader: "X-Workspace",
      qps: 0.5,
      burst: 1,
      insecureSkipTLSVerify: true,
    };
    const result = await submit("create", connection("ClusterServiceConnection", connectionName(), spec));
    expect(result.stderr).toBe("");
    expect(result.code).toBe(0);
  });

  it.for([
    "http://127.0.0.1:8080",
    "http://[::1]:8080/api",
    "https://10.0.0.12",
    "https://dms.team-a.svc.cluster.local:8443",
    "https://[2001:db8::a9fe:a9fe]",
    "https://169.255.0.1",
    "https://metadata.example.com",
    "https://api.example.com./v2",
    "https://api.example.com/ｖ２/。",
    "https://[2002:808:808::1]",
    "https://[64:ff9b::808:808]",
  ])("accepts %s as baseUrl: loopback, private and public hosts", async (baseUrl, { expect }) => {
    const spec = { ...CONNECTION_SPEC, baseUrl };
    const result = await submit("create", connection("ServiceConnection", connectionName(), spec));
    expect(result.stderr).toBe("");
    expect(result.code).toBe(0);
  });

  // The two kinds at once: each on connections of its own names.
  it.concurrent.for(Object.keys(KINDS) as ConnectionKind[])(
    "%s: spec.tenantId cannot be changed, added or removed; the rest of the spec can",
    async (kind, { expect }) => {
      const name = connectionName();
      const withTenant = connection(kind, name, { ...KINDS[kind].spec, tenantId: UUID });
      await created(withTenant);
      const IMMUTABLE = /spec\.tenantId: Forbidden: spec\.tenantId is immutable/;
      const other = "6f1c1d2e-0000-4000-8000-0000000000ff";
      const changed = await submit("apply", connection(kind, name, { ...KINDS[kind].spec, tenantId: other }));
      expect(changed.stderr).toMatch(IMMUTABLE);
      const removed = await submit("replace", connection(kind, name, KINDS[kind].spec));
      expect(removed.stderr).toMatch(IMMUTABLE);
      const moved = await submit(
        "apply",
        connection(kind, name, { ...KINDS[kind].spec, tenantId: UUID, baseUrl: "https://moved.example" }),
      );
      expect(moved.stderr).not.toMatch(/Forbidden|Invalid/);
      expect(moved.code).toBe(0);

      const without = connectionName();
      await created(connection(kind, without, KINDS[kind].spec));
      const added = await submit("apply", connection(kind, without, { ...KINDS[kind].spec, tenantId: UUID }));
      expect(added.stderr).toMatch(IMMUTABLE);
    },
  );

  it("ClusterServiceConnection: accepts a full namespaceSelector (matchLabels, every operator, prefixed keys)", async () => {
    const spec = {
      ...CLUSTER_SPEC,
      namespaceSelector: {
        matchLabels: { "dms.dev/tenant": "staging", team: "" },
        matchExpressions: [
          { key: "kubernetes.io/metadata.name", operator: "In", values: ["team-a", "team-b"] },
          { key: "tier", operator: "NotIn", values: ["dev"] },
          { key: `${"a".repeat(63)}.example.com/${"n".repeat(63)}`, operator: "Exists" },
          { key: "quarantine", operator: "DoesNotExist" },
        ],
      },
    };
    const result = await submit("create", connection("ClusterServiceConnection", connectionName(), spec));
    expect(result.stderr).toBe("");
    expect(result.code).toBe(0);
  });

  it("teaches the resources through kubectl explain", async () => {
    const out = await kubectlOk([
      "explain",
      "clusterserviceconnections.dms.dev.spec.apiKeySecretRef.namespace",
    ]);
    expect(out).toContain("Namespace of the Secret");
  });
});

const invalidConnections: Array<{ reason: string; kind: ConnectionKind; spec: Spec; message: RegExp }> = [
  {
    reason: "a missing baseUrl",
    kind: "ServiceConnection",
    spec: { apiKeySecretRef: KEY_REF },
    message: /spec\.baseUrl: Required value/,
  },
  {
    reason: "a missing apiKeySecretRef",
    kind: "ClusterServiceConnection",
    spec: { baseUrl: "https://api.example.com" },
    message: /spec\.apiKeySecretRef: Required value/,
  },
  {
    reason: "a rolloutWindowsPolicy that is neither Advisory nor Binding",
    kind: "ClusterServiceConnection",
    spec: { ...CLUSTER_SPEC, rolloutWindowsPolicy: "Strict" },
    message:
      /spec\.rolloutWindowsPolicy: Unsupported value: "Strict": supported values: "Advisory", "Binding"/,
  },
  ...(
    [
      ["of another scheme", "ServiceConnection", "ftp://api.example.com"],
      // The pattern lets it through; the URL library does not parse the port.
      ["whose port is not a number", "ServiceConnection", "https://api.example.com:https"],
      ["without a host", "ClusterServiceConnection", "https://:8080/"],
    ] as const
  ).map(([what, kind, baseUrl]) => ({
    reason: `a baseUrl ${what}`,
    kind,
    spec: { ...KINDS[kind].spec, baseUrl },
    message: /spec\.baseUrl: Invalid value: .*spec\.baseUrl must be an http or https URL with a host/,
  })),
  {
    reason: "a baseUrl that is not a URL",
    kind: "ServiceConnection",
    spec: { ...CONNECTION_SPEC, baseUrl: "api.example.com" },
    message: /spec\.baseUrl: Invalid value: "api\.example\.com"/,
  },
  {
    reason: "a tenantId that is not a uuid",
    kind: "ServiceConnection",
    spec: { ...CONNECTION_SPEC, tenantId: "acme" },
    message: /spec\.tenantId: Invalid value: "acme"/,
  },
  {
    reason: "a cluster connection without the Secret's namespace",
    kind: "ClusterServiceConnection",
    spec: CONNECTION_SPEC,
    message: /spec\.apiKeySecretRef\.namespace: Required value/,
  },
  {
    reason: "a Secret namespace that is not a namespace name",
    kind: "ClusterServiceConnection",
    spec: { ...CLUSTER_SPEC, apiKeySecretRef: { ...KEY_REF, namespace: "Team_A" } },
    message: /spec\.apiKeySecretRef\.namespace: Invalid value: "Team_A"/,
  },
  {
    // Strict field validation names it; the namespaced kind reads its own namespace only.
    reason: "a namespaced connection naming the Secret's namespace",
    kind: "ServiceConnection",
    spec: CLUSTER_SPEC,
    message: /unknown field "spec\.apiKeySecretRef\.namespace"/,
  },
  {
    reason: "a Secret key that no Secret can hold",
    kind: "ServiceConnection",
    spec: { ...CONNECTION_SPEC, apiKeySecretRef: { name: "s", key: "a/b" } },
    message: /spec\.apiKeySecretRef\.key: Invalid value: "a\/b"/,
  },
  {
    reason: "a baseUrl with a fragment, even an empty one",
    kind: "ServiceConnection",
    spec: { ...CONNECTION_SPEC, baseUrl: "http://169.254.169.254/computeMetadata/v1/token#" },
    message:
      /spec\.baseUrl: Forbidden: spec\.baseUrl must not have a fragment \(#…\): .*remove everything from the "#"/,
  },
  {
    reason: "a baseUrl with a query",
    kind: "ClusterServiceConnection",
    spec: { ...CLUSTER_SPEC, baseUrl: "http://169.254.169.254/computeMetadata/v1/x?y=" },
    message:
      /spec\.baseUrl: Forbidden: spec\.baseUrl must not have a query \(\?…\): .*remove everything from the "\?"/,
  },
  {
    reason: "a baseUrl with user-info",
    kind: "ServiceConnection",
    spec: { ...CONNECTION_SPEC, baseUrl: "https://user:pw@host" },
    message:
      /spec\.baseUrl: Forbidden: spec\.baseUrl must not carry user-info \(user:password@host\): put the API key in the Secret named by spec\.apiKeySecretRef/,
  },
  {
    reason: "Host as the API key's header",
    kind: "ServiceConnection",
    spec: { ...CONNECTION_SPEC, apiKeyHeader: "Host" },
    message:
      /spec\.apiKeyHeader: Forbidden: spec\.apiKeyHeader must not be a header that frames, routes or proxies the request.*choose a header of your own/,
  },
  {
    reason: "Transfer-Encoding, in any case, as the tenant header",
    kind: "ClusterServiceConnection",
    spec: { ...CLUSTER_SPEC, tenantIdHeader: "transfer-ENCODING" },
    message: /spec\.tenantIdHeader: Forbidden: spec\.tenantIdHeader must not be a header that frames/,
  },
  ...(
    [
      ["the metadata address", "http://169.254.169.254/latest/meta-data/"],
      ["another link-local address, with a port", "https://169.254.170.2:8443"],
      ["an IPv6 link-local address", "http://[fe80::a9fe:a9fe]/"],
      ["an IPv4-mapped link-local address", "http://[::ffff:169.254.169.254]/"],
      ["an IPv4-mapped link-local address in hexadecimal", "http://[0:0:0:0:0:FFFF:a9fe:a9fe]/"],
      ["a NAT64 link-local address", "http://[64:ff9b::a9fe:a9fe]/"],
      ["AWS's IPv6 metadata address", "http://[fd00:ec2::254]/"],
      ["an IPv4-translated link-local address", "http://[::ffff:0:169.254.169.254]/"],
      ["a 6to4 address carrying a link-local one", "http://[2002:a9fe:a9fe::1]/"],
      ["a NAT64 local-use address", "http://[64:ff9b:1::a9fe:a9fe]/"],
      ["Azure's platform endpoint", "http://168.63.129.16/machine/"],
      ["Oracle Cloud's metadata address", "http://192.0.0.192/opc/v2/instance/"],
    ] as const
  ).map(([what, baseUrl], i) => ({
    reason: `${what} as baseUrl`,
    kind: i % 2 === 0 ? ("ServiceConnection" as const) : ("ClusterServiceConnection" as const),
    spec: { ...(i % 2 === 0 ? CONNECTION_SPEC : CLUSTER_SPEC), baseUrl },
    message:
      /spec\.baseUrl: Forbidden: spec\.baseUrl must not be a link-local address .*the operator never connects to one/,
  })),
  ...(
    [
      ["a metadata service's name", "http://metadata.google.internal/computeMetadata/v1/"],
      ["a metadata service's short name, in capitals, with a final dot", "http://METADATA./"],
      ["Azure's metadata name", "https://metadata.azure.com"],
      ["AWS's metadata name", "http://instance-data:80/latest"],
    ] as const
  ).map(([what, baseUrl]) => ({
    reason: `${what} as baseUrl`,
    kind: "ServiceConnection" as const,
    spec: { ...CONNECTION_SPEC, baseUrl },
    message: /spec\.baseUrl: Forbidden: spec\.baseUrl must not name a cloud metadata service/,
  })),
  ...(
    [
      ["a link-local address as one decimal number", "http://2852039166/"],
      ["a link-local address as one hexadecimal number", "http://0xa9fea9fe/"],
      ["a link-local address in octal", "http://0251.0376.0251.0376/"],
      ["a link-local address with its last two bytes as one number", "http://169.254.43518/"],
      ["an IPv4 address with a leading zero", "http://010.0.0.1/"],
    ] as const
  ).map(([what, baseUrl]) => ({
    reason: `${what} as baseUrl`,
    kind: "ClusterServiceConnection" as const,
    spec: { ...CLUSTER_SPEC, baseUrl },
    message:
      /spec\.baseUrl: Invalid value: .*write an IPv4 address as four decimal numbers without leading zeros/,
  })),
  ...(
    [
      ["full-width digits and ideographic dots", "http://１６９。２５４。１６９。２５４/"],
      ["a full-width full stop", "http://169．254．169．254/"],
      ["a halfwidth ideographic full stop", "http://169｡254｡169｡254:80/"],
      ["full-width letters", "https://ｍｅｔａｄａｔａ.google.internal/"],
    ] as const
  ).map(([what, baseUrl], i) => ({
    reason: `a host written with ${what}`,
    kind: i % 2 === 0 ? ("ServiceConnection" as const) : ("ClusterServiceConnection" as const),
    spec: { ...(i % 2 === 0 ? CONNECTION_SPEC : CLUSTER_SPEC), baseUrl },
    message:
      /spec\.baseUrl: Invalid value: .*spec\.baseUrl must write its host in ASCII: .*write them as 0-9, a-z and '\.'/,
  })),
  ...["Metadata-Flavor", "metadata", "X-aws-ec2-metadata-token", "x-google-metadata-request"].map(
    (header) => ({
      reason: `${header} as the API key's header`,
      kind: "ServiceConnection" as const,
      spec: { ...CONNECTION_SPEC, apiKeyHeader: header },
      message:
        /spec\.apiKeyHeader: Forbidden: spec\.apiKeyHeader must not be a header .*or that a cloud metadata service requires/,
    }),
  ),
  {
    reason: "a baseUrl longer than 2048 characters",
    kind: "ServiceConnection",
    spec: { ...CONNECTION_SPEC, baseUrl: `https://api.example.com/${"a".repeat(2048)}` },
    message: /spec\.baseUrl: Too long: may not be (more|longer) than 2048/,
  },
  {
    reason: "a header name with a space",
    kind: "ServiceConnection",
    spec: { ...CONNECTION_SPEC, apiKeyHeader: "X Api Key" },
    message: /spec\.apiKeyHeader: Invalid value: "X Api Key"/,
  },
  {
    reason: "a qps of zero",
    kind: "ServiceConnection",
    spec: { ...CONNECTION_SPEC, qps: 0 },
    message: /spec\.qps: Invalid value: .*spec\.qps must be at least 0\.001 requests per second/,
  },
  {
    reason: "a qps below the minimum",
    kind: "ClusterServiceConnection",
    spec: { ...CLUSTER_SPEC, qps: 0.0001 },
    message: /spec\.qps: Invalid value: 0\.0001: .*greater than or equal to 0\.001/,
  },
  {
    reason: "a namespaceSelector on a namespaced connection (it serves its own namespace only)",
    kind: "ServiceConnection",
    spec: { ...CONNECTION_SPEC, namespaceSelector: { matchLabels: { team: "a" } } },
    message: /unknown field "spec\.namespaceSelector"/,
  },
  {
    reason: "a namespaceSelector label key that is not one",
    kind: "ClusterServiceConnection",
    spec: { ...CLUSTER_SPEC, namespaceSelector: { matchLabels: { "-team": "a" } } },
    message: /spec\.namespaceSelector\.matchLabels: Invalid value: .*a label key is \[prefix\/\]name/,
  },
  {
    reason: "a namespaceSelector label key whose prefix is longer than 253",
    kind: "ClusterServiceConnection",
    spec: {
      ...CLUSTER_SPEC,
      namespaceSelector: { matchExpressions: [{ key: `${"a".repeat(254)}/team`, operator: "Exists" }] },
    },
    message: /spec\.namespaceSelector\.matchExpressions\[0\]\.key: Invalid value: .*a label key is/,
  },
  {
    reason: "a namespaceSelector label value longer than 63",
    kind: "ClusterServiceConnection",
    spec: { ...CLUSTER_SPEC, namespaceSelector: { matchLabels: { team: "a".repeat(64) } } },
    message: /spec\.namespaceSelector\.matchLabels\.team: Too long/,
  },
  {
    reason: "a namespaceSelector operator Kubernetes does not know",
    kind: "ClusterServiceConnection",
    spec: {
      ...CLUSTER_SPEC,
      namespaceSelector: { matchExpressions: [{ key: "team", operator: "Gt", values: ["1"] }] },
    },
    message: /spec\.namespaceSelector\.matchExpressions\[0\]\.operator: Unsupported value: "Gt"/,
  },
  {
    reason: "In without values",
    kind: "ClusterServiceConnection",
    spec: { ...CLUSTER_SPEC, namespaceSelector: { matchExpressions: [{ key: "team", operator: "In" }] } },
    message:
      /spec\.namespaceSelector\.matchExpressions\[0\]\.values: Invalid value: .*In and NotIn need at least one value/,
  },
  {
    reason: "Exists with values",
    kind: "ClusterServiceConnection",
    spec: {
      ...CLUSTER_SPEC,
      namespaceSelector: { matchExpressions: [{ key: "team", operator: "Exists", values: ["a"] }] },
    },
    message: /Exists and DoesNotExist take none/,
  },
  {
    reason: "a namespaceSelector with more than 32 matchLabels",
    kind: "ClusterServiceConnection",
    spec: {
      ...CLUSTER_SPEC,
      namespaceSelector: {
        matchLabels: Object.fromEntries(Array.from({ length: 33 }, (_, i) => [`k${i}`, "v"])),
      },
    },
    message: /spec\.namespaceSelector\.matchLabels: Too many: 33: must have at most 32 items/,
  },
  {
    reason: "a burst of zero",
    kind: "ClusterServiceConnection",
    spec: { ...CLUSTER_SPEC, burst: 0 },
    message: /spec\.burst: Invalid value: 0: .*greater than or equal to 1/,
  },
  ...rolloutWindowCases().map((c) => ({
    ...c,
    kind: "ClusterServiceConnection" as const,
    spec: { ...CLUSTER_SPEC, ...c.spec },
  })),
];

describe.concurrent("connection CRDs: refused input names the field", () => {
  it.for(invalidConnections)("$kind: refuses $reason", async ({ kind, spec, message }, { expect }) => {
    const result = await submit("create", connection(kind, connectionName(), spec));
    expect(result.code).not.toBe(0);
    expect(result.stderr).toMatch(message);
  });
});

describe("kubectl get: short names, category dms, printer columns", () => {
  const status = {
    conditions: [
      {
        type: "Ready",
        status: "True",
        reason: "Connected",
        message: "the service listed 3 providers",
        lastTransitionTime: "2026-01-01T00:00:00Z",
      },
    ],
    providers: 3,
    deployments: 2,
    refused: 1,
  };
  let clusterName: string;

  beforeAll(async () => {
    clusterName = connectionName();
    for (const [kind, name] of [
      ["ServiceConnection", "columns"],
      ["ClusterServiceConnection", clusterName],
    ] as const) {
      await created(connection(kind, name, { ...KINDS[kind].spec, tenantId: UUID }));
      await kubectlOk([
        "patch",
        KINDS[kind].plural,
        name,
        "-n",
        namespace,
        "--subresource=status",
        "--type=merge",
        "-p",
        JSON.stringify({ status }),
      ]);
    }
  });

  /** The header and the row of `name` in a `kubectl get` table, split on runs of 2+ spaces. */
  const table = async (args: string[], name: string) => {
    const lines = (await kubectlOk(["get", ...args])).trimEnd().split("\n");
    const cells = (line: string) => line.trim().split(/\s{2,}/);
    const row = lines.find((line) => line.split(/\s+/).includes(name));
    return { header: cells(lines[0] ?? ""), row: row ? cells(row) : [] };
  };

  it.each([
    ["dmsconn", "ServiceConnection"],
    ["dmscconn", "ClusterServiceConnection"],
  ] as const)(
    "kubectl get %s -o wide shows Ready, Reason, Base URL, Providers, Age, Tenant, Deployments, Refused",
    async (short, kind) => {
      const name = kind === "ServiceConnection" ? "columns" : clusterName;
      const { header, row } = await table([short, "-n", namespace, "-o", "wide"], name);
      expect(header).toEqual([
        "NAME",
        "READY",
        "REASON",
        "BASE URL",
        "PROVIDERS",
        "AGE",
        "TENANT",
        "DEPLOYMENTS",
        "REFUSED",
      ]);
      expect(row).toEqual([
        name,
        "True",
        "Connected",
        "https://api.example.com",
        "3",
        expect.any(String),
        UUID,
        "2",
        "1",
      ]);
      const narrow = await table([short, "-n", namespace], name);
      expect(narrow.header).toEqual(["NAME", "READY", "REASON", "BASE URL", "PROVIDERS", "AGE"]);
    },
  );

  it("kubectl get dms lists the Deployments and both connection kinds", async () => {
    const out = await kubectlOk(["get", "dms", "-n", namespace, "-o", "name"]);
    const kinds = new Set(
      out
        .trim()
        .split("\n")
        .map((line) => line.split("/")[0]),
    );
    expect(kinds).toEqual(
      new Set(["deployment.dms.dev", "serviceconnection.dms.dev", "clusterserviceconnection.dms.dev"]),
    );
    expect(out).toContain("serviceconnection.dms.dev/columns");
    expect(out).toContain(`clusterserviceconnection.dms.dev/${clusterName}`);
  });
});
