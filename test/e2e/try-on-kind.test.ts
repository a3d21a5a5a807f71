// The README's "Try it on kind", as far as a machine without a container engine or a kubelet
// goes: the chart rendered with the section's own `--set` values (simulator.enabled), accepted by
// a server-side dry run, then applied; the simulator and the operator started as processes with
// the rendered arguments and environment (the simulator's Service URL replaced by its loopback
// address, its listen address by loopback, its seed by the rendered ConfigMap's), `helm test`'s
// check run against it, the section's samples applied and every one of them Ready, as the
// section's `kubectl wait` waits. manifests/components/simulator, the same for the kustomize
// install, renders and passes a server-side dry run. The simulator pod meets the restricted Pod
// Security Standard the README labels the namespace with. A real `helm install` and `helm upgrade`
// keep the generated key. No pod runs: processes stand in for them.
import { type ChildProcess, spawn } from "node:child_process";
import { cpSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parse, stringify } from "yaml";
import { runCaptured } from "../controlplane/kubectl.ts";
import { freePort } from "../controlplane/net.ts";
import { freshNamespace, kubectl, kubectlOk, testKubeconfigPath } from "../support/cluster.ts";
import { CHART, helm, helmBinary, type K8sObject, objectsOf, renderChart } from "../support/helm-chart.ts";
import { nodeCacheEnv } from "../support/node-env.ts";
import { shBlockCommands } from "../support/sh-blocks.ts";
import {
  MANIFESTS,
  type StartedOperator,
  serviceAccountKubeconfig,
  startOperatorAs,
} from "./install-support.ts";

const ROOT = join(import.meta.dirname, "..", "..");
const CLI = join(ROOT, "src", "cli.ts");
const RELEASE = "e2e-kind";
const FULLNAME = `${RELEASE}-dms-operator`;

/** The commands of the README's "Try it on kind". */
const tryOnKindCommands = () =>
  shBlockCommands(readFileSync(join(ROOT, "README.md"), "utf8"), "Try it on kind", "README.md");

/** A container as rendered (only the fields read here). */
interface Container {
  name: string;
  args: string[];
  env?: { name: string; value?: string; valueFrom?: { secretKeyRef?: { name: string; key: string } } }[];
  ports?: { name: string; containerPort: number }[];
  volumeMounts?: { name: string; mountPath: string }[];
}

type PodSpec = { containers: Container[]; volumes?: { name: string; configMap?: { name: string } }[] };

/** The one object of `kind` named `name` in a rendering. */
function one(objects: K8sObject[], kind: string, name: string): K8sObject {
  const found = objects.filter((o) => o.kind === kind && o.metadata.name === name);
  expect(found, `${kind} ${name}`).toHaveLength(1);
  return found[0] as K8sObject;
}

const podSpecOf = (deployment: K8sObject) =>
  (deployment as unknown as { spec: { template: { spec: PodSpec } } }).spec.template.spec;

function containerOf(deployment: K8sObject, name: string): Container {
  const container = podSpecOf(deployment).containers.find((c) => c.name === name);
  if (!container) throw new Error(`${deployment.metadata.name} has no container ${name}`);
  return container;
}

/** The literal environment of a container. */
const literalEnv = (container: Container) =>
  Object.fromEntries(
    (container.env ?? []).flatMap((e) => (e.value === undefined ? [] : [[e.name, e.value]])),
  );

/** The Secret the container's variable `name` reads, as `{name, key}`. */
function secretRef(container: Container, variable: string) {
  const ref = container.env?.find((e) => e.name === variable)?.valueFrom?.secretKeyRef;
  if (!ref) throw new Error(`${container.name} reads no ${variable} from a Secret`);
  return ref;
}

/** The value of flag `--name=` in `args`. */
function flag(args: string[], name: string): string {
  const found = args.find((a) => a.startsWith(`--${name}=`));
  if (found === undefined) throw new Error(`no --${name}= in ${args.join(" ")}`);
  return found.slice(name.length + 3);
}

