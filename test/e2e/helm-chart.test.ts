// charts/dms-operator with the real helm against a real API server: it lints clean, renders object
// for object what `kubectl kustomize manifests/default` (and manifests/namespaced) renders, is
// accepted by a server-side dry run, installs (the operator, run as a process with the installed
// Deployment's args and env and the installed ServiceAccount's token, takes its Lease, answers
// /readyz and makes a sample Ready), upgrades to changed values keeping the CRDs and the operator
// Ready, serves HTTPS /metrics to a token bound to the release's reader role, and uninstalls
// leaving the CRDs. It also upgrades from the previous chart version (the last tagged release's,
// or the first chart commit's while there is none, run with that version's operator) to this one,
// keeping the CRDs, the Deployment's selector and a sample Ready. There is no kubelet: the pods
// are never run, the operator process stands in for them.
import { readFileSync } from "node:fs";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadSeed } from "../../src/simulator/seed.ts";
import { type RunningSimulator, startSimulator } from "../../src/simulator/server.ts";
import { httpsAnswer } from "../bench/probes.ts";
import { freePort } from "../controlplane/net.ts";
import { freshNamespace, kubectl, kubectlOk, testKubeconfigPath, waitFor } from "../support/cluster.ts";
import {
  addedValues,
  byIdentity,
  CHART,
  helm,
  helmBinary,
  type K8sObject,
  objectsOf,
  type PreviousChart,
  previousChart,
  renderChart,
} from "../support/helm-chart.ts";
import { LAST_RELEASE } from "../support/release.ts";
import {
  forbiddenLines,
  MANIFESTS,
  type StartedOperator,
  serviceAccountKubeconfig,
  startOperatorAs,
} from "./install-support.ts";

const API_KEY = "e2e-helm-key-0123456789abcdef";
const RELEASE = "e2e-helm";
const FULLNAME = `${RELEASE}-dms-operator`;
const REPO = join(import.meta.dirname, "..", "..");
const CRD_NAMES = ["deployments.dms.dev", "serviceconnections.dms.dev", "clusterserviceconnections.dms.dev"];

/**
 * The image the kustomize install pulls: the last release's (manifests/default's tag), while the
 * chart of this tree defaults to its own appVersion, the version being made between releases.
 */
const AS_RELEASED = [`image.tag=${LAST_RELEASE}`];

/** kubectl's warnings, but the one of adopting the CRDs the global setup applied server-side. */
const warnings = (stderr: string) =>
  stderr.split("\n").filter((line) => line !== "" && !line.includes("last-applied-configuration annotation"));

/**
 * Asserts that the chart's objects are the kustomize install's, object by object, under the
 * normalisation of test/support/helm-chart.ts (`normalised`: Helm's three standard labels and
 * the CRDs' keep policy, nothing else). A difference fails naming the object.
 */
function expectSameObjects(chart: K8sObject[], kustomize: K8sObject[]) {
  const fromChart = byIdentity(chart);
  const fromKustomize = byIdentity(kustomize);
  expect([...fromChart.keys()].sort(), "the objects the chart renders").toEqual(
    [...fromKustomize.keys()].sort(),
  );
  for (const [id, object] of fromKustomize) expect(fromChart.get(id), id).toEqual(object);
}

/** The container `operator` of a Deployment as the API server holds it. */
interface InstalledContainer {
  args: string[];
  env: { name: string; value?: string }[];
}

/** A release of the chart as the tests install it: where, and its objects' name. */
interface Release {
  namespace: string;
  /** `<release>-dms-operator`: the Deployment's, ServiceAccount's and ClusterRole's name. */
  fullname: string;
}

/** The installed Deployment's replicas, operator container and selector, as the API server holds them. */
async function installedDeployment(release: Release): Promise<{
  replicas: number;
  container: InstalledContainer;
  selector: unknown;
}> {
  const deployment = JSON.parse(
    await kubectlOk(["get", "deployment", release.fullname, "-n", release.namespace, "-o", "json"]),
  ) as {
    spec: {
      replicas: number;
      selector: unknown;
      template: { spec: { containers: (InstalledContainer & { name: string })[] } };
    };
  };
  const container = deployment.spec.template.spec.containers.find((c) => c.name === "operator");
  if (!container) throw new Error(`deployment ${release.fullname} has no operator container`);
  return { replicas: deployment.spec.replicas, container, selector: deployment.spec.selector };
}

