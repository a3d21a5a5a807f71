// The Helm chart without a cluster: its version is the package's, its CRDs are crds/', every
// `run` setting a platform team sets is a value passed under the operator's own variable name,
// what it renders for metrics, a private CA and a proxy is what the operator reads, and
// values.schema.json refuses a typo naming it. Rendering runs the real helm (`helm template`,
// `helm lint`); installing it, and the comparison with the kustomize install, are in
// test/e2e/helm-chart.test.ts.
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { parse } from "yaml";
import type { CliContext } from "../../src/commands/context.ts";
import { createProgram } from "../../src/commands/program.ts";
import { registerRunCommand } from "../../src/commands/run.ts";
import { type RunFlags, runConfigFrom } from "../../src/commands/run-config.ts";
import { chartConfigName, chartConfigSchema, SETTINGS } from "../../src/commands/settings.ts";
import { serviceConfigFrom } from "../../src/config.ts";
import { CRDS, crdFile, renderCrd } from "../../src/crd/render.ts";
import { createTestCa } from "../support/certificates.ts";
import {
  CHART,
  compareChartVersions,
  helm,
  helmBinary,
  type K8sObject,
  renderChart,
} from "../support/helm-chart.ts";
import { LAST_RELEASE, PACKAGE_VERSION } from "../support/release.ts";

const root = join(import.meta.dirname, "..", "..");
const values = parse(readFileSync(join(CHART, "values.yaml"), "utf8")) as {
  config: Record<string, unknown>;
} & Record<string, unknown>;

/** A volume of the operator's pod, as the chart renders them (only the fields read here). */
interface Volume {
  name: string;
  secret?: { secretName: string; items?: { key: string; path: string }[] };
  configMap?: { name: string; items?: { key: string; path: string }[] };
}

/** The pod spec of the operator's Deployment in a rendering. */
function podSpec(objects: K8sObject[]) {
  const deployment = objects.find((o) => o.kind === "Deployment") as unknown as {
    spec: {
      replicas: number;
      template: {
        spec: {
          containers: {
            name: string;
            image: string;
            args: string[];
            env: { name: string; value?: string }[];
            ports: { name: string; containerPort: number }[];
            volumeMounts: { name: string; mountPath: string; readOnly?: boolean }[];
          }[];
          volumes: Volume[];
        };
      };
    };
  };
  return deployment.spec.template.spec;
}

/** The operator container of a rendering. */
function operatorContainer(objects: K8sObject[]) {
  const container = podSpec(objects).containers.find((c) => c.name === "operator");
  if (!container) throw new Error("the rendering has no operator container");
  return container;
}

/**
 * The files the pod shows at `dir` from its volume of that mount, as `path → source/key`
 * (`secret:<name>/<key>` or `configMap:<name>/<key>`).
 */
function filesAt(objects: K8sObject[], dir: string): Record<string, string> {
  const mount = operatorContainer(objects).volumeMounts.find((m) => m.mountPath === dir);
  if (!mount) return {};
  expect(mount.readOnly, `the mount at ${dir}`).toBe(true);
  const volume = podSpec(objects).volumes.find((v) => v.name === mount.name);
  const source = volume?.secret
    ? { kind: "secret", name: volume.secret.secretName, items: volume.secret.items }
    : volume?.configMap
      ? { kind: "configMap", name: volume.configMap.name, items: volume.configMap.items }
      : undefined;
  if (!source?.items) throw new Error(`the volume mounted at ${dir} lists no items`);
  return Object.fromEntries(
    source.items.map((item) => [`${dir}/${item.path}`, `${source.kind}:${source.name}/${item.key}`]),
  );
}

/**
 * What `dms-operator run` makes of the operator container of a rendering: its args parsed by the
 * `run` command itself, its literal environment (with the downward API's namespace and the
 * credentials Secret's base URL), every file it names left out (the API key and CA files, which
 * exist only in the pod).
 */
async function operatorReads(objects: K8sObject[]) {
  const { DMS_API_KEY_FILE: _key, DMS_CA_FILE: _ca, ...literal } = envOf(objects);
  const env = { ...literal, POD_NAMESPACE: "dms-system", DMS_BASE_URL: "https://api.example.com" };
  const ctx: CliContext = {
    out: () => {},
    err: () => {},
    stdoutIsTTY: false,
    env,
    stopSignal: new AbortController().signal,
  };
  let flags: RunFlags | undefined;
  const program = createProgram(ctx, [registerRunCommand]);
  program.commands
    .find((c) => c.name() === "run")
    ?.action((given: RunFlags) => {
      flags = given;
    });
  const args = operatorContainer(objects).args.map((a) => a.replaceAll("$(POD_NAMESPACE)", "dms-system"));
  await program.parseAsync(args, { from: "user" });
  if (!flags) throw new Error(`run was not parsed from ${args.join(" ")}`);
  const result = runConfigFrom(flags, env);
  if (!result.ok) throw new Error(`run refuses the rendering: ${result.problems.join("; ")}`);
  return result.config;
}

/** The literal environment of the operator container. */
const envOf = (objects: K8sObject[]) =>
  Object.fromEntries(
    operatorContainer(objects).env.flatMap((e) =>
      e.value === undefined ? [] : [[e.name, e.value] as const],
    ),
  );

/** The value at a dotted path of values.yaml (`leaderElection.enabled`), if there is one. */
function valueAt(path: string): unknown {
  return path
    .split(".")
    .reduce<unknown>(
      (at, part) =>
        typeof at === "object" && at !== null && part in at
          ? (at as Record<string, unknown>)[part]
          : undefined,
      values,
    );
}

/** The `config` value of each setting the chart passes there, by the setting's name. */
const CONFIG_VALUES = Object.fromEntries(
  Object.entries(SETTINGS).flatMap(([key, setting]) => {
    const name = chartConfigName(key, setting.chart);
    return name === undefined ? [] : [[key, name] as const];
  }),
);