/** `dms-operator simulator` as a child process; resolves with its URL once it listens. */
async function startSimulatorProcess(args: string[], env: Record<string, string>) {
  const child = spawn(process.execPath, [CLI, ...args], {
    env: { PATH: process.env.PATH ?? "", ...nodeCacheEnv(), ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  const url = await new Promise<string>((resolve, reject) => {
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      const match = /simulator listening on (\S+)/.exec(output);
      if (match?.[1]) resolve(match[1]);
    };
    child.stdout.on("data", onData);
    child.stderr.on("data", onData);
    child.once("exit", (code) => reject(new Error(`the simulator exited ${code}:\n${output}`)));
  });
  return { child, url };
}

/** Runs `dms-operator <args>` to its end. */
const runCli = (args: string[], env: Record<string, string>) =>
  runCaptured(process.execPath, [CLI, ...args], {
    env: { PATH: process.env.PATH ?? "", ...nodeCacheEnv(), ...env },
    input: "",
    timeoutMs: 60_000,
  });

describe("the README's Try it on kind: the chart with simulator.enabled", () => {
  const commands = tryOnKindCommands();
  const install = commands.find((c) => c[0] === "helm" && c[1] === "install") ?? [];
  const sets = install.flatMap((w, i) => (install[i - 1] === "--set" ? [w] : []));
  let bin: string;
  let ns: string;
  let apps: string;
  let dir: string;
  let rendered: K8sObject[];
  let simulator: ChildProcess | undefined;
  let operator: StartedOperator | undefined;

  beforeAll(async () => {
    bin = await helmBinary();
    ns = await freshNamespace("e2e-kind");
    apps = await freshNamespace("e2e-kind-apps");
    dir = await mkdtemp(join(tmpdir(), "dms-e2e-kind-"));
  }, 900_000);

  afterAll(async () => {
    if (operator && apps)
      await kubectl(["delete", "dmsd", "--all", "-n", apps, "--timeout=30s"], { timeoutMs: 35_000 });
    await operator?.process.stop(10_000);
    simulator?.kill("SIGTERM");
    if (rendered) {
      const cluster = rendered.filter((o) => !o.metadata.namespace && o.kind !== "CustomResourceDefinition");
      if (cluster.length > 0)
        await kubectl(["delete", "--ignore-not-found", "-f", "-"], {
          input: cluster.map((o) => stringify(o)).join("---\n"),
        });
    }
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it("gives an evaluator the commands in order: cluster, image, namespace, chart, samples, wait", () => {
    const heads = commands.map((c) => c.slice(0, 2).join(" "));
    expect(heads).toEqual([
      "kind create",
      "docker build",
      "kind load",
      "kubectl create",
      "kubectl label",
      "helm install",
      "kubectl apply",
      "kubectl wait",
    ]);
    expect(sets).toContain("simulator.enabled=true");
    expect(commands.find((c) => c[1] === "label")).toContain("pod-security.kubernetes.io/enforce=restricted");
  });

  it("renders objects the API server accepts (server-side dry run), the simulator's own pods and a Secret pointing at it", async () => {
    // The README's pod-security label, and its warning twin for the Deployments' pod templates
    // (enforce admits or refuses pods, such as the helm test pods; warn speaks of templates too).
    const label = commands.find((c) => c[0] === "kubectl" && c[1] === "label") ?? [];
    const levels = label.filter((w) => w.startsWith("pod-security.kubernetes.io/enforce="));
    expect(levels).toEqual(["pod-security.kubernetes.io/enforce=restricted"]);
    await kubectlOk(["label", "namespace", ns, ...levels, "pod-security.kubernetes.io/warn=restricted"]);
    const full = await renderChart(bin, { release: RELEASE, namespace: ns, set: sets, tests: true });
    const dryRun = await kubectl(["apply", "--dry-run=server", "-n", ns, "-f", "-"], {
      input: full.map((o) => stringify(o)).join("---\n"),
    });
    expect(dryRun.code, dryRun.stderr).toBe(0);
    expect(dryRun.stderr).not.toContain("PodSecurity");
    expect(dryRun.stdout).toContain(`deployment.apps/${FULLNAME}-simulator created (server dry run)`);
    expect(dryRun.stdout).toContain(`service/${FULLNAME}-simulator created (server dry run)`);
    expect(dryRun.stdout).toContain(`pod/${FULLNAME}-simulator-test created (server dry run)`);

    // The simulator's pod, made from its template (no controller manager here makes one), is
    // admitted where `restricted` is enforced; without its security context it would not be.
    const simulatorPod = (edit: (spec: Record<string, unknown>) => void) => {
      const template = (
        one(full, "Deployment", `${FULLNAME}-simulator`) as unknown as {
          spec: { template: { spec: Record<string, unknown> } };
        }
      ).spec.template;
      const spec = structuredClone(template.spec);
      edit(spec);
      const pod = { apiVersion: "v1", kind: "Pod", metadata: { name: "psa-check", namespace: ns }, spec };
      return kubectl(["create", "--dry-run=server", "-o", "name", "-f", "-"], { input: JSON.stringify(pod) });
    };
    const admitted = await simulatorPod(() => {});
    expect(admitted.stderr).toBe("");
    expect(admitted.stdout.trim()).toBe("pod/psa-check");
    const refused = await simulatorPod((spec) => {
      delete spec.securityContext;
    });
    expect(refused.stderr).toContain('violates PodSecurity "restricted');

    // The CRDs are the run's already; the rest is installed, the test pod aside (a hook).
    rendered = await renderChart(bin, {
      release: RELEASE,
      namespace: ns,
      set: [...sets, "crds.enabled=false"],
    });
    const applied = await kubectl(["apply", "-n", ns, "-f", "-"], {
      input: rendered.map((o) => stringify(o)).join("---\n"),
    });
    expect(applied.code, applied.stderr).toBe(0);

    const simulatorDeployment = one(rendered, "Deployment", `${FULLNAME}-simulator`);
    const sim = containerOf(simulatorDeployment, "simulator");
    const service = one(rendered, "Service", `${FULLNAME}-simulator`) as unknown as K8sObject & {
      spec: { selector: Record<string, string>; ports: { port: number; targetPort: string }[] };
    };
    // The Service selects the simulator's pods and no operator pod, and reaches the port it listens on.
    const podLabels = (
      simulatorDeployment as unknown as {
        spec: { template: { metadata: { labels: Record<string, string> } } };
      }
    ).spec.template.metadata.labels;
    const operatorDeployment = one(rendered, "Deployment", FULLNAME);
    const operatorLabels = (
      operatorDeployment as unknown as {
        spec: { template: { metadata: { labels: Record<string, string> } } };
      }
    ).spec.template.metadata.labels;
    const selects = (labels: Record<string, string>) =>
      Object.entries(service.spec.selector).every(([k, v]) => labels[k] === v);
    expect(selects(podLabels)).toBe(true);
    expect(selects(operatorLabels)).toBe(false);
    const operatorSelector = (
      operatorDeployment as unknown as { spec: { selector: { matchLabels: Record<string, string> } } }
    ).spec.selector.matchLabels;
    expect(Object.entries(operatorSelector).every(([k, v]) => podLabels[k] === v)).toBe(false);
    const [servicePort] = service.spec.ports;
    const containerPort = sim.ports?.find((p) => p.name === servicePort?.targetPort)?.containerPort;
    expect(String(containerPort)).toBe(flag(sim.args, "port"));
    // Listening on every address of the pod's own network namespace, where the Service reaches it.
    expect(flag(sim.args, "host")).toBe("0.0.0.0");

    // The operator's default connection is the Service, with the key the simulator requires.
    const op = containerOf(operatorDeployment, "operator");
    const secretName = secretRef(op, "DMS_BASE_URL").name;
    expect(secretRef(sim, "DMS_SIMULATOR_API_KEY")).toEqual({ name: secretName, key: "api-key" });
    const secret = one(rendered, "Secret", secretName) as unknown as { stringData: Record<string, string> };
    expect(secret.stringData["base-url"]).toBe(
      `http://${service.metadata.name}.${ns}.svc:${servicePort?.port}`,
    );
    expect(secret.stringData["api-key"]).toMatch(/^[A-Za-z0-9]{40}$/);
    const keyVolume = podSpecOf(operatorDeployment).volumes?.find((v) => v.name === "credentials") as
      | { secret?: { secretName: string } }
      | undefined;
    expect(keyVolume?.secret?.secretName).toBe(secretName);
  });

  it("starts the simulator and the operator as rendered, passes helm test's check, and gets every sample Ready", async () => {
    const sim = containerOf(one(rendered, "Deployment", `${FULLNAME}-simulator`), "simulator");
    const secretName = secretRef(sim, "DMS_SIMULATOR_API_KEY").name;
    const secret = one(rendered, "Secret", secretName) as unknown as { stringData: Record<string, string> };
    const apiKey = secret.stringData["api-key"] ?? "";
    const serviceUrl = secret.stringData["base-url"] ?? "";

    // The seed file at the path --seed names, from the ConfigMap mounted there.
    const seedPath = flag(sim.args, "seed");
    const mount = sim.volumeMounts?.find((m) => seedPath.startsWith(`${m.mountPath}/`));
    const volume = podSpecOf(one(rendered, "Deployment", `${FULLNAME}-simulator`)).volumes?.find(
      (v) => v.name === mount?.name,
    );
    const seedMap = one(rendered, "ConfigMap", volume?.configMap?.name ?? "") as unknown as {
      data: Record<string, string>;
    };
    const seedFile = join(dir, "seed.yaml");
    await writeFile(seedFile, seedMap.data[seedPath.slice((mount?.mountPath.length ?? 0) + 1)] ?? "");

    const port = await freePort();
    const args = sim.args.map((a) =>
      a.startsWith("--host=")
        ? "--host=127.0.0.1"
        : a.startsWith("--port=")
          ? `--port=${port}`
          : a.startsWith("--seed=")
            ? `--seed=${seedFile}`
            : a,
    );
    const started = await startSimulatorProcess(args, { DMS_SIMULATOR_API_KEY: apiKey });
    simulator = started.child;
    expect(started.url).toBe(`http://127.0.0.1:${port}`);
    // The in-cluster Service URL, with the simulator's loopback address in its place.
    const loopbackUrl = serviceUrl.replace(/^http:\/\/[^/]+/, started.url);
    expect(loopbackUrl).toBe(started.url);

    // `helm test`'s check of the simulator, run as its pod would: it answers the generated key,
    // and refuses another.
    const tests = await renderChart(bin, { release: RELEASE, namespace: ns, set: sets, tests: true });
    const testPod = one(tests, "Pod", `${FULLNAME}-simulator-test`) as unknown as { spec: PodSpec };
    const [check] = testPod.spec.containers;
    expect(secretRef(check as Container, "DMS_API_KEY")).toEqual({ name: secretName, key: "api-key" });
    expect(secretRef(check as Container, "DMS_BASE_URL")).toEqual({ name: secretName, key: "base-url" });
    const answered = await runCli(check?.args ?? [], { DMS_BASE_URL: loopbackUrl, DMS_API_KEY: apiKey });
    expect(answered.code, answered.stderr).toBe(0);
    expect(answered.stdout).toContain("support-agent");
    const refused = await runCli(check?.args ?? [], {
      DMS_BASE_URL: loopbackUrl,
      DMS_API_KEY: "another-key",
    });
    expect(refused.code).not.toBe(0);

    const op = containerOf(one(rendered, "Deployment", FULLNAME), "operator");
    const [command, ...opArgs] = op.args.map((a) => a.replaceAll("$(POD_NAMESPACE)", ns));
    expect(command).toBe("run");
    operator = await startOperatorAs({
      args: opArgs,
      kubeconfig: await serviceAccountKubeconfig(ns, FULLNAME, dir),
      serviceUrl: loopbackUrl,
      apiKey,
      podNamespace: ns,
      podName: `${FULLNAME}-0`,
      dir,
      env: literalEnv(op),
    });

    const apply = commands.find((c) => c[0] === "kubectl" && c[1] === "apply") ?? [];
    const wait = commands.find((c) => c[0] === "kubectl" && c[1] === "wait") ?? [];
    await kubectlOk(
      [...apply.slice(1), "-n", apps].map((w) => (w.startsWith("manifests/") ? join(ROOT, w) : w)),
    );
    const samples = (await kubectlOk(["get", "dmsd", "-n", apps, "-o", "name"])).trim().split("\n");
    expect(samples.length).toBeGreaterThanOrEqual(7);
    const waited = await operator.whileRunning(
      kubectl([...wait.slice(1).filter((w) => !w.startsWith("--timeout=")), "--timeout=90s", "-n", apps], {
        timeoutMs: 95_000,
      }),
    );
    expect(waited.code, `${waited.stderr}\n${operator.logText().slice(-4000)}`).toBe(0);
    expect(waited.stdout.trim().split("\n")).toHaveLength(samples.length);
  }, 180_000);
});

describe("helm install and upgrade with simulator.enabled", () => {
  it("keeps the generated key through an upgrade, and uninstalls the simulator with the release", async () => {
    const bin = await helmBinary();
    const ns = await freshNamespace("e2e-kind-upgrade");
    const release = "e2e-kind-keep";
    const run = (args: string[]) => helm(bin, [...args, "-n", ns], { kubeconfig: testKubeconfigPath() });
    const apiKey = async () =>
      Buffer.from(
        await kubectlOk([
          "get",
          "secret",
          `${release}-dms-operator-simulator-credentials`,
          "-n",
          ns,
          "-o",
          "jsonpath={.data.api-key}",
        ]),
        "base64",
      ).toString("utf8");
    try {
      const installed = await run([
        "install",
        release,
        CHART,
        "--set",
        "simulator.enabled=true",
        "--set",
        "crds.enabled=false",
      ]);
      expect(installed.code, installed.stderr).toBe(0);
      const key = await apiKey();
      expect(key).toMatch(/^[A-Za-z0-9]{40}$/);
      const upgraded = await run([
        "upgrade",
        release,
        CHART,
        "--reuse-values",
        "--set",
        "simulator.extraArgs[0]=--ready-after-ms=500",
      ]);
      expect(upgraded.code, upgraded.stderr).toBe(0);
      expect(await apiKey()).toBe(key);
      const args = await kubectlOk([
        "get",
        "deployment",
        `${release}-dms-operator-simulator`,
        "-n",
        ns,
        "-o",
        "jsonpath={.spec.template.spec.containers[0].args}",
      ]);
      expect(JSON.parse(args)).toContain("--ready-after-ms=500");
    } finally {
      const uninstalled = await run(["uninstall", release]);
      expect(uninstalled.code, uninstalled.stderr).toBe(0);
    }
    const left = await kubectlOk(["get", "deployment,service,secret,configmap", "-n", ns, "-o", "name"]);
    expect(left.split("\n").filter((line) => line.includes("simulator"))).toEqual([]);
  });
});

describe("manifests/components/simulator", () => {
  it("adds the simulator to the kustomize install, the operator's image and credentials pointing at it, accepted by the API server", async () => {
    const ns = await freshNamespace("e2e-kind-kustomize");
    const work = mkdtempSync(join(tmpdir(), "dms-simulator-component-"));
    try {
      cpSync(MANIFESTS, join(work, "manifests"), { recursive: true });
      cpSync(join(ROOT, "crds"), join(work, "crds"), { recursive: true });
      const file = join(work, "manifests", "default", "kustomization.yaml");
      const k = parse(readFileSync(file, "utf8"));
      k.components = ["../components/simulator"];
      // Into a namespace of the test's own (the Namespace object aside: it exists).
      k.namespace = ns;
      k.resources = (k.resources as string[]).filter((r) => r !== "namespace.yaml");
      writeFileSync(file, stringify(k));
      const objects = objectsOf(await kubectlOk(["kustomize", join(work, "manifests", "default")]));
      const operatorDeployment = one(objects, "Deployment", "dms-operator");
      const simulatorDeployment = one(objects, "Deployment", "dms-operator-simulator");
      const op = containerOf(operatorDeployment, "operator");
      const sim = containerOf(simulatorDeployment, "simulator");
      expect(sim.args[0]).toBe("simulator");
      expect((sim as unknown as { image: string }).image).toBe((op as unknown as { image: string }).image);
      const secretName = secretRef(op, "DMS_BASE_URL").name;
      expect(secretRef(sim, "DMS_SIMULATOR_API_KEY")).toEqual({ name: secretName, key: "api-key" });
      const secret = one(objects, "Secret", secretName) as unknown as { data: Record<string, string> };
      const service = one(objects, "Service", "dms-operator-simulator") as unknown as {
        spec: { ports: { port: number; targetPort: string }[] };
      };
      const baseUrl = Buffer.from(secret.data["base-url"] ?? "", "base64").toString("utf8");
      expect(baseUrl).toBe(`http://dms-operator-simulator:${service.spec.ports[0]?.port}`);
      const containerPort = sim.ports?.find(
        (p) => p.name === service.spec.ports[0]?.targetPort,
      )?.containerPort;
      expect(String(containerPort)).toBe(flag(sim.args, "port"));
      const seedVolume = podSpecOf(simulatorDeployment).volumes?.find((v) => v.configMap);
      const seedMap = one(objects, "ConfigMap", seedVolume?.configMap?.name ?? "") as unknown as {
        data: Record<string, string>;
      };
      expect(seedMap.data["seed.yaml"]).toBe(
        readFileSync(join(MANIFESTS, "components", "simulator", "seed.yaml"), "utf8"),
      );
      for (const o of objects.filter((o) => o.metadata.namespace !== undefined))
        expect(o.metadata.namespace, `${o.kind} ${o.metadata.name}`).toBe(ns);
      const dryRun = await kubectl(["apply", "--dry-run=server", "-f", "-"], {
        input: objects.map((o) => stringify(o)).join("---\n"),
      });
      expect(dryRun.code, dryRun.stderr).toBe(0);
      expect(dryRun.stdout).toContain("deployment.apps/dms-operator-simulator created (server dry run)");
    } finally {
      await rm(work, { recursive: true, force: true });
    }
  });
});