/** The CRDs' uids: the same uids after an upgrade or an uninstall mean the CRDs (and resources) were kept. */
async function crdUids(): Promise<string[]> {
  return (await kubectlOk(["get", "crd", ...CRD_NAMES, "-o", "jsonpath={.items[*].metadata.uid}"])).split(
    " ",
  );
}

/** Asserts that each CRD is Established. */
async function expectEstablished() {
  for (const crd of CRD_NAMES) {
    const established = await kubectlOk([
      "get",
      "crd",
      crd,
      "-o",
      'jsonpath={.status.conditions[?(@.type=="Established")].status}',
    ]);
    expect(established, crd).toBe("True");
  }
}

/** An operator started by {@link startInstalled}, with where it serves /metrics (on loopback). */
type InstalledOperator = StartedOperator & { metricsUrl: string };

/**
 * Runs the operator as the installed Deployment says (its args and literal env), as the installed
 * ServiceAccount, with the installed credentials Secret: the pod `podName` of the release.
 * `entry`: another version's CLI (by default this tree's).
 */
async function startInstalled(
  release: Release,
  podName: string,
  dir: string,
  entry?: string,
): Promise<InstalledOperator> {
  const { namespace: ns, fullname } = release;
  const { container } = await installedDeployment(release);
  const [command, ...args] = container.args.map((a) => a.replaceAll("$(POD_NAMESPACE)", ns));
  expect(command).toBe("run");
  const secret = JSON.parse(
    await kubectlOk(["get", "secret", "dms-operator-credentials", "-n", ns, "-o", "json"]),
  ) as { data: Record<string, string> };
  const decoded = (key: string) => Buffer.from(secret.data[key] ?? "", "base64").toString("utf8");
  const metricsPort = await freePort();
  const started = await startOperatorAs({
    metricsBindAddress: `127.0.0.1:${metricsPort}`,
    args,
    kubeconfig: await serviceAccountKubeconfig(ns, fullname, dir),
    serviceUrl: decoded("base-url"),
    apiKey: decoded("api-key"),
    podNamespace: ns,
    podName,
    dir,
    entry,
    env: Object.fromEntries(
      container.env.flatMap((e) => (e.value === undefined ? [] : [[e.name, e.value] as const])),
    ),
  });
  return Object.assign(started, { metricsUrl: `https://127.0.0.1:${metricsPort}/metrics` });
}

/** Waits until `podName` holds the release's Lease and its /readyz answers 200. */
async function becomesReady(started: StartedOperator, release: Release, podName: string) {
  await started.whileRunning(
    waitFor(
      async () => {
        const holder = await kubectl([
          "get",
          "lease",
          "dms-operator-leader",
          "-n",
          release.namespace,
          "-o",
          "jsonpath={.spec.holderIdentity}",
        ]);
        return holder.stdout.startsWith(`${podName}_`);
      },
      { timeoutMs: 45_000, intervalMs: 300, description: `${podName} to hold the Lease` },
    ),
  );
  await started.whileRunning(
    waitFor(async () => (await fetch(`${started.probesUrl}/readyz`)).status === 200, {
      timeoutMs: 20_000,
      intervalMs: 300,
      description: "/readyz to answer 200",
    }),
  );
}

/** The Ready condition's status of Deployment resource `name`. */
async function readyStatus(namespace: string, name: string): Promise<string> {
  return kubectlOk([
    "get",
    "dmsd",
    name,
    "-n",
    namespace,
    "-o",
    'jsonpath={.status.conditions[?(@.type=="Ready")].status}',
  ]);
}

/** Applies the internal-docker sample into `namespace` and waits until it is Ready. */
async function sampleBecomesReady(namespace: string) {
  await kubectlOk(["apply", "-n", namespace, "-f", join(MANIFESTS, "samples", "internal-docker.yaml")]);
  const waited = await kubectl(
    ["wait", "--for=condition=Ready", "dmsd/summarizer", "-n", namespace, "--timeout=45s"],
    { timeoutMs: 50_000 },
  );
  expect(waited.stderr).toBe("");
  expect(waited.code).toBe(0);
}