describe("the chart's package", () => {
  it("has package.json's version as its version and appVersion (a release publishes both at once)", () => {
    const chart = parse(readFileSync(join(CHART, "Chart.yaml"), "utf8")) as Record<string, unknown>;
    expect(chart.version).toBe(PACKAGE_VERSION);
    expect(chart.appVersion).toBe(PACKAGE_VERSION);
  });

  it("carries the last release's version, or between releases a pre-release of a later one", () => {
    if (PACKAGE_VERSION === LAST_RELEASE) return;
    expect(PACKAGE_VERSION, "a version being made has a pre-release tag, e.g. 0.2.0-dev").toMatch(/-/);
    expect(compareChartVersions(PACKAGE_VERSION, LAST_RELEASE), `above ${LAST_RELEASE}`).toBeGreaterThan(0);
  });

  it("is installed by the READMEs and the guide from the registry a release publishes it to, at the last release", () => {
    const guide = ["install.md", "security.md"].map((page) => join(root, "docs", "guide", page));
    for (const readme of [join(root, "README.md"), join(CHART, "README.md"), ...guide]) {
      const installs = readFileSync(readme, "utf8")
        .split("\n")
        .filter((line) => line.startsWith("helm install "));
      expect(installs.length, readme).toBeGreaterThan(0);
      for (const line of installs) {
        const [, , , chart] = line.split(/\s+/);
        if (chart?.startsWith("oci://")) {
          // By version, or by the digest a verified pull printed.
          const [ref, digest] = chart.split("@");
          expect(ref).toBe("oci://ghcr.io/dms-dev/charts/dms-operator");
          if (digest === undefined) expect(line).toContain(`--version ${LAST_RELEASE} `);
          else expect(digest).toMatch(/^sha256:/);
        } else expect(join(root, chart ?? "")).toBe(CHART);
      }
    }
  });

  it("holds exactly the CRDs of crds/, as `npm run generate` writes them", () => {
    const dir = join(CHART, "files", "crds");
    expect(readdirSync(dir).sort()).toEqual(CRDS.map((crd) => crdFile(crd).replace(/^crds\//, "")).sort());
    for (const crd of CRDS) {
      const copy = readFileSync(join(dir, crdFile(crd).replace(/^crds\//, "")), "utf8");
      expect(copy, `${dir} is out of date: run \`npm run generate\``).toBe(renderCrd(crd));
    }
  });

  it("holds the deletion protection policy of manifests/crd, as `npm run generate` copies it", () => {
    const copy = readFileSync(join(CHART, "files", "deletion-protection-policy.yaml"), "utf8");
    expect(copy, "the chart's copy is out of date: run `npm run generate`").toBe(
      readFileSync(join(root, "manifests", "crd", "deletion-protection-policy.yaml"), "utf8"),
    );
  });

  it("passes every `run` setting: a `config` value each, or another value that exists, as the table says", () => {
    expect(Object.keys(values.config).sort()).toEqual(Object.values(CONFIG_VALUES).sort());
    for (const [key, setting] of Object.entries(SETTINGS)) {
      const chart = setting.chart;
      expect(chart, `${key} says how the chart passes it`).toBeDefined();
      if (typeof chart === "object" && "value" in chart)
        expect(valueAt(chart.value), `${key} is set by ${chart.value}`).not.toBeUndefined();
    }
    // Only what a pod has no use for is left out: it has no kubeconfig, but its ServiceAccount.
    const none = Object.entries(SETTINGS).filter(([, s]) => typeof s.chart === "object" && "none" in s.chart);
    expect(none.map(([key]) => key).sort()).toEqual(["context", "kubeconfig"]);
  });

  it("holds the `config` schema the table of settings gives, as `npm run generate` writes it", () => {
    const schema = JSON.parse(readFileSync(join(CHART, "values.schema.json"), "utf8")) as {
      properties: { config: unknown };
    };
    expect(schema.properties.config, "values.schema.json is out of date: run `npm run generate`").toEqual(
      chartConfigSchema(),
    );
    // A deprecated spelling is read (the schema has it) but not offered in values.yaml.
    expect(values.config).not.toHaveProperty("insecureSkipTlsVerify");
  });

  it("documents every block of values.yaml in its README's table of values", () => {
    const readme = readFileSync(join(CHART, "README.md"), "utf8");
    const table = readme.slice(readme.indexOf("## Values"));
    const documented = new Set(
      table
        .split("\n")
        .filter((line) => line.startsWith("| `"))
        .flatMap((line) => [...(line.split("|")[1] ?? "").matchAll(/`([A-Za-z]+)[.`*]/g)].map((m) => m[1])),
    );
    expect(Object.keys(values).filter((key) => !documented.has(key))).toEqual([]);
  });
});

// Each case runs helm a few times (a second each on a busy machine), on values of its own and
// sharing nothing but the binary: the cases of this and the blocks below run a few at a time.
// Run so, a case's time is mostly its neighbours' helm processes on the same cores, which a CI
// machine running other files beside them stretches several times (30 s was reached): the
// timeout guards against a helm that hangs, and is no measure of a case's work.
const HELM_CASES = 120_000;
describe("helm template charts/dms-operator", { timeout: HELM_CASES, concurrent: true }, () => {
  let bin: string;
  beforeAll(async () => {
    bin = await helmBinary();
  }, 900_000);

  it("passes each `config` value as the setting's own environment variable, numbers without an exponent", async ({
    expect,
  }) => {
    const given: Record<string, string> = {
      namespaces: "{team-a,team-b}",
      clusterConnections: "false",
      labelSelector: "shard=1",
      defaultConnectionNamespaceSelector: "dms.dev/tenant=platform",
      concurrency: "8",
      maxReconcilesPerConnection: "3",
      resyncPeriod: "5m",
      listingDeadline: "30s",
      logLevel: "debug",
      logFormat: "console",
      shutdownTimeout: "20s",
      pollInterval: "10s",
      createGrace: "90s",
      reconcileTimeout: "3m",
      revisionTracking: "off",
      maxSecretBytes: "16777216",
      connectionAddressPolicy: "public-only",
      maxConnectionsPerNamespace: "5",
      optimizeForSize: "off",
      apiKeyHeader: "X-Key",
      tenantHeader: "X-Tenant",
      insecureSkipTLSVerify: "true",
      timeoutMs: "20000",
      maxResponseBytes: "1073741824",
      retries: "2",
      qps: "0.5",
      burst: "10",
    };
    expect(Object.keys(given).sort()).toEqual(Object.keys(values.config).sort());
    const objects = await renderChart(bin, {
      namespace: "dms-system",
      set: Object.entries(given).map(([key, value]) => `config.${key}=${value}`),
    });
    const env = envOf(objects);
    const settingOf = Object.fromEntries(Object.entries(CONFIG_VALUES).map(([key, value]) => [value, key]));
    for (const [key, text] of Object.entries(given)) {
      const name = SETTINGS[settingOf[key] ?? key]?.env;
      expect(name, `${key} has an environment variable`).toBeDefined();
      expect(env[name as string], `config.${key} → ${name}`).toBe(
        text === "{team-a,team-b}" ? "team-a,team-b" : text,
      );
    }
    // …and `run` reads each into the operator's settings.
    expect(await operatorReads(objects)).toMatchObject({
      namespaces: ["team-a", "team-b"],
      concurrency: 8,
      maxReconcilesPerConnection: 3,
      logLevel: "debug",
      logFormat: "console",
      maxSecretBytes: 16_777_216,
      service: { qps: 0.5, insecureSkipTlsVerify: true, apiKeyHeader: "X-Key" },
    });
  });

  it("leaves every `config` value at the operator's default when unset: no DMS_* variable but the credentials'", async ({
    expect,
  }) => {
    const env = operatorContainer(await renderChart(bin, { namespace: "dms-system" })).env.map((e) => e.name);
    expect(env.filter((name) => name.startsWith("DMS_"))).toEqual([
      "DMS_BASE_URL",
      "DMS_TENANT_ID",
      "DMS_API_KEY_FILE",
    ]);
  });

  it("pulls the chart's appVersion by default, another tag when given, and by digest when one is given", async ({
    expect,
  }) => {
    const image = async (set: string[]) =>
      operatorContainer(await renderChart(bin, { namespace: "dms-system", set })).image;
    const chart = parse(readFileSync(join(CHART, "Chart.yaml"), "utf8")) as { appVersion: string };
    expect(await image([])).toBe(`ghcr.io/dms-dev/dms-operator:${chart.appVersion}`);
    expect(await image(["image.tag=0.2.0-rc.1"])).toBe("ghcr.io/dms-dev/dms-operator:0.2.0-rc.1");
    const digest = `sha256:${"ab".repeat(32)}`;
    expect(await image(["image.tag=0.2.0", `image.digest=${digest}`])).toBe(
      `ghcr.io/dms-dev/dms-operator@${digest}`,
    );
  });

  it("sizes the runtime from `runtime` and passes leader election and the metrics mode as `run`'s flags", async ({
    expect,
  }) => {
    const objects = await renderChart(bin, {
      namespace: "dms-system",
      set: [
        "runtime.heapSizeMiB=192",
        "runtime.extraNodeOptions=--trace-gc",
        "leaderElection.enabled=false",
        "leaderElection.id=shard-b",
        "leaderElection.leaseDuration=30s",
        "metrics.secure=false",
        "replicas=1",
      ],
    });
    expect(envOf(objects)).toMatchObject({
      NODE_OPTIONS: "--max-old-space-size=192 --max-semi-space-size=1 --trace-gc",
      MALLOC_ARENA_MAX: "2",
      DMS_LEADER_ELECTION_ID: "shard-b",
    });
    expect(operatorContainer(objects).args).toEqual([
      "run",
      "--no-leader-elect",
      // Plain HTTP answers anyone: on the pod's loopback unless metrics.loopbackOnly says otherwise.
      "--metrics-bind-address=127.0.0.1:8080",
      "--health-probe-bind-address=:8081",
      "--metrics-secure=false",
      "--lease-duration=30s",
    ]);
    // Without leader election there is no Lease to grant.
    expect(objects.map((o) => o.metadata.name)).not.toContain("dms-operator-leader-election");
  });

  it("creates the credentials Secret from values when asked, and rolls the pods when it changes", async ({
    expect,
  }) => {
    const render = (apiKey: string) =>
      renderChart(bin, {
        namespace: "dms-system",
        set: [
          "credentials.create=true",
          "credentials.baseUrl=https://api.example.com",
          `credentials.apiKey=${apiKey}`,
        ],
      });
    const objects = await render("key-1");
    const secret = objects.find((o) => o.kind === "Secret");
    expect(secret).toMatchObject({
      metadata: { name: "dms-operator-credentials", namespace: "dms-system" },
      stringData: { "base-url": "https://api.example.com", "api-key": "key-1" },
    });
    const checksum = (o: K8sObject[]) =>
      (
        o.find((x) => x.kind === "Deployment") as unknown as {
          spec: { template: { metadata: { annotations: Record<string, string> } } };
        }
      ).spec.template.metadata.annotations["checksum/credentials"];
    expect(checksum(objects)).toMatch(/^[0-9a-f]{64}$/);
    expect(checksum(await render("key-2"))).not.toBe(checksum(objects));
  });

  it("renders the CRDs, kept on uninstall, with scope cluster and not with scope namespace unless crds.enabled says so", async ({
    expect,
  }) => {
    const crds = async (set: string[]) =>
      (await renderChart(bin, { namespace: "dms-system", set })).filter(
        (o) => o.kind === "CustomResourceDefinition",
      );
    const cluster = await crds([]);
    expect(cluster.map((o) => o.metadata.name).sort()).toEqual(
      CRDS.map((crd) => `${crd.plural}.dms.dev`).sort(),
    );
    for (const crd of cluster)
      expect(crd.metadata.annotations).toEqual({ "helm.sh/resource-policy": "keep" });
    expect(await crds(["crds.enabled=false"])).toEqual([]);
    expect(await crds(["scope=namespace"])).toEqual([]);
    expect(await crds(["scope=namespace", "crds.enabled=true"])).toHaveLength(CRDS.length);
  });

  it("renders the deletion protection policy and its binding with the CRDs, named after the release and kept on uninstall", async ({
    expect,
  }) => {
    const policies = async (set: string[], release?: string) =>
      (await renderChart(bin, { namespace: "dms-system", set, ...(release ? { release } : {}) })).filter(
        (o) =>
          o.kind.startsWith("ValidatingAdmissionPolicy") && o.metadata.name.endsWith("-deletion-protection"),
      ) as unknown as (K8sObject & {
        spec: { policyName?: string; validations?: { expression: string }[] };
      })[];
    const [policy, binding] = await policies([], "team");
    expect([policy?.kind, binding?.kind]).toEqual([
      "ValidatingAdmissionPolicy",
      "ValidatingAdmissionPolicyBinding",
    ]);
    expect(policy?.metadata.name).toBe("team-dms-operator-deletion-protection");
    expect(binding?.metadata.name).toBe("team-dms-operator-deletion-protection");
    expect(binding?.spec.policyName).toBe("team-dms-operator-deletion-protection");
    expect(policy?.spec.validations?.[0]?.expression).toContain("oldObject.spec.deletionProtection");
    for (const o of [policy, binding]) {
      expect(o?.metadata.annotations).toEqual({ "helm.sh/resource-policy": "keep" });
      expect(o?.metadata.labels).toMatchObject({ "app.kubernetes.io/instance": "team" });
    }
    expect(await policies(["crds.enabled=false"])).toEqual([]);
    expect(await policies(["scope=namespace"])).toEqual([]);
    expect(await policies(["scope=namespace", "crds.enabled=true"])).toHaveLength(2);
  });

  it("puts the release's Lease requests in the leader-election priority level by a FlowSchema; flowSchema.enabled=false, scope namespace or no leader election leave it out", async ({
    expect,
  }) => {
    type FlowSchema = K8sObject & {
      spec: {
        matchingPrecedence: number;
        priorityLevelConfiguration: { name: string };
        rules: {
          subjects: { kind: string; serviceAccount: { name: string; namespace: string } }[];
          resourceRules: {
            apiGroups: string[];
            resources: string[];
            verbs: string[];
            namespaces: string[];
          }[];
        }[];
      };
    };
    const flowSchemas = async (set: string[], release?: string) =>
      (await renderChart(bin, { namespace: "team-a", set, ...(release ? { release } : {}) })).filter(
        (o) => o.kind === "FlowSchema",
      ) as FlowSchema[];
    const [schema, ...more] = await flowSchemas(["serviceAccount.name=runner"], "team");
    expect(more).toEqual([]);
    expect(schema?.metadata.name).toBe("team-dms-operator-leader-election");
    expect(schema?.metadata.namespace).toBeUndefined();
    expect(schema?.metadata.labels).toMatchObject({ "app.kubernetes.io/instance": "team" });
    expect(schema?.spec.priorityLevelConfiguration).toEqual({ name: "leader-election" });
    // After the built-in system-leader-election (100), before service-accounts (9000).
    expect(schema?.spec.matchingPrecedence).toBe(200);
    expect(schema?.spec.rules).toHaveLength(1);
    expect(schema?.spec.rules[0]?.subjects).toEqual([
      { kind: "ServiceAccount", serviceAccount: { name: "runner", namespace: "team-a" } },
    ]);
    expect(schema?.spec.rules[0]?.resourceRules).toEqual([
      { apiGroups: ["coordination.k8s.io"], resources: ["leases"], verbs: ["*"], namespaces: ["team-a"] },
    ]);
    // The Leases live where leaderElection.namespace says.
    const [elsewhere] = await flowSchemas(["leaderElection.namespace=leases"]);
    expect(elsewhere?.spec.rules[0]?.resourceRules[0]?.namespaces).toEqual(["leases"]);
    expect(await flowSchemas(["flowSchema.enabled=false"])).toEqual([]);
    expect(await flowSchemas(["scope=namespace"])).toEqual([]);
    expect(await flowSchemas(["leaderElection.enabled=false", "replicas=1"])).toEqual([]);
  });

  it("narrows the operator's ConfigMap writes with the export policy, its parameter the release's ServiceAccount; export.enabled=false leaves ConfigMaps out", async ({
    expect,
  }) => {
    type Rendered = K8sObject & {
      spec: { policyName?: string; paramRef?: { name: string; namespace: string } };
      rules?: { resources?: string[] }[];
    };
    const render = async (set: string[]) =>
      (await renderChart(bin, { namespace: "team-ns", release: "team", set })) as unknown as Rendered[];
    const exportPolicy = (objects: Rendered[]) =>
      objects.filter((o) => o.metadata.name === "team-dms-operator-export-configmaps").map((o) => o.kind);
    const grantsConfigMaps = (objects: Rendered[]) =>
      objects.some(
        (o) =>
          (o.kind === "ClusterRole" || o.kind === "Role") &&
          o.rules?.some((r) => r.resources?.includes("configmaps")),
      );
    const all = await render([]);
    expect(exportPolicy(all)).toEqual(["ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"]);
    const binding = all.find(
      (o) => o.kind === "ValidatingAdmissionPolicyBinding" && o.metadata.name.endsWith("-export-configmaps"),
    );
    expect(binding?.spec.policyName).toBe("team-dms-operator-export-configmaps");
    expect(binding?.spec.paramRef).toMatchObject({ name: "team-dms-operator", namespace: "team-ns" });
    expect(grantsConfigMaps(all)).toBe(true);
    const off = await render(["export.enabled=false"]);
    expect(exportPolicy(off)).toEqual([]);
    expect(grantsConfigMaps(off)).toBe(false);
    const namespaced = await render(["scope=namespace"]);
    expect(exportPolicy(namespaced)).toEqual([]);
    expect(grantsConfigMaps(namespaced)).toBe(true);
    expect(grantsConfigMaps(await render(["scope=namespace", "export.enabled=false"]))).toBe(false);
  });

  it("holds the export ConfigMap policy of manifests/rbac, as `npm run generate` copies it", () => {
    expect(
      readFileSync(join(CHART, "files", "export-configmap-policy.yaml"), "utf8"),
      "the chart's copy is out of date: run `npm run generate`",
    ).toBe(readFileSync(join(root, "manifests", "rbac", "export-configmap-policy.yaml"), "utf8"));
  });

  it("refuses what the operator could not run with, naming the value and the fix", async ({ expect }) => {
    const refusal = async (set: string[]) => {
      const args = ["template", "dms-operator", CHART, ...set.flatMap((s) => ["--set", s])];
      const result = await helm(bin, args);
      expect(result.code).not.toBe(0);
      return result.stderr;
    };
    expect(
      await refusal(["credentials.create=true", "credentials.baseUrl=https://api.example.com"]),
    ).toContain("credentials.apiKey: the API key is required when credentials.create is true");
    expect(await refusal(["scope=namespace", "config.namespaces={a}"])).toContain(
      "config.namespaces: with scope: namespace the operator watches the release namespace only",
    );
    expect(await refusal(["serviceAccount.create=false"])).toContain(
      "serviceAccount.name: name the existing ServiceAccount",
    );
    // ClusterServiceConnections and the namespace labels they select by are cluster-scoped: the
    // Role cannot grant them, and the operator exits at start on the namespaces' 403.
    expect(await refusal(["scope=namespace", "config.clusterConnections=true"])).toContain(
      "config.clusterConnections: with scope: namespace",
    );
    // `run --sharded --no-leader-elect` exits at start: the elected leader assigns the resources.
    expect(await refusal(["sharding.enabled=true", "leaderElection.enabled=false"])).toContain(
      "sharding.enabled: needs leaderElection.enabled",
    );
    // Two replicas without leader election would both reconcile (and write) every resource.
    for (const replicas of [[], ["replicas=3"]])
      expect(await refusal(["leaderElection.enabled=false", ...replicas])).toMatch(
        /leaderElection.enabled=false with replicas: [23]: .*set replicas=1, or leaderElection.enabled=true/,
      );
    // A namespace-scoped release cannot create the cluster-scoped label policy.
    expect(await refusal(["scope=namespace", "sharding.enabled=true"])).toContain(
      "sharding.labelPolicy: with scope: namespace the release cannot create the shard label policy",
    );
  });

  it("renders leaderElection.enabled=false with one replica, and a sharded namespace-scoped release without cluster-scoped objects", async ({
    expect,
  }) => {
    const single = await renderChart(bin, {
      namespace: "dms-system",
      set: ["leaderElection.enabled=false", "replicas=1"],
    });
    expect(podSpec(single).containers[0]?.args).toContain("--no-leader-elect");
    for (const mode of ["required", "unenforced"]) {
      const objects = await renderChart(bin, {
        namespace: "team-a",
        set: [
          "scope=namespace",
          "sharding.enabled=true",
          "sharding.labelPolicy=false",
          `sharding.labelPolicyMode=${mode}`,
        ],
      });
      expect(operatorContainer(objects).args, mode).toContain("--sharded");
      expect(
        objects.filter((o) => !("namespace" in o.metadata)).map((o) => `${o.kind}/${o.metadata.name}`),
        mode,
      ).toEqual([]);
    }
  });
});

describe("helm template charts/dms-operator: metrics, a private CA, a proxy", {
  timeout: HELM_CASES,
  concurrent: true,
}, () => {
  let bin: string;
  beforeAll(async () => {
    bin = await helmBinary();
  }, 900_000);

  const render = (set: string[], namespace = "dms-system") => renderChart(bin, { namespace, set });
  const named = (objects: K8sObject[], kind: string, name: string) =>
    objects.find((o) => o.kind === kind && o.metadata.name === name);
  const reviewRules = (objects: K8sObject[], kind: string) =>
    ((named(objects, kind, "dms-operator")?.rules ?? []) as { resources?: string[] }[]).filter((r) =>
      r.resources?.some((x) => x.endsWith("reviews")),
    );

  it("serves HTTPS metrics on :8443 with scope cluster, its role creating the reviews; plain HTTP on the loopback with scope namespace", async ({
    expect,
  }) => {
    const cluster = await render([]);
    expect(await operatorReads(cluster)).toMatchObject({
      metricsSecure: true,
      metricsBindAddress: ":8443",
    });
    expect(operatorContainer(cluster).ports).toContainEqual({ name: "metrics", containerPort: 8443 });
    expect(reviewRules(cluster, "ClusterRole")).toEqual([
      { apiGroups: ["authentication.k8s.io"], resources: ["tokenreviews"], verbs: ["create"] },
      { apiGroups: ["authorization.k8s.io"], resources: ["subjectaccessreviews"], verbs: ["create"] },
    ]);
    expect(named(cluster, "ClusterRole", "dms-operator-metrics-reader")?.rules).toEqual([
      { nonResourceURLs: ["/metrics"], verbs: ["get"] },
    ]);

    const namespaced = await render(["scope=namespace"], "team-a");
    expect(await operatorReads(namespaced)).toMatchObject({
      metricsSecure: false,
      metricsBindAddress: "127.0.0.1:8080",
      namespaces: ["dms-system"], // $(POD_NAMESPACE), as operatorReads expands it
    });
    expect(operatorContainer(namespaced).ports.map((p) => p.name)).toEqual(["probes"]);
    expect(namespaced.filter((o) => !("namespace" in o.metadata)).map((o) => o.kind)).toEqual([]);
  });

  it("grants the install key in the Lease's namespace, whatever the scope: get on that Secret alone, create on the namespace's Secrets", async ({
    expect,
  }) => {
    const rules = [
      {
        apiGroups: [""],
        resources: ["secrets"],
        resourceNames: ["dms-operator-install-key"],
        verbs: ["get"],
      },
      { apiGroups: [""], resources: ["secrets"], verbs: ["create"] },
    ];
    for (const [set, namespace, where] of [
      [[], "dms-system", "dms-system"],
      [["scope=namespace"], "team-a", "team-a"],
      [["leaderElection.namespace=ops"], "dms-system", "ops"],
      [["leaderElection.enabled=false", "replicas=1"], "dms-system", "dms-system"],
    ] as const) {
      const objects = await render([...set], namespace);
      const role = named(objects, "Role", "dms-operator-install-key");
      expect(role?.metadata.namespace, set.join()).toBe(where);
      expect(role?.rules, set.join()).toEqual(rules);
      expect(named(objects, "RoleBinding", "dms-operator-install-key")?.metadata.namespace).toBe(where);
    }
  });

  it("follows metrics.secure, .port and .loopbackOnly when given, and leaves the reviews out of a role that needs none", async ({
    expect,
  }) => {
    const plain = await render(["metrics.secure=false", "metrics.loopbackOnly=false", "metrics.port=9090"]);
    expect(await operatorReads(plain)).toMatchObject({ metricsSecure: false, metricsBindAddress: ":9090" });
    expect(operatorContainer(plain).ports).toContainEqual({ name: "metrics", containerPort: 9090 });
    expect(reviewRules(plain, "ClusterRole")).toEqual([]);

    // A namespace-scoped release a cluster admin gave system:auth-delegator.
    const secure = await render(["scope=namespace", "metrics.secure=true"], "team-a");
    expect(await operatorReads(secure)).toMatchObject({ metricsSecure: true, metricsBindAddress: ":8443" });
    expect(operatorContainer(secure).ports).toContainEqual({ name: "metrics", containerPort: 8443 });
  });

  it("mounts metrics.certSecret's certificate and key where --metrics-cert-dir points, and the ServiceMonitor verifies it", async ({
    expect,
  }) => {
    const objects = await render(["metrics.certSecret=metrics-tls", "metrics.serviceMonitor.enabled=true"]);
    const config = await operatorReads(objects);
    expect(config).toMatchObject({ metricsSecure: true, metricsCertDir: expect.any(String) });
    expect(filesAt(objects, config.metricsCertDir ?? "")).toEqual({
      [`${config.metricsCertDir}/tls.crt`]: "secret:metrics-tls/tls.crt",
      [`${config.metricsCertDir}/tls.key`]: "secret:metrics-tls/tls.key",
    });
    expect(named(objects, "ServiceMonitor", "dms-operator")).toMatchObject({
      spec: {
        endpoints: [
          {
            port: "https",
            scheme: "https",
            tlsConfig: {
              ca: { secret: { name: "metrics-tls", key: "ca.crt" } },
              // The Service's name, as the Certificate must list it.
              serverName: "dms-operator-metrics.dms-system.svc",
            },
          },
        ],
      },
    });
    expect(named(objects, "Service", "dms-operator-metrics")).toBeDefined();

    const given = await render([
      "metrics.serviceMonitor.enabled=true",
      "metrics.serviceMonitor.tlsConfig.ca.configMap.name=corp-ca",
      "metrics.serviceMonitor.tlsConfig.ca.configMap.key=ca.crt",
    ]);
    expect(named(given, "ServiceMonitor", "dms-operator")).toMatchObject({
      spec: { endpoints: [{ tlsConfig: { ca: { configMap: { name: "corp-ca", key: "ca.crt" } } } }] },
    });
    expect(JSON.stringify(named(given, "ServiceMonitor", "dms-operator"))).not.toContain(
      "insecureSkipVerify",
    );
  });

  it("scrapes with the scraper's token, bound to the reader role, or with a token Secret of the user's; plain HTTP without a token", async ({
    expect,
  }) => {
    const objects = await render(["metrics.serviceMonitor.enabled=true"]);
    expect(named(objects, "Secret", "dms-operator-metrics-scraper-token")).toMatchObject({
      type: "kubernetes.io/service-account-token",
      metadata: { annotations: { "kubernetes.io/service-account.name": "dms-operator-metrics-scraper" } },
    });
    expect(named(objects, "ServiceAccount", "dms-operator-metrics-scraper")).toBeDefined();
    expect(named(objects, "ClusterRoleBinding", "dms-operator-metrics-reader")).toMatchObject({
      roleRef: { kind: "ClusterRole", name: "dms-operator-metrics-reader" },
      subjects: [{ kind: "ServiceAccount", name: "dms-operator-metrics-scraper", namespace: "dms-system" }],
    });

    const own = await render([
      "metrics.serviceMonitor.enabled=true",
      "metrics.serviceMonitor.scraper.create=false",
      "metrics.serviceMonitor.scraper.tokenSecret.name=prometheus-token",
    ]);
    expect(own.map((o) => o.metadata.name)).not.toContain("dms-operator-metrics-scraper");
    expect(named(own, "ServiceMonitor", "dms-operator")).toMatchObject({
      spec: {
        endpoints: [
          { authorization: { type: "Bearer", credentials: { name: "prometheus-token", key: "token" } } },
        ],
      },
    });

    // A namespace-scoped release creates the scraper but cannot bind a ClusterRole (its NOTES say who does).
    const team = await render(
      ["scope=namespace", "metrics.secure=true", "metrics.serviceMonitor.enabled=true"],
      "team-a",
    );
    expect(named(team, "ServiceAccount", "dms-operator-metrics-scraper")).toBeDefined();
    expect(team.filter((o) => o.kind.startsWith("Cluster"))).toEqual([]);

    const plain = await render([
      "metrics.secure=false",
      "metrics.loopbackOnly=false",
      "metrics.serviceMonitor.enabled=true",
    ]);
    expect(named(plain, "ServiceMonitor", "dms-operator")).toMatchObject({
      spec: { endpoints: [{ port: "http", path: "/metrics", interval: "30s" }] },
    });
    expect(JSON.stringify(named(plain, "ServiceMonitor", "dms-operator"))).not.toMatch(
      /scheme|authorization/,
    );
    expect(named(plain, "Service", "dms-operator-metrics")).toMatchObject({
      spec: { ports: [{ name: "http", port: 8080, targetPort: "metrics" }] },
    });
    expect(plain.map((o) => o.metadata.name)).not.toContain("dms-operator-metrics-scraper-token");
  });

  it("mounts the CA from caSecretRef, caConfigMapRef, the PEM of caBundle or chart 0.1.0's caBundle object at the file DMS_CA_FILE names, which the operator trusts", async ({
    expect,
  }) => {
    const ca = await createTestCa();
    for (const [set, source] of [
      [["caSecretRef.name=corp-ca"], "secret:corp-ca/ca.crt"],
      [["caConfigMapRef.name=corp-ca", "caConfigMapRef.key=bundle.pem"], "configMap:corp-ca/bundle.pem"],
      [[`caBundle=${ca.cert}`], "configMap:dms-operator-ca/ca.crt"],
      // The deprecated form, still read.
      [["caBundle.secretName=corp-ca"], "secret:corp-ca/ca.crt"],
      [["caBundle.configMapName=corp-ca", "caBundle.key=bundle.pem"], "configMap:corp-ca/bundle.pem"],
    ] as const) {
      const objects = await render([...set]);
      const caFile = envOf(objects).DMS_CA_FILE ?? "";
      const dir = caFile.slice(0, caFile.lastIndexOf("/"));
      expect(filesAt(objects, dir)).toEqual({ [caFile]: source });
      const read: string[] = [];
      const service = serviceConfigFrom(
        {},
        { ...envOf(objects), DMS_BASE_URL: "https://dms.corp.example" },
        (path) => {
          read.push(path);
          return path === caFile ? ca.cert : "api-key";
        },
      );
      expect(service).toMatchObject({ ok: true, config: { caBundle: ca.cert } });
      expect(read).toContain(caFile);
    }
  });

  it("sets the proxy variables the operator's service calls go through", async ({ expect }) => {
    const objects = await render([
      "proxy.httpsProxy=http://proxy.corp.example:3128",
      "proxy.httpProxy=http://proxy.corp.example:3128",
      "proxy.noProxy={.corp.example,.svc,10.0.0.1}",
    ]);
    expect(envOf(objects)).toMatchObject({
      HTTPS_PROXY: "http://proxy.corp.example:3128",
      HTTP_PROXY: "http://proxy.corp.example:3128",
      NO_PROXY: ".corp.example,.svc,10.0.0.1",
    });
    const service = serviceConfigFrom(
      {},
      { ...envOf(objects), DMS_BASE_URL: "https://dms.corp.example" },
      () => "key",
    );
    expect(service).toMatchObject({
      ok: true,
      config: {
        proxyEnv: { HTTPS_PROXY: "http://proxy.corp.example:3128", NO_PROXY: ".corp.example,.svc,10.0.0.1" },
      },
    });
    const text = await render(["proxy.noProxy=.corp.example\\,.svc"]);
    expect(envOf(text).NO_PROXY).toBe(".corp.example,.svc");
  });

  it("adds extraEnv, extraVolumes and extraVolumeMounts after the chart's own, e.g. a CA for every call of the process", async ({
    expect,
  }) => {
    const objects = await render([
      "extraEnv[0].name=NODE_EXTRA_CA_CERTS",
      "extraEnv[0].value=/etc/proxy-ca/ca.crt",
      "extraVolumes[0].name=proxy-ca",
      "extraVolumes[0].configMap.name=proxy-ca",
      "extraVolumeMounts[0].name=proxy-ca",
      "extraVolumeMounts[0].mountPath=/etc/proxy-ca",
      "extraVolumeMounts[0].readOnly=true",
    ]);
    expect(operatorContainer(objects).env.at(-1)).toEqual({
      name: "NODE_EXTRA_CA_CERTS",
      value: "/etc/proxy-ca/ca.crt",
    });
    expect(operatorContainer(objects).volumeMounts.at(-1)).toEqual({
      name: "proxy-ca",
      mountPath: "/etc/proxy-ca",
      readOnly: true,
    });
    expect(podSpec(objects).volumes.at(-1)).toEqual({ name: "proxy-ca", configMap: { name: "proxy-ca" } });
  });

  it("refuses metrics, CA and scraper values that cannot work together, naming the values and the fix", async ({
    expect,
  }) => {
    const refusal = async (set: string[]) => {
      const result = await helm(bin, [
        "template",
        "dms-operator",
        CHART,
        ...set.flatMap((s) => ["--set", s]),
      ]);
      expect(result.code, set.join(" ")).not.toBe(0);
      return result.stderr;
    };
    for (const [set, message] of [
      [
        ["scope=namespace", "metrics.serviceMonitor.enabled=true"],
        "metrics.service.enabled, metrics.serviceMonitor.enabled: /metrics listens on the pod's loopback only",
      ],
      [["metrics.secure=false", "metrics.service.enabled=true"], "metrics.loopbackOnly=false"],
      [
        ["scope=namespace", "metrics.prometheusRule.enabled=true"],
        "metrics.prometheusRule.enabled: the alerts read the series Prometheus scrapes",
      ],
      [["metrics.port=8081"], "metrics.port: must differ from healthProbes.port"],
      [
        ["healthProbes.port=8080", "metrics.secure=false"],
        "metrics.port: must differ from healthProbes.port",
      ],
      [
        ["metrics.secure=false", "metrics.certSecret=metrics-tls"],
        "metrics.certSecret: a certificate serves HTTPS metrics only",
      ],
      [
        ["caBundle.secretName=a", "caBundle.configMapName=b"],
        "caBundle.secretName, caBundle.configMapName: give one of them",
      ],
      [
        ["caSecretRef.name=a", "caConfigMapRef.name=b"],
        "caSecretRef.name, caConfigMapRef.name: give one of them",
      ],
      [["caBundle=not a certificate"], "caBundle: give the PEM text of the CA certificates"],
      [
        ["caSecretRef.name=a", "config.insecureSkipTLSVerify=true"],
        "caSecretRef.name, config.insecureSkipTLSVerify: give one of them",
      ],
      [
        ["caBundle.secretName=a", "config.insecureSkipTlsVerify=true"],
        "caBundle, config.insecureSkipTLSVerify: give one of them",
      ],
      [
        ["config.insecureSkipTLSVerify=true", "config.insecureSkipTlsVerify=true"],
        "config.insecureSkipTlsVerify is its deprecated spelling",
      ],
      [
        ["metrics.serviceMonitor.enabled=true", "metrics.serviceMonitor.scraper.create=false"],
        "metrics.serviceMonitor.scraper.tokenSecret.name: name the Secret",
      ],
    ] as const)
      expect(await refusal([...set])).toContain(message);
  });
});

describe("helm template charts/dms-operator: what a platform team sets on day two", {
  timeout: HELM_CASES,
  concurrent: true,
}, () => {
  let bin: string;
  beforeAll(async () => {
    bin = await helmBinary();
  }, 900_000);

  const render = (
    set: string[],
    options: { namespace?: string; tests?: boolean; values?: Record<string, unknown> } = {},
  ) =>
    renderChart(bin, {
      namespace: options.namespace ?? "dms-system",
      set,
      tests: options.tests ?? false,
      ...(options.values ? { values: options.values } : {}),
    });
  const deploymentOf = (objects: K8sObject[]) =>
    objects.find((o) => o.kind === "Deployment") as unknown as {
      metadata: { annotations?: Record<string, string> };
      spec: Record<string, unknown> & {
        template: { metadata: { annotations?: Record<string, string> }; spec: Record<string, unknown> };
      };
    };

  it("spreads the pods softly across nodes by default, and takes the spread given instead", async ({
    expect,
  }) => {
    const spread = async (set: string[], values?: Record<string, unknown>) =>
      deploymentOf(await render(set, values ? { values } : {})).spec.template.spec.topologySpreadConstraints;
    expect(await spread([])).toEqual([
      {
        maxSkew: 1,
        topologyKey: "kubernetes.io/hostname",
        whenUnsatisfiable: "ScheduleAnyway",
        labelSelector: {
          matchLabels: {
            "app.kubernetes.io/name": "dms-operator",
            "app.kubernetes.io/instance": "dms-operator",
          },
        },
        matchLabelKeys: ["pod-template-hash"],
      },
    ]);
    expect(
      await spread([], {
        topologySpreadConstraints: [
          {
            maxSkew: 1,
            topologyKey: "topology.kubernetes.io/zone",
            whenUnsatisfiable: "DoNotSchedule",
            labelSelector: { matchLabels: { release: "{{ .Release.Name }}" } },
          },
        ],
      }),
    ).toEqual([
      {
        maxSkew: 1,
        topologyKey: "topology.kubernetes.io/zone",
        whenUnsatisfiable: "DoNotSchedule",
        labelSelector: { matchLabels: { release: "dms-operator" } },
      },
    ]);
    expect(await spread([], { topologySpreadConstraints: [] })).toBeUndefined();
  });

  it("sets revisionHistoryLimit, strategy and deploymentAnnotations on the Deployment only when given", async ({
    expect,
  }) => {
    const plain = deploymentOf(await render([]));
    expect(plain.spec).not.toHaveProperty("revisionHistoryLimit");
    expect(plain.spec).not.toHaveProperty("strategy");
    expect(plain.metadata.annotations).toBeUndefined();
    const given = deploymentOf(
      await render([
        "revisionHistoryLimit=3",
        "strategy.type=RollingUpdate",
        "strategy.rollingUpdate.maxSurge=0",
        "strategy.rollingUpdate.maxUnavailable=1",
        "deploymentAnnotations.owner=platform",
        "commonAnnotations.team=sre",
      ]),
    );
    expect(given.spec.revisionHistoryLimit).toBe(3);
    expect(given.spec.strategy).toEqual({
      type: "RollingUpdate",
      rollingUpdate: { maxSurge: 0, maxUnavailable: 1 },
    });
    expect(given.metadata.annotations).toEqual({ owner: "platform", team: "sre" });
    expect(given.spec.template.metadata.annotations ?? {}).not.toHaveProperty("owner");
  });

  it("renders extraObjects, maps and strings, through tpl", async ({ expect }) => {
    const objects = await render([], {
      namespace: "team-a",
      values: {
        extraObjects: [
          {
            apiVersion: "v1",
            kind: "ConfigMap",
            metadata: {
              name: '{{ include "dms-operator.fullname" . }}-extra',
              namespace: "{{ .Release.Namespace }}",
            },
            data: { release: "{{ .Release.Name }}" },
          },
          "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: {{ .Release.Name }}-extra-sa\n",
        ],
      },
    });
    expect(objects.find((o) => o.kind === "ConfigMap" && o.metadata.name === "dms-operator-extra")).toEqual({
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name: "dms-operator-extra", namespace: "team-a" },
      data: { release: "dms-operator" },
    });
    expect(
      objects.find((o) => o.kind === "ServiceAccount" && o.metadata.name === "dms-operator-extra-sa"),
    ).toBeDefined();
  });

  it("pulls every image from global.imageRegistry with global.imagePullSecrets first", async ({ expect }) => {
    const objects = await render(
      [
        "global.imageRegistry=registry.corp.example/mirror",
        "global.imagePullSecrets[0]=corp-pull",
        "global.imagePullSecrets[1].name=shared-pull",
        "imagePullSecrets[0].name=corp-pull",
        "imagePullSecrets[1].name=own-pull",
      ],
      { tests: true },
    );
    const operator = podSpec(objects) as unknown as { imagePullSecrets: { name: string }[] };
    expect(operatorContainer(objects).image).toMatch(
      /^registry\.corp\.example\/mirror\/dms-dev\/dms-operator:/,
    );
    expect(operator.imagePullSecrets).toEqual([
      { name: "corp-pull" },
      { name: "shared-pull" },
      { name: "own-pull" },
    ]);
    const testPod = objects.find((o) => o.kind === "Pod") as unknown as {
      spec: { imagePullSecrets: unknown; containers: { image: string }[] };
    };
    expect(testPod.spec.imagePullSecrets).toEqual(operator.imagePullSecrets);
    for (const c of testPod.spec.containers)
      expect(c.image).toBe("registry.corp.example/mirror/kubectl:v1.35.4");
    // Without a registry, the images are as given.
    expect(operatorContainer(await render([])).image).toMatch(/^ghcr\.io\/dms-dev\/dms-operator:/);
  });

  it("rolls the pods on the chart's own CA ConfigMap, and names the Secrets and ConfigMaps read at start for Reloader", async ({
    expect,
  }) => {
    const ca = await createTestCa();
    const other = await createTestCa();
    const checksum = async (pem: string) =>
      deploymentOf(await render([`caBundle=${pem}`])).spec.template.metadata.annotations?.["checksum/ca"];
    expect(await checksum(ca.cert)).toMatch(/^[0-9a-f]{64}$/);
    expect(await checksum(other.cert)).not.toBe(await checksum(ca.cert));

    const reloader = async (set: string[]) =>
      deploymentOf(await render(["reloader.enabled=true", ...set])).metadata.annotations;
    expect(await reloader([])).toEqual({ "secret.reloader.stakater.com/reload": "dms-operator-credentials" });
    expect(await reloader(["caSecretRef.name=corp-ca"])).toEqual({
      "secret.reloader.stakater.com/reload": "dms-operator-credentials,corp-ca",
    });
    expect(await reloader(["caConfigMapRef.name=corp-ca"])).toEqual({
      "secret.reloader.stakater.com/reload": "dms-operator-credentials",
      "configmap.reloader.stakater.com/reload": "corp-ca",
    });
    // What the release creates rolls the pods by its checksum; Reloader is not needed for it.
    expect(
      await reloader([
        "credentials.create=true",
        "credentials.baseUrl=https://api.example.com",
        "credentials.apiKey=k",
        `caBundle=${ca.cert}`,
      ]),
    ).toBeUndefined();
    expect(deploymentOf(await render([])).metadata.annotations).toBeUndefined();
  });

  it("passes insecureSkipTLSVerify, and its deprecated spelling, as DMS_INSECURE_SKIP_TLS_VERIFY", async ({
    expect,
  }) => {
    for (const key of ["insecureSkipTLSVerify", "insecureSkipTlsVerify"]) {
      const objects = await render([`config.${key}=true`]);
      expect(envOf(objects).DMS_INSECURE_SKIP_TLS_VERIFY, key).toBe("true");
      expect(await operatorReads(objects)).toBeDefined();
    }
  });

  it("admits the metrics port from the scraper's namespace only, and from its pods when given", async ({
    expect,
  }) => {
    const policy = async (set: string[]) =>
      (await render(["networkPolicy.enabled=true", ...set])).find(
        (o) => o.kind === "NetworkPolicy",
      ) as unknown as {
        spec: { ingress: { from: unknown[]; ports: unknown[] }[]; policyTypes: string[] };
      };
    const byDefault = await policy([]);
    expect(byDefault.spec.policyTypes).toEqual(["Ingress"]);
    expect(byDefault.spec.ingress).toEqual([
      {
        from: [{ namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": "monitoring" } } }],
        ports: [{ port: "metrics", protocol: "TCP" }],
      },
    ]);
    const pods = await policy([
      "networkPolicy.metricsNamespaceSelector.matchLabels.kubernetes\\.io/metadata\\.name=observability",
      "networkPolicy.metricsPodSelector.matchLabels.app\\.kubernetes\\.io/name=prometheus",
    ]);
    expect(pods.spec.ingress[0]?.from).toEqual([
      {
        namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": "observability" } },
        podSelector: { matchLabels: { "app.kubernetes.io/name": "prometheus" } },
      },
    ]);
  });

  it("names every cluster-scoped object after the release but the CRDs: a release of another name installs beside the first with crds.enabled=false", async ({
    expect,
  }) => {
    // Every optional object, cluster-scoped ones included (sharding's, the scraper's binding).
    const everything = [
      "sharding.enabled=true",
      "replicas=3",
      "metrics.serviceMonitor.enabled=true",
      "metrics.prometheusRule.enabled=true",
      "networkPolicy.enabled=true",
      "namespace.create=true",
    ];
    // What the API server keeps once per cluster: the objects without a namespace.
    const clusterScoped = async (release: string, namespace: string, set: string[] = []) =>
      (await renderChart(bin, { release, namespace, set: [...everything, ...set] }))
        .filter((o) => o.metadata.namespace === undefined && o.kind !== "Namespace")
        .map((o) => `${o.kind}/${o.metadata.name}`);
    const first = await clusterScoped("dms-operator", "team-a");
    const crds = first.filter((o) => o.startsWith("CustomResourceDefinition/"));
    expect(crds).toHaveLength(3);
    // Helm refuses an object another release owns ("invalid ownership metadata"): the CRDs are
    // the only ones two releases share, and the second leaves them to the first.
    expect((await clusterScoped("team-b", "team-b")).filter((o) => first.includes(o))).toEqual(crds);
    expect(
      (await clusterScoped("team-b", "team-b", ["crds.enabled=false"])).filter((o) => first.includes(o)),
    ).toEqual([]);
    // The same release name in another namespace has the same full name: the README says to
    // give it another name (or fullnameOverride).
    expect(
      (await clusterScoped("dms-operator", "team-b", ["crds.enabled=false"])).filter((o) =>
        first.includes(o),
      ),
    ).not.toEqual([]);
    expect(
      (
        await clusterScoped("dms-operator", "team-b", [
          "crds.enabled=false",
          "fullnameOverride=dms-operator-b",
        ])
      ).filter((o) => first.includes(o)),
    ).toEqual([]);
  });

  it("takes metricsNamespaceSelector as given, a label of one's own or expressions, never also requiring the namespace `monitoring`", async ({
    expect,
  }) => {
    const selector = async (networkPolicy: Record<string, unknown>) => {
      const objects = await render([], { values: { networkPolicy: { enabled: true, ...networkPolicy } } });
      const policy = objects.find((o) => o.kind === "NetworkPolicy") as unknown as {
        spec: { ingress: { from: { namespaceSelector: unknown }[] }[] };
      };
      return policy.spec.ingress[0]?.from[0]?.namespaceSelector;
    };
    // chart 0.1.0's selector, a label put on the scraper's namespace
    const ownLabel = { matchLabels: { metrics: "enabled" } };
    expect(await selector({ metricsNamespaceSelector: ownLabel })).toEqual(ownLabel);
    const expressions = { matchExpressions: [{ key: "team", operator: "In", values: ["observability"] }] };
    expect(await selector({ metricsNamespaceSelector: expressions })).toEqual(expressions);
    // A key set to null, the way to drop a default merged into a map, is left out.
    expect(
      await selector({
        metricsNamespaceSelector: {
          matchLabels: { "kubernetes.io/metadata.name": null, metrics: "enabled" },
        },
      }),
    ).toEqual(ownLabel);
    const byDefault = { matchLabels: { "kubernetes.io/metadata.name": "monitoring" } };
    expect(await selector({})).toEqual(byDefault);
    expect(await selector({ metricsNamespaceSelector: {} })).toEqual(byDefault);
  });

  it("ships the Grafana dashboard in a ConfigMap the sidecar loads, from the chart's one copy", async ({
    expect,
  }) => {
    expect((await render([])).filter((o) => o.kind === "ConfigMap")).toEqual([]);
    const objects = await render([
      "metrics.dashboard.enabled=true",
      "metrics.dashboard.namespace=monitoring",
      "metrics.dashboard.annotations.grafana_folder=Operators",
    ]);
    const map = objects.find((o) => o.kind === "ConfigMap") as unknown as K8sObject & {
      data: Record<string, string>;
    };
    expect(map.metadata).toMatchObject({
      name: "dms-operator-dashboard",
      namespace: "monitoring",
      labels: { grafana_dashboard: "1" },
      annotations: { grafana_folder: "Operators" },
    });
    expect(JSON.parse(map.data["dms-operator.json"] ?? "")).toEqual(
      JSON.parse(readFileSync(join(CHART, "files", "grafana-dashboard.json"), "utf8")),
    );
  });

  it("has a helm test pod checking the pods' readiness (/readyz) and the CRDs, as an account that may only read pods", async ({
    expect,
  }) => {
    expect((await render([])).filter((o) => o.metadata.name.endsWith("-test"))).toEqual([]);
    const objects = (await render([], { tests: true })).filter(
      (o) => o.metadata.name === "dms-operator-test",
    );
    expect(objects.map((o) => o.kind).sort()).toEqual(["Pod", "Role", "RoleBinding", "ServiceAccount"]);
    for (const o of objects)
      expect((o.metadata.annotations as Record<string, string>)["helm.sh/hook"], o.kind).toBe("test");
    const pod = objects.find((o) => o.kind === "Pod") as unknown as {
      spec: {
        serviceAccountName: string;
        restartPolicy: string;
        securityContext: unknown;
        containers: { name: string; args: string[]; securityContext: unknown }[];
      };
    };
    expect(pod.spec).toMatchObject({ serviceAccountName: "dms-operator-test", restartPolicy: "Never" });
    expect(pod.spec.securityContext).toEqual(values.podSecurityContext);
    expect(pod.spec.containers.map((c) => [c.name, c.args])).toEqual([
      [
        "ready",
        [
          "wait",
          "--for=condition=Ready",
          "pod",
          "--selector=app.kubernetes.io/instance=dms-operator,app.kubernetes.io/name=dms-operator",
          "--namespace=dms-system",
          "--timeout=120s",
        ],
      ],
      ...CRDS.map((crd) => [
        `crd-${crd.plural}`,
        ["explain", `${crd.plural}.dms.dev`, "--api-version=dms.dev/v1alpha1", "--request-timeout=30s"],
      ]),
    ]);
    for (const c of pod.spec.containers) expect(c.securityContext, c.name).toEqual(values.securityContext);
    expect(objects.find((o) => o.kind === "Role")?.rules).toEqual([
      { apiGroups: [""], resources: ["pods"], verbs: ["get", "list", "watch"] },
    ]);
    const lint = await helm(bin, ["lint", "--strict", CHART]);
    expect(lint.stdout).not.toMatch(/\[(WARNING|ERROR)\]/);
  });

  it("ends its NOTES with a listing of the resources the release watches, in its namespace only with scope: namespace", async ({
    expect,
  }) => {
    const notes = async (set: string[]) => {
      const result = await helm(bin, [
        "install",
        "dms-operator",
        CHART,
        "-n",
        "team-a",
        "--dry-run=client",
        ...set.flatMap((s) => ["--set", s]),
      ]);
      expect(result.code, result.stderr).toBe(0);
      return result.stdout.slice(result.stdout.indexOf("\nNOTES:\n"));
    };
    // A team owning one namespace may not list a kind in every namespace.
    const namespaced = await notes(["scope=namespace"]);
    expect(namespaced).toContain("\n  kubectl -n team-a get dmsd\n");
    expect(namespaced).not.toContain("--all-namespaces");
    expect(await notes([])).toContain("\n  kubectl get dmsd --all-namespaces\n");
  });

  it("gives the helm test pod labels no selector of the operator's pods matches, its own wait's included", async ({
    expect,
  }) => {
    const objects = await render(
      ["podDisruptionBudget.enabled=true", "networkPolicy.enabled=true", "metrics.service.enabled=true"],
      { tests: true },
    );
    const labelsOf = (o: K8sObject | undefined) => (o?.metadata.labels ?? {}) as Record<string, string>;
    const testPod = objects.find((o) => o.kind === "Pod" && o.metadata.name === "dms-operator-test");
    const deployment = deploymentOf(objects) as unknown as {
      spec: {
        selector: { matchLabels: Record<string, string> };
        template: { metadata: { labels: Record<string, string> } };
      };
    };
    const containers = (testPod?.spec as { containers: { name: string; args: string[] }[] } | undefined)
      ?.containers;
    const selectorArg = containers
      ?.find((c) => c.name === "ready")
      ?.args.find((a) => a.startsWith("--selector="));
    const waitSelector = Object.fromEntries(
      (selectorArg?.slice("--selector=".length).split(",") ?? []).map(
        (pair) => pair.split("=") as [string, string],
      ),
    );
    const spec = (kind: string) => objects.find((o) => o.kind === kind)?.spec as Record<string, unknown>;
    const selectors: Record<string, Record<string, string>> = {
      "the test's kubectl wait": waitSelector,
      Deployment: deployment.spec.selector.matchLabels,
      PodDisruptionBudget: (spec("PodDisruptionBudget").selector as { matchLabels: Record<string, string> })
        .matchLabels,
      NetworkPolicy: (spec("NetworkPolicy").podSelector as { matchLabels: Record<string, string> })
        .matchLabels,
      Service: spec("Service").selector as Record<string, string>,
    };
    const matches = (selector: Record<string, string>, labels: Record<string, string>) =>
      Object.entries(selector).every(([k, v]) => labels[k] === v);
    for (const [by, selector] of Object.entries(selectors)) {
      expect(Object.keys(selector).length, by).toBeGreaterThan(0);
      // The operator's pods are what each selects; the test pod, which ends once its checks
      // exit (never Ready again) and has no controller, is not.
      expect(matches(selector, deployment.spec.template.metadata.labels), by).toBe(true);
      expect(matches(selector, labelsOf(testPod)), by).toBe(false);
    }
    expect(labelsOf(testPod)).toMatchObject({
      "app.kubernetes.io/instance": "dms-operator",
      "app.kubernetes.io/component": "test",
    });
  });
});

describe("values.schema.json", { timeout: HELM_CASES, concurrent: true }, () => {
  let bin: string;
  beforeAll(async () => {
    bin = await helmBinary();
  }, 900_000);

  // A key mistyped at each depth a user types: the top, a section, a nested section.
  const typos = [
    { set: "replicaz=3", at: "''", key: "replicaz" },
    { set: "config.logLevl=debug", at: "'/config'", key: "logLevl" },
    { set: "metrics.serviceMonitor.enabeld=true", at: "'/metrics/serviceMonitor'", key: "enabeld" },
    {
      set: "securityContext.readOnlyRootFileSystem=true",
      at: "'/securityContext'",
      key: "readOnlyRootFileSystem",
    },
  ];

  it.each(typos)(
    "makes `helm template` and `helm lint` refuse $set, naming the key",
    async ({ set, at, key }) => {
      for (const command of [
        ["template", "dms-operator", CHART, "--set", set],
        ["lint", CHART, "--set", set],
      ]) {
        const result = await helm(bin, command);
        expect(result.code, `helm ${command.join(" ")}`).not.toBe(0);
        expect(`${result.stdout}${result.stderr}`).toContain(
          `at ${at}: additional properties '${key}' not allowed`,
        );
      }
    },
  );

  it("refuses a value of the wrong kind or outside the operator's bounds", async ({ expect }) => {
    for (const [set, message] of [
      ["config.logLevel=verbose", "at '/config/logLevel'"],
      ["config.concurrency=100", "at '/config/concurrency'"],
      ["config.resyncPeriod=ten minutes", "at '/config/resyncPeriod'"],
      ["scope=cluster-wide", "at '/scope'"],
      ["image.digest=latest", "at '/image/digest'"],
      ["proxy.httpsProxy=proxy.corp.example:3128", "at '/proxy/httpsProxy'"],
      ["extraEnv[0].value=x", "at '/extraEnv/0'"],
      ["extraVolumeMounts[0].name=x", "at '/extraVolumeMounts/0'"],
      ["metrics.port=0", "at '/metrics/port'"],
      ["revisionHistoryLimit=-1", "at '/revisionHistoryLimit'"],
      ["strategy.type=Replace", "at '/strategy/type'"],
      ["caBundle=1", "at '/caBundle'"],
      ["metrics.prometheusRule.runbookBaseUrl=docs/alerts.md", "at '/metrics/prometheusRule/runbookBaseUrl'"],
      ["global.imageRegistry=has space", "at '/global/imageRegistry'"],
    ] as const) {
      const result = await helm(bin, ["template", "dms-operator", CHART, "--set", set]);
      expect(result.code, set).not.toBe(0);
      expect(result.stderr, set).toContain(message);
    }
  });

  // Values the API server would refuse only once helm install had created the objects before
  // theirs (a failed release left behind), naming the object's field rather than the value.
  it.each([
    { set: "podDisruptionBudget.maxUnavailable=-1", at: "'/podDisruptionBudget/maxUnavailable'" },
    { set: "podDisruptionBudget.maxUnavailable=one", at: "'/podDisruptionBudget/maxUnavailable'" },
    { set: "strategy.rollingUpdate.maxSurge=-1", at: "'/strategy/rollingUpdate/maxSurge'" },
    { set: "strategy.rollingUpdate.maxUnavailable=25 %", at: "'/strategy/rollingUpdate/maxUnavailable'" },
    { set: "podSecurityContext.runAsUser=-1", at: "'/podSecurityContext/runAsUser'" },
    { set: "podSecurityContext.runAsGroup=nobody", at: "'/podSecurityContext/runAsGroup'" },
    { set: "securityContext.readOnlyRootFilesystem=1", at: "'/securityContext/readOnlyRootFilesystem'" },
  ])(
    "refuses a count below 0, a text that is no percentage, an id or a switch of the wrong kind: $set",
    async ({ set, at }) => {
      const result = await helm(bin, ["template", "dms-operator", CHART, "--set", set]);
      expect(result.code, set).not.toBe(0);
      expect(result.stderr, set).toContain(`at ${at}`);
    },
  );

  it("accepts the defaults: `helm lint --strict` is clean", async ({ expect }) => {
    const result = await helm(bin, ["lint", "--strict", CHART]);
    expect(result.stdout).not.toMatch(/\[(WARNING|ERROR)\]/);
    expect(result.code).toBe(0);
  });
});
