// charts/dms-operator with the real helm against a real API server: it lints clean, renders object
// for object what `kubectl kustomize manifests/default` (and manifests/namespaced) renders, is
// accepted by a server-side dry run, installs (the operator, run as a process with the installed
// Deployment's args and env and the installed ServiceAccount's token, takes its Lease, answers
// /readyz and makes a sample Ready), upgrades to changed values keeping the CRDs and the operator
// Ready, serves HTTPS /metrics to a token bound to the release's reader role, and uninstalls
// leaving the CRDs. There is no kubelet: the pods are never run, the operator process stands in
// for them.
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import got from "got";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadSeed } from "../../src/simulator/seed.ts";
import { type RunningSimulator, startSimulator } from "../../src/simulator/server.ts";
import { freePort } from "../controlplane/net.ts";
import { freshNamespace, kubectl, kubectlOk, testKubeconfigPath, waitFor } from "../support/cluster.ts";
import {
  byIdentity,
  CHART,
  helm,
  helmBinary,
  type K8sObject,
  objectsOf,
  renderChart,
} from "../support/helm-chart.ts";
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
const CRD_NAMES = ["deployments.dms.dev", "serviceconnections.dms.dev", "clusterserviceconnections.dms.dev"];

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

async function installedContainer(
  namespace: string,
): Promise<{ replicas: number; container: InstalledContainer }> {
  const deployment = JSON.parse(
    await kubectlOk(["get", "deployment", FULLNAME, "-n", namespace, "-o", "json"]),
  ) as {
    spec: { replicas: number; template: { spec: { containers: (InstalledContainer & { name: string })[] } } };
  };
  const container = deployment.spec.template.spec.containers.find((c) => c.name === "operator");
  if (!container) throw new Error(`deployment ${FULLNAME} has no operator container`);
  return { replicas: deployment.spec.replicas, container };
}