/** The simulator the operator of a block talks to, with fast service timing. */
async function fastSimulator(): Promise<RunningSimulator> {
  return startSimulator({
    apiKey: API_KEY,
    seed: await loadSeed(join(import.meta.dirname, "..", "..", "src", "simulator", "seed.example.yaml")),
    timing: { readyAfterMs: 300, revisionActiveAfterMs: 300, deleteAfterMs: 300 },
  });
}

/**
 * A scrape of /metrics at `url` as Prometheus with insecureSkipVerify would (any certificate: the
 * operator's self-signed one), with a token of ServiceAccount `namespace/account`.
 */
async function scrape(url: string, namespace: string, account: string) {
  const token = (await kubectlOk(["create", "token", account, "-n", namespace, "--duration=600s"])).trim();
  return httpsAnswer(
    url,
    { rejectUnauthorized: false, headers: { authorization: `Bearer ${token}` } },
    20_000,
  );
}

/**
 * `helm uninstall` as the install guide's uninstall says: the resources of `apps` first, while the
 * operator still runs, so that their finalizers are handled (once its RBAC is gone the operator
 * could not); then the operator stops and the release goes, all but the CRDs (the same uids,
 * still serving).
 */
async function uninstallKeepingCrds(
  bin: string,
  name: string,
  release: Release,
  apps: string,
  operator: StartedOperator | undefined,
) {
  const { namespace: ns, fullname } = release;
  const deleted = await kubectl(["delete", "dmsd", "--all", "-n", apps, "--timeout=30s"], {
    timeoutMs: 35_000,
  });
  expect(deleted.code).toBe(0);
  await operator?.process.stop(10_000);
  const before = await crdUids();
  const uninstalled = await helm(bin, ["uninstall", name, "-n", ns], {
    kubeconfig: testKubeconfigPath(),
  });
  expect(uninstalled.code).toBe(0);
  expect(uninstalled.stdout).toContain("These resources were kept due to the resource policy");
  expect(await crdUids()).toEqual(before);
  expect((await kubectl(["get", "dmsd", "-n", apps])).code).toBe(0); // still served
  const gone = [
    ["deployment", fullname, "-n", ns],
    ["clusterrole", fullname],
    ["clusterrolebinding", fullname],
    ["clusterrole", `${fullname}-metrics-reader`],
    ["flowschema", `${fullname}-leader-election`],
    ["serviceaccount", fullname, "-n", ns],
    ["secret", "dms-operator-credentials", "-n", ns],
  ];
  const results = await Promise.all(gone.map((object) => kubectl(["get", ...object, "-o", "name"])));
  for (const [i, result] of results.entries())
    expect(result.stderr, gone[i]?.join(" ")).toContain("NotFound");
}

/** `helm <args>` against the test cluster; its stdout, or a throw with helm's message. */
async function helmOk(bin: string, args: string[]): Promise<string> {
  const result = await helm(bin, args, { kubeconfig: testKubeconfigPath() });
  if (result.code !== 0)
    throw new Error(`helm ${args.join(" ")} exited ${result.code}: ${result.stderr.trim()}`);
  return result.stdout;
}

/** The file of crds/ holding CRD `name` (`deployments.dms.dev` → `dms.dev_deployments.yaml`). */
function crdFile(name: string): string {
  const [plural, ...group] = name.split(".");
  return `${group.join(".")}_${plural}.yaml`;
}

/**
 * The chart an upgrade starts from (see `previousChart`), chosen when the file is collected so
 * that the test's name says which; a checkout without history fails that block's tests, naming
 * the fix.
 */
const previous = await previousChart().catch((error: unknown) =>
  error instanceof Error ? error : new Error(String(error)),
);
/** How a test name shows {@link previous}: `v0.1.0 (tag)`, `9c05f2d (first chart commit)`. */
const previousName =
  previous instanceof Error
    ? "the previous version (not found)"
    : `${previous.source === "tag" ? previous.rev : previous.rev.slice(0, 7)} (${previous.source}, version ${previous.version})`;

