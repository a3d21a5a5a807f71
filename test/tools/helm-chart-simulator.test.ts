// The chart's `simulator.enabled` without a cluster (its install and the processes that stand in
// for its pods: test/e2e/try-on-kind.test.ts): off by default; on, the simulator's Deployment,
// Service, seed and the Secret the operator then reads, the simulator's pods apart from the
// operator's, `helm test`'s check of it, and what it refuses.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, it } from "vitest";
import { parse } from "yaml";
import { CHART, helm, helmBinary, type K8sObject, renderChart } from "../support/helm-chart.ts";

const values = parse(readFileSync(join(CHART, "values.yaml"), "utf8")) as Record<string, unknown>;

type Container = {
  name: string;
  image: string;
  args: string[];
  env: { name: string; value?: string; valueFrom?: { secretKeyRef?: { name: string; key: string } } }[];
  securityContext: unknown;
};
type Workload = K8sObject & {
  spec: {
    selector: { matchLabels: Record<string, string> };
    template: {
      metadata: { labels: Record<string, string> };
      spec: { containers: Container[]; securityContext: unknown };
    };
  };
};

const named = (objects: K8sObject[], kind: string, name: string) =>
  objects.find((o) => o.kind === kind && o.metadata.name === name) as Workload | undefined;

describe("helm template charts/dms-operator --set simulator.enabled", {
  timeout: 30_000,
  concurrent: true,
}, () => {
  let bin: string;
  beforeAll(async () => {
    bin = await helmBinary();
  }, 900_000);
  const render = (set: string[], opts: { tests?: boolean } = {}) =>
    renderChart(bin, { namespace: "dms-system", set, ...opts });

  it("renders no simulator by default", async ({ expect }) => {
    expect((values.simulator as { enabled: boolean }).enabled).toBe(false);
    const objects = await render([], { tests: true });
    expect(objects.filter((o) => o.metadata.name.includes("simulator"))).toEqual([]);
  });

  it("runs the simulator from the operator's image, seeded, and points the operator at it with a generated key", async ({
    expect,
  }) => {
    const objects = await render(["simulator.enabled=true", "image.tag=dev"]);
    const simulator = named(objects, "Deployment", "dms-operator-simulator");
    const operator = named(objects, "Deployment", "dms-operator");
    const sim = simulator?.spec.template.spec.containers[0];
    const op = operator?.spec.template.spec.containers.find((c) => c.name === "operator");
    expect(sim?.image).toBe(op?.image);
    expect(sim?.args).toEqual([
      "simulator",
      "--host=0.0.0.0",
      "--port=8090",
      "--seed=/etc/dms-simulator/seed.yaml",
    ]);
    expect(simulator?.metadata.annotations).toMatchObject({
      "dms.dev/not-for-production": expect.any(String),
    });
    // The restricted Pod Security Standard, as the operator's pod.
    expect(simulator?.spec.template.spec.securityContext).toEqual(values.podSecurityContext);
    expect(sim?.securityContext).toEqual(values.securityContext);
    // Its pods are not the operator's.
    const operatorSelector = operator?.spec.selector.matchLabels ?? {};
    const simLabels = simulator?.spec.template.metadata.labels ?? {};
    expect(Object.entries(operatorSelector).every(([k, v]) => simLabels[k] === v)).toBe(false);

    const secret = objects.find((o) => o.kind === "Secret") as
      | (K8sObject & { stringData: Record<string, string> })
      | undefined;
    expect(secret?.metadata.name).toBe("dms-operator-simulator-credentials");
    expect(secret?.stringData["base-url"]).toBe("http://dms-operator-simulator.dms-system.svc:8090");
    expect(secret?.stringData["api-key"]).toMatch(/^[A-Za-z0-9]{40}$/);
    const reads = (c: Container | undefined, name: string) =>
      c?.env.find((e) => e.name === name)?.valueFrom?.secretKeyRef;
    expect(reads(op, "DMS_BASE_URL")).toEqual({
      name: "dms-operator-simulator-credentials",
      key: "base-url",
    });
    expect(reads(sim, "DMS_SIMULATOR_API_KEY")).toEqual({
      name: "dms-operator-simulator-credentials",
      key: "api-key",
    });

    const seed = objects.find(
      (o) => o.kind === "ConfigMap" && o.metadata.name === "dms-operator-simulator-seed",
    ) as (K8sObject & { data: Record<string, string> }) | undefined;
    expect(seed?.data["seed.yaml"]).toBe(readFileSync(join(CHART, "files", "simulator-seed.yaml"), "utf8"));
  });

  it("renders the same key every time with simulator.apiKey (a GitOps tool's helm template), and refuses one that is not letters and digits", async ({
    expect,
  }) => {
    const key = (objects: K8sObject[]) =>
      (
        objects.find((o) => o.kind === "Secret") as
          | (K8sObject & { stringData: Record<string, string> })
          | undefined
      )?.stringData["api-key"];
    const set = ["simulator.enabled=true", "simulator.apiKey=abcdefgh12345678"];
    expect(key(await render(set))).toBe("abcdefgh12345678");
    expect(key(await render(set))).toBe("abcdefgh12345678");
    // Without it, each render draws its own.
    expect(key(await render(["simulator.enabled=true"]))).not.toBe(
      key(await render(["simulator.enabled=true"])),
    );
    await expect(render(["simulator.enabled=true", "simulator.apiKey=short"])).rejects.toThrow(/apiKey/);
  });

  it("seeds with simulator.seed when given, sends the key in config.apiKeyHeader, and passes extraArgs", async ({
    expect,
  }) => {
    const objects = await render([
      "simulator.enabled=true",
      "simulator.port=9000",
      "simulator.seed.deployments[0].name=mine",
      "simulator.seed.deployments[0].source=internal_template",
      "simulator.extraArgs[0]=--ready-after-ms=500",
      "config.apiKeyHeader=X-Key",
    ]);
    const sim = named(objects, "Deployment", "dms-operator-simulator")?.spec.template.spec.containers[0];
    expect(sim?.args).toEqual([
      "simulator",
      "--host=0.0.0.0",
      "--port=9000",
      "--seed=/etc/dms-simulator/seed.yaml",
      "--api-key-header=X-Key",
      "--ready-after-ms=500",
    ]);
    const seed = objects.find((o) => o.kind === "ConfigMap") as
      | (K8sObject & { data: Record<string, string> })
      | undefined;
    expect(parse(seed?.data["seed.yaml"] ?? "")).toEqual({
      deployments: [{ name: "mine", source: "internal_template" }],
    });
    const service = named(objects, "Service", "dms-operator-simulator") as unknown as {
      spec: { ports: { port: number }[] };
    };
    expect(service.spec.ports[0]?.port).toBe(9000);
  });

  it("has a helm test pod that lists the simulator's deployments with the operator's key", async ({
    expect,
  }) => {
    const objects = await render(["simulator.enabled=true"], { tests: true });
    const pod = objects.find((o) => o.kind === "Pod" && o.metadata.name === "dms-operator-simulator-test") as
      | (K8sObject & { spec: { containers: Container[]; automountServiceAccountToken: boolean } })
      | undefined;
    expect(pod?.metadata.annotations).toMatchObject({ "helm.sh/hook": "test" });
    expect(pod?.spec.automountServiceAccountToken).toBe(false);
    const [check] = pod?.spec.containers ?? [];
    expect(check?.args).toEqual(["deployments", "list", "--output=name"]);
    expect(check?.env.find((e) => e.name === "DMS_API_KEY")?.valueFrom?.secretKeyRef).toEqual({
      name: "dms-operator-simulator-credentials",
      key: "api-key",
    });
    const lint = await helm(bin, ["lint", "--strict", CHART, "--set", "simulator.enabled=true"]);
    expect(lint.stdout).not.toMatch(/\[(WARNING|ERROR)\]/);
    expect(lint.code).toBe(0);
  });

  it("refuses the simulator with credentials.create, and a mistyped simulator value, naming them", async ({
    expect,
  }) => {
    const both = await helm(bin, [
      "template",
      "dms-operator",
      CHART,
      "--set",
      "simulator.enabled=true",
      "--set",
      "credentials.create=true",
      "--set",
      "credentials.baseUrl=https://api.example.com",
      "--set",
      "credentials.apiKey=k",
    ]);
    expect(both.code).not.toBe(0);
    expect(both.stderr).toContain("credentials.create, simulator.enabled:");
    const typo = await helm(bin, ["template", "dms-operator", CHART, "--set", "simulator.enabeld=true"]);
    expect(typo.code).not.toBe(0);
    expect(typo.stderr).toContain("at '/simulator': additional properties 'enabeld' not allowed");
  });
});