describe("the Helm chart", () => {
  let bin: string;
  let work: string;
  beforeAll(async () => {
    bin = await helmBinary();
    work = await mkdtemp(join(tmpdir(), "dms-e2e-helm-"));
  }, 900_000);
  afterAll(async () => {
    if (work) await rm(work, { recursive: true, force: true });
  });

  describe("helm lint", () => {
    it.each([
      ["default values", []],
      ["scope: namespace", ["--set", "scope=namespace"]],
      ["every optional object", ["--set", "metrics.serviceMonitor.enabled=true,networkPolicy.enabled=true"]],
    ])("is clean, also with --strict: %s", async (_name, values) => {
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
      const chart = await renderChart(bin, { namespace: "dms-system" });
      // `helm install --create-namespace` (or an existing namespace) is the chart's default: a
      // namespace owned by a release would be deleted with it, Secrets and all.
      expectSameObjects(
        chart,
        kustomize.filter((o) => o.kind !== "Namespace"),
      );
      expectSameObjects(
        await renderChart(bin, { namespace: "dms-system", set: ["namespace.create=true"] }),
        kustomize,
      );
    });

    it("manifests/default with the metrics, network-policy and pdb components, for the values enabling them", async () => {
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
          `components: [${to("components/metrics")}, ${to("components/network-policy")}, ${to("components/pdb")}]`,
          "",
        ].join("\n"),
      );
      const kustomize = objectsOf(await kubectlOk(["kustomize", overlay]));
      expect(kustomize.map((o) => o.kind)).toEqual(
        expect.arrayContaining(["Service", "ServiceMonitor", "NetworkPolicy", "PodDisruptionBudget"]),
      );
      const chart = await renderChart(bin, {
        namespace: "dms-system",
        set: [
          "namespace.create=true",
          "metrics.serviceMonitor.enabled=true",
          "networkPolicy.enabled=true",
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
        await renderChart(bin, { namespace: "dms-apps", set: ["scope=namespace"] }),
        kustomize,
      );
    });
  });

  describe("helm template, applied with kubectl apply --dry-run=server", () => {
    it.each([
      ["default values", []],
      ["scope: namespace", ["scope=namespace"]],
      [
        "a metrics certificate, a private CA and a proxy",
        [
          "metrics.certSecret=metrics-tls",
          "caBundle.configMapName=corp-ca",
          "proxy.httpsProxy=http://proxy.corp.example:3128",
          "proxy.noProxy={.svc,.cluster.local}",
        ],
      ],
    ])("is accepted: %s", async (_name, set) => {
      const namespace = await freshNamespace("e2e-helm-dry");
      const objects = await renderChart(bin, { release: "e2e-helm-dry", namespace, set });
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
    let operator: StartedOperator | undefined;
    /** Where the running operator serves /metrics (on loopback, in the installed mode). */
    let metricsUrl = "";
    const scraperBinding = `${RELEASE}-e2e-scraper`;
    const crdUids = async () =>
      (await kubectlOk(["get", "crd", ...CRD_NAMES, "-o", "jsonpath={.items[*].metadata.uid}"])).split(" ");

    /** Runs the operator as the installed Deployment says, as the installed ServiceAccount. */
    const startInstalled = async (podName: string) => {
      const { container } = await installedContainer(ns);
      const [command, ...args] = container.args.map((a) => a.replaceAll("$(POD_NAMESPACE)", ns));
      expect(command).toBe("run");
      const secret = JSON.parse(
        await kubectlOk(["get", "secret", "dms-operator-credentials", "-n", ns, "-o", "json"]),
      ) as { data: Record<string, string> };
      const decoded = (key: string) => Buffer.from(secret.data[key] ?? "", "base64").toString("utf8");
      const metricsPort = await freePort();
      metricsUrl = `https://127.0.0.1:${metricsPort}/metrics`;
      return startOperatorAs({
        metricsBindAddress: `127.0.0.1:${metricsPort}`,
        args,
        kubeconfig: await serviceAccountKubeconfig(ns, FULLNAME, work),
        serviceUrl: decoded("base-url"),
        apiKey: decoded("api-key"),
        podNamespace: ns,
        podName,
        dir: work,
        env: Object.fromEntries(
          container.env.flatMap((e) => (e.value === undefined ? [] : [[e.name, e.value] as const])),
        ),
      });
    };
    const becomesReady = async (started: StartedOperator, podName: string) => {
      await started.whileRunning(
        waitFor(
          async () => {
            const holder = await kubectl([
              "get",
              "lease",
              "dms-operator-leader",
              "-n",
              ns,
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
    };

    beforeAll(async () => {
      ns = await freshNamespace("e2e-helm");
      apps = await freshNamespace("e2e-helm-apps");
      simulator = await startSimulator({
        apiKey: API_KEY,
        seed: await loadSeed(join(import.meta.dirname, "..", "..", "src", "simulator", "seed.example.yaml")),
        timing: { readyAfterMs: 300, revisionActiveAfterMs: 300, deleteAfterMs: 300 },
      });
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

      const { replicas, container } = await installedContainer(ns);
      expect(replicas).toBe(2);
      expect(container.args).toContain("--leader-elect");
      operator = await startInstalled(`${FULLNAME}-0`);
      await becomesReady(operator, `${FULLNAME}-0`);

      await kubectlOk(["apply", "-n", apps, "-f", join(MANIFESTS, "samples", "internal-docker.yaml")]);
      const waited = await kubectl(
        ["wait", "--for=condition=Ready", "dmsd/summarizer", "-n", apps, "--timeout=45s"],
        { timeoutMs: 50_000 },
      );
      expect(waited.stderr).toBe("");
      expect(waited.code).toBe(0);
      expect(simulator.store.list().filter((d) => d.name === "summarizer")).toHaveLength(1);
      expect(forbiddenLines(operator.logText())).toEqual([]);
    });

    it("serves /metrics over HTTPS to a token bound to the release's reader role, reviewed with the release's ClusterRole; 403 to another", async () => {
      // As Prometheus with insecureSkipVerify: any certificate (the operator's self-signed one).
      const scrape = async (account: string) => {
        const token = (await kubectlOk(["create", "token", account, "-n", ns, "--duration=600s"])).trim();
        return got(metricsUrl, {
          https: { rejectUnauthorized: false },
          headers: { authorization: `Bearer ${token}` },
          throwHttpErrors: false,
          retry: { limit: 0 },
          timeout: { request: 20_000 },
        });
      };
      for (const account of ["scraper", "stranger"])
        await kubectlOk(["create", "serviceaccount", account, "-n", ns]);
      await kubectlOk([
        "create",
        "clusterrolebinding",
        scraperBinding,
        `--clusterrole=${FULLNAME}-metrics-reader`,
        `--serviceaccount=${ns}:scraper`,
      ]);
      const allowed = await scrape("scraper");
      expect(allowed.statusCode).toBe(200);
      expect(allowed.body).toContain("# TYPE controller_runtime_reconcile_total counter");
      expect((await scrape("stranger")).statusCode).toBe(403);
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

      const { replicas, container } = await installedContainer(ns);
      expect(replicas).toBe(1);
      expect(container.env).toContainEqual({ name: "DMS_LOG_LEVEL", value: "debug" });
      // The rollout: the old pod stops (handing the Lease over), the new one starts from the new spec.
      await operator?.process.stop(10_000);
      operator = await startInstalled(`${FULLNAME}-1`);
      await becomesReady(operator, `${FULLNAME}-1`);
      expect(operator.logText()).toContain('"level":20'); // pino's debug
      const ready = await kubectlOk([
        "get",
        "dmsd",
        "summarizer",
        "-n",
        apps,
        "-o",
        'jsonpath={.status.conditions[?(@.type=="Ready")].status}',
      ]);
      expect(ready).toBe("True");
      expect(forbiddenLines(operator.logText())).toEqual([]);
    });

    it("uninstalls everything but the CRDs", async () => {
      // As the README's uninstall says: resources first, while the operator still runs, so that
      // their finalizers are handled (once its RBAC is gone the operator could not).
      const deleted = await kubectl(["delete", "dmsd", "--all", "-n", apps, "--timeout=30s"], {
        timeoutMs: 35_000,
      });
      expect(deleted.code).toBe(0);
      await operator?.process.stop(10_000);
      operator = undefined;
      const before = await crdUids();
      const uninstalled = await helm(bin, ["uninstall", RELEASE, "-n", ns], {
        kubeconfig: testKubeconfigPath(),
      });
      expect(uninstalled.code).toBe(0);
      expect(uninstalled.stdout).toContain("These resources were kept due to the resource policy");
      expect(await crdUids()).toEqual(before);
      expect((await kubectl(["get", "dmsd", "-n", apps])).code).toBe(0); // still served
      for (const gone of [
        ["deployment", FULLNAME, "-n", ns],
        ["clusterrole", FULLNAME],
        ["clusterrolebinding", FULLNAME],
        ["clusterrole", `${FULLNAME}-metrics-reader`],
        ["serviceaccount", FULLNAME, "-n", ns],
        ["secret", "dms-operator-credentials", "-n", ns],
      ]) {
        const result = await kubectl(["get", ...gone, "-o", "name"]);
        expect(result.stderr, gone.join(" ")).toContain("NotFound");
      }
    });
  });
});