describe("the Helm chart", () => {
  let bin: string;
  let work: string;
  beforeAll(async () => {
    bin = await helmBinary();
    work = await mkdtemp(join(tmpdir(), "dms-e2e-helm-"));
  }, 900_000);
  afterAll(async () => {
    if (work) await rm(work, { recursive: true, force: true });
    if (!(previous instanceof Error)) await rm(previous.root, { recursive: true, force: true });
  });

  // Each case is one helm process on the chart alone: run at once.
  describe.concurrent("helm lint", () => {
    it.for<[string, string[]]>([
      ["default values", []],
      ["scope: namespace", ["--set", "scope=namespace"]],
      [
        "every optional object",
        [
          "--set",
          "metrics.serviceMonitor.enabled=true,metrics.prometheusRule.enabled=true,metrics.dashboard.enabled=true,networkPolicy.enabled=true,podDisruptionBudget.enabled=true,reloader.enabled=true",
        ],
      ],
    ])("is clean, also with --strict: %s", async ([, values], { expect }) => {
      for (const strict of [[], ["--strict"]]) {
        const result = await helm(bin, ["lint", ...strict, CHART, ...values]);
        expect(result.stdout).not.toMatch(/\[(WARNING|ERROR)\]/);
        expect(result.code).toBe(0);
      }
    });
  });

  describe("renders the kustomize install's objects", () => {
    it("manifests/default, for default values (the Namespace only with namespace.create)", async () => {
      const kustomize = objectsOf(await kubectlOk(["kustomize", join(MANIFESTS, "default")]));
      const chart = await renderChart(bin, { namespace: "dms-system", set: AS_RELEASED });
      // `helm install --create-namespace` (or an existing namespace) is the chart's default: a
      // namespace owned by a release would be deleted with it, Secrets and all.
      expectSameObjects(
        chart,
        kustomize.filter((o) => o.kind !== "Namespace"),
      );
      expectSameObjects(
        await renderChart(bin, { namespace: "dms-system", set: [...AS_RELEASED, "namespace.create=true"] }),
        kustomize,
      );
    });

    it("manifests/default with the metrics, alerts, network-policy and pdb components, for the values enabling them", async () => {
      const overlay = join(work, "components");
      await mkdir(overlay, { recursive: true });
      const to = (path: string) => relative(overlay, join(MANIFESTS, path));
      await writeFile(
        join(overlay, "kustomization.yaml"),
        [
          "apiVersion: kustomize.config.k8s.io/v1beta1",
          "kind: Kustomization",
          "namespace: dms-system",
          `resources: [${to("default")}]`,
          `components: [${to("components/metrics")}, ${to("components/alerts")}, ${to("components/network-policy")}, ${to("components/pdb")}]`,
          "",
        ].join("\n"),
      );
      const kustomize = objectsOf(await kubectlOk(["kustomize", overlay]));
      expect(kustomize.map((o) => o.kind)).toEqual(
        expect.arrayContaining([
          "Service",
          "ServiceMonitor",
          "PrometheusRule",
          "NetworkPolicy",
          "PodDisruptionBudget",
        ]),
      );
      const chart = await renderChart(bin, {
        namespace: "dms-system",
        set: [
          ...AS_RELEASED,
          "namespace.create=true",
          "metrics.serviceMonitor.enabled=true",
          "metrics.prometheusRule.enabled=true",
          "networkPolicy.enabled=true",
          // The component's selector, a label to put on the scraper's namespace, in place of
          // the chart's default, the namespace named monitoring.
          "networkPolicy.metricsNamespaceSelector.matchLabels.metrics=enabled",
          "podDisruptionBudget.enabled=true",
        ],
      });
      expectSameObjects(chart, kustomize);
    });

    it("manifests/namespaced, for scope: namespace", async () => {
      const kustomize = objectsOf(await kubectlOk(["kustomize", join(MANIFESTS, "namespaced")]));
      const namespace = kustomize.find((o) => o.kind === "Deployment")?.metadata.namespace;
      expect(namespace).toBe("dms-apps");
      expectSameObjects(
        await renderChart(bin, { namespace: "dms-apps", set: [...AS_RELEASED, "scope=namespace"] }),
        kustomize,
      );
    });
  });

  // Each case renders into a namespace of its own and persists nothing (a dry run): run at once.
  describe.concurrent("helm template, applied with kubectl apply --dry-run=server", () => {
    it.for<[string, string[]]>([
      ["default values", []],
      ["scope: namespace", ["scope=namespace"]],
      [
        "a metrics certificate, a private CA and a proxy",
        [
          "metrics.certSecret=metrics-tls",
          "caConfigMapRef.name=corp-ca",
          "proxy.httpsProxy=http://proxy.corp.example:3128",
          "proxy.noProxy={.svc,.cluster.local}",
        ],
      ],
      [
        "the day-two values: a strategy, history, the dashboard, Reloader, a registry, extra objects",
        [
          "revisionHistoryLimit=3",
          "strategy.type=RollingUpdate",
          "strategy.rollingUpdate.maxSurge=0",
          "deploymentAnnotations.owner=platform",
          "metrics.dashboard.enabled=true",
          "reloader.enabled=true",
          "networkPolicy.enabled=true",
          "global.imageRegistry=registry.corp.example",
          "global.imagePullSecrets[0]=corp-pull",
          "extraObjects[0].apiVersion=v1",
          "extraObjects[0].kind=ConfigMap",
          // `--set` cannot spell tpl's braces; test/tools/helm-chart.test.ts renders them.
          "extraObjects[0].metadata.name=day-two-extra",
        ],
      ],
    ])("is accepted, with its helm test pod: %s", async ([, set], { expect }) => {
      const namespace = await freshNamespace("e2e-helm-dry");
      const objects = await renderChart(bin, { release: "e2e-helm-dry", namespace, set, tests: true });
      const input = objects.map((o) => JSON.stringify(o)).join("\n");
      const result = await kubectl(["apply", "--dry-run=server", "-f", "-"], { input });
      expect(warnings(result.stderr)).toEqual([]); // e.g. a Pod Security or deprecation warning
      expect(result.code).toBe(0);
      for (const object of objects) expect(result.stdout).toContain(`/${object.metadata.name} `);
    });
  });

  describe("helm install, upgrade and uninstall", () => {
    let ns: string;
    let apps: string;
    let simulator: RunningSimulator;
    let operator: InstalledOperator | undefined;
    const scraperBinding = `${RELEASE}-e2e-scraper`;
    const release = (): Release => ({ namespace: ns, fullname: FULLNAME });

    beforeAll(async () => {
      ns = await freshNamespace("e2e-helm");
      apps = await freshNamespace("e2e-helm-apps");
      simulator = await fastSimulator();
    });

    afterAll(async () => {
      // Leave no resources behind: other files read the cluster as a whole (name claims, plan).
      if (apps) await kubectl(["delete", "dmsd", "--all", "-n", apps, "--timeout=30s"]);
      await operator?.process.stop(10_000);
      await simulator?.close();
      await kubectl(["delete", "clusterrolebinding", scraperBinding, "--ignore-not-found"]);
    });

    it("refuses a typo in the values, naming it, and installs nothing", async () => {
      const result = await helm(bin, ["install", "e2e-typo", CHART, "-n", ns, "--set", "replicaz=3"], {
        kubeconfig: testKubeconfigPath(),
      });
      expect(result.code).not.toBe(0);
      expect(result.stderr).toContain("additional properties 'replicaz' not allowed");
      const list = await helm(bin, ["list", "-n", ns, "-a", "-q"], { kubeconfig: testKubeconfigPath() });
      expect(list.stdout.trim()).toBe("");
    });

    it("installs; the operator, run as the installed ServiceAccount with the Deployment's args, becomes Ready and reconciles a sample", async () => {
      const before = await crdUids();
      // The control plane's setup applied crds/ with kubectl, as a cluster moving from the
      // kustomize install has them: --take-ownership lets the release adopt them.
      const installed = await helm(
        bin,
        [
          "install",
          RELEASE,
          CHART,
          "-n",
          ns,
          "--take-ownership",
          "--set",
          "credentials.create=true",
          "--set",
          `credentials.baseUrl=${simulator.url}`,
          "--set",
          `credentials.apiKey=${API_KEY}`,
        ],
        { kubeconfig: testKubeconfigPath() },
      );
      expect(installed.stderr).toBe("");
      expect(installed.code).toBe(0);
      expect(installed.stdout).toContain("STATUS: deployed");
      // Adopted, not replaced: the same CRDs, now the release's, kept on uninstall.
      expect(await crdUids()).toEqual(before);
      for (const crd of CRD_NAMES) {
        const annotations = JSON.parse(
          await kubectlOk(["get", "crd", crd, "-o", "jsonpath={.metadata.annotations}"]),
        ) as Record<string, string>;
        expect(annotations).toMatchObject({
          "helm.sh/resource-policy": "keep",
          "meta.helm.sh/release-name": RELEASE,
          "meta.helm.sh/release-namespace": ns,
        });
      }

      const { replicas, container } = await installedDeployment(release());
      expect(replicas).toBe(2);
      expect(container.args).toContain("--leader-elect");
      operator = await startInstalled(release(), `${FULLNAME}-0`, work);
      await becomesReady(operator, release(), `${FULLNAME}-0`);

      await sampleBecomesReady(apps);
      expect(simulator.store.list().filter((d) => d.name === "summarizer")).toHaveLength(1);
      expect(forbiddenLines(operator.logText())).toEqual([]);
    });

    it("serves /metrics over HTTPS to a token bound to the release's reader role, reviewed with the release's ClusterRole; 403 to another", async () => {
      for (const account of ["scraper", "stranger"])
        await kubectlOk(["create", "serviceaccount", account, "-n", ns]);
      await kubectlOk([
        "create",
        "clusterrolebinding",
        scraperBinding,
        `--clusterrole=${FULLNAME}-metrics-reader`,
        `--serviceaccount=${ns}:scraper`,
      ]);
      const allowed = await scrape(operator?.metricsUrl ?? "", ns, "scraper");
      expect(allowed.status).toBe(200);
      expect(allowed.body).toContain("# TYPE controller_runtime_reconcile_total counter");
      expect((await scrape(operator?.metricsUrl ?? "", ns, "stranger")).status).toBe(403);
      expect(forbiddenLines(operator?.logText() ?? "")).toEqual([]);
    });

    it("upgrades to changed values (log level, replicas), keeping the CRDs and the operator Ready", async () => {
      const before = await crdUids();
      const upgraded = await helm(
        bin,
        [
          "upgrade",
          RELEASE,
          CHART,
          "-n",
          ns,
          "--reuse-values",
          "--set",
          "config.logLevel=debug",
          "--set",
          "replicas=1",
        ],
        { kubeconfig: testKubeconfigPath() },
      );
      expect(upgraded.stderr).toBe("");
      expect(upgraded.code).toBe(0);
      expect(upgraded.stdout).toContain("REVISION: 2");
      expect(await crdUids()).toEqual(before);
      await expectEstablished();

      const { replicas, container } = await installedDeployment(release());
      expect(replicas).toBe(1);
      expect(container.env).toContainEqual({ name: "DMS_LOG_LEVEL", value: "debug" });
      // The rollout: the old pod stops (handing the Lease over), the new one starts from the new spec.
      await operator?.process.stop(10_000);
      operator = await startInstalled(release(), `${FULLNAME}-1`, work);
      await becomesReady(operator, release(), `${FULLNAME}-1`);
      const started = operator;
      await started.whileRunning(
        waitFor(async () => started.logText().includes('"level":"debug"'), {
          timeoutMs: 20_000,
          intervalMs: 300,
          description: 'a debug line ("level":"debug") in the log',
        }),
      );
      expect(await readyStatus(apps, "summarizer")).toBe("True");
      expect(forbiddenLines(operator.logText())).toEqual([]);
    });

    it("uninstalls everything but the CRDs", async () => {
      await uninstallKeepingCrds(bin, RELEASE, release(), apps, operator);
      operator = undefined;
    });
  });

  describe(`helm upgrade from the previous chart version: ${previousName}`, () => {
    // A release name of its own: the chart's cluster-scoped objects (ClusterRoles, bindings) are
    // named after the release, and must not meet the other block's.
    const PREVIOUS_RELEASE = "e2e-helm-prev";
    const fullname = `${PREVIOUS_RELEASE}-dms-operator`;
    let ns: string;
    let apps: string;
    let simulator: RunningSimulator;
    let operator: InstalledOperator | undefined;
    let chart: PreviousChart;
    /** The Deployment's selector as the previous chart installed it. */
    let selector: unknown;
    const scraperBinding = `${PREVIOUS_RELEASE}-e2e-scraper`;
    const release = (): Release => ({ namespace: ns, fullname });
    const credentials = () => [
      "credentials.create=true",
      `credentials.baseUrl=${simulator.url}`,
      `credentials.apiKey=${API_KEY}`,
    ];

    beforeAll(async () => {
      if (previous instanceof Error) throw previous;
      chart = previous;
      ns = await freshNamespace("e2e-helm-prev");
      apps = await freshNamespace("e2e-helm-prev-apps");
      simulator = await fastSimulator();
    });

    afterAll(async () => {
      if (apps) await kubectl(["delete", "dmsd", "--all", "-n", apps, "--timeout=30s"]);
      await operator?.process.stop(10_000);
      await simulator?.close();
      await kubectl(["delete", "clusterrolebinding", scraperBinding, "--ignore-not-found"]);
      // Whatever failed, the files after this one find the CRDs of crds/, not the previous chart's.
      await kubectlOk([
        "apply",
        "--server-side",
        "--force-conflicts",
        "--field-manager=dms-test-harness",
        ...CRD_NAMES.map((name) => `--filename=${join(REPO, "crds", crdFile(name))}`),
      ]);
    });

    it(`installs the chart at ${previousName}; the operator, run from its Deployment, becomes Ready and reconciles a sample`, async () => {
      const before = await crdUids();
      const installed = await helm(
        bin,
        [
          "install",
          PREVIOUS_RELEASE,
          chart.path,
          "-n",
          ns,
          // The CRDs are adopted as the other block adopts them. They are this tree's, applied
          // server-side by the control plane's setup: the previous chart's older CRDs take their
          // fields back (a cluster upgrading from the previous release has that release's CRDs).
          "--take-ownership",
          "--force-conflicts",
          ...credentials().flatMap((value) => ["--set", value]),
        ],
        { kubeconfig: testKubeconfigPath() },
      );
      expect(installed.stderr).toBe("");
      expect(installed.code).toBe(0);
      expect(installed.stdout).toContain("STATUS: deployed");
      expect(await crdUids()).toEqual(before);
      await expectEstablished();

      selector = (await installedDeployment(release())).selector;
      // The previous release's image: the operator at the previous chart's commit.
      operator = await startInstalled(release(), `${fullname}-0`, work, chart.cli);
      await becomesReady(operator, release(), `${fullname}-0`);
      await sampleBecomesReady(apps);
      expect(forbiddenLines(operator.logText())).toEqual([]);
    });

    // --reuse-values renders the new templates with the previous chart's values.yaml as their
    // defaults (Helm's documented behaviour), so a value this chart adds is unset.
    const added =
      previous instanceof Error
        ? []
        : addedValues(
            readFileSync(join(previous.path, "values.yaml"), "utf8"),
            readFileSync(join(CHART, "values.yaml"), "utf8"),
          );
    if (added.length > 0)
      it(`--reuse-values, lacking the values this chart adds (${added.join(", ")}), is refused before any change`, async () => {
        const reused = await helm(bin, ["upgrade", PREVIOUS_RELEASE, CHART, "-n", ns, "--reuse-values"], {
          kubeconfig: testKubeconfigPath(),
        });
        expect(
          reused.code,
          "--reuse-values upgraded although this chart adds values: the chart README's Upgrade section says otherwise",
        ).not.toBe(0);
        // Refused for an added value, as Helm's template error shows it (e.g. `<.Values.caBundle.secretName>`).
        expect(
          added.some((path) => reused.stderr.includes(`.Values.${path}`)),
          reused.stderr,
        ).toBe(true);
        const history = JSON.parse(
          (
            await helm(bin, ["history", PREVIOUS_RELEASE, "-n", ns, "-o", "json"], {
              kubeconfig: testKubeconfigPath(),
            })
          ).stdout,
        ) as { revision: number; status: string }[];
        expect(history.map((h) => [h.revision, h.status])).toEqual([[1, "deployed"]]);
        expect(await readyStatus(apps, "summarizer")).toBe("True");
      });
    else
      it("--reuse-values upgrades (a server-side dry run), this chart adding no value", async () => {
        const reused = await helm(
          bin,
          ["upgrade", PREVIOUS_RELEASE, CHART, "-n", ns, "--reuse-values", "--dry-run=server"],
          { kubeconfig: testKubeconfigPath() },
        );
        expect(reused.stderr).toBe("");
        expect(reused.code).toBe(0);
      });

    it("upgrades to this chart with --reset-then-reuse-values: the CRDs kept, the selector unchanged, the operator Ready again as the new Deployment says, the sample still Ready", async () => {
      const before = await crdUids();
      const upgraded = await helm(
        bin,
        ["upgrade", PREVIOUS_RELEASE, CHART, "-n", ns, "--reset-then-reuse-values"],
        { kubeconfig: testKubeconfigPath() },
      );
      expect(upgraded.stderr).toBe("");
      expect(upgraded.code).toBe(0);
      expect(upgraded.stdout).toContain("REVISION: 2");
      expect(await crdUids()).toEqual(before);
      await expectEstablished();
      // The values given at install are kept; everything else is this chart's default.
      const values = JSON.parse(
        await helmOk(bin, ["get", "values", PREVIOUS_RELEASE, "-n", ns, "-o", "json"]),
      ) as unknown;
      expect(values).toEqual({ credentials: { create: true, baseUrl: simulator.url, apiKey: API_KEY } });

      // A Deployment's selector is immutable: a chart changing it could never be upgraded to.
      const upgradedDeployment = await installedDeployment(release());
      expect(upgradedDeployment.selector).toEqual(selector);
      // The Deployment is what this chart renders for those values, e.g. HTTPS /metrics on 8443.
      const rendered = (
        await renderChart(bin, { release: PREVIOUS_RELEASE, namespace: ns, set: credentials() })
      ).find((o) => o.kind === "Deployment") as
        | { spec: { template: { spec: { containers: (InstalledContainer & { name: string })[] } } } }
        | undefined;
      const container = rendered?.spec.template.spec.containers.find((c) => c.name === "operator");
      // Names and literal values: the API server adds defaults (fieldRef.apiVersion) to the rest.
      const literal = (env: InstalledContainer["env"] = []) => env.map((e) => [e.name, e.value]);
      expect(upgradedDeployment.container.args).toEqual(container?.args);
      expect(literal(upgradedDeployment.container.env)).toEqual(literal(container?.env));

      // The rollout: the old pod stops, the new one starts from the new spec and RBAC.
      await operator?.process.stop(10_000);
      operator = await startInstalled(release(), `${fullname}-1`, work);
      await becomesReady(operator, release(), `${fullname}-1`);
      expect(await readyStatus(apps, "summarizer")).toBe("True");
      // The reviews HTTPS /metrics asks for are granted by the upgraded RBAC.
      await kubectlOk(["create", "serviceaccount", "scraper", "-n", ns]);
      await kubectlOk([
        "create",
        "clusterrolebinding",
        scraperBinding,
        `--clusterrole=${fullname}-metrics-reader`,
        `--serviceaccount=${ns}:scraper`,
      ]);
      const scraped = await scrape(operator.metricsUrl, ns, "scraper");
      expect(scraped.status).toBe(200);
      expect(forbiddenLines(operator.logText())).toEqual([]);
    });

    it("uninstalls everything but the CRDs", async () => {
      await uninstallKeepingCrds(bin, PREVIOUS_RELEASE, release(), apps, operator);
      operator = undefined;
    });
  });
});
